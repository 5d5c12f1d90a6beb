"""Columnar view of the cluster's nodes, so plugins can evaluate all nodes at once.

A Python call per node per plugin cannot schedule 1000 pods/s on 5000 nodes; a numpy
expression over a column can. The table mirrors `ClusterState` in the same node order
(so both evaluation paths break score ties identically) and is kept current
incrementally: `sync()` rewrites only the rows of nodes that changed since the last call
(an assumed pod touches one row) and rebuilds only when nodes come or go.

Columns built on demand (a label key's values, an image's sizes) are cached until a
node's labels or images change; `version` counts changes of labels, annotations and
images, for caches kept outside the table.

Every row write that can change a value is stamped (`row_stamp`, from the increasing
`stamp`; a usage rewrite with the same values is not), and a rebuild
starts a new `generation` (unique across tables), so a cache of per-row results
(`policyd.model.row_memo`) can tell exactly which rows changed since it last looked.
"""

from __future__ import annotations

import itertools
from typing import Protocol

import numpy as np
import numpy.typing as npt

from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Taint

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
ABSENT = -1  # label code of a node without the key

# Generations are drawn from one counter for every table: a result cached against one
# table can never be mistaken for another table's (or another build's) rows.
_GENERATIONS = itertools.count(1)
_WRITTEN_LOG_LIMIT = 4096
_NO_ROWS: IntArray = np.zeros(0, np.int64)
_NO_ROWS.flags.writeable = False


class NodeSource(Protocol):
    """What the table reads from `ClusterState` (which owns the table, so cannot be
    imported here): the nodes in order, and its change log."""

    structure_epoch: int
    """Bumped when nodes come or go (the table then rebuilds)."""

    @property
    def epoch(self) -> int: ...

    def changes_since(self, epoch: int) -> set[str] | None: ...

    def node_infos(self) -> list[NodeInfo]: ...


class NodeTable:
    def __init__(self, cluster: NodeSource) -> None:
        self.cluster = cluster
        self.infos: list[NodeInfo] = []
        self.names: list[str] = []
        self.name_array: npt.NDArray[np.object_] = np.zeros(0, dtype=object)
        self.index: dict[str, int] = {}
        self.resources: dict[str, int] = {}
        # Resource-major (resources x nodes), so one resource over many nodes is a
        # contiguous row: `allocatable[j]` for the resource with column `j`.
        self.allocatable: IntArray = np.zeros((0, 0), np.int64)
        self.requested: IntArray = np.zeros((0, 0), np.int64)
        self.non_zero_requested: IntArray = np.zeros((2, 0), np.int64)  # cpu, memory
        self.pod_count: IntArray = np.zeros(0, np.int64)
        self.unschedulable: BoolArray = np.zeros(0, np.bool_)
        # Nodes with identical taints share an id, so a pod's tolerations are checked once
        # per distinct taint set, not once per node.
        self.taint_set_id: IntArray = np.zeros(0, np.int64)
        self.taint_sets: list[tuple[Taint, ...]] = []
        self._taint_ids: dict[tuple[Taint, ...], int] = {}
        # Likewise nodes declaring the same features (status.declaredFeatures) share an id.
        self.feature_set_id: IntArray = np.zeros(0, np.int64)
        self.feature_sets: list[tuple[str, ...]] = []
        self._feature_ids: dict[tuple[str, ...], int] = {}
        self._records: list[Node] = []
        self._labels: dict[str, tuple[IntArray, dict[str, int]]] = {}
        self._images: dict[str, IntArray] = {}
        self._groups: dict[tuple[str, ...], tuple[IntArray, list[int]]] = {}
        self._image_counts: dict[str, int] = {}
        # Row stamps: `row_stamp[i]` is the `stamp` at which row i was last written (any
        # column; an unchanged usage rewrite does not count); `generation` changes when
        # the rows are rebuilt (renumbered, new columns).
        self.generation = 0
        self.stamp = 0
        self.row_stamp: IntArray = np.zeros(0, np.int64)
        # The rows written since the rebuild, in write order: `_written[k]` was written
        # at stamp `_written_start + k`. Answers `rows_written_since` without a pass over
        # every row; trimmed when long (older questions then scan `row_stamp`).
        self._written: list[int] = []
        self._written_start = 1
        self.version = 0  # bumped when node labels, annotations or images change
        self._epoch = -1  # the cluster's change-log position this table reflects
        self._structure_epoch = -1
        self._rebuild()

    def __len__(self) -> int:
        return len(self.infos)

    # maintenance
    def sync(self) -> None:
        cluster = self.cluster
        if cluster.structure_epoch != self._structure_epoch:
            self._rebuild()
            return
        if cluster.epoch == self._epoch:
            return
        changed = cluster.changes_since(self._epoch)
        self._epoch = cluster.epoch
        if changed is None:
            self._rebuild()
            return
        labels_changed = images_changed = annotations_changed = False
        for name in changed:
            i = self.index.get(name)
            if i is None:
                continue
            info = self.infos[i]
            old = self._records[i]
            if info.node is not old:
                # A kubelet posts its node's status every 10 s with only heartbeat times
                # new: the columns built from labels and images stay valid unless those
                # actually differ (rebuilding them is a Python pass over every node).
                labels_changed = labels_changed or info.node.labels != old.labels
                images_changed = images_changed or info.node.images != old.images
                annotations_changed = (annotations_changed
                                       or info.node.annotations != old.annotations)
                if not self._write_node(i, info):
                    self._rebuild()
                    return
            if not self._write_usage(i, info):
                self._rebuild()
                return
        if labels_changed:
            self._labels.clear()
            self._groups.clear()
        if images_changed:
            self._images.clear()
            self._image_counts.clear()
        if labels_changed or images_changed or annotations_changed:
            self.version += 1

    def _rebuild(self) -> None:
        cluster = self.cluster
        self.infos = cluster.node_infos()
        self.names = [i.node.name for i in self.infos]
        # The names again as an array, to turn index arrays into names in one step.
        self.name_array = np.array(self.names, dtype=object)
        self.index = {n: i for i, n in enumerate(self.names)}
        names: set[str] = set()
        for info in self.infos:
            names.update(info.node.allocatable)
            names.update(info.requested)
        self.resources = {r: j for j, r in enumerate(sorted(names))}
        n, r = len(self.infos), len(self.resources)
        self.allocatable = np.zeros((r, n), np.int64)
        self.requested = np.zeros((r, n), np.int64)
        self.non_zero_requested = np.zeros((2, n), np.int64)
        self.pod_count = np.zeros(n, np.int64)
        self.unschedulable = np.zeros(n, np.bool_)
        self.taint_set_id = np.zeros(n, np.int64)
        self.taint_sets = []
        self._taint_ids = {}
        self.feature_set_id = np.zeros(n, np.int64)
        self.feature_sets = []
        self._feature_ids = {}
        self._records = [info.node for info in self.infos]
        self.generation = next(_GENERATIONS)
        self.row_stamp = np.zeros(n, np.int64)
        for i, info in enumerate(self.infos):
            # Every resource has a column here, so these cannot fail.
            self._write_node(i, info)
            self._write_usage(i, info)
        self._written = []
        self._written_start = self.stamp + 1
        self._labels.clear()
        self._images.clear()
        self._image_counts.clear()
        self._groups.clear()
        self.version += 1
        self._epoch = cluster.epoch
        self._structure_epoch = cluster.structure_epoch

    def _write_node(self, i: int, info: NodeInfo) -> bool:
        """Write a node's own columns; False when it has a resource without a column."""
        node = info.node
        self._records[i] = node
        self._stamp_row(i)
        column = self.allocatable[:, i]
        column[:] = 0
        for name, value in node.allocatable.items():
            j = self.resources.get(name)
            if j is None:
                return False
            column[j] = value
        self.unschedulable[i] = node.unschedulable
        key = node.taints
        tid = self._taint_ids.get(key)
        if tid is None:
            tid = self._taint_ids[key] = len(self.taint_sets)
            self.taint_sets.append(key)
        self.taint_set_id[i] = tid
        features = node.declared_features
        fid = self._feature_ids.get(features)
        if fid is None:
            fid = self._feature_ids[features] = len(self.feature_sets)
            self.feature_sets.append(features)
        self.feature_set_id[i] = fid
        return True

    def _write_usage(self, i: int, info: NodeInfo) -> bool:
        column = self.requested[:, i]
        nz = info.non_zero_requested
        before = self._usage_of(i)
        column[:] = 0
        for name, value in info.requested.items():
            j = self.resources.get(name)
            if j is None:
                if value:
                    self._stamp_row(i)
                    return False
                continue
            column[j] = value
        self.non_zero_requested[0, i] = nz.get("cpu", 0)
        self.non_zero_requested[1, i] = nz.get("memory", 0)
        self.pod_count[i] = len(info.pods)
        # Stamped only when a value changed: the watch confirming a pod the scheduler
        # assumed there (same requests, same count) leaves every memoized row valid.
        if self._usage_of(i) != before:
            self._stamp_row(i)
        return True

    def _usage_of(self, i: int) -> tuple[bytes, int, int, int]:
        """Row i's usage columns, to tell whether a rewrite changed them."""
        return (self.requested[:, i].tobytes(), int(self.non_zero_requested[0, i]),
                int(self.non_zero_requested[1, i]), int(self.pod_count[i]))

    def _stamp_row(self, i: int) -> None:
        self.stamp += 1
        self.row_stamp[i] = self.stamp
        written = self._written
        written.append(i)
        if len(written) > _WRITTEN_LOG_LIMIT:
            drop = len(written) // 2
            del written[:drop]
            self._written_start += drop

    def rows_written_since(self, stamp: int) -> IntArray:
        """The rows written after `stamp` (a value of `self.stamp`), ascending, once each."""
        if stamp >= self.stamp:
            return _NO_ROWS
        k = stamp + 1 - self._written_start
        if k >= 0 and len(self._written) - k <= len(self.row_stamp) // 8:
            return np.array(sorted(set(self._written[k:])), np.int64)
        return np.flatnonzero(self.row_stamp > stamp)

    # columns
    def resource_column(self, name: str) -> int | None:
        """The row of `name` in `allocatable`/`requested`, None if no node has it."""
        return self.resources.get(name)

    def take(self, row: IntArray, idx: IntArray) -> IntArray:
        """`row[idx]`, without a copy when `idx` covers every node (it is then sorted and
        complete, so it is exactly 0..n-1)."""
        return row if idx.size == row.size else row[idx]

    def label_codes(self, key: str) -> tuple[IntArray, dict[str, int]]:
        """(code per node, value -> code) for a label key; ABSENT where the key is missing."""
        cached = self._labels.get(key)
        if cached is not None:
            return cached
        vocab: dict[str, int] = {}
        codes = np.full(len(self.infos), ABSENT, np.int64)
        for i, info in enumerate(self.infos):
            value = info.node.labels.get(key)
            if value is not None:
                code = vocab.get(value)
                if code is None:
                    code = vocab[value] = len(vocab)
                codes[i] = code
        self._labels[key] = (codes, vocab)
        return codes, vocab

    def label_groups(self, keys: tuple[str, ...]) -> tuple[IntArray, list[int]]:
        """Group nodes by their values for `keys`: (group id per node, one node index per
        group). Any verdict that reads only these labels is the same for a whole group,
        and nodes share few label combinations (zone, pool, instance type), so a plugin
        decides once per group and maps the answer back with `verdicts[group_id[idx]]`.
        """
        cached = self._groups.get(keys)
        if cached is not None:
            return cached
        n = len(self.infos)
        columns = [self.label_codes(key) for key in keys]
        radix = 1
        for _, vocab in columns:
            radix *= len(vocab) + 1
        if radix < 1 << 62:
            combined = np.zeros(n, np.int64)
            for codes, vocab in columns:
                combined = combined * (len(vocab) + 1) + (codes + 1)
            _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
        else:  # too many combinations to pack into one integer: compare whole rows
            stacked = np.stack([codes for codes, _ in columns], axis=1)
            _, first, inverse = np.unique(stacked, axis=0, return_index=True,
                                          return_inverse=True)
        result = (inverse.astype(np.int64).reshape(n), first.tolist())
        self._groups[keys] = result
        return result

    def image_sizes(self, image: str) -> IntArray:
        """Size in bytes of `image` on each node, -1 where the node does not have it."""
        cached = self._images.get(image)
        if cached is None:
            cached = np.fromiter((info.node.images.get(image, -1) for info in self.infos),
                                 np.int64, len(self.infos))
            self._images[image] = cached
        return cached

    def image_count(self, image: str) -> int:
        """How many nodes hold `image` (cached like `image_sizes`)."""
        count = self._image_counts.get(image)
        if count is None:
            count = self._image_counts[image] = int(
                np.count_nonzero(self.image_sizes(image) >= 0))
        return count

