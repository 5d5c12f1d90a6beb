"""Run one plugin's Filter or Score through a CycleState, in both forms, as the engine
does: the reference form on a cycle prepared for per-node evaluation (what
`schedule_one(reference=True)` and explain run), the columnar form on a cycle prepared
for the NodeTable (the default path). Every run checks that the forms agree, so a plugin
test that goes through here also tests its columnar form; the registry-driven contract
test (tests/unit/plugins/test_plugin_contract.py) runs every plugin through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from policyd.framework.cycle_state import CycleState
from policyd.framework.interfaces import (
    ColumnarFilterPlugin,
    ColumnarNormalizePlugin,
    ColumnarScorePlugin,
    FilterPlugin,
    NormalizeScorePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreBreakdownPlugin,
    ScorePlugin,
)
from policyd.framework.status import Status
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import IntArray, NodeTable


@dataclass(slots=True)
class FilterOutcome:
    """A Filter run: the PreFilter status that stopped it (Skip or a rejection), or
    the reference form's status per node in cluster order."""

    stopped: Status | None
    statuses: list[Status | None]
    names: list[str]
    columnar: bool  # whether the columnar form answered (not the None fallback)

    def by_node(self) -> dict[str, Status | None]:
        return dict(zip(self.names, self.statuses, strict=True))


@dataclass(slots=True)
class ScoreOutcome:
    """A Score run: the PreScore status that stopped it (Skip or an error), or the raw
    and normalized scores of the nodes."""

    stopped: Status | None
    raw: list[int]
    normalized: list[int]
    names: list[str]
    columnar: bool

    @property
    def skipped(self) -> bool:
        return self.stopped is not None and self.stopped.is_skip


def cluster_of(*infos: NodeInfo) -> ClusterState:
    """A ClusterState holding these NodeInfos' nodes and pods (table tests build
    NodeInfos by hand)."""
    cluster = ClusterState([info.node for info in infos])
    for info in infos:
        for pod in info.pods.values():
            cluster.assume(pod, info.name)
    return cluster


def filter_statuses(plugin: FilterPlugin, pod: Pod, *infos: NodeInfo) -> list[Status | None]:
    """The reference statuses on these nodes, both forms checked; a PreFilter Skip
    means every node passes, a PreFilter rejection is returned for each node."""
    out = run_filter(plugin, pod, cluster_of(*infos))
    if out.stopped is not None:
        return [None if out.stopped.is_skip else out.stopped for _ in infos]
    return out.statuses


def reference_state(cluster: ClusterState) -> CycleState:
    return CycleState(cluster.node_infos(), cluster)


def columnar_state(cluster: ClusterState) -> tuple[CycleState, NodeTable]:
    table = cluster.table()
    state = CycleState(table.infos, cluster)
    state.table = table
    return state, table


def _pre_filter(plugin: object, state: CycleState, pod: Pod) -> Status | None:
    if not isinstance(plugin, PreFilterPlugin):
        return None
    names, status = plugin.pre_filter(state, pod, state.all_nodes)
    assert names is None or isinstance(names, set)
    if status is not None and not status.is_success:
        return status
    return None


def run_filter(plugin: FilterPlugin, pod: Pod, cluster: ClusterState,
               subset: Sequence[int] | None = None) -> FilterOutcome:
    """PreFilter then Filter on every node (or the node positions `subset`), in both
    forms; asserts they agree: same PreFilter outcome, same reference statuses on
    either cycle, and a mask (when given) that passes exactly the nodes `filter`
    passes."""
    ref = reference_state(cluster)
    col, table = columnar_state(cluster)
    stopped = _pre_filter(plugin, ref, pod)
    assert _pre_filter(plugin, col, pod) == stopped, "PreFilter differs per form"
    infos = cluster.node_infos()
    assert [i.name for i in infos] == table.names
    idx: IntArray = (np.arange(len(infos), dtype=np.int64) if subset is None
                     else np.array(sorted(subset), np.int64))
    chosen = [infos[i] for i in idx.tolist()]
    names = [n.name for n in chosen]
    if stopped is not None:
        return FilterOutcome(stopped, [], names, False)
    # The columnar form runs first on its cycle, as on the fast path, so no per-node
    # call can have warmed a cache it relies on.
    mask = (plugin.filter_mask(col, pod, table, idx)
            if isinstance(plugin, ColumnarFilterPlugin) else None)
    statuses = [plugin.filter(ref, pod, n) for n in chosen]
    # The fast path asks `filter` for reasons on its own (columnar) cycle.
    on_table = [plugin.filter(col, pod, table.infos[i]) for i in idx.tolist()]
    assert on_table == statuses, "filter differs on the columnar cycle"
    if mask is not None:
        want = [s is None or s.is_success for s in statuses]
        got = mask.tolist()
        assert got == want, (
            "filter_mask disagrees with filter on "
            f"{[n for n, g, w in zip(names, got, want, strict=True) if g != w]}")
    return FilterOutcome(None, statuses, names, mask is not None)


def run_score(plugin: ScorePlugin, pod: Pod, cluster: ClusterState,
              subset: Sequence[int] | None = None) -> ScoreOutcome:
    """PreScore, Score and NormalizeScore over every node (or the node positions
    `subset`, standing for the feasible nodes), in both forms; asserts that the
    columnar scores (normalized when the plugin has normalize_vector) equal the
    reference ones."""
    ref = reference_state(cluster)
    col, table = columnar_state(cluster)
    infos = cluster.node_infos()
    idx: IntArray = (np.arange(len(infos), dtype=np.int64) if subset is None
                     else np.array(sorted(subset), np.int64))
    chosen = [infos[i] for i in idx.tolist()]
    on_table = [table.infos[i] for i in idx.tolist()]
    names = [n.name for n in chosen]
    if isinstance(plugin, PreScorePlugin):
        status = plugin.pre_score(ref, pod, chosen)
        assert plugin.pre_score(col, pod, on_table) == status, "PreScore differs per form"
        if status is not None and not status.is_success:
            return ScoreOutcome(status, [], [], names, False)
    # The columnar form first (see run_filter).
    vector = (plugin.score_vector(col, pod, table, idx)
              if isinstance(plugin, ColumnarScorePlugin) else None)
    normalized_vector = vector
    normalizes = isinstance(plugin, ColumnarNormalizePlugin)
    if vector is not None and isinstance(plugin, ColumnarNormalizePlugin):
        normalized_vector = plugin.normalize_vector(col, pod, table, idx, vector)
    raw = [plugin.score(ref, pod, n) for n in chosen]
    # The fast path scores per node on its own (columnar) cycle when score_vector
    # returns None.
    assert [plugin.score(col, pod, n) for n in on_table] == raw, \
        "score differs on the columnar cycle"
    normalized = list(raw)
    if isinstance(plugin, NormalizeScorePlugin):
        assert plugin.normalize_score(ref, pod, chosen, normalized) is None
    if isinstance(plugin, ScoreBreakdownPlugin):
        breakdown = plugin.score_breakdown(ref, chosen)
        assert all(len(v) == len(chosen) for v in breakdown.values())
    if vector is not None and normalizes:
        assert vector.tolist() == raw, "score_vector differs from score"
    if normalized_vector is not None:
        assert normalized_vector.tolist() == normalized, "columnar scores differ"
    return ScoreOutcome(None, raw, normalized, names, vector is not None)
