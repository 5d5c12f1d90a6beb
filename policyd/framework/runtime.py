"""The runner: calls plugins at each extension point, in profile order, as upstream does.

Every plugin call goes through here, and here alone a stray exception becomes an Error
status naming the plugin. Filters run plugin by plugin over the still-feasible nodes;
since a node's result is its first rejecting plugin, this gives exactly upstream's
node-by-node outcome while letting a plugin evaluate many nodes in one call
(`filter_all`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

from policyd.framework.cycle_state import CycleState
from policyd.framework.events import ClusterEventWithHint, registrations
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import (
    FilterPlugin,
    NormalizeScorePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ScorePlugin,
)
from policyd.framework.status import Code, Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import IntArray, NodeTable

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


@dataclass(slots=True)
class WeightedScorePlugin:
    plugin: ScorePlugin
    weight: int


@dataclass(slots=True)
class PluginScores:
    """One score plugin's scores over the feasible nodes, aligned with them."""

    plugin: str
    weight: int
    raw: list[int]
    normalized: list[int]  # after NormalizeScore (== raw when it has none)
    # Plugins that score by several rules (compiled policies): per rule id, each node's
    # raw value (None: missing) and its 0..100 score. Their `raw` above is only the
    # integer Score must return, not a value anyone computed from the node.
    rules: dict[str, list[tuple[float | None, int]]] | None = None


@dataclass(slots=True)
class ScoreResult:
    nodes: list[NodeInfo]
    plugins: list[PluginScores] = field(default_factory=list)
    totals: list[int] = field(default_factory=list)


class Framework:
    """A profile's plugins per extension point, ready to run (frameworkImpl)."""

    def __init__(
        self,
        profile_name: str,
        *,
        queue_sort: QueueSortPlugin | None = None,
        pre_filter: Sequence[PreFilterPlugin] = (),
        filter: Sequence[FilterPlugin] = (),
        pre_score: Sequence[PreScorePlugin] = (),
        score: Sequence[WeightedScorePlugin] = (),
        seed: int | None = None,
    ) -> None:
        self.profile_name = profile_name
        self.queue_sort = queue_sort
        self.pre_filter_plugins = list(pre_filter)
        self.filter_plugins = list(filter)
        self.pre_score_plugins = list(pre_score)
        self.score_plugins = list(score)
        self.rng = random.Random(seed)
        # Called with (extension point, plugin, seconds) after each plugin call when set:
        # the daemon's per-plugin latency metric. None costs one comparison per plugin.
        self.plugin_timer: Callable[[str, str, float], None] | None = None

    # PreFilter
    def run_pre_filter(
        self, state: CycleState, pod: Pod
    ) -> tuple[set[str] | None, Status | None, set[str]]:
        """Returns (node names to restrict to or None, failure status, rejecting plugins).

        A Skip marks the plugin so its Filter does not run; the first rejection or error
        ends PreFilter (RunPreFilterPlugins)."""
        result: set[str] | None = None
        narrowing: list[str] = []
        nodes = state.all_nodes
        timer = self.plugin_timer
        for pl in self.pre_filter_plugins:
            try:
                t0 = perf_counter()
                names, status = pl.pre_filter(state, pod, nodes)
                if timer is not None:
                    timer("PreFilter", pl.name, perf_counter() - t0)
            except Exception as exc:
                return None, _error("PreFilter", pl.name, exc), {pl.name}
            if status is not None:
                if status.is_skip:
                    state.skip_filter.add(pl.name)
                    continue
                if not status.is_success:
                    if not status.is_rejected:
                        return None, _error_status("PreFilter", pl.name, status), {pl.name}
                    return None, status.with_plugin(pl.name), {pl.name}
            if names is not None:
                narrowing.append(pl.name)
                result = set(names) if result is None else result & names
                if not result:
                    if len(narrowing) == 1:
                        msg = f"node(s) didn't satisfy plugin {narrowing[0]}"
                    else:
                        msg = f"node(s) didn't satisfy plugin(s) [{' '.join(narrowing)}] " \
                              "simultaneously"
                    return None, Status.unschedulable(msg), set(narrowing)
        return result, None, set(narrowing)

    # Filter
    def run_filters(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], diagnosis: Diagnosis
    ) -> tuple[list[NodeInfo], Status | None]:
        """The nodes that pass every filter; rejected nodes go into `diagnosis` with
        their first rejecting status. A plugin error aborts the cycle (returned)."""
        remaining = list(nodes)
        for pl in self.filter_plugins:
            if pl.name in state.skip_filter or not remaining:
                continue
            try:
                batch = getattr(pl, "filter_all", None)
                if batch is not None:
                    results = batch(state, pod, remaining)
                else:
                    f = pl.filter
                    results = [f(state, pod, n) for n in remaining]
            except Exception as exc:
                return [], _error("Filter", pl.name, exc)
            if not any(results):
                continue
            kept = []
            for node, status in zip(remaining, results, strict=True):
                if status is None or status.is_success:
                    kept.append(node)
                elif status.is_rejected:
                    diagnosis.node_to_status[node.name] = status.with_plugin(pl.name)
                    diagnosis.unschedulable_plugins.add(pl.name)
                else:
                    return [], _error_status("Filter", pl.name, status)
            remaining = kept
        return remaining, None

    def filter_details(
        self, state: CycleState, pod: Pod, node: NodeInfo
    ) -> dict[str, Status | None]:
        """Every filter plugin's verdict on one node, without stopping at the first
        rejection: what `explain` shows. Skipped plugins are reported as Skip."""
        out: dict[str, Status | None] = {}
        for pl in self.filter_plugins:
            if pl.name in state.skip_filter:
                out[pl.name] = Status.skip()
                continue
            try:
                out[pl.name] = pl.filter(state, pod, node)
            except Exception as exc:
                out[pl.name] = _error("Filter", pl.name, exc)
        return out

    # PreScore and Score
    def run_pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        timer = self.plugin_timer
        for pl in self.pre_score_plugins:
            try:
                t0 = perf_counter()
                status = pl.pre_score(state, pod, nodes)
                if timer is not None:
                    timer("PreScore", pl.name, perf_counter() - t0)
            except Exception as exc:
                return _error("PreScore", pl.name, exc)
            if status is None or status.is_success:
                continue
            if status.is_skip:
                state.skip_score.add(pl.name)
                continue
            return _error_status("PreScore", pl.name, status)
        return None

    def run_score(
        self, state: CycleState, pod: Pod, nodes: list[NodeInfo]
    ) -> tuple[ScoreResult, Status | None]:
        """Score, normalize, check the range, weigh and sum (RunScorePlugins)."""
        result = ScoreResult(nodes=nodes, totals=[0] * len(nodes))
        for wp in self.score_plugins:
            pl = wp.plugin
            if pl.name in state.skip_score:
                continue
            try:
                score = pl.score
                raw = [score(state, pod, n) for n in nodes]
                normalized = list(raw)
                if isinstance(pl, NormalizeScorePlugin):
                    status = pl.normalize_score(state, pod, nodes, normalized)
                    if status is not None and not status.is_success:
                        return result, _error_status("NormalizeScore", pl.name, status)
                explain_rules = getattr(pl, "explain_scores", None)
                rules = explain_rules(state, nodes) if explain_rules is not None else None
            except Exception as exc:
                return result, _error("Score", pl.name, exc)
            for i, s in enumerate(normalized):
                if s > MAX_NODE_SCORE or s < MIN_NODE_SCORE:
                    return result, Status.error(
                        f"plugin {pl.name!r} returns an invalid score {s}, it should in the "
                        f"range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing")
                result.totals[i] += s * wp.weight
            result.plugins.append(PluginScores(pl.name, wp.weight, raw, normalized, rules))
        return result, None

    def select_host(self, scores: ScoreResult) -> NodeInfo:
        """Highest total; ties broken uniformly at random (seedable)."""
        best = max(scores.totals)
        tied = [n for n, t in zip(scores.nodes, scores.totals, strict=True) if t == best]
        return tied[0] if len(tied) == 1 else self.rng.choice(tied)

    # The vectorized path: same decisions over index arrays into the NodeTable.
    def run_filters_fast(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> tuple[IntArray, Status | None]:
        """Indices of the nodes that pass every filter. Rejection reasons are not kept:
        when they are needed (no node fits, explain), `run_filters` recomputes them."""
        infos = table.infos
        timer = self.plugin_timer
        for pl in self.filter_plugins:
            if pl.name in state.skip_filter or idx.size == 0:
                continue
            try:
                t0 = perf_counter()
                vector = getattr(pl, "filter_mask", None)
                mask = vector(state, pod, table, idx) if vector is not None else None
                if mask is None:
                    f = pl.filter
                    results = [f(state, pod, infos[i]) for i in idx.tolist()]
                    for st in results:
                        if st is not None and not st.is_success and not st.is_rejected:
                            return idx[:0], _error_status("Filter", pl.name, st)
                    mask = np.fromiter((st is None or st.is_success for st in results),
                                       np.bool_, len(results))
                if timer is not None:
                    timer("Filter", pl.name, perf_counter() - t0)
            except Exception as exc:
                return idx[:0], _error("Filter", pl.name, exc)
            if not mask.all():  # keep the same array when nothing is rejected
                idx = idx[mask]
        return idx, None

    def run_score_fast(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray,
        nodes: Sequence[NodeInfo],
    ) -> tuple[IntArray, Status | None]:
        """Weighted totals of the feasible nodes `idx` (`nodes` = their NodeInfos)."""
        totals = np.zeros(idx.size, np.int64)
        timer = self.plugin_timer
        for wp in self.score_plugins:
            pl = wp.plugin
            if pl.name in state.skip_score:
                continue
            try:
                t0 = perf_counter()
                vector = getattr(pl, "score_vector", None)
                scores = vector(state, pod, table, idx) if vector is not None else None
                if scores is not None:
                    normalize = getattr(pl, "normalize_vector", None)
                    if normalize is not None:
                        scores = normalize(state, pod, table, idx, scores)
                else:
                    score = pl.score
                    raw = [score(state, pod, n) for n in nodes]
                    if isinstance(pl, NormalizeScorePlugin):
                        status = pl.normalize_score(state, pod, nodes, raw)
                        if status is not None and not status.is_success:
                            return totals, _error_status("NormalizeScore", pl.name, status)
                    scores = np.array(raw, np.int64)
                if timer is not None:
                    timer("Score", pl.name, perf_counter() - t0)
            except Exception as exc:
                return totals, _error("Score", pl.name, exc)
            if scores.size and (scores.max() > MAX_NODE_SCORE or scores.min() < MIN_NODE_SCORE):
                bad = int(scores[(scores > MAX_NODE_SCORE) | (scores < MIN_NODE_SCORE)][0])
                return totals, Status.error(
                    f"plugin {pl.name!r} returns an invalid score {bad}, it should in the "
                    f"range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing")
            totals += scores * wp.weight
        return totals, None

    def select_index(self, totals: IntArray) -> int:
        """Position of the highest total; ties at random, drawing exactly as
        `select_host` does so both paths choose the same node for the same seed."""
        tied = np.flatnonzero(totals == totals.max())
        if tied.size == 1:
            return int(tied[0])
        # randrange(n) draws exactly as choice() of an n-long sequence does, without
        # turning thousands of tied indices (identical nodes) into a list.
        return int(tied[self.rng.randrange(tied.size)])

    def queueing_hints(self) -> list[tuple[str, ClusterEventWithHint]]:
        """Every (plugin, registered event) of the plugins that can reject a pod
        (PreFilter and Filter), each plugin once: what the scheduling queue consults
        to decide which events can help a pod those plugins rejected."""
        seen: set[str] = set()
        out: list[tuple[str, ClusterEventWithHint]] = []
        for pl in [*self.pre_filter_plugins, *self.filter_plugins]:
            if pl.name in seen:
                continue
            seen.add(pl.name)
            out.extend((pl.name, reg) for reg in registrations(pl))
        return out

    def less(self, a: Pod, b: Pod) -> bool:
        if self.queue_sort is None:
            return a.creation_timestamp < b.creation_timestamp
        return self.queue_sort.less(a, b)


def _error(point: str, plugin: str, exc: Exception) -> Status:
    return Status(Code.ERROR, (f"running {point} plugin {plugin!r}: "
                               f"{type(exc).__name__}: {exc}",), plugin)


def _error_status(point: str, plugin: str, status: Status) -> Status:
    return Status(Code.ERROR, (f"running {point} plugin {plugin!r}: {status.message}",), plugin)
