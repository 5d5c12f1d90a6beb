"""NodeResourcesFit: a pod only goes where its requests fit what the node has left, and
(by default) prefers the nodes with the most room left.

Mirrors kube-scheduler v1.36 `noderesources/fit.go`:

* PreFilter computes the pod's requests once (component-helpers `PodRequests`, including
  sidecars, overhead and pod-level resources). It never returns Skip: even a pod that
  requests nothing is held to the node's pod count.
* Filter: `Too many pods` when pods on the node + 1 > allocatable pods; a pod whose
  requests are all zero stops there; otherwise each requested resource must fit
  allocatable - requested: cpu, memory, ephemeral-storage, then the scalar resources
  (extended, hugepages, kubernetes.io-prefixed), one reason each. The code is
  UnschedulableAndUnresolvable when some request exceeds the node's whole allocatable
  (preemption cannot help there, kubernetes PR 131345), Unschedulable otherwise.
  `ignoredResources` / `ignoredResourceGroups` only apply to extended resources.
* Score: LeastAllocated (default, cpu and memory weight 1), MostAllocated or
  RequestedToCapacityRatio over "non-zero" cpu/memory requests (a container without a
  request counts 100m / 200Mi); resources a node does not have are left out.

With DRAExtendedResource (beta, on) a request for an extended resource that a
DeviceClass serves is not checked on a node whose allocatable does not provide it
(zero or absent): DynamicResources allocates it there (`helper/extended_resources.py`,
upstream's shouldDelegateResourceToDRA). Which requests a class serves is decided once
per cycle, at PreFilter (`FitRequest.delegable`); the node half (allocatable zero) is
a column comparison like the others, so both forms stay one answer.

Deviations, all deliberate: upstream walks the pod's extended resources in Go map order,
so with several insufficient ones its reason order is random; policyd sorts them by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.dra.selectors import KUBERNETES_CEL, SelectorCache
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import (
    DEVICE_CLASS,
    NODE,
    POD,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    is_self,
)
from policyd.framework.interfaces import Verdict
from policyd.framework.status import Code
from policyd.model.dra_objects import DEVICE_CLASS_RESOURCE_PREFIX
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod
from policyd.model.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    pod_requests,
    show_amount,
)
from policyd.model.row_memo import RowMemo
from policyd.plugins import names
from policyd.plugins.helper.extended_resources import GATE as EXTENDED_RESOURCE_GATE
from policyd.plugins.helper.extended_resources import (
    ClassResolver,
    DraCapacity,
    delegated_to_dra,
    is_extended_resource_name,
)
from policyd.plugins.helper.function_shape import ShapePoint, parse_shape
from policyd.plugins.helper.plugin_args import (
    Problems,
    check_envelope,
    check_unknown_fields,
    type_name,
)
from policyd.plugins.noderesources.resource_allocation import (
    DEFAULT_RESOURCES,
    IntArray,
    ResourceSpec,
    Scorer,
    VectorScorer,
    check_weights,
    cycle_dra_capacity,
    is_scalar_resource_name,
    least_allocated_scorer,
    least_allocated_vector,
    most_allocated_scorer,
    most_allocated_vector,
    node_allocatable_allocated,
    parse_resource_specs,
    pod_request_list,
    qualified_name_errors,
    requested_to_capacity_ratio_scorer,
    requested_to_capacity_ratio_vector,
    resource_kind,
    table_scores,
)
from policyd.problems import field_problem

if TYPE_CHECKING:
    from policyd.model.table import BoolArray, NodeTable

DEFAULT_WEIGHT = 1

ERR_REASON_TOO_MANY_PODS = "Too many pods"
ERR_REASON_INSUFFICIENT_CPU = "Insufficient cpu"
ERR_REASON_INSUFFICIENT_MEMORY = "Insufficient memory"
ERR_REASON_INSUFFICIENT_EPHEMERAL_STORAGE = "Insufficient ephemeral-storage"
ERR_REASON_INSUFFICIENT_PREFIX = "Insufficient "

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

ARGS_KIND = "NodeResourcesFitArgs"

_PRE_FILTER_KEY = "NodeResourcesFit/request"
# What DRA-served extended resources count per node this cycle (DraCapacity).
_DRA_KEY = "NodeResourcesFit/dra_capacity"
_PRE_SCORE_KEY = "NodeResourcesFit/score_request"

_STATUSES: dict[tuple[bool | str, ...], Status] = {}
_INT64_MAX = 2**63 - 1


def insufficient_reason(resource: str) -> str:
    if resource == CPU:
        return ERR_REASON_INSUFFICIENT_CPU
    if resource == MEMORY:
        return ERR_REASON_INSUFFICIENT_MEMORY
    if resource == EPHEMERAL_STORAGE:
        return ERR_REASON_INSUFFICIENT_EPHEMERAL_STORAGE
    return ERR_REASON_INSUFFICIENT_PREFIX + resource


@dataclass(frozen=True, slots=True)
class FitRequest:
    """What Filter checks for one pod, computed once in PreFilter.

    `checks` are (resource, request, reason) for every non-zero, non-ignored request, in
    upstream's order. `all_zero` is upstream's "requests nothing" test, which looks at
    which scalar resources are named at all, not at their values.
    """

    all_zero: bool
    checks: tuple[tuple[str, int, str], ...]
    # Checked names a DeviceClass serves: skipped on a node whose allocatable lacks them.
    delegable: frozenset[str] = frozenset()


def compute_fit_request(pod: Pod, ignored_resources: frozenset[str],
                        ignored_groups: frozenset[str],
                        classes: ClassResolver | None = None) -> FitRequest:
    """`classes`: the cluster's DeviceClasses with DRAExtendedResource on, else None."""
    reqs = pod_requests(pod)
    cpu = reqs.get(CPU, 0)
    memory = reqs.get(MEMORY, 0)
    ephemeral = reqs.get(EPHEMERAL_STORAGE, 0)
    scalars = sorted(name for name in reqs if is_scalar_resource_name(name))
    checks: list[tuple[str, int, str]] = []
    for name, value in ((CPU, cpu), (MEMORY, memory), (EPHEMERAL_STORAGE, ephemeral)):
        if value > 0:
            checks.append((name, value, insufficient_reason(name)))
    for name in scalars:
        value = reqs[name]
        if value == 0:
            continue
        if is_extended_resource_name(name) and (
                name in ignored_resources
                or (ignored_groups and name.split("/", 1)[0] in ignored_groups)):
            continue
        checks.append((name, value, insufficient_reason(name)))
    all_zero = cpu == 0 and memory == 0 and ephemeral == 0 and not scalars
    delegable = frozenset() if classes is None else frozenset(
        name for name, _, _ in checks if is_scalar_resource_name(name)
        and classes.for_extended_resource(name) is not None)
    return FitRequest(all_zero, tuple(checks), delegable)


def fits_request(request: FitRequest, info: NodeInfo) -> Status | None:
    """fitsRequest + Filter's status: every reason, Unresolvable if any request exceeds
    the node's whole allocatable."""
    allocatable = info.node.allocatable
    reasons: list[str] | None = None
    unresolvable = False
    if len(info.pods) + 1 > allocatable.get(PODS, 0):
        reasons = [ERR_REASON_TOO_MANY_PODS]
    if not request.all_zero:
        requested = info.requested
        delegable = request.delegable
        for name, value, reason in request.checks:
            alloc = allocatable.get(name, 0)
            if delegable and alloc <= 0 and name in delegable:
                continue  # DynamicResources allocates it on this node
            if value > alloc - requested.get(name, 0):
                if reasons is None:
                    reasons = [reason]
                else:
                    reasons.append(reason)
                if value > alloc:
                    unresolvable = True
    if reasons is None:
        return None
    return _status(unresolvable, reasons)


def _status(unresolvable: bool, reasons: Sequence[str]) -> Status:
    """Filter's status for these reasons. Statuses are immutable: nodes failing the
    same way share one (an unschedulable pod's diagnosis asks thousands of nodes)."""
    key: tuple[bool | str, ...] = (unresolvable, *reasons)
    status = _STATUSES.get(key)
    if status is None:
        if len(_STATUSES) > 4096:
            _STATUSES.clear()
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        status = _STATUSES[key] = Status(code, tuple(reasons))
    return status


# Checks one bit each in an int64 beside the pod count's and the unresolvable bit.
_MAX_COLUMNAR_CHECKS = 60


def fit_statuses(request: FitRequest, table: NodeTable, rows: IntArray
                 ) -> list[Status | None] | None:
    """`fits_request` for the NodeTable rows `rows` at once: each row's failing checks
    as bits of one integer (the pod count first, then the request's checks in order,
    then unresolvable), one status per distinct integer. None when a request is past
    int64 or has more checks than bits (the caller asks `fits_request` per node)."""
    checks = () if request.all_zero else request.checks
    if len(checks) > _MAX_COLUMNAR_CHECKS or any(v > _INT64_MAX for _, v, _ in checks):
        return None
    take = table.take
    zeros = np.zeros(rows.size, np.int64)
    j = table.resource_column(PODS)
    allowed = take(table.allocatable[j], rows) if j is not None else zeros
    code = (take(table.pod_count, rows) + 1 > allowed).astype(np.int64)
    unresolvable = np.zeros(rows.size, np.bool_)
    for k, (name, value, _) in enumerate(checks, start=1):
        j = table.resource_column(name)
        alloc = take(table.allocatable[j], rows) if j is not None else zeros
        used = take(table.requested[j], rows) if j is not None else zeros
        short = value > alloc - used
        if name in request.delegable:
            short &= alloc > 0  # else DynamicResources allocates it there
        code |= short.astype(np.int64) << k
        unresolvable |= short & (value > alloc)
    code |= unresolvable.astype(np.int64) << (len(checks) + 1)
    distinct, inverse = np.unique(code, return_inverse=True)
    statuses: list[Status | None] = []
    for c in distinct.tolist():
        reasons = [ERR_REASON_TOO_MANY_PODS] if c & 1 else []
        reasons += [reason for k, (_, _, reason) in enumerate(checks, start=1)
                    if c >> k & 1]
        statuses.append(_status(bool(c >> (len(checks) + 1) & 1), reasons)
                        if reasons else None)
    return [statuses[i] for i in inverse.tolist()]


class NodeResourcesFit:
    name = names.NODE_RESOURCES_FIT
    # No PreFilterExtensions upstream: its PreFilter state reads no other pod
    # (preemption's dry runs rely on that; framework/interfaces.py).
    pre_filter_reads_other_pods = False

    def __init__(self, ignored_resources: frozenset[str] = frozenset(),
                 ignored_resource_groups: frozenset[str] = frozenset(),
                 strategy: str = LEAST_ALLOCATED,
                 resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES,
                 shape: Sequence[ShapePoint] = (), *,
                 features: FeatureGates = DEFAULTS) -> None:
        self.ignored_resources = ignored_resources
        # How a resized bound pod counts in the scale-down hint (isSchedulableAfterPodScaleDown).
        self.features = features
        self.extended_enabled = features.enabled(EXTENDED_RESOURCE_GATE)
        # The DeviceClasses of the cluster PreFilter last ran on (the daemon has one,
        # kept current by its informers): the node and class hints resolve names with
        # them, as upstream's read its DRA manager.
        self._classes: ClassResolver | None = None
        # Compiled DeviceClass selectors, for counting devices in the score.
        self._selectors = SelectorCache(KUBERNETES_CEL)
        self.ignored_resource_groups = ignored_resource_groups
        self.strategy = strategy
        self.resources = tuple(resources)
        self.shape = tuple(shape)
        self._names = tuple(r.name for r in self.resources)
        self._kinds = tuple(resource_kind(r.name) for r in self.resources)
        self._scorer: Scorer
        self._vector_scorer: VectorScorer
        if strategy == MOST_ALLOCATED:
            self._scorer = most_allocated_scorer(self.resources)
            self._vector_scorer = most_allocated_vector(self.resources)
        elif strategy == REQUESTED_TO_CAPACITY_RATIO:
            self._scorer = requested_to_capacity_ratio_scorer(self.resources, self.shape)
            self._vector_scorer = requested_to_capacity_ratio_vector(self.resources, self.shape)
        else:
            self._scorer = least_allocated_scorer(self.resources)
            self._vector_scorer = least_allocated_vector(self.resources)
        # Consecutive pods mostly share their requests, and only the rows of the nodes
        # that changed in between differ: see policyd.model.row_memo.
        self._fit_memo: RowMemo[FitRequest] = RowMemo(
            self._fit_rows, compute_row=lambda t, r, i: fits_request(r, t.infos[i]) is None)
        self._score_memo: RowMemo[tuple[int, ...]] = RowMemo(
            self._score_rows, compute_row=lambda t, k, i: self._score_node(t.infos[i], k))

    # filter

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: Sequence[NodeInfo]) -> tuple[set[str] | None, Status | None]:
        state.write(_PRE_FILTER_KEY, compute_fit_request(
            pod, self.ignored_resources, self.ignored_resource_groups,
            self._classes_of(state)))
        return None, None

    def _classes_of(self, state: CycleState) -> ClassResolver | None:
        """The cycle's DeviceClasses with DRAExtendedResource on (None off)."""
        if not self.extended_enabled or state.cluster is None:
            return None
        self._classes = state.cluster.dra.classes
        return self._classes

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        request = state.get(_PRE_FILTER_KEY)
        if request is None:
            return Status.error(f"error reading {_PRE_FILTER_KEY!r} from cycleState: "
                                "PreFilter did not run")
        return fits_request(request, node)

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                    idx: IntArray) -> BoolArray | None:
        """Filter over the NodeTable rows `idx` (True = fits); the reasons of rejected
        nodes come from `filter` when the engine needs them."""
        request: FitRequest | None = state.get(_PRE_FILTER_KEY)
        if request is None:
            return None
        checks = () if request.all_zero else request.checks
        # Comparisons only (no products): any request an int64 holds is exact here.
        if any(value > _INT64_MAX for _, value, _ in checks):
            return None
        return self._fit_memo.get(table, request, idx)

    def filter_statuses(self, state: CycleState, pod: Pod, table: NodeTable,
                        idx: IntArray) -> list[Status | None] | None:
        """`filter` over the NodeTable rows `idx`, reasons included (`fit_statuses`)."""
        request: FitRequest | None = state.get(_PRE_FILTER_KEY)
        return None if request is None else fit_statuses(request, table, idx)

    @staticmethod
    def _fit_rows(table: NodeTable, request: FitRequest, rows: IntArray) -> BoolArray:
        """The fit verdict of the rows `rows`: a function of the request and each row's
        own columns, as RowMemo requires."""
        checks = () if request.all_zero else request.checks
        allocatable = table.allocatable
        requested = table.requested
        j = table.resource_column(PODS)
        take = table.take
        allowed = take(allocatable[j], rows) if j is not None else np.zeros(rows.size, np.int64)
        ok: BoolArray = take(table.pod_count, rows) + 1 <= allowed
        for name, value, _ in checks:
            j = table.resource_column(name)
            delegable = name in request.delegable
            if j is None:  # no node has it: value > 0 - 0 everywhere
                if delegable:
                    continue  # DynamicResources allocates it everywhere
                return np.zeros(rows.size, np.bool_)
            alloc = take(allocatable[j], rows)
            fits = value <= alloc - take(requested[j], rows)
            ok &= (fits | (alloc <= 0)) if delegable else fits
        return ok

    def verdicts(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[Verdict, ...]:
        """For explain, the numbers behind each of Filter's reasons on `node`, which
        kube-scheduler's own reasons leave out: the subject is the reason as Filter
        says it (`Insufficient cpu`), the verdict the request, what is free and the
        node's allocatable. Nothing when the node fits."""
        request: FitRequest | None = state.get(_PRE_FILTER_KEY)
        if request is None:
            return ()
        allocatable = node.node.allocatable
        out: list[Verdict] = []
        pods_allowed = allocatable.get(PODS, 0)
        if len(node.pods) + 1 > pods_allowed:
            out.append(Verdict(ERR_REASON_TOO_MANY_PODS, False,
                               f"{len(node.pods)} pods on it, {pods_allowed} allowed"))
        if not request.all_zero:
            requested = node.requested
            for name, value, reason in request.checks:
                alloc = allocatable.get(name, 0)
                free = alloc - requested.get(name, 0)
                if alloc <= 0 and name in request.delegable:
                    continue  # DynamicResources' verdict says what it gets
                if value > free:
                    out.append(Verdict(reason, False, (
                        f"requests {show_amount(name, value)}, free "
                        f"{show_amount(name, max(free, 0))} of {show_amount(name, alloc)} "
                        "allocatable")))
        return tuple(out)

    # score

    def pre_score(self, state: CycleState, pod: Pod,
                  nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(_PRE_SCORE_KEY, pod_request_list(pod, self.resources, False))
        self._dra_capacity(state)
        return None

    def _dra_capacity(self, state: CycleState) -> DraCapacity | None:
        return cycle_dra_capacity(state, _DRA_KEY, self.extended_enabled, self._names,
                                  self._selectors)

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        pod_request = state.get(_PRE_SCORE_KEY)
        if pod_request is None:
            # PreScore disabled in the profile: upstream computes it here too.
            pod_request = pod_request_list(pod, self.resources, False)
        return self._score_node(node, pod_request, self._dra_capacity(state))

    def _score_node(self, node: NodeInfo, pod_request: Sequence[int],
                    dra: DraCapacity | None = None) -> int:
        allocatable, allocated = node_allocatable_allocated(
            node, self._names, self._kinds, pod_request, False, dra)
        requested = [allocated[i] + pod_request[i] for i in range(len(allocated))]
        return self._scorer(requested, allocated, allocatable)

    def score_vector(self, state: CycleState, pod: Pod, table: NodeTable,
                     idx: IntArray) -> IntArray | None:
        """`score` for the NodeTable rows `idx` at once (None: use the per-node path)."""
        pod_request = state.get(_PRE_SCORE_KEY)
        if pod_request is None:
            pod_request = pod_request_list(pod, self.resources, False)
        dra = self._dra_capacity(state)
        if dra is not None and dra.counts_for(self._names, pod_request):
            return None  # devices counted per node (`score`)
        key = tuple(pod_request)
        scores = self._score_memo.get(table, key, idx)
        # None: some node's values are too large for exact vector math; the rows asked
        # for may still be fine.
        return scores if scores is not None else self._score_rows(table, key, idx)

    def _score_rows(self, table: NodeTable, pod_request: tuple[int, ...],
                    rows: IntArray) -> IntArray | None:
        """The scores of the rows `rows` for a pod requesting `pod_request`."""
        return table_scores(table, rows, self._names, self._kinds, pod_request, False,
                            self._vector_scorer)

    # queueing hints (EventsToRegister with SchedulerQueueingHints on, as in v1.36)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (
            ClusterEventWithHint(
                ClusterEvent(POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
                self._after_pod_event),
            ClusterEventWithHint(
                ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                self._after_node_change),
        ) + ((ClusterEventWithHint(ClusterEvent(DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE),
                                   self._after_class_change),)
             if self.extended_enabled else ())

    def _after_class_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """isSchedulableAfterDeviceClassEvent: a class added, or whose
        extendedResourceName changed, now serves a resource the pod requests."""
        if not isinstance(new, dict) or (old is not None and not isinstance(old, dict)):
            return QUEUE
        explicit = _extended_resource_name(new)
        requests = pod_requests(pod)
        if old is None:
            name = (new.get("metadata") or {}).get("name")
            if f"{DEVICE_CLASS_RESOURCE_PREFIX}{name}" in requests:
                return QUEUE
        elif _extended_resource_name(old) == explicit:
            return QUEUE_SKIP
        return QUEUE if explicit and explicit in requests else QUEUE_SKIP

    def _after_pod_event(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A bound pod deleted frees its requests; a scale-down frees part of them."""
        if new is None:
            return QUEUE if isinstance(old, Pod) and old.node_name else QUEUE_SKIP
        if not isinstance(new, Pod) or not isinstance(old, Pod):
            return QUEUE
        if is_self(pod, new):
            return QUEUE  # the pending pod asks for less now
        if not new.node_name:
            return QUEUE_SKIP
        # Upstream reads all three with UseStatusResources (and pod-level status under
        # InPlacePodLevelResourcesVerticalScaling): a resize the kubelet has carried out
        # is what frees room.
        gates = self.features
        before = pod_requests(old, use_status=True, features=gates)
        after = pod_requests(new, use_status=True, features=gates)
        for name, value in pod_requests(pod, use_status=True, features=gates).items():
            if value and before.get(name, 0) > after.get(name, 0):
                return QUEUE
        return QUEUE_SKIP

    def _after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the pod fits the node's allocatable (on an empty node) and, for an
        update, some allocatable the pod requests (or the pod count) grew."""
        if not isinstance(new, Node):
            return QUEUE_SKIP
        classes = self._classes if self.extended_enabled else None
        request = compute_fit_request(pod, self.ignored_resources,
                                      self.ignored_resource_groups, classes)
        if fits_request(request, NodeInfo(new)) is not None:
            return QUEUE_SKIP
        if not isinstance(old, Node):
            return QUEUE
        before, after = old.allocatable, new.allocatable
        if after.get(PODS, 0) > before.get(PODS, 0):
            return QUEUE
        for name, _, _ in request.checks:
            if after.get(name, 0) > before.get(name, 0):
                return QUEUE
            if delegated_to_dra(name, after, classes):
                return QUEUE  # as upstream: DRA may now allocate it there
        return QUEUE_SKIP


def _extended_resource_name(cls: dict[str, Any]) -> str:
    spec = cls.get("spec")
    name = spec.get("extendedResourceName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) else ""


# --- args --------------------------------------------------------------------------------

def _string_list(value: Any, path: str, problems: Problems) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(field_problem(path, f"must be a list, not {type_name(value)}"))
        return []
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            problems.append(field_problem(f"{path}[{i}]",
                                          f"must be a string, not {type_name(item)}"))
            continue
        out.append(item)
    return out




def new(args: Mapping[str, Any] | None = None, *, features: FeatureGates = DEFAULTS
        ) -> NodeResourcesFit:
    """Build NodeResourcesFit from NodeResourcesFitArgs (v1 defaults, then upstream's
    ValidateNodeResourcesFitArgs); raises PluginError listing every problem."""
    problems: Problems = []
    args = dict(args or {})
    check_envelope(args, ("apiVersion", "kind", "ignoredResources", "ignoredResourceGroups",
                          "scoringStrategy"), ARGS_KIND, problems)

    ignored = _string_list(args.get("ignoredResources"), "ignoredResources", problems)
    for i, name in enumerate(ignored):
        for msg in qualified_name_errors(name):
            problems.append(field_problem(f"ignoredResources[{i}]",
                                          f"Invalid value: {name!r}: {msg}"))
    groups = _string_list(args.get("ignoredResourceGroups"), "ignoredResourceGroups",
                          problems)
    for i, group in enumerate(groups):
        path = f"ignoredResourceGroups[{i}]"
        if "/" in group:
            problems.append(field_problem(path,
                                          f"Invalid value: {group!r}: resource group name can't "
                                   "contain '/'"))
        for msg in qualified_name_errors(group):
            problems.append(field_problem(path, f"Invalid value: {group!r}: {msg}"))

    strategy = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    shape: list[ShapePoint] = []
    raw_strategy = args.get("scoringStrategy")
    if raw_strategy is not None:
        spath = "scoringStrategy"
        if not isinstance(raw_strategy, dict):
            problems.append(field_problem(spath,
                                          f"must be an object, not {type_name(raw_strategy)}"))
        else:
            check_unknown_fields(raw_strategy, ("type", "resources",
                                                "requestedToCapacityRatio"), spath, problems)
            raw_type = raw_strategy.get("type")
            if raw_type not in SCORING_STRATEGY_TYPES:
                supported = ", ".join(f'"{t}"' for t in SCORING_STRATEGY_TYPES)
                shown = json.dumps("" if raw_type is None else raw_type, default=str)
                problems.append(field_problem(f"{spath}.type",
                                 f"Unsupported value: {shown}: supported values: {supported}"))
            else:
                strategy = raw_type
            resources = parse_resource_specs(raw_strategy.get("resources"),
                                             f"{spath}.resources", problems)
            check_weights(resources, f"{spath}.resources", problems)
            ratio = raw_strategy.get("requestedToCapacityRatio")
            rpath = f"{spath}.requestedToCapacityRatio"
            if ratio is not None:
                if not isinstance(ratio, dict):
                    problems.append(field_problem(rpath,
                                                  f"must be an object, not {type_name(ratio)}"))
                else:
                    check_unknown_fields(ratio, ("shape",), rpath, problems)
                    # Upstream reports these under `scoringStrategy.shape`, a path that
                    # does not exist in the file; policyd names the real one.
                    shape = parse_shape(ratio.get("shape"), f"{rpath}.shape", problems)
            elif strategy == REQUESTED_TO_CAPACITY_RATIO:
                # kubernetes PR 132120 (upstream crashed on this before).
                problems.append(field_problem(rpath,
                                              "Required value: must be specified when type is "
                                        "RequestedToCapacityRatio"))
    if problems:
        raise PluginError(names.NODE_RESOURCES_FIT, problems)
    return NodeResourcesFit(frozenset(ignored), frozenset(groups), strategy, resources, shape,
                            features=features)
