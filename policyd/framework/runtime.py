"""The runner: calls plugins at each extension point, in profile order, as upstream does.

Every plugin call goes through here, and here alone a stray exception becomes an Error
status naming the plugin. The Framework sorts its plugins once, when it is built, into
typed lists (`BoundFilter`, `BoundScore`) holding each plugin's reference form and, when
it has one, its columnar form; calls never look methods up by name.

Which form produces what:
- the decision (feasible nodes, scores, chosen node) on the default path: the columnar
  form (`run_filters_fast`, `run_score_fast`), the reference form for a plugin without
  one or whose columnar method returns None for the pod;
- every rejection reason (the FailedScheduling message, the Diagnosis, explain's
  per-plugin verdicts): the reference `filter`, by construction. `run_filter_diagnosis`
  uses a plugin's mask only to skip the nodes it passes;
- `run_filters`, `run_score`: the reference form only (`schedule_one(reference=True)`,
  explain), which the columnar form is tested against.

Policies in Audit mode are neither filters nor scores here: they are sorted into
`audits` when the Framework is built (whatever extension points the profile named them
at), and `run_audits`/`run_audits_fast` judge their rules on the feasible nodes after
Filter, rejecting nothing.

Filters run plugin by plugin over the still-feasible nodes: since a node's result is its
first rejecting plugin, this gives exactly upstream's node-by-node outcome.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np

from policyd.features import DEFAULTS, FeatureGates
from policyd.framework.cycle_state import CycleState
from policyd.framework.events import ClusterEventWithHint, registrations
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import (
    AuditedRule,
    AuditPlugin,
    BindingHandle,
    ClusterPlugin,
    ColumnarFilterPlugin,
    ColumnarNormalizePlugin,
    ColumnarScorePlugin,
    ColumnarStatusesPlugin,
    FilterPlugin,
    NormalizeScorePlugin,
    PermitPlugin,
    PostFilterNotesPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreBindPreFlightPlugin,
    PreEnqueuePlugin,
    PreFilterExtensionsPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    RuleScores,
    ScoreBreakdownPlugin,
    ScorePlugin,
    UndoPreBindPlugin,
    Verdict,
    VerdictsPlugin,
    WaitingPodsPlugin,
    filter_reads_node_pods,
    pre_filter_state_follows_pods,
)
from policyd.framework.status import Code, Status
from policyd.framework.waiting_pods import PERMIT_MAX_WAIT_S, WaitingPods
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import BoolArray, IntArray, NodeTable

if TYPE_CHECKING:
    from policyd.model.cluster import ClusterState

_log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0

FilterFn = Callable[[CycleState, Pod, NodeInfo], Status | None]
MaskFn = Callable[[CycleState, Pod, NodeTable, IntArray], BoolArray | None]
StatusesFn = Callable[[CycleState, Pod, NodeTable, IntArray], Sequence[Status | None] | None]
ScoreFn = Callable[[CycleState, Pod, NodeInfo], int]
NormalizeFn = Callable[[CycleState, Pod, Sequence[NodeInfo], list[int]], Status | None]
ScoreVectorFn = Callable[[CycleState, Pod, NodeTable, IntArray], IntArray | None]
NormalizeVectorFn = Callable[[CycleState, Pod, NodeTable, IntArray, IntArray], IntArray]
BreakdownFn = Callable[[CycleState, Sequence[NodeInfo]], dict[str, RuleScores]]


@dataclass(slots=True)
class WeightedScorePlugin:
    plugin: ScorePlugin
    weight: int


@dataclass(frozen=True, slots=True)
class BoundFilter:
    """A filter plugin's forms, bound once: `mask` (`statuses`) is None when it has no
    columnar verdicts (reasons)."""

    name: str
    filter: FilterFn
    mask: MaskFn | None
    statuses: StatusesFn | None = None

    @classmethod
    def of(cls, plugin: object) -> BoundFilter:
        if not isinstance(plugin, FilterPlugin):
            raise TypeError(f"{plugin!r} has no filter: it is not a Filter plugin")
        mask = plugin.filter_mask if isinstance(plugin, ColumnarFilterPlugin) else None
        statuses = (plugin.filter_statuses if isinstance(plugin, ColumnarStatusesPlugin)
                    else None)
        return cls(plugin.name, plugin.filter, mask, statuses)


@dataclass(frozen=True, slots=True)
class BoundScore:
    """A score plugin's forms and weight, bound once (None: the plugin lacks that one)."""

    name: str
    weight: int
    score: ScoreFn
    normalize: NormalizeFn | None
    vector: ScoreVectorFn | None
    normalize_vector: NormalizeVectorFn | None
    breakdown: BreakdownFn | None

    @classmethod
    def of(cls, wp: WeightedScorePlugin) -> BoundScore:
        pl = wp.plugin
        if not isinstance(pl, ScorePlugin):
            raise TypeError(f"{pl!r} has no score: it is not a Score plugin")
        return cls(
            pl.name, wp.weight, pl.score,
            pl.normalize_score if isinstance(pl, NormalizeScorePlugin) else None,
            pl.score_vector if isinstance(pl, ColumnarScorePlugin) else None,
            pl.normalize_vector if isinstance(pl, ColumnarNormalizePlugin) else None,
            pl.score_breakdown if isinstance(pl, ScoreBreakdownPlugin) else None,
        )


AuditBindFn = Callable[[CycleState, Pod], Sequence[AuditedRule]]
AuditFilterFn = Callable[[CycleState, Pod, NodeInfo], Sequence[bool]]
AuditMaskFn = Callable[[CycleState, Pod, NodeTable, IntArray], Sequence[BoolArray]]


@dataclass(frozen=True, slots=True)
class BoundAudit:
    """An audited policy's forms, bound once."""

    name: str
    policy: str
    bind: AuditBindFn
    filter: AuditFilterFn
    mask: AuditMaskFn

    @classmethod
    def of(cls, plugin: AuditPlugin) -> BoundAudit:
        return cls(plugin.name, plugin.policy_name, plugin.audit_bind, plugin.audit_filter,
                   plugin.audit_mask)


@dataclass(frozen=True, slots=True)
class AuditOutcome:
    """One audited rule over the nodes it was given: `rejected` holds the positions
    (into those nodes, ascending) of the nodes it would have rejected."""

    plugin: str
    policy: str
    rule: str
    reason: str
    rejected: IntArray


def _audit_only(plugin: object) -> bool:
    """An audited policy with no Enforce form (Audit for every pod). One Enforce in
    some namespaces and Audit in others (spec.scopedModes) has both: it filters and
    scores the pods it enforces and is audited for the others."""
    return isinstance(plugin, AuditPlugin) and not isinstance(
        plugin, FilterPlugin | PreFilterPlugin | ScorePlugin | PreScorePlugin)


def _enforced(plugins: Sequence[T]) -> list[T]:
    """`plugins` without the audit-only policies a profile named at that point."""
    return [p for p in plugins if not _audit_only(p)]


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
    rules: dict[str, RuleScores] | None = None


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
        pre_enqueue: Sequence[PreEnqueuePlugin] = (),
        queue_sort: QueueSortPlugin | None = None,
        pre_filter: Sequence[PreFilterPlugin] = (),
        filter: Sequence[FilterPlugin | AuditPlugin] = (),
        pre_score: Sequence[PreScorePlugin] = (),
        score: Sequence[WeightedScorePlugin] = (),
        post_filter: Sequence[PostFilterPlugin] = (),
        reserve: Sequence[ReservePlugin] = (),
        permit: Sequence[PermitPlugin] = (),
        pre_bind: Sequence[PreBindPlugin] = (),
        seed: int | None = None,
        features: FeatureGates = DEFAULTS,
        waiting_pods: WaitingPods | None = None,
    ) -> None:
        self.profile_name = profile_name
        # The feature gates its plugins were built under: the one place the engine,
        # the daemon (binder, queue) and the offline commands read them from.
        self.features = features
        self.pre_enqueue_plugins = list(pre_enqueue)
        self.queue_sort = queue_sort
        # An audited policy goes wherever the profile puts its Enforce form; it is
        # audited where that form would filter, and nowhere else: not a PreFilter
        # (it binds its rules itself), not a Filter (it rejects nothing), not a
        # PreScore or Score (its scores do not count).
        self.audit_plugins = [p for p in filter if isinstance(p, AuditPlugin)]
        self.audits: tuple[BoundAudit, ...] = tuple(
            BoundAudit.of(p) for p in self.audit_plugins)
        filters = cast(list[FilterPlugin], _enforced(filter))
        score = [wp for wp in score if not _audit_only(wp.plugin)]
        self.pre_filter_plugins = _enforced(pre_filter)
        # The PreFilter plugins with AddPod/RemovePod, in profile order, and whether a
        # cloned PreFilter state updated through them is every plugin's right state
        # with pods added or removed (else preemption's dry runs rerun PreFilter).
        self.pre_filter_extensions = tuple(
            p for p in self.pre_filter_plugins if isinstance(p, PreFilterExtensionsPlugin))
        self.pre_filter_state_follows_pods = all(
            map(pre_filter_state_follows_pods, self.pre_filter_plugins))
        self.filter_plugins = filters
        self.pre_score_plugins = _enforced(pre_score)
        self.score_plugins = list(score)
        self.post_filter_plugins = list(post_filter)
        self.reserve_plugins = list(reserve)
        self.permit_plugins = list(permit)
        self.pre_bind_plugins = list(pre_bind)
        self._waiting_pods_plugins = [
            pl for pl in {id(p): p for p in (*pre_enqueue, *filter, *reserve, *permit,
                                             *post_filter, *pre_bind)}.values()
            if isinstance(pl, WaitingPodsPlugin)]
        self._cluster_plugins = [
            pl for pl in {id(p): p for p in (*pre_enqueue, *([queue_sort] if queue_sort else []),
                                             *pre_filter, *filter, *post_filter, *reserve,
                                             *permit)}.values()
            if isinstance(pl, ClusterPlugin)]
        self.waiting_pods = WaitingPods()
        self.use_waiting_pods(waiting_pods if waiting_pods is not None else WaitingPods())
        # Each plugin's forms, bound once here: the cycle only loops over these.
        self.filters: tuple[BoundFilter, ...] = tuple(map(BoundFilter.of, filters))
        # The filters whose verdict on a node may change with the pods on it: once a
        # dry run's node passed every filter, its later checks need only these.
        self.pod_dependent_filters = tuple(
            bf for bf, pl in zip(self.filters, filters, strict=True)
            if filter_reads_node_pods(pl))
        self.scores: tuple[BoundScore, ...] = tuple(map(BoundScore.of, score))
        self.rng = random.Random(seed)
        # Called with (extension point, plugin, seconds) after each plugin call when set:
        # the daemon's per-plugin latency metric. None costs one comparison per plugin.
        # (extension point, plugin, seconds, status code name): set on sampled cycles.
        self.plugin_timer: Callable[[str, str, float, str], None] | None = None

    def use_waiting_pods(self, waiting: WaitingPods) -> None:
        """Keep the pods waiting at Permit in `waiting`, and tell the plugins that act
        on them: the daemon gives every profile's framework, and every reload's, its
        one map, so a wait that began under one outlives it."""
        self.waiting_pods = waiting
        for pl in self._waiting_pods_plugins:
            pl.use_waiting_pods(waiting)

    def use_cluster(self, cluster: ClusterState) -> None:
        """Tell the plugins that read the cluster outside a cycle (`ClusterPlugin`)
        which one the scheduler keeps."""
        for pl in self._cluster_plugins:
            pl.use_cluster(cluster)

    # PreEnqueue: before the pod enters activeQ or backoffQ.
    def group_topology_keys(self, pod: Pod) -> list[str]:
        """The node label keys whose one domain `pod`'s pod group must share, as the
        profile's Filter plugins say (`group_topology_keys`: a policy's sameTopology
        rules): the pod group cycle tries the group one domain at a time with them."""
        keys: list[str] = []
        for pl in self.filter_plugins:
            ask = getattr(pl, "group_topology_keys", None)
            if ask is not None:
                keys += [k for k in ask(pod) if k not in keys]
        return keys

    def run_pre_enqueue(self, pod: Pod, cluster: ClusterState, gating: str = ""
                        ) -> tuple[str, Status] | None:
        """The first PreEnqueue plugin that does not let `pod` in, with its status, or
        None when all do (runPreEnqueuePlugins). The plugin that gated the pod last
        time (`gating`) is asked first: the likeliest to still refuse. Upstream asks
        the others in map order (random); policyd in profile order. A plugin that
        raises gates the pod with an Error, as an Error status does upstream."""
        plugins = self.pre_enqueue_plugins
        if gating:
            plugins = sorted(plugins, key=lambda pl: pl.name != gating)
        timer = self.plugin_timer
        for pl in plugins:
            try:
                t0 = perf_counter()
                status = pl.pre_enqueue(pod, cluster)
                if timer is not None:
                    timer("PreEnqueue", pl.name, perf_counter() - t0, _code(status))
            except Exception as exc:
                _log.exception("running PreEnqueue plugin %r for %s", pl.name, pod.key)
                return pl.name, _error("PreEnqueue", pl.name, exc)
            if status is not None and not status.is_success:
                return pl.name, status.with_plugin(pl.name)
        return None

    # PreFilter
    def run_pre_filter(
        self, state: CycleState, pod: Pod
    ) -> tuple[set[str] | None, Status | None, set[str]]:
        """Returns (node names to restrict to or None, failure status, rejecting plugins),
        as RunPreFilterPlugins does.

        A Skip marks the plugin so its Filter does not run. UnschedulableAndUnresolvable
        or an error ends PreFilter at once. A plain Unschedulable does not: preemption may
        still help, and it needs every plugin's PreFilter state, so the others run and
        the last such status is the answer (upstream issue 119770). Node sets of the
        plugins that narrow are intersected; an empty intersection is unresolvable."""
        result: set[str] | None = None
        narrowing: set[str] = set()
        rejected: Status | None = None
        nodes = state.all_nodes
        timer = self.plugin_timer
        for pl in self.pre_filter_plugins:
            try:
                t0 = perf_counter()
                names, status = pl.pre_filter(state, pod, nodes)
                if timer is not None:
                    timer("PreFilter", pl.name, perf_counter() - t0, _code(status))
            except Exception as exc:
                return None, _error("PreFilter", pl.name, exc), {pl.name}
            if status is not None:
                if status.is_skip:
                    state.skip_filter.add(pl.name)
                    continue
                if not status.is_success:
                    if status.code is Code.UNSCHEDULABLE:
                        rejected = status.with_plugin(pl.name)
                        continue
                    if not status.is_rejected:
                        return None, _error_status("PreFilter", pl.name, status), {pl.name}
                    return None, status.with_plugin(pl.name), {pl.name}
            if names is not None:
                narrowing.add(pl.name)
                result = set(names) if result is None else result & names
                if not result:
                    # Upstream lists the plugins as a sorted set.
                    which = sorted(narrowing)
                    msg = (f"node(s) didn't satisfy plugin {which[0]}" if len(which) == 1 else
                           f"node(s) didn't satisfy plugin(s) [{' '.join(which)}] "
                           "simultaneously")
                    return None, Status.unresolvable(msg), narrowing
        if rejected is not None:
            return None, rejected, narrowing | {rejected.plugin}
        return result, None, narrowing

    def pre_filter_extensions_run(self, state: CycleState) -> bool:
        """Whether any PreFilter plugin with extensions runs them for this cycle (its
        PreFilter did not Skip): otherwise adding and removing pods leaves `state` as
        it is, and what only reads it need not copy it."""
        return any(pl.name not in state.skip_filter for pl in self.pre_filter_extensions)

    def with_pods_added(self, state: CycleState, pod: Pod, node: NodeInfo,
                        pods: Sequence[Pod]) -> tuple[CycleState, NodeInfo] | Status:
        """Copies of `state` and `node` with `pods` counted on the node, the state
        through the PreFilterExtensions (copied only when one runs): upstream's
        addGENominatedPods, for the nominated pods' pass and preemption's dry runs.
        The first extension's failure is returned instead."""
        extensions = self.pre_filter_extensions_run(state)
        out_state = state.clone() if extensions else state
        out_node = node.clone()
        for p in pods:
            out_node.add_pod(p)
            if extensions:
                status = self.run_pre_filter_extension_add_pod(out_state, pod, p, out_node)
                if status is not None:
                    return status
        return out_state, out_node

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: Pod,
                                         pod_to_add: Pod, node: NodeInfo) -> Status | None:
        """RunPreFilterExtensionAddPod: every PreFilter plugin with extensions whose
        PreFilter did not Skip counts `pod_to_add` on `node`; the first failure is an
        Error status naming the plugin."""
        return self._run_pre_filter_extension("AddPod", state, pod, pod_to_add, node)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: Pod,
                                            pod_to_remove: Pod, node: NodeInfo
                                            ) -> Status | None:
        """RunPreFilterExtensionRemovePod: `add_pod`'s converse."""
        return self._run_pre_filter_extension("RemovePod", state, pod, pod_to_remove, node)

    def _run_pre_filter_extension(self, op: str, state: CycleState, pod: Pod, other: Pod,
                                  node: NodeInfo) -> Status | None:
        for pl in self.pre_filter_extensions:
            if pl.name in state.skip_filter:
                continue
            call = pl.add_pod if op == "AddPod" else pl.remove_pod
            try:
                status = call(state, pod, other, node)
            except Exception as exc:
                status = Status.error(f"{type(exc).__name__}: {exc}")
            if status is not None and not status.is_success:
                return Status(Code.ERROR, (f"running {op} on PreFilter plugin "
                                           f"{_go_quote(pl.name)}: {status.message}",),
                              pl.name)
        return None

    # Filter, reference form
    def run_filters(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], diagnosis: Diagnosis
    ) -> tuple[list[NodeInfo], Status | None]:
        """The nodes that pass every filter; rejected nodes go into `diagnosis` with
        their first rejecting status. A plugin error aborts the cycle (returned)."""
        remaining = list(nodes)
        for bf in self.filters:
            if bf.name in state.skip_filter or not remaining:
                continue
            f = bf.filter
            try:
                results = [f(state, pod, n) for n in remaining]
            except Exception as exc:
                return [], _error("Filter", bf.name, exc)
            if not any(results):
                continue
            kept = []
            for node, status in zip(remaining, results, strict=True):
                if status is None or status.is_success:
                    kept.append(node)
                elif status.is_rejected:
                    diagnosis.node_to_status[node.name] = status.with_plugin(bf.name)
                    diagnosis.unschedulable_plugins.add(bf.name)
                else:
                    return [], _error_status("Filter", bf.name, status)
            remaining = kept
        return remaining, None

    def run_filters_on_node(self, state: CycleState, pod: Pod, node: NodeInfo,
                            filters: Sequence[BoundFilter] | None = None) -> Status | None:
        """`run_filters` on one node, without the lists: None when the pod fits, else
        the first rejecting status with its plugin, or the error. Preemption's dry
        runs ask this a few times per node on hundreds of nodes; `filters` (a
        subsequence of `self.filters`, e.g. `pod_dependent_filters`) limits which."""
        skip = state.skip_filter
        for bf in self.filters if filters is None else filters:
            if bf.name in skip:
                continue
            try:
                status = bf.filter(state, pod, node)
            except Exception as exc:
                return _error("Filter", bf.name, exc)
            if status is None or status.is_success:
                continue
            if status.is_rejected:
                return status.with_plugin(bf.name)
            return _error_status("Filter", bf.name, status)
        return None

    def filter_details(
        self, state: CycleState, pod: Pod, node: NodeInfo
    ) -> dict[str, Status | None]:
        """Every filter plugin's verdict on one node, without stopping at the first
        rejection: what `explain` shows. Skipped plugins are reported as Skip."""
        out: dict[str, Status | None] = {}
        for bf in self.filters:
            if bf.name in state.skip_filter:
                out[bf.name] = Status.skip()
                continue
            try:
                out[bf.name] = bf.filter(state, pod, node)
            except Exception as exc:
                out[bf.name] = _error("Filter", bf.name, exc)
        return out

    def verdicts(self, state: CycleState, pod: Pod, node: NodeInfo
                 ) -> dict[str, Sequence[Verdict]]:
        """After `filter_details` on `node`: the per-part verdicts of the filters that
        judge parts of the pod separately (VolumeBinding's claims), for explain."""
        out: dict[str, Sequence[Verdict]] = {}
        for pl in self.filter_plugins:
            if isinstance(pl, VerdictsPlugin) and pl.name not in state.skip_filter:
                try:
                    found = pl.verdicts(state, pod, node)
                except Exception as exc:
                    found = [Verdict("", False, _error("Filter", pl.name, exc).message)]
                if found:
                    out[pl.name] = found
        return out

    # PreScore and Score, reference form
    def run_pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        timer = self.plugin_timer
        for pl in self.pre_score_plugins:
            try:
                t0 = perf_counter()
                status = pl.pre_score(state, pod, nodes)
                if timer is not None:
                    timer("PreScore", pl.name, perf_counter() - t0, _code(status))
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
        for bs in self.scores:
            if bs.name in state.skip_score:
                continue
            try:
                score = bs.score
                raw = [score(state, pod, n) for n in nodes]
                normalized = list(raw)
                if bs.normalize is not None:
                    status = bs.normalize(state, pod, nodes, normalized)
                    if status is not None and not status.is_success:
                        return result, _error_status("NormalizeScore", bs.name, status)
                rules = bs.breakdown(state, nodes) if bs.breakdown is not None else None
            except Exception as exc:
                return result, _error("Score", bs.name, exc)
            for i, s in enumerate(normalized):
                if s > MAX_NODE_SCORE or s < MIN_NODE_SCORE:
                    return result, _invalid_score(bs.name, s)
                result.totals[i] += s * bs.weight
            result.plugins.append(PluginScores(bs.name, bs.weight, raw, normalized, rules))
        return result, None

    def select_host(self, scores: ScoreResult) -> NodeInfo:
        """Highest total; ties broken uniformly at random (seedable)."""
        best = max(scores.totals)
        tied = [n for n, t in zip(scores.nodes, scores.totals, strict=True) if t == best]
        return tied[0] if len(tied) == 1 else self.rng.choice(tied)

    # The columnar form: the same decisions over index arrays into the NodeTable.
    def run_filters_fast(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> tuple[IntArray, Status | None]:
        """Indices of the nodes that pass every filter. Rejection reasons are not kept:
        when they are needed (no node fits), `run_filter_diagnosis` asks `filter`."""
        infos = table.infos
        timer = self.plugin_timer
        for bf in self.filters:
            if bf.name in state.skip_filter or idx.size == 0:
                continue
            try:
                t0 = perf_counter()
                mask = bf.mask(state, pod, table, idx) if bf.mask is not None else None
                if mask is None:
                    f = bf.filter
                    results = [f(state, pod, infos[i]) for i in idx.tolist()]
                    for st in results:
                        if st is not None and not st.is_success and not st.is_rejected:
                            return idx[:0], _error_status("Filter", bf.name, st)
                    mask = np.fromiter((st is None or st.is_success for st in results),
                                       np.bool_, len(results))
                if timer is not None:
                    timer("Filter", bf.name, perf_counter() - t0, _BATCH)
            except Exception as exc:
                return idx[:0], _error("Filter", bf.name, exc)
            if not mask.all():  # keep the same array when nothing is rejected
                idx = idx[mask]
        return idx, None

    def run_filter_diagnosis(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray,
        diagnosis: Diagnosis,
    ) -> tuple[IntArray, Status | None]:
        """`run_filters` over the NodeTable rows `idx`: each node's first rejecting
        status, from `filter`, into `diagnosis`. A plugin's mask only spares the calls
        on the nodes it passes (mask == filter is the plugin contract), so an
        unschedulable pod costs one `filter` call per rejected node, not per node."""
        infos = table.infos
        names = table.names
        node_to_status = diagnosis.node_to_status
        for bf in self.filters:
            if bf.name in state.skip_filter or idx.size == 0:
                continue
            f = bf.filter
            # Plugins return shared statuses: tag each distinct one with the plugin once
            # (the entry keeps the status alive, so its id is not reused meanwhile).
            tagged: dict[int, tuple[Status, Status]] = {}
            rejected = []
            try:
                mask = bf.mask(state, pod, table, idx) if bf.mask is not None else None
                rows = idx if mask is None else idx[~mask]
                found = (bf.statuses(state, pod, table, rows) if bf.statuses is not None
                         else None)
                pairs: Iterable[tuple[int, Status | None]] = (
                    zip(rows.tolist(), found, strict=True) if found is not None
                    else ((i, f(state, pod, infos[i])) for i in rows.tolist()))
                for i, st in pairs:
                    if st is None or st.code is Code.SUCCESS:
                        continue
                    entry = tagged.get(id(st))
                    if entry is None:
                        if not st.is_rejected:
                            return idx[:0], _error_status("Filter", bf.name, st)
                        entry = tagged[id(st)] = (st, st.with_plugin(bf.name))
                    node_to_status[names[i]] = entry[1]
                    rejected.append(i)
            except Exception as exc:
                return idx[:0], _error("Filter", bf.name, exc)
            if rejected:
                diagnosis.unschedulable_plugins.add(bf.name)
                idx = np.setdiff1d(idx, rejected, assume_unique=True)
        return idx, None

    def run_score_fast(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray,
        nodes: Sequence[NodeInfo],
    ) -> tuple[IntArray, Status | None]:
        """Weighted totals of the feasible nodes `idx` (`nodes` = their NodeInfos)."""
        totals = np.zeros(idx.size, np.int64)
        timer = self.plugin_timer
        for bs in self.scores:
            if bs.name in state.skip_score:
                continue
            try:
                t0 = perf_counter()
                scores = bs.vector(state, pod, table, idx) if bs.vector is not None else None
                if scores is not None:
                    if bs.normalize_vector is not None:
                        scores = bs.normalize_vector(state, pod, table, idx, scores)
                else:
                    score = bs.score
                    raw = [score(state, pod, n) for n in nodes]
                    if bs.normalize is not None:
                        status = bs.normalize(state, pod, nodes, raw)
                        if status is not None and not status.is_success:
                            return totals, _error_status("NormalizeScore", bs.name, status)
                    scores = np.array(raw, np.int64)
                if timer is not None:
                    timer("Score", bs.name, perf_counter() - t0, _BATCH)
            except Exception as exc:
                return totals, _error("Score", bs.name, exc)
            if scores.size and (scores.max() > MAX_NODE_SCORE or scores.min() < MIN_NODE_SCORE):
                bad = int(scores[(scores > MAX_NODE_SCORE) | (scores < MIN_NODE_SCORE)][0])
                return totals, _invalid_score(bs.name, bad)
            totals += scores * bs.weight
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

    # Audit: policies in Audit mode, after Filter, over the feasible nodes.
    def run_audits(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
                   ) -> list[AuditOutcome]:
        """Each audited rule's verdict on `nodes`, from the reference `audit_filter`
        (what the columnar form is tested against, and explain's answer)."""
        out: list[AuditOutcome] = []
        for ba in self.audits:
            try:
                rules = ba.bind(state, pod)
                if not rules:
                    continue
                f = ba.filter
                verdicts = [f(state, pod, n) for n in nodes]
            except Exception:
                _audit_failed(ba.name, pod)
                continue
            for j, r in enumerate(rules):
                rejected = np.array([i for i, v in enumerate(verdicts) if not v[j]], np.int64)
                out.append(AuditOutcome(ba.name, ba.policy, r.rule, r.reason, rejected))
        return out

    def run_audits_fast(self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
                        ) -> list[AuditOutcome]:
        """`run_audits` over the NodeTable rows `idx`: one mask per rule."""
        out: list[AuditOutcome] = []
        timer = self.plugin_timer
        for ba in self.audits:
            try:
                t0 = perf_counter()
                rules = ba.bind(state, pod)
                masks = ba.mask(state, pod, table, idx) if rules else ()
                if timer is not None:
                    timer("Audit", ba.name, perf_counter() - t0, _BATCH)
            except Exception:
                _audit_failed(ba.name, pod)
                continue
            out.extend(AuditOutcome(ba.name, ba.policy, r.rule, r.reason, np.flatnonzero(~m))
                       for r, m in zip(rules, masks, strict=True))
        return out

    def queueing_hints(self) -> list[tuple[str, ClusterEventWithHint]]:
        """Every (plugin, registered event) of the plugins that can reject or gate a
        pod (PreEnqueue, PreFilter and Filter), each plugin once: what the scheduling
        queue consults to decide which events can help a pod those plugins rejected."""
        seen: set[str] = set()
        out: list[tuple[str, ClusterEventWithHint]] = []
        for pl in [*self.pre_enqueue_plugins, *self.pre_filter_plugins,
                   *self.filter_plugins]:
            if pl.name in seen:
                continue
            seen.add(pl.name)
            out.extend((pl.name, reg) for reg in registrations(pl))
        return out

    # PostFilter: when no node fits.
    def run_post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                        ) -> tuple[PostFilterResult | None, Status]:
        """Every PostFilter plugin in order until one succeeds, one says
        UnschedulableAndUnresolvable or one errs (RunPostFilterPlugins); rejections'
        reasons accumulate, so the status's message is every plugin's in order, and
        the result is the last one a rejecting plugin returned."""
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for pl in self.post_filter_plugins:
            try:
                r, status = pl.post_filter(state, pod, diagnosis)
            except Exception as exc:
                return None, _error("PostFilter", pl.name, exc)
            if status.is_success:
                return r, status
            if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return r, status.with_plugin(pl.name)
            if not status.is_rejected:
                return None, Status(Code.ERROR, status.reasons, pl.name)
            if r is not None:
                result = r
            reasons.extend(status.reasons)
            rejector = rejector or pl.name
        return result, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)

    def post_filter_notes(self, state: CycleState) -> dict[str, list[str]]:
        """Each PostFilter plugin's account of what it did in this cycle, for explain."""
        out: dict[str, list[str]] = {}
        for pl in self.post_filter_plugins:
            if isinstance(pl, PostFilterNotesPlugin):
                try:
                    notes = pl.post_filter_notes(state)
                except Exception as exc:
                    notes = [_error("PostFilter", pl.name, exc).message]
                if notes:
                    out[pl.name] = notes
        return out

    # Reserve, Unreserve, PreBind: after a node is chosen (the binding cycle's side).
    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Every Reserve plugin in order (RunReservePluginsReserve); the first failure
        is returned (a rejection with its plugin, an error worded as upstream's). The
        caller then runs `run_unreserve`, as upstream's scheduling cycle does."""
        for pl in self.reserve_plugins:
            try:
                status = pl.reserve(state, pod, node_name)
            except Exception as exc:
                return _wrapped_error("Reserve", pl.name, f"{type(exc).__name__}: {exc}")
            if status is None or status.is_success:
                continue
            if status.is_rejected:
                return status.with_plugin(pl.name)
            return _wrapped_error("Reserve", pl.name, status.message)
        return None

    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Every Reserve plugin's `unreserve`, in reverse order; a plugin that raises
        does not keep the others from cleaning up."""
        for pl in reversed(self.reserve_plugins):
            try:
                pl.unreserve(state, pod, node_name)
            except Exception:
                # Upstream's Unreserve cannot fail; a bug in one plugin's must not keep
                # the others from releasing what they hold.
                _log.exception("running Unreserve plugin %r", pl.name)

    def run_permit(self, state: CycleState, pod: Pod, node_name: str
                   ) -> tuple[Status | None, dict[str, float]]:
        """Every Permit plugin in order (RunPermitPlugins): (None, {}) when all allow;
        the first rejection (with its plugin) or error (worded as upstream's) at once;
        else Wait, with how long each waiting plugin holds the pod (at most 15 min).
        The caller adds the pod to `waiting_pods` on Wait, and unreserves otherwise."""
        waits: dict[str, float] = {}
        wait: Status | None = None
        for pl in self.permit_plugins:
            try:
                status, seconds = pl.permit(state, pod, node_name)
            except Exception as exc:
                return _wrapped_error("Permit", pl.name, f"{type(exc).__name__}: {exc}"), {}
            if status is None or status.is_success:
                continue
            if status.is_rejected:
                return status.with_plugin(pl.name), {}
            if status.code is not Code.WAIT:
                return _wrapped_error("Permit", pl.name, status.message), {}
            waits[pl.name] = min(max(seconds, 0.0), PERMIT_MAX_WAIT_S)
            wait = status
        if wait is None:
            return None, {}
        return Status(Code.WAIT, (*wait.reasons, PERMIT_WAIT_REASON), wait.plugin), waits

    def run_undo_pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                          handle: BindingHandle) -> None:
        """After `run_unreserve`, outside the state lock: each Reserve plugin's undoing
        of its PreBind writes, in reverse order as Unreserve; one that raises does not
        keep the others from theirs."""
        for pl in reversed(self.reserve_plugins):
            if not isinstance(pl, UndoPreBindPlugin):
                continue
            try:
                pl.undo_pre_bind(state, pod, node_name, handle)
            except Exception:
                _log.exception("undoing the PreBind writes of plugin %r", pl.name)

    def run_pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str
                                ) -> Status | None:
        """Every PreBind plugin's pre-flight (RunPreBindPreFlights): None (Success) when
        at least one will have work, Skip when none will, else the first error, worded
        as upstream's. The plugins that said Skip are kept in the cycle state, and
        `run_pre_bind` does not call them. A PreBind plugin without a pre-flight is
        taken to have work, as the safe answer (every upstream PreBind plugin has
        one)."""
        skipped: set[str] = set()
        answer: Status | None = Status.skip()
        for pl in self.pre_bind_plugins:
            if not isinstance(pl, PreBindPreFlightPlugin):
                answer = None
                continue
            try:
                status = pl.pre_bind_pre_flight(state, pod, node_name)
            except Exception as exc:
                return _pre_flight_error(pl.name, f"{type(exc).__name__}: {exc}")
            if status is None or status.is_success:
                answer = None
            elif status.is_skip:
                skipped.add(pl.name)
            elif status.code is Code.ERROR:
                return _pre_flight_error(pl.name, status.message)
            else:
                return Status(Code.ERROR, (
                    f'PreBindPreFlight {pl.name} returned "{status.code}", which is '
                    "unsupported. It is supposed to return Success, Skip, or Error "
                    "status",), pl.name)
        state.skip_pre_bind = skipped
        return answer

    def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                     handle: BindingHandle) -> Status | None:
        """Every PreBind plugin in order (RunPreBindPlugins) but those whose pre-flight
        said Skip; the first failure is returned, a rejection with its plugin, an
        error worded as upstream's."""
        for pl in self.pre_bind_plugins:
            if pl.name in state.skip_pre_bind:
                continue
            try:
                status = pl.pre_bind(state, pod, node_name, handle)
            except Exception as exc:
                return _wrapped_error("PreBind", pl.name, f"{type(exc).__name__}: {exc}")
            if status is None or status.is_success or status.is_skip:
                continue
            if status.is_rejected:
                return status.with_plugin(pl.name)
            return _wrapped_error("PreBind", pl.name, status.message)
        return None

    def less(self, a: Pod, b: Pod) -> bool:
        if self.queue_sort is None:
            return a.creation_timestamp < b.creation_timestamp
        return self.queue_sort.less(a, b)


def _audit_failed(plugin: str, pod: Pod) -> None:
    """An audited policy that raises is a bug to report, never a reason to fail the
    cycle: the point of Audit mode is that the policy cannot disturb scheduling."""
    _log.exception("auditing plugin %r for pod %s failed; its rules are not audited in "
                   "this cycle", plugin, pod.key)


def _go_quote(name: str) -> str:
    """Go's %q of a plugin name (plain ASCII: quotes and backslashes escaped)."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


# The plugin timer's status of a columnar Filter/Score call: one call answers for many
# nodes, so no single node's status is its own (kube-scheduler times each node's call).
_BATCH = str(Code.SUCCESS)


def _code(status: Status | None) -> str:
    """A plugin's status as kube-scheduler's plugin metric labels it (nil: Success)."""
    return str(Code.SUCCESS) if status is None else str(status.code)


def _error(point: str, plugin: str, exc: Exception) -> Status:
    return Status(Code.ERROR, (f"running {point} plugin {plugin!r}: "
                               f"{type(exc).__name__}: {exc}",), plugin)


# What RunPermitPlugins appends to the last waiting plugin's status.
PERMIT_WAIT_REASON = "one or more plugins asked to wait and no plugin rejected pod"


def _wrapped_error(point: str, plugin: str, message: str) -> Status:
    """An error of a binding-side extension point, worded as upstream's
    `running Reserve plugin "VolumeBinding": ...` (Go's %q)."""
    return Status(Code.ERROR, (f'running {point} plugin "{plugin}": {message}',), plugin)


def _pre_flight_error(plugin: str, message: str) -> Status:
    """RunPreBindPreFlights' error: `running PreBindPreFlight "VolumeBinding": ...`."""
    return Status(Code.ERROR, (f'running PreBindPreFlight "{plugin}": {message}',), plugin)


def _error_status(point: str, plugin: str, status: Status) -> Status:
    return Status(Code.ERROR, (f"running {point} plugin {plugin!r}: {status.message}",), plugin)


def _invalid_score(plugin: str, score: int) -> Status:
    return Status.error(
        f"plugin {plugin!r} returns an invalid score {score}, it should in the "
        f"range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing")
