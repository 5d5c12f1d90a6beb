"""PodTopologySpread over the NodeTable: per-domain counts with numpy, not a node loop.

The per-node Python path costs microseconds per node per constraint, milliseconds per
pod at 5000 nodes. Here each (namespace, selector) keeps a count column aligned with
the table; a pod cycle recounts only the rows of nodes that the cluster's change log
names since the column was last brought up to date (an assumed pod touches one row),
and domain sums are a `bincount` over the topology key's label codes. Node inclusion
policies become boolean columns: node affinity is evaluated once per distinct affinity
until node records change, taints once per distinct taint set.

Every result here equals the per-node path's; tests compare both on generated clusters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import ABSENT, BoolArray, IntArray, NodeTable
from policyd.plugins.nodeaffinity.node_affinity import pod_node_affinity
from policyd.plugins.podtopologyspread.constraints import Constraint, tolerates_taints

# (node, namespace + selector key, constraint, namespace) -> matching pods on the node
Counter = Callable[[NodeInfo, str, Constraint, str], int]
_COLUMN_LIMIT = 256  # (namespace, selector) count columns kept per plugin instance
_AFFINITY_LIMIT = 64  # distinct node affinities whose node masks are kept


@dataclass(slots=True)
class _Column:
    infos: list[NodeInfo]  # the table's row list the column was built for
    epoch: int  # the cluster change-log position the counts are current to
    counts: IntArray


class VectorCache:
    """Count columns and affinity masks, per plugin instance, for one NodeTable."""

    def __init__(self) -> None:
        self._columns: dict[str, _Column] = {}
        self._affinity: dict[Any, tuple[NodeTable, int, BoolArray]] = {}

    def counts(self, table: NodeTable, count_key: str, c: Constraint, namespace: str,
               recount: Counter) -> IntArray:
        """Matching pods per table row for c's selector; `recount` is the per-node
        counter (memoized on the node), called for new and changed rows only."""
        infos = table.infos
        cluster = table.cluster
        epoch = cluster.epoch
        col = self._columns.get(count_key)
        changed: set[str] | None = None
        if col is not None and col.infos is infos:
            if col.epoch == epoch:
                return col.counts
            changed = cluster.changes_since(col.epoch)
        if col is None or changed is None or col.infos is not infos:
            # New column, rebuilt table, or a change log that no longer reaches back.
            if len(self._columns) >= _COLUMN_LIMIT:
                self._columns.clear()
            counts = np.fromiter((recount(info, count_key, c, namespace) for info in infos),
                                 np.int64, len(infos))
            self._columns[count_key] = _Column(infos, epoch, counts)
            return counts
        index = table.index
        for name in changed:
            i = index.get(name)
            if i is not None:
                col.counts[i] = recount(infos[i], count_key, c, namespace)
        col.epoch = epoch
        return col.counts

    def affinity_mask(self, table: NodeTable, pod: Pod) -> BoolArray | None:
        """Nodes matching the pod's nodeSelector and required node affinity; None when
        every node does."""
        pna = pod_node_affinity(pod)
        if not pna.selector and pna.required is None:
            return None
        key = (pna.selector, pna.required)
        hit = self._affinity.get(key)
        if hit is not None and hit[0] is table and hit[1] == table.version:
            return hit[2]
        mask = np.fromiter((pna.matches(info.node.labels, info.node.name)
                            for info in table.infos), np.bool_, len(table.infos))
        if len(self._affinity) >= _AFFINITY_LIMIT:
            self._affinity.clear()
        self._affinity[key] = (table, table.version, mask)
        return mask


def taints_mask(table: NodeTable, pod: Pod) -> BoolArray:
    """Nodes without a NoSchedule/NoExecute taint the pod does not tolerate."""
    ok = np.fromiter((tolerates_taints(pod, taints) for taints in table.taint_sets),
                     np.bool_, len(table.taint_sets))
    return ok[table.taint_set_id] if ok.size else np.ones(len(table.infos), np.bool_)


def keys_present(table: NodeTable, keys: Sequence[str]) -> BoolArray:
    mask = np.ones(len(table.infos), np.bool_)
    for key in dict.fromkeys(keys):
        mask &= table.label_codes(key)[0] != ABSENT
    return mask


def eligibility(cache: VectorCache, table: NodeTable, pod: Pod,
                constraints: Sequence[Constraint], require_all: bool) -> list[BoolArray]:
    """Per constraint, the table rows whose pods count for it (the per-node path's
    key and inclusion-policy checks)."""
    base = (keys_present(table, [c.topology_key for c in constraints]) if require_all
            else np.ones(len(table.infos), np.bool_))
    affinity: BoolArray | None = None
    taints: BoolArray | None = None
    if any(c.honor_node_affinity for c in constraints):
        affinity = cache.affinity_mask(table, pod)
    if any(c.honor_node_taints for c in constraints):
        taints = taints_mask(table, pod)
    out = []
    for c in constraints:
        mask = base
        if c.honor_node_affinity and affinity is not None:
            mask = mask & affinity
        if c.honor_node_taints and taints is not None:
            mask = mask & taints
        out.append(mask)
    return out


def domain_codes(table: NodeTable, key: str) -> tuple[IntArray, dict[str, int]]:
    """Label codes where a missing key reads as the value "" (as the per-node path's
    `labels.get(key, "")`): absent rows share the code of "" (or a new last code)."""
    codes, vocab = table.label_codes(key)
    empty = vocab.get("", len(vocab))
    return np.where(codes == ABSENT, empty, codes), vocab


def domain_sums(codes: IntArray, mask: BoolArray, counts: IntArray, size: int
                ) -> tuple[IntArray, BoolArray]:
    """(matching pods per domain code, which codes hold an eligible node)."""
    sel = codes[mask]
    present = np.bincount(sel, minlength=size) > 0
    sums = np.bincount(sel, weights=counts[mask], minlength=size)
    return sums.astype(np.int64), present
