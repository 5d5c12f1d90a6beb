"""The structured allocator of kube-scheduler v1.36 (k8s.io/dynamic-resource-allocation,
`structured/internal/incubating`, the implementation v1.36's default features select).

`Allocator` is built once per pod from the cluster's slices, classes and allocated
devices; `allocate(node, claims)` then finds, for one node, one device per required
slot of every request of every claim, or says there is none. The search is upstream's
depth-first backtracking in upstream's order, so the same devices are chosen:

- claims in the order given, requests in spec order, a request's devices one by one;
- candidates in pool order (see `pools`), slice by slice, device by device; within a
  request a later device never precedes an earlier one (combinations, not
  permutations);
- a `firstAvailable` request tries its sub-requests in order and keeps the first that
  leads to a full solution;
- `All` requests are resolved to their device list before the search and must get
  every one of them;
- at most 32 devices per claim, with early backtracking when a branch cannot stay
  under it;
- a candidate is checked for use (allocated, or being allocated in this attempt),
  class and request selectors (cached per device and request), per-device node
  selection, consumable capacity, shared counters, taints and then the claim's
  constraints, and every change is undone when the search backs out.

The first complete solution wins; results carry the request names, admin access,
tolerations, binding conditions, share IDs and consumed capacity, the class and claim
configuration, and the node selector the claims are then bound to.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from policyd.dra import capacity
from policyd.dra.constraints import DeviceConstraint, DistinctAttribute, MatchAttribute
from policyd.dra.errors import AllocationAborted, AllocationError, NodeAllocationError
from policyd.dra.features import AllocatorFeatures
from policyd.dra.nodes import Node, NodeSelector, NodeSelectorError, Requirement, Term
from policyd.dra.nodes import node_matches as _node_matches
from policyd.dra.objects import (
    ALL,
    EFFECT_NO_EXECUTE,
    EFFECT_NO_SCHEDULE,
    EXACT_COUNT,
    Device,
    DeviceClass,
    DeviceRequest,
    Quantity,
    Request,
    ResourceClaim,
    ResourceSlice,
    Selector,
)
from policyd.dra.pools import Pool, PoolError, gather_pools
from policyd.dra.results import (
    SOURCE_CLAIM,
    SOURCE_CLASS,
    AllocationResult,
    ConfigResult,
    DeviceResult,
)
from policyd.dra.selectors import SelectorCache
from policyd.dra.state import AllocatedState, DeviceID

# resource.k8s.io/v1 AllocationResultsMaxSize: devices one claim may get.
MAX_RESULTS_PER_CLAIM = 32

# (claim index, request index, sub-request index): one request or sub-request.
_RequestKey = tuple[int, int, int]
_ORIGIN = 0  # search from the first candidate


def _random_share_id() -> str:
    return str(uuid.uuid4())


@dataclass(slots=True)
class AllocatorStats:
    # How often the search placed (or tried to place) one device: the work done.
    steps: int = 0


@dataclass(frozen=True, slots=True)
class SliceLayout:
    """Slices as `allocate` looks them up: those local to one node by node name, and
    the others (node selectors, all nodes, per-device selection, shared counters),
    which every node's search considers. Built once per set of slices, it may serve
    many allocators."""

    all_slices: tuple[ResourceSlice, ...]
    on_node: Mapping[str, tuple[ResourceSlice, ...]]
    shared: tuple[ResourceSlice, ...]

    @classmethod
    def of(cls, slices: Sequence[ResourceSlice]) -> SliceLayout:
        on_node: dict[str, list[ResourceSlice]] = {}
        shared: list[ResourceSlice] = []
        for s in slices:
            if not s.node_name or s.shared_counters:
                shared.append(s)
            else:
                on_node.setdefault(s.node_name, []).append(s)
        return cls(tuple(slices), {n: tuple(found) for n, found in on_node.items()},
                   tuple(shared))


class Allocator:
    """One pod's allocator over a fixed view of the cluster; `allocate` per node.

    `allocated` may be given as a function, called once when a search first needs
    it (a pod whose every node's answer is known needs none)."""

    def __init__(self, *, features: AllocatorFeatures,
                 allocated: AllocatedState | Callable[[], AllocatedState],
                 classes: Mapping[str, DeviceClass],
                 slices: Sequence[ResourceSlice] | SliceLayout,
                 selectors: SelectorCache,
                 new_share_id: Callable[[], str] = _random_share_id) -> None:
        self.features = features
        self._allocated = allocated
        self.classes = classes
        self.selectors = selectors
        self.new_share_id = new_share_id
        layout = slices if isinstance(slices, SliceLayout) else SliceLayout.of(slices)
        self.all_slices = layout.all_slices
        self.stats = AllocatorStats()
        self._on_node = layout.on_node
        self._shared = layout.shared
        # Counters still free per pool, from the allocated devices only (they do not
        # change during a search). v1.36.3 keys this and the counters consumed during a
        # search by the pool's name alone, so two drivers' pools of one name share one
        # account (kubernetes/kubernetes#140434, fixed after v1.36.3); kept so, for the
        # same answers as the kube-scheduler policyd reproduces.
        self._available_counters: dict[str, dict[str, dict[str, int]]] = {}

    @property
    def allocated(self) -> AllocatedState:
        if not isinstance(self._allocated, AllocatedState):
            self._allocated = self._allocated()
        return self._allocated

    def allocate(self, node: Node, claims: Sequence[ResourceClaim], *,
                 cancelled: Callable[[], str | None] | None = None,
                 pools: list[Pool] | None = None,
                 ) -> list[AllocationResult] | None:
        """One AllocationResult per claim, in order, or None when the claims cannot
        be allocated on this node. Raises AllocationError (NodeAllocationError when
        only this node is concerned). `cancelled` is polled during the search; a
        returned cause stops it with AllocationAborted. `pools` are the node's, as
        `pools_for(node)` gave them (found again when not given)."""
        if pools is None:
            pools = self.pools_for(node)
        return _Search(self, node, claims, pools, cancelled).run()

    def pools_for(self, node: Node) -> list[Pool]:
        """The pools the node can allocate from, in search order; raises
        AllocationError when a slice's node selection cannot be evaluated."""
        slices = (*self._on_node.get(node.name, ()), *self._shared)
        try:
            return gather_pools(slices, node, self.features, self.all_slices)
        except PoolError as err:
            raise AllocationError(f"gather pool information: {err}") from None

    def available_counters(self, pool: Pool) -> dict[str, dict[str, int]]:
        found = self._available_counters.get(pool.name)
        if found is not None:
            return found
        available = {name: {c: q.nanos for c, q in cs.counters.items()}
                     for name, cs in pool.counter_sets.items()}
        for s in (*pool.slices, *pool.other_slices):
            for device in s.devices:
                if not self.allocated.is_allocated(DeviceID(s.driver, s.pool, device.name)):
                    continue
                for consumption in device.consumes_counters:
                    counters = available.get(consumption.counter_set)
                    if counters is None:
                        continue
                    for name, q in consumption.counters.items():
                        if name in counters:  # may go negative: nothing left
                            counters[name] -= q.nanos
        self._available_counters[pool.name] = available
        return available


@dataclass(frozen=True, slots=True)
class _Candidate:
    id: DeviceID
    device: Device
    slice: ResourceSlice
    pool: Pool
    index: int  # position in the search order (`_Search.candidates`)


@dataclass(slots=True)
class _RequestData:
    request: Request
    parent: DeviceRequest | None  # set for a sub-request
    device_class: DeviceClass
    num_devices: int = 0
    # On the entry of sub-request 0: which sub-request the solution uses.
    selected_sub: int = 0
    all_devices: list[_Candidate] | None = None

    @property
    def name(self) -> str:
        if self.parent is not None:
            return f"{self.parent.name}/{self.request.name}"
        return self.request.name


@dataclass(frozen=True, slots=True)
class _Chosen:
    request: Request
    parent: str  # the parent request's name, "" for a plain request
    candidate: _Candidate
    share_id: str | None
    consumed: Mapping[str, Quantity] | None

    @property
    def name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


@dataclass(slots=True)
class _Undo:
    """What placing one candidate changed, so that backing out restores it."""

    counters_reserved: bool
    previous_results: int
    constraints_added: int = 0
    marked: bool = False
    capacity_inserted: bool = False
    capacity_existed: bool = False
    consumed: Mapping[str, Quantity] = field(default_factory=dict)
    result_added: bool = False


class _TooManyDevices(Exception):
    """This branch cannot stay within MAX_RESULTS_PER_CLAIM: back out further."""


class _Search:
    """The state of one `allocate` call (upstream's `allocator`)."""

    def __init__(self, owner: Allocator, node: Node, claims: Sequence[ResourceClaim],
                 pools: list[Pool], cancelled: Callable[[], str | None] | None) -> None:
        self.owner = owner
        self.features = owner.features
        self.node = node
        self.claims = claims
        self.pools = pools
        self.cancelled = cancelled
        # Every device of the usable pools in search order (pool, slice, device), and
        # each pool's range in it: a position in this list is upstream's
        # (pool, slice, device) start location, flattened.
        self.candidates: list[_Candidate] = []
        self.pool_ranges: list[tuple[int, int]] = []
        for pool in pools:
            first = len(self.candidates)
            for s in pool.slices:
                for device in s.devices:
                    self.candidates.append(_Candidate(
                        DeviceID(pool.driver, pool.name, device.name), device, s, pool,
                        len(self.candidates)))
            self.pool_ranges.append((first, len(self.candidates)))
        self.request_data: dict[_RequestKey, _RequestData] = {}
        self.constraints: list[list[DeviceConstraint]] = []
        # per request: whether each candidate passes its selectors (None: not checked)
        self.matches: dict[_RequestKey, list[bool | None]] = {}
        # device -> indices of the claims it is being allocated for
        self.allocating: dict[DeviceID, set[int]] = {}
        # shared device -> capacity its shares in this attempt consume
        self.allocating_capacity: dict[DeviceID, dict[str, int]] = {}
        # pool name (not driver: see Allocator) -> counter set -> counter -> consumed
        # in this attempt
        self.consumed_counters: dict[str, dict[str, dict[str, int]]] = {}
        self.results: list[list[_Chosen]] = [[] for _ in claims]

    # ------------------------------------------------------------ preparation

    def run(self) -> list[AllocationResult] | None:
        for ci, claim in enumerate(self.claims):
            self._prepare_claim(ci, claim)
        try:
            with _recursion_depth_for(self.claims):
                done = self._allocate_one(0, 0, 0, 0, False, _ORIGIN)
        except _TooManyDevices:
            # Only the first claim's limit can reach this far; upstream returns its
            # internal sentinel as the error then.
            raise AllocationError("allocation max size exceeded") from None
        if not done:
            if any(p.invalid for p in self.pools):
                raise NodeAllocationError("invalid resource pools were encountered")
            return None
        return [self._result(ci, claim) for ci, claim in enumerate(self.claims)]

    def _prepare_claim(self, ci: int, claim: ResourceClaim) -> None:
        min_devices = 0
        for ri, request in enumerate(claim.requests):
            if request.first_available and not self.features.prioritized_list:
                raise AllocationError(
                    f"claim {claim.key}, request {request.name}: has subrequests, but the "
                    "DRAPrioritizedList feature is disabled")
            if not self.features.consumable_capacity:
                if request.exactly is not None and request.exactly.capacity is not None:
                    raise AllocationError(
                        f"claim {claim.key}, request {request.name}: has capacity requests, "
                        "but the DRAConsumableCapacity feature is disabled")
                for sub in request.first_available:
                    if sub.capacity is not None:
                        raise AllocationError(
                            f"claim {claim.key}, subrequest {sub.name}: has capacity "
                            "requests, but the DRAConsumableCapacity feature is disabled")
            if request.first_available:
                fewest = None
                for si, sub in enumerate(request.first_available):
                    data = self._validate(sub, request, (ci, ri, si))
                    self.request_data[(ci, ri, si)] = data
                    fewest = data.num_devices if fewest is None else min(fewest,
                                                                         data.num_devices)
                min_devices += fewest or 0
            else:
                if request.exactly is None:
                    raise AllocationError(
                        f"claim {claim.key}, request {request.name}: missing device class "
                        "name (unsupported request type?)")
                data = self._validate(request.exactly, None, (ci, ri, 0))
                self.request_data[(ci, ri, 0)] = data
                min_devices += data.num_devices
        if min_devices > MAX_RESULTS_PER_CLAIM:
            raise AllocationError(
                f"claim {claim.key}: number of requested devices {min_devices} exceeds the "
                f"claim limit of {MAX_RESULTS_PER_CLAIM}")
        constraints: list[DeviceConstraint] = []
        for i, c in enumerate(claim.constraints):
            if c.match_attribute is not None:
                constraints.append(MatchAttribute(c.requests, c.match_attribute))
            elif c.distinct_attribute is not None:
                constraints.append(DistinctAttribute(c.requests, c.distinct_attribute))
            else:
                raise AllocationError(
                    f"claim {claim.key}, constraint #{i}: empty constraint (unsupported "
                    "constraint type?)")
        self.constraints.append(constraints)

    def _validate(self, request: Request, parent: DeviceRequest | None,
                  key: _RequestKey) -> _RequestData:
        claim = self.claims[key[0]]
        where = f"claim {claim.key}, request {request.name}"
        for i, selector in enumerate(request.selectors):
            if selector.expression is None:
                raise AllocationError(
                    f"{where}, selector #{i}: CEL expression empty (unsupported selector "
                    "type?)")
        if not self.features.admin_access and request.admin_access is not None:
            raise AllocationError(
                f"{where}: admin access is requested, but the feature is disabled")
        if not request.device_class_name:
            raise AllocationError(
                f"{where}: missing device class name (unsupported request type?)")
        device_class = self.owner.classes.get(request.device_class_name)
        if device_class is None:
            raise AllocationError(
                f"{where}: could not retrieve device class {request.device_class_name}: "
                f'deviceclass.resource.k8s.io "{request.device_class_name}" not found')
        data = _RequestData(request, parent, device_class)
        if request.allocation_mode == EXACT_COUNT:
            data.num_devices = request.count
        elif request.allocation_mode == ALL:
            data.all_devices = self._all_devices(request, data, key, where)
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError(
                f"{where}: unsupported count mode {request.allocation_mode}")
        return data

    def _all_devices(self, request: Request, data: _RequestData, key: _RequestKey,
                     where: str) -> list[_Candidate]:
        found = []
        for pool, (first, end) in zip(self.pools, self.pool_ranges, strict=True):
            if pool.incomplete:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool.id} is "
                    "currently being updated")
            if pool.invalid:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool.id} is "
                    "currently invalid")
            for candidate in self.candidates[first:end]:
                if not self._selectable(key, data, candidate):
                    continue
                if (self.features.consumable_capacity
                        and not self._capacity_fits(request, candidate.id, candidate.device)):
                    continue
                found.append(candidate)
        return found

    # ------------------------------------------------------------ the search

    def _allocate_one(self, ci: int, ri: int, si: int, di: int, in_sub: bool,
                      start: int) -> bool:
        """Place device `di` of request (ci, ri, si) and everything after it;
        True when a full solution was found (its choices then stay in place)."""
        self.owner.stats.steps += 1
        if self.cancelled is not None:
            cause = self.cancelled()
            if cause is not None:
                raise AllocationAborted(cause)
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.requests):
            try:
                return self._allocate_one(ci + 1, 0, 0, 0, False, _ORIGIN)
            except _TooManyDevices:
                # A different choice in an earlier claim may let this one use a
                # sub-request with fewer devices: not a dead end for the caller.
                return False
        data = self.request_data[(ci, ri, si)]

        if not in_sub and data.parent is not None:
            return self._allocate_sub_requests(ci, ri, di, data)

        request = data.request
        all_mode = request.allocation_mode == ALL
        if all_mode and not data.all_devices:
            return False
        if di >= data.num_devices:
            return self._allocate_one(ci, ri + 1, 0, 0, False, _ORIGIN)
        if len(self.results[ci]) + data.num_devices - di > MAX_RESULTS_PER_CLAIM:
            raise _TooManyDevices

        if all_mode:
            assert data.all_devices is not None
            undo = self._allocate_device(ci, ri, si, data.all_devices[di], must=True)
            if undo is None:
                return False  # every device is needed: no other choice to try
            try:
                done = self._allocate_one(ci, ri, si, di + 1, in_sub, _ORIGIN)
            except _TooManyDevices:
                undo()
                raise
            if not done:
                undo()
            return done

        key = (ci, ri, si)
        admin = bool(request.admin_access)
        # The hottest loop: what the checks read is bound to locals first.
        candidates = self.candidates
        known = self._matches_of(key)
        allocated = self.owner.allocated.devices
        allocating = self.allocating
        check_capacity = self.features.consumable_capacity
        for index in range(start, len(candidates)):
            candidate = candidates[index]
            device_id = candidate.id
            # Invalid and incomplete pools have no candidates: nothing to skip here.
            if admin:
                if ci in allocating.get(device_id, ()):
                    continue
            elif device_id in allocated or allocating.get(device_id):
                continue
            ok = known[index]
            if ok is None:
                ok = self._selectable(key, data, candidate)
            if not ok:
                continue
            if check_capacity and not self._capacity_fits(request, device_id,
                                                          candidate.device):
                continue
            undo = self._allocate_device(ci, ri, si, candidate, must=False)
            if undo is None:
                continue
            try:
                done = self._allocate_one(ci, ri, si, di + 1, in_sub, index + 1)
            except _TooManyDevices:
                undo()
                raise
            if done:
                return True
            undo()
        return False

    def _allocate_sub_requests(self, ci: int, ri: int, di: int,
                               data: _RequestData) -> bool:
        all_too_many = True
        si = 0
        while (ci, ri, si) in self.request_data:
            try:
                done = self._allocate_one(ci, ri, si, di, True, _ORIGIN)
            except _TooManyDevices:
                si += 1
                continue
            all_too_many = False
            if done:
                data.selected_sub = si
                return True
            si += 1
        if all_too_many:
            # No sub-request fits under the limit: no choice made before this request
            # can help, so the caller backs out further.
            raise _TooManyDevices
        return False

    def _allocate_device(self, ci: int, ri: int, si: int, candidate: _Candidate, *,
                         must: bool) -> Callable[[], None] | None:
        """Place the candidate (already selectable) or return None; on success the
        returned function takes it out again."""
        claim = self.claims[ci]
        data = self.request_data[(ci, ri, si)]
        request = data.request
        device = candidate.device
        device_id = candidate.id
        admin = bool(request.admin_access)
        shared = self.features.consumable_capacity and bool(device.allow_multiple_allocations)
        if not shared and admin and ci in self.allocating.get(device_id, ()):
            return None
        if not admin and self._in_use(device_id):
            return None
        if not self.features.partitionable_devices and device.consumes_counters:
            return None

        skip_counters = shared and self._capacity_in_use(device_id)
        reserved = False
        if not skip_counters and device.consumes_counters:
            if not self._reserve_counters(candidate):
                return None
            reserved = True

        if data.parent is not None:
            base, sub = data.parent.name, request.name
        else:
            base, sub = request.name, ""
        undo = _Undo(reserved, len(self.results[ci]))

        def back_out() -> None:
            self._rollback(ci, candidate, base, sub, undo)

        if self.features.device_taints and _untolerated_taint(device, request):
            back_out()
            return None
        for constraint in self.constraints[ci]:
            if not constraint.add(base, sub, device, candidate.pool.driver):
                back_out()
                if must:
                    raise AllocationError(
                        f"claim {claim.key}, request {request.name}: cannot add device "
                        f"{device_id} because a claim constraint would not be satisfied")
                return None
            undo.constraints_added += 1

        if not shared:
            self.allocating.setdefault(device_id, set()).add(ci)
            undo.marked = True

        consumed: Mapping[str, Quantity] = {}
        share_id = None
        if self.features.consumable_capacity:
            if not self._capacity_fits(request, device_id, device):
                back_out()
                return None
            if shared:
                consumed = capacity.consumed_capacity(request.capacity, device.capacity)
                share_id = self.owner.new_share_id()
                undo.capacity_existed = device_id in self.allocating_capacity
                total = self.allocating_capacity.setdefault(device_id, {})
                for name, q in consumed.items():
                    total[name] = total.get(name, 0) + q.nanos
                undo.capacity_inserted = True
                undo.consumed = consumed

        parent = data.parent.name if data.parent is not None else ""
        self.results[ci].append(_Chosen(request, parent, candidate, share_id,
                                        consumed or None))
        undo.result_added = True
        return back_out

    def _rollback(self, ci: int, candidate: _Candidate, base: str, sub: str,
                  undo: _Undo) -> None:
        device_id = candidate.id
        if undo.result_added:
            del self.results[ci][undo.previous_results:]
        if undo.capacity_inserted:
            total = self.allocating_capacity.get(device_id)
            if total is not None:
                for name, q in undo.consumed.items():
                    if name in total:
                        total[name] -= q.nanos
                if all(v == 0 for v in total.values()):
                    del self.allocating_capacity[device_id]
            # An earlier share of the device keeps its (possibly empty) entry: it
            # marks the device as shared, which spares later shares the counters.
            if undo.capacity_existed and device_id not in self.allocating_capacity:
                self.allocating_capacity[device_id] = {}
        if undo.marked:
            self.allocating[device_id].discard(ci)
        for constraint in reversed(self.constraints[ci][:undo.constraints_added]):
            constraint.remove(base, sub, candidate.device, candidate.pool.driver)
        if undo.counters_reserved:
            self._release_counters(candidate)

    # ------------------------------------------------------------ checks

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.owner.allocated.devices or bool(
            self.allocating.get(device_id))

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        return (device_id in self.owner.allocated.capacity
                or device_id in self.allocating_capacity)

    def _capacity_fits(self, request: Request, device_id: DeviceID, device: Device) -> bool:
        return capacity.fits(self.owner.allocated.capacity.get(device_id), request.capacity,
                             device.capacity, self.allocating_capacity.get(device_id))

    def _matches_of(self, key: _RequestKey) -> list[bool | None]:
        known = self.matches.get(key)
        if known is None:
            known = self.matches[key] = [None] * len(self.candidates)
        return known

    def _selectable(self, key: _RequestKey, data: _RequestData, candidate: _Candidate) -> bool:
        device = candidate.device
        if not self.features.device_binding_and_status and device.binding_conditions:
            return False
        known = self._matches_of(key)
        ok = known[candidate.index]
        if ok is not None:
            return ok
        driver = candidate.slice.driver
        ok = (self._selectors_match(key, device, driver, data.device_class,
                                    data.device_class.selectors)
              and self._selectors_match(key, device, driver, None, data.request.selectors))
        if ok and candidate.slice.per_device_node_selection:
            try:
                ok = _node_matches(self.node, device.node_name or "", bool(device.all_nodes),
                                   device.node_selector)
            except NodeSelectorError as err:
                raise AllocationError(f"failed to parse node selector: {err}") from None
        known[candidate.index] = ok
        return ok

    def _selectors_match(self, key: _RequestKey, device: Device, driver: str,
                         device_class: DeviceClass | None,
                         selectors: Sequence[Selector]) -> bool:
        if device_class is not None:
            owner = f"class {device_class.name}"
        else:
            owner = f"claim {self.claims[key[0]].key}"
        cache = self.owner.selectors
        for i, selector in enumerate(selectors):
            if selector.expression is None:
                # Only a class can get here (a request's are refused up front); the
                # API server refuses such a class, upstream would crash on it.
                raise AllocationError(f"{owner}: selector #{i}: CEL expression empty "
                                      "(unsupported selector type?)")
            compiled = cache.get(selector.expression)
            if compiled.selector is None:
                raise AllocationError(f"{owner}: selector #{i}: CEL compile error: "
                                      f"{compiled.error}")
            try:
                matched = compiled.selector.matches(driver, device.raw)
            except cache.runtime_error as err:
                raise AllocationError(
                    f"{owner}: selector #{i}: CEL runtime error: {err}") from None
            if not matched:
                return False
        return True

    def _reserve_counters(self, candidate: _Candidate) -> bool:
        pool = candidate.pool
        available = self.owner.available_counters(pool)
        consumed = self.consumed_counters.setdefault(pool.name, {})
        for consumption in candidate.device.consumes_counters:
            counters = consumed.setdefault(consumption.counter_set, {})
            for name, q in consumption.counters.items():
                counters[name] = counters.get(name, 0) + q.nanos
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for name, free in counters.items():
                if free < used.get(name, 0):
                    self._release_counters(candidate)
                    return False
        return True

    def _release_counters(self, candidate: _Candidate) -> None:
        consumed = self.consumed_counters[candidate.pool.name]
        for consumption in candidate.device.consumes_counters:
            counters = consumed[consumption.counter_set]
            for name, q in consumption.counters.items():
                counters[name] -= q.nanos

    # ------------------------------------------------------------ results

    def _result(self, ci: int, claim: ResourceClaim) -> AllocationResult:
        binding = self.features.device_binding_and_status
        devices = tuple(
            DeviceResult(
                request=chosen.name,
                driver=chosen.candidate.id.driver,
                pool=chosen.candidate.id.pool,
                device=chosen.candidate.id.device,
                admin_access=True if chosen.request.admin_access else None,
                tolerations=chosen.request.tolerations,
                binding_conditions=(chosen.candidate.device.binding_conditions
                                    if binding else None),
                binding_failure_conditions=(
                    chosen.candidate.device.binding_failure_conditions if binding else None),
                share_id=chosen.share_id,
                consumed_capacity=chosen.consumed,
            )
            for chosen in self.results[ci])
        return AllocationResult(devices, self._config(ci, claim),
                                self._node_selector(claim, self.results[ci]))

    def _config(self, ci: int, claim: ResourceClaim) -> tuple[ConfigResult, ...]:
        # A class's configuration appears once, listing every request that used it.
        entries: list[tuple[str, list[str], Mapping[str, object]]] = []
        class_entries: dict[str, tuple[int, int]] = {}
        for ri in range(len(claim.requests)):
            data = self.request_data[(ci, ri, 0)]
            if data.parent is not None:
                data = self.request_data[(ci, ri, data.selected_sub)]
            name = data.device_class.name
            if name in class_entries:
                first, end = class_entries[name]
                for i in range(first, end):
                    entries[i][1].append(data.name)
                continue
            first = len(entries)
            for configuration in data.device_class.config:
                entries.append((SOURCE_CLASS, [data.name], configuration))
            class_entries[name] = (first, len(entries))
        for config in claim.config:
            if not config.requests:
                entries.append((SOURCE_CLAIM, [], config.configuration))
                continue
            # Once per request it names (so a config naming two requests appears twice),
            # and for a prioritized request only when it names the chosen sub-request.
            for ri, request in enumerate(claim.requests):
                if request.name in config.requests:
                    entries.append((SOURCE_CLAIM, list(config.requests), config.configuration))
                    continue
                data = self.request_data[(ci, ri, 0)]
                if data.parent is None:
                    continue
                sub = request.first_available[data.selected_sub]
                if f"{request.name}/{sub.name}" in config.requests:
                    entries.append((SOURCE_CLAIM, list(config.requests), config.configuration))
        return tuple(ConfigResult(source, tuple(requests), dict(configuration))
                     for source, requests, configuration in entries)

    def _node_selector(self, claim: ResourceClaim,
                       chosen: list[_Chosen]) -> NodeSelector | None:
        fields: list[Requirement] = []
        expressions: list[Requirement] = []
        for c in chosen:
            s, device = c.candidate.slice, c.candidate.device
            if s.per_device_node_selection:
                node_name, selector = device.node_name, device.node_selector
            else:
                node_name, selector = s.node_name, s.node_selector
            if node_name is not None or device.binds_to_node:
                # One device bound to this node binds the whole claim to it.
                return NodeSelector((Term(match_fields=(
                    Requirement("metadata.name", "In", (self.node.name,)),)),))
            if selector is None or not selector.terms:
                continue
            if len(selector.terms) > 1:
                raise AllocationError(
                    f"create NodeSelector for claim {claim.name}: unsupported "
                    f"ResourceSlice.NodeSelector with {len(selector.terms)} terms")
            _add_new(selector.terms[0].match_fields, fields)
            _add_new(selector.terms[0].match_expressions, expressions)
        if fields or expressions:
            return NodeSelector((Term(tuple(expressions), tuple(fields)),))
        return None


# Frames the search may stack per claim: a few per request and two per device, with at
# most 32 of each (the API's limits on requests and on a claim's results).
_FRAMES_PER_CLAIM = 4 * MAX_RESULTS_PER_CLAIM + 8


@contextmanager
def _recursion_depth_for(claims: Sequence[ResourceClaim]) -> Iterator[None]:
    """The search recurses once per device placed, as upstream's does; a pod with
    many claims must not end in RecursionError. Python 3.11+ keeps Python-to-Python
    calls off the C stack, so a higher limit is safe for the search itself; but the
    limit is the whole process's (C code such as the JSON decoder guards its own
    recursion with it, and tells deeply nested input apart by it), so it is raised
    only for the search of such a pod and put back after."""
    search = _FRAMES_PER_CLAIM * (len(claims) + 1)
    limit = sys.getrecursionlimit()
    if search + 300 < limit:
        yield  # one or a few claims: plenty of room (the common case, checked cheaply)
        return
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    if limit >= depth + search:
        yield
        return
    sys.setrecursionlimit(depth + search)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _add_new(new: Sequence[Requirement], into: list[Requirement]) -> None:
    for requirement in new:
        values = set(requirement.values)
        if not any(r.key == requirement.key and r.operator == requirement.operator
                   and set(r.values) == values for r in into):
            into.append(requirement)


def _untolerated_taint(device: Device, request: Request) -> bool:
    # Only the effects known to prevent allocation count; others (None) do not.
    return any(
        taint.effect in (EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE)
        and not any(t.tolerates(taint) for t in request.tolerations)
        for taint in device.taints)
