"""Resource arithmetic shared by NodeResourcesFit and NodeResourcesBalancedAllocation.

kube-scheduler keeps this in `noderesources/resource_allocation.go` and friends: which
resource names count as scalar/extended, the per-resource (allocatable, allocated) pair a
scorer sees for a node, the scorers themselves (LeastAllocated, MostAllocated,
RequestedToCapacityRatio, balance) and the argument parsing both plugins share. Keeping
it in one module keeps the two plugins' integer arithmetic identical to upstream's.

Go integer division truncates toward zero and `math.Round` rounds halves away from zero;
Python's `//` floors and `round` rounds halves to even, so both are spelled out here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from policyd.dra.selectors import SelectorCache
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework import MAX_NODE_SCORE, CycleState
from policyd.model import k8snames
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, pod_requests
from policyd.plugins.helper.extended_resources import DraCapacity, is_extended_resource_name
from policyd.plugins.helper.function_shape import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    ShapePoint,
    broken_linear_function,
    go_div,
)
from policyd.plugins.helper.plugin_args import (
    Problems,
    check_unknown_fields,
    parse_int,
    type_name,
)
from policyd.problems import field_problem

if TYPE_CHECKING:
    from policyd.model.table import NodeTable

MAX_RESOURCE_WEIGHT = 100

HUGEPAGES_PREFIX = "hugepages-"
_ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"
_NATIVE_DOMAIN = "kubernetes.io/"

def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName: what is wrong with `value` as a label-style name."""
    return k8snames.qualified_name(value)


def is_prefixed_native_resource(name: str) -> bool:
    return _NATIVE_DOMAIN in name


def is_native_resource(name: str) -> bool:
    return "/" not in name or is_prefixed_native_resource(name)


def is_hugepages_resource(name: str) -> bool:
    return name.startswith(HUGEPAGES_PREFIX)


def is_scalar_resource_name(name: str) -> bool:
    """schedutil.IsScalarResourceName: the names a NodeInfo keeps as ScalarResources.

    Anything else (other than cpu, memory, ephemeral-storage and pods) is dropped by the
    scheduler's Resource type, so it never fits, fails or scores.
    """
    return (is_extended_resource_name(name) or is_hugepages_resource(name)
            or is_prefixed_native_resource(name)
            or name.startswith(_ATTACHABLE_VOLUMES_PREFIX))


def go_round(x: float) -> int:
    """Go's math.Round: halves away from zero (Python's round() goes to even).

    `floor(x + 0.5)` would be off for 0.49999999999999994, whose sum rounds up to 1.0;
    `x - trunc(x)` is exact for floats.
    """
    whole = math.trunc(x)
    if abs(x - whole) >= 0.5:
        whole += 1 if x > 0 else -1
    return whole


# --- arguments -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """config.ResourceSpec: a resource to score and its weight."""

    name: str
    weight: int


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))



def parse_resource_specs(value: Any, path: str, problems: Problems) -> tuple[ResourceSpec, ...]:
    """A `resources` list, with v1 defaulting: empty -> cpu and memory weight 1; a weight
    of 0 or none -> 1 (v1 cannot tell an explicit 0 from a missing weight)."""
    if value is None:
        return DEFAULT_RESOURCES
    if not isinstance(value, list):
        problems.append(field_problem(path, f"must be a list, not {type_name(value)}"))
        return DEFAULT_RESOURCES
    if not value:
        return DEFAULT_RESOURCES
    # An invalid entry becomes a placeholder (name "", weight 1) so that later problems
    # keep the index of the entry they are about; any problem fails the factory anyway.
    specs = []
    for i, item in enumerate(value):
        ipath = f"{path}[{i}]"
        spec = ResourceSpec("", 1)
        if not isinstance(item, dict):
            problems.append(field_problem(ipath, f"must be an object, not {type_name(item)}"))
        else:
            check_unknown_fields(item, ("name", "weight"), ipath, problems)
            name = item.get("name")
            weight: int | None = 1
            if item.get("weight") is not None:
                weight = parse_int(item["weight"], f"{ipath}.weight", problems)
            if not isinstance(name, str) or not name:
                problems.append(field_problem(f"{ipath}.name", "Required value: a resource name"))
            elif weight is not None:
                spec = ResourceSpec(name, weight or 1)
        specs.append(spec)
    return tuple(specs)


def check_weights(specs: Sequence[ResourceSpec], path: str, problems: Problems) -> None:
    """validateResources: every weight in (0, 100]."""
    for i, spec in enumerate(specs):
        if spec.weight <= 0 or spec.weight > MAX_RESOURCE_WEIGHT:
            problems.append(field_problem(f"{path}[{i}].weight",
                             f"Invalid value: {spec.weight}: resource weight of {spec.name} "
                             f"not in valid range (0, {MAX_RESOURCE_WEIGHT}]"))


# --- per-pod and per-node quantities ------------------------------------------------------

def pod_request_list(pod: Pod, resources: Sequence[ResourceSpec],
                     use_requested: bool, *, use_status: bool = False,
                     features: FeatureGates = DEFAULTS) -> tuple[int, ...]:
    """calculatePodResourceRequestList: the pod's request for each scored resource.

    Without `use_requested` (NodeResourcesFit) cpu and memory are the "non-zero" requests:
    a container that sets none counts 100m / 200Mi, so that request-less pods do not all
    look free. BalancedAllocation uses the actual requests.

    NodeResourcesFit's scorer also ignores pod-level requests (`spec.resources`): in
    v1.36 its resourceAllocationScorer is built without enablePodLevelResources, so
    PodRequests runs with SkipPodLevelResources and the containers' (non-zero) requests
    plus overhead are scored, while its filter and BalancedAllocation honour pod-level
    requests. Found by the differential test against kube-scheduler.

    `use_status` is the scorer's enableInPlacePodVerticalScaling: BalancedAllocation's is
    set (a pod carrying resize status counts it, pod-level under `features`), the one
    NodeResourcesFit builds for scoring is not.
    """
    if not use_requested and pod.pod_requests:
        pod = _without_pod_level_requests(pod)
    actual = pod_requests(pod, use_status=use_status, features=features)
    nonzero = actual if use_requested else pod_requests(
        pod, non_zero=True, use_status=use_status, features=features)
    return tuple(
        nonzero.get(spec.name, 0) if spec.name in (CPU, MEMORY) else actual.get(spec.name, 0)
        for spec in resources
    )


_CONTAINER_LEVEL_KEY = "resource_allocation/container_level"


def _without_pod_level_requests(pod: Pod) -> Pod:
    """The pod as NodeResourcesFit's scorer sees it: no pod-level requests (memoized)."""
    view: Pod | None = pod.cache.get(_CONTAINER_LEVEL_KEY)
    if view is None:
        view = replace(pod, pod_requests={}, cache={})
        pod.cache[_CONTAINER_LEVEL_KEY] = view
    return view


# What calculateResourceAllocatableRequest reads from a node, decided once per resource.
KIND_CPU_MEM = 0  # allocatable; requested or non-zero requested
KIND_EPHEMERAL = 1  # allocatable; requested
KIND_SCALAR = 2  # allocatable if the node lists it; requested; skipped when pod asks 0
KIND_IGNORED = 3  # not a resource the scheduler's Resource type keeps: never scored


def resource_kind(name: str) -> int:
    if name in (CPU, MEMORY):
        return KIND_CPU_MEM
    if name == EPHEMERAL_STORAGE:
        return KIND_EPHEMERAL
    if is_scalar_resource_name(name):
        return KIND_SCALAR
    return KIND_IGNORED


def node_allocatable_allocated(
    info: NodeInfo, names: Sequence[str], kinds: Sequence[int],
    pod_request: Sequence[int], use_requested: bool, dra: DraCapacity | None = None,
) -> tuple[list[int], list[int]]:
    """calculateNodeAllocatableRequest: per scored resource, the node's allocatable and
    what its pods already request; (0, 0) for a resource the node does not have, or an
    extended resource the pod does not ask for (so it is left out of the score). With
    `dra` (DRAExtendedResource), a scalar resource the node's allocatable lacks
    counts the devices of the class serving it there instead."""
    allocatable_map = info.node.allocatable
    requested_map = info.requested
    cpu_mem_map = requested_map if use_requested else info.non_zero_requested
    n = len(names)
    allocatable = [0] * n
    allocated = [0] * n
    for i in range(n):
        kind = kinds[i]
        name = names[i]
        if kind == KIND_CPU_MEM:
            alloc = allocatable_map.get(name, 0)
            used = cpu_mem_map.get(name, 0)
        elif kind == KIND_EPHEMERAL:
            alloc = allocatable_map.get(name, 0)
            used = requested_map.get(name, 0)
        elif kind == KIND_SCALAR:
            if pod_request[i] == 0:
                continue
            alloc = allocatable_map.get(name, 0)
            used = requested_map.get(name, 0)
            if alloc == 0 and dra is not None:
                alloc, used = dra.totals(info.node, name)
        else:
            continue
        if alloc == 0:
            continue
        allocatable[i] = alloc
        allocated[i] = used
    return allocatable, allocated


def cycle_dra_capacity(state: CycleState, key: str, enabled: bool, names: Sequence[str],
                       selectors: SelectorCache) -> DraCapacity | None:
    """The cycle's DraCapacity for the scored `names` (None with DRAExtendedResource
    off, or when no class serves any of them), built once per cycle under `key`:
    at PreScore, or at the first Score when PreScore is off."""
    if not enabled or state.cluster is None:
        return None
    found = state.get(key)
    if found is None:
        found = DraCapacity.for_resources(state.cluster.dra, names, selectors) or False
        state.write(key, found)
    return found if isinstance(found, DraCapacity) else None


# --- scorers -----------------------------------------------------------------------------
# Each takes (requested, allocated, allocatable) lists aligned with the configured
# resources, where requested = allocated + the pod's request and allocatable 0 means
# "leave this resource out".

Scorer = Callable[[Sequence[int], Sequence[int], Sequence[int]], int]


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div((capacity - requested) * MAX_NODE_SCORE, capacity)


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    # Non-zero defaults can push requested past capacity: count it as full.
    requested = min(requested, capacity)
    return go_div(requested * MAX_NODE_SCORE, capacity)


def _weighted_scorer(weights: Sequence[int], one: Callable[[int, int], int]) -> Scorer:
    def score(requested: Sequence[int], allocated: Sequence[int],
              allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for i, alloc in enumerate(allocatable):
            if alloc == 0:
                continue
            node_score += one(requested[i], alloc) * weights[i]
            weight_sum += weights[i]
        if weight_sum == 0:
            return 0
        return go_div(node_score, weight_sum)
    return score


def least_allocated_scorer(resources: Sequence[ResourceSpec]) -> Scorer:
    """LeastAllocated: sum(w * (a - r) * 100 / a) / sum(w), favouring free nodes."""
    return _weighted_scorer([r.weight for r in resources], least_requested_score)


def most_allocated_scorer(resources: Sequence[ResourceSpec]) -> Scorer:
    """MostAllocated: sum(w * min(r, a) * 100 / a) / sum(w), favouring full nodes."""
    return _weighted_scorer([r.weight for r in resources], most_requested_score)


def requested_to_capacity_ratio_scorer(resources: Sequence[ResourceSpec],
                                       shape: Sequence[ShapePoint]) -> Scorer:
    """RequestedToCapacityRatio: the shape (scores 0..10, scaled to 0..100) applied to
    each resource's utilization percentage; resources scoring 0 do not count in the
    weighted average, which is rounded (not truncated)."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    raw = broken_linear_function(
        [ShapePoint(p.utilization, p.score * scale) for p in shape])
    weights = [r.weight for r in resources]

    def one(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(MAX_UTILIZATION)
        return raw(go_div(requested * MAX_UTILIZATION, capacity))

    def score(requested: Sequence[int], allocated: Sequence[int],
              allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for i, alloc in enumerate(allocatable):
            if alloc == 0:
                continue
            s = one(requested[i], alloc)
            if s > 0:
                node_score += s * weights[i]
                weight_sum += weights[i]
        if weight_sum == 0:
            return 0
        return go_round(node_score / weight_sum)
    return score


def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """(1 - std of the utilization fractions) * 100, truncated: each fraction capped at
    1; for two resources std is |f1 - f2| / 2, for more the population std, for fewer 0."""
    fractions = []
    for i, alloc in enumerate(allocatable):
        if alloc == 0:
            continue
        fractions.append(min(requested[i] / alloc, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        total = 0.0
        for f in fractions:
            total += (f - mean) * (f - mean)
        std = math.sqrt(total / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def balanced_allocation_score(requested: Sequence[int], allocated: Sequence[int],
                              allocatable: Sequence[int]) -> int:
    """v1.36 BalancedAllocation (kubernetes PR 135573): how much placing the pod improves
    the node's balance. No change scores 75, balanced -> unbalanced 50, unbalanced ->
    balanced 100 (all integer arithmetic, as upstream)."""
    with_pod = balanced_resource_score(requested, allocatable)
    without_pod = balanced_resource_score(allocated, allocatable)
    half = MAX_NODE_SCORE // 2
    return half + go_div(half + with_pod - without_pod, 2)


# --- columnar (NodeTable) versions ---------------------------------------------------------
# The same arithmetic over all feasible nodes at once. Every operation is chosen to give
# bit-for-bit the per-node result: integer ops on non-negative int64 (where // is Go's
# division), float ops in the same order as the scalar code (adding 0.0 for a left-out
# resource changes no sum). Values beyond VECTOR_LIMIT would overflow `* 100` or lose
# exactness as float64, so the plugins fall back to the per-node path for them.

VECTOR_LIMIT = 2**50

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
VectorScorer = Callable[[IntArray, IntArray, IntArray], IntArray]


def table_allocatable_allocated(
    table: NodeTable, idx: IntArray, names: Sequence[str], kinds: Sequence[int],
    pod_request: Sequence[int], use_requested: bool,
) -> tuple[IntArray, IntArray] | None:
    """`node_allocatable_allocated` for the nodes `table.infos[idx]`, as two
    (resources x nodes) arrays; None when some value is too large for exact vector math."""
    k = len(names)
    allocatable = np.zeros((k, idx.size), np.int64)
    allocated = np.zeros((k, idx.size), np.int64)
    if any(r > VECTOR_LIMIT or r < 0 for r in pod_request):
        return None
    table_allocatable = table.allocatable
    for i in range(k):
        kind = kinds[i]
        if kind == KIND_IGNORED or (kind == KIND_SCALAR and pod_request[i] == 0):
            continue
        j = table.resource_column(names[i])
        if j is None:
            continue
        allocatable[i] = table_allocatable[j, idx]
        if kind == KIND_CPU_MEM and not use_requested:
            allocated[i] = table.non_zero_requested[0 if names[i] == CPU else 1, idx]
        else:
            allocated[i] = table.requested[j, idx]
    # A resource the node lacks counts nothing used (it is left out of the score).
    allocated = np.where(allocatable != 0, allocated, 0)
    # As unsigned, a negative value is above the limit too: one comparison for both ends.
    if allocatable.size and (int(allocatable.view(np.uint64).max()) > VECTOR_LIMIT
                             or int(allocated.view(np.uint64).max()) > VECTOR_LIMIT):
        return None
    return allocatable, allocated


def table_scores(table: NodeTable, rows: IntArray, names: Sequence[str],
                 kinds: Sequence[int], pod_request: Sequence[int], use_requested: bool,
                 scorer: VectorScorer) -> IntArray | None:
    """`scorer` over the rows `rows` for a pod requesting `pod_request` (the columnar
    form of a resource plugin's `score`); None when some value is too large for exact
    vector math."""
    columns = table_allocatable_allocated(table, rows, names, kinds, pod_request,
                                          use_requested)
    if columns is None:
        return None
    allocatable, allocated = columns
    requested = allocated + np.array(pod_request, np.int64)[:, None]
    return scorer(requested, allocated, allocatable)


def _weighted_vector(weights: Sequence[int],
                     one: Callable[[IntArray, IntArray], IntArray]) -> VectorScorer:
    w = np.array(weights, np.int64)[:, None]
    w_total = int(w.sum())

    def score(requested: IntArray, allocated: IntArray, allocatable: IntArray) -> IntArray:
        present = allocatable != 0
        if present.all():
            # Every node has every scored resource (the usual case): no masking needed,
            # and the weight sum is the same for all nodes.
            total: IntArray = (one(requested, allocatable) * w).sum(axis=0) // w_total
            return total
        safe = np.where(present, allocatable, 1)
        per = np.where(present, one(requested, safe), 0)
        node_score = (per * w).sum(axis=0)
        weight_sum = (present * w).sum(axis=0)
        return np.where(weight_sum == 0, 0, node_score // np.maximum(weight_sum, 1))
    return score


def _least_vector(requested: IntArray, capacity: IntArray) -> IntArray:
    return np.where(requested > capacity, 0, (capacity - requested) * MAX_NODE_SCORE // capacity)


def _most_vector(requested: IntArray, capacity: IntArray) -> IntArray:
    return np.minimum(requested, capacity) * MAX_NODE_SCORE // capacity


def least_allocated_vector(resources: Sequence[ResourceSpec]) -> VectorScorer:
    return _weighted_vector([r.weight for r in resources], _least_vector)


def most_allocated_vector(resources: Sequence[ResourceSpec]) -> VectorScorer:
    return _weighted_vector([r.weight for r in resources], _most_vector)


def _go_div_vector(num: IntArray, den: int) -> IntArray:
    q: IntArray = np.abs(num) // den
    return np.where(num < 0, -q, q)


def requested_to_capacity_ratio_vector(resources: Sequence[ResourceSpec],
                                       shape: Sequence[ShapePoint]) -> VectorScorer:
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    points = [ShapePoint(p.utilization, p.score * scale) for p in shape]
    w = np.array([r.weight for r in resources], np.int64)[:, None]

    def raw(p: IntArray) -> IntArray:
        out = np.full(p.shape, points[-1].score, np.int64)
        done = np.zeros(p.shape, np.bool_)
        for i, point in enumerate(points):
            sel = (p <= point.utilization) & ~done
            if i == 0:
                out[sel] = point.score
            else:
                prev = points[i - 1]
                out[sel] = prev.score + _go_div_vector(
                    (point.score - prev.score) * (p[sel] - prev.utilization),
                    point.utilization - prev.utilization)
            done |= sel
        return out

    def score(requested: IntArray, allocated: IntArray, allocatable: IntArray) -> IntArray:
        present = allocatable != 0
        safe = np.where(present, allocatable, 1)
        utilization = np.where(requested > allocatable, MAX_UTILIZATION,
                               requested * MAX_UTILIZATION // safe)
        per = raw(utilization)
        counted = present & (per > 0)
        node_score = (np.where(counted, per, 0) * w).sum(axis=0)
        weight_sum = (counted * w).sum(axis=0)
        # Go's math.Round of a non-negative a/b is floor((2a + b) / 2b), exactly.
        rounded = (2 * node_score + weight_sum) // np.maximum(2 * weight_sum, 1)
        return np.where(weight_sum == 0, 0, rounded)
    return score


def balanced_resource_vector(requested: IntArray, allocatable: IntArray) -> IntArray:
    """`balanced_resource_score` per node (column), with the scalar code's float ops in
    the same order."""
    present = allocatable != 0
    k, m = requested.shape
    if k == 2 and present.all():
        # The common case (cpu and memory on every node), without the masking below.
        f = np.minimum(requested / allocatable, 1.0)
        two: IntArray = ((1 - np.abs((f[0] - f[1]) / 2)) * MAX_NODE_SCORE).astype(np.int64)
        return two
    fractions = np.where(present, np.minimum(
        requested.astype(np.float64) / np.where(present, allocatable, 1).astype(np.float64),
        1.0), 0.0)
    count = present.sum(axis=0)
    # Two resources: |first - second| / 2, first and second in resource order.
    position = np.cumsum(present, axis=0)
    first = np.where(present & (position == 1), fractions, 0.0).sum(axis=0)
    second = np.where(present & (position == 2), fractions, 0.0).sum(axis=0)
    std = np.where(count == 2, np.abs((first - second) / 2), 0.0)
    many = count > 2
    if many.any():
        total = np.zeros(m, np.float64)
        for i in range(k):
            total = total + fractions[i]
        mean = total / np.maximum(count, 1)
        squares = np.zeros(m, np.float64)
        for i in range(k):
            d = fractions[i] - mean
            squares = squares + np.where(present[i], d * d, 0.0)
        std = np.where(many, np.sqrt(squares / np.maximum(count, 1)), std)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


def balanced_allocation_vector(requested: IntArray, allocated: IntArray,
                               allocatable: IntArray) -> IntArray:
    half = MAX_NODE_SCORE // 2
    # Both balances in one pass (the arithmetic is per column): half the numpy calls,
    # which is most of the cost when only a few rows are recomputed (RowMemo).
    m = requested.shape[1]
    both = balanced_resource_vector(np.concatenate((requested, allocated), axis=1),
                                    np.concatenate((allocatable, allocatable), axis=1))
    with_pod, without_pod = both[:m], both[m:]
    return half + (half + with_pod - without_pod) // 2
