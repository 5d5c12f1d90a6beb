"""DynamicResources (kube-scheduler v1.36.3, `pkg/scheduler/framework/plugins/
dynamicresources`): a pod's ResourceClaims must be allocatable where it goes.

Upstream's plugin sits at PreEnqueue, PreFilter, Filter, PostFilter, Score (weight 2 in
the default profile), Reserve/Unreserve and PreBind; in the default profile it comes
right before DefaultPreemption, so that PostFilter frees an idle claim before evicting
a pod. policyd has it at the same points:

- PreEnqueue: a pod whose claim lookup fails (below) is held out of the queue, as
  Unschedulable, silently, until a claim or pod event moves it.
- PreFilter: a pod without claims gets Skip (Filter then does not run) after
  recording that PreFilter ran. Otherwise its claims are looked up (`claims.py`: a
  missing one, one being deleted, a template's claim not created yet or not the
  pod's, each refused UnschedulableAndUnresolvable with upstream's text), an
  allocated claim's node selector is kept for Filter, a claim whose allocation is in
  flight for another pod makes this one wait, and every request's DeviceClass must
  exist. When some claim is unallocated, one `policyd.dra.Allocator` is built for the
  cycle over every slice and class, with the devices of every allocated claim and
  every allocation in flight taken (`allocation.py`).
- Filter: an allocated claim whose node selector does not match the node, or whose
  binding conditions failed or timed out (`binding.py`), makes it
  `resourceclaim not available on the node`; the allocator must then allocate every
  unallocated claim there (`cannot allocate all claims`; a claim or class it cannot
  use is an Error, a timeout after `filterTimeout` too). The node's allocation is
  kept for Score and Reserve, and across pods of the same claim shape while nothing
  it depends on changes (`node_memo.py`: upstream's answer, without the search);
  `filter_mask` reads those kept answers as NodeTable rows.
- Score: `scoring.py` (which `firstAvailable` alternatives were chosen), normalized
  to 100 for the best node; 0 everywhere, without a pass over the nodes, for a pod
  with no `firstAvailable` request.
- Reserve: each unallocated claim's allocation on the chosen node is signalled as in
  flight in the claim tracker, so the next pod's cycle does not take its devices;
  Unreserve withdraws it and restores the tracker's claim.
- PostFilter: `no new claims to deallocate` for a pod without claims (every
  unschedulable pod's message has it); otherwise an allocated claim that was not
  available on some node and is reserved for nobody (or only this pod) is chosen for
  deallocation: upstream writes that at once and answers `deallocation of
  ResourceClaim completed`. policyd's engine makes no API call: the decision is kept
  in the cycle state (`claim_to_deallocate`); the daemon's scheduling loop writes it
  after the cycle, outside the state lock.
- PreBind (`prebind.py`): each claim not yet reserved for the pod gets its
  allocation (from Reserve) and the pod in reservedFor written, then the wait for
  binding conditions; this needs a binding handle that writes a claim's status
  (`prebind.ClaimStatusWriter`), else PreBind fails with a clear error and
  Unreserve withdraws the in-flight allocation; after it, outside the state lock and
  before the pod is requeued, `undo_pre_bind` patches the pod out of its claims'
  reservedFor (upstream's Unreserve makes that patch itself).

When an earlier PreFilter rejected the pod as unresolvable, this PreFilter never ran,
and upstream's PostFilter fails reading its cycle state: an Error whose text is
`not found`, which ends the PostFilter run (DefaultPreemption is not asked). policyd
says the same.

Extended resources backed by device classes (DRAExtendedResource, on by default) are
allocated through one claim per pod, in memory until PreBind creates it: `extended.py`
at each of these points.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from policyd.dra.errors import AllocationAborted, AllocationError, NodeAllocationError
from policyd.dra.features import AllocatorFeatures
from policyd.dra.nodes import Node, NodeSelectorError
from policyd.dra.results import AllocationResult
from policyd.dra.selectors import KUBERNETES_CEL, SelectorCache
from policyd.errors import InvalidObjectError
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework import CycleState, Status
from policyd.framework.events import ClusterEventWithHint
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import (
    BindingHandle,
    PostFilterResult,
    Verdict,
    default_normalize_score,
)
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import BoolArray, IntArray, NodeTable
from policyd.plugins.dynamicresources import NAME, hints
from policyd.plugins.dynamicresources.allocation import (
    ClaimInfo,
    ClusterView,
    DraState,
    allocation_node_selector,
    build_allocator,
    matches,
)
from policyd.plugins.dynamicresources.args import DynamicResourcesArgs, parse_args
from policyd.plugins.dynamicresources.binding import binding_state, binding_timed_out
from policyd.plugins.dynamicresources.claims import ClaimLookupError, PodClaim, pod_claims
from policyd.plugins.dynamicresources.explain import claim_verdicts
from policyd.plugins.dynamicresources.extended import (
    DELETION_COMPLETED,
    ExtendedClaim,
    ExtendedClaimWriter,
    bind_extended,
    delete_claim,
    extended_verdict,
    node_claim,
    pre_filter_extended,
    reserve_extended,
    unreserve_extended,
)
from policyd.plugins.dynamicresources.node_memo import NodeAllocationMemo, claims_key
from policyd.plugins.dynamicresources.prebind import (
    CLAIM_FINALIZER,
    bind_claims,
    unreserve_claims,
)
from policyd.plugins.dynamicresources.scoring import pod_score
from policyd.plugins.dynamicresources.store import DraStore, Obj, claim_of, dra_of
from policyd.plugins.helper.extended_resources import GATE as _EXTENDED_RESOURCE_GATE

log = logging.getLogger(__name__)

DEFAULT_WEIGHT: int | None = 2
MAX_NODE_SCORE = 100

# PostFilter's answers (upstream's wording).
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
DEALLOCATION_COMPLETED = "deallocation of ResourceClaim completed"
STILL_NOT_SCHEDULABLE = "still not schedulable"
# Upstream's PostFilter (and Filter, Reserve) when its PreFilter did not run: the
# cycle state's ErrNotFound.
STATE_NOT_FOUND = "not found"
# Filter's reasons.
NOT_AVAILABLE_ON_NODE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
ALLOCATION_NOT_FOUND = "claim allocation not found for node"

STATE_KEY = f"{NAME}/claims"
# The pod's claim for its DRA-backed extended resources (extended.ExtendedClaim).
EXTENDED_KEY = f"{NAME}/extended"

_NOTHING_TO_DEALLOCATE = Status.unschedulable(NO_CLAIMS_TO_DEALLOCATE)
_FILTER_TIMEOUT_GATE = "DRASchedulerFilterTimeout"
_PRIORITIZED_LIST_GATE = "DRAPrioritizedList"


class DynamicResources:
    name = NAME
    # No PreFilterExtensions upstream: its PreFilter state reads no other pod
    # (preemption's dry runs rely on that; framework/interfaces.py).
    pre_filter_reads_other_pods = False

    def __init__(self, args: DynamicResourcesArgs, *, features: FeatureGates = DEFAULTS,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.args = args
        self.allocator_features = AllocatorFeatures.from_gates(features)
        self.score_enabled = features.enabled(_PRIORITIZED_LIST_GATE)
        self.extended_enabled = features.enabled(_EXTENDED_RESOURCE_GATE)
        self.filter_timeout = (args.filter_timeout_seconds
                               if features.enabled(_FILTER_TIMEOUT_GATE) else 0.0)
        self._clock = clock
        self._wall = wall  # allocationTimestamp is wall time
        # Compiled CEL selectors, kept across cycles as upstream's cel.Cache.
        self._selectors = SelectorCache(KUBERNETES_CEL)
        # Each node's allocation kept across pods while nothing it read changed.
        self._node_memo = NodeAllocationMemo()
        # Classes and slices decoded once per version of them.
        self._view = ClusterView()

    # PreEnqueue
    def pre_enqueue(self, pod: Pod, cluster: ClusterState) -> Status | None:
        """Hold the pod out of the queue while a claim is missing, being deleted, or a
        template's claim is not created yet or not the pod's (upstream's texts, as
        Unschedulable): it is not tried, and says nothing, until a claim or pod event
        this plugin registered moves it. PreFilter asks the same again, for the time
        between the two."""
        if not pod.resource_claims:
            return None
        try:
            pod_claims(dra_of(cluster), pod)
        except ClaimLookupError as err:
            return Status.unschedulable(str(err))
        return None

    # PreFilter
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        data = DraState()
        state.write(STATE_KEY, data)
        store = dra_of(state.cluster)
        try:
            found = pod_claims(store, pod) if pod.resource_claims else []
        except ClaimLookupError as err:
            return None, Status.unresolvable(str(err))
        try:
            ext = (pre_filter_extended(store, pod, store.classes if store else None)
                   if self.extended_enabled else None)
        except InvalidObjectError as err:
            return None, Status.error(str(err))
        if not found and ext is None:
            return None, Status.skip()
        assert store is not None  # found claims came from it
        if ext is not None:
            state.write(EXTENDED_KEY, ext)
            if not ext.allocated and store.claims.pending_allocation(ext.initial_uid):
                return None, Status.unresolvable(
                    f"resource claim {ext.key} is in the process of being allocated")
        try:
            infos = [ClaimInfo(c, claim_of(store, c.obj)) for c in found]
            problem = self._check_claims(store, infos)
        except InvalidObjectError as err:
            return None, Status.error(str(err))
        if problem is not None:
            return None, problem
        if any(not info.allocated for info in infos) or (ext is not None
                                                          and not ext.allocated):
            try:
                data.allocator = build_allocator(store, self.allocator_features,
                                                 self._selectors, self._view)
            except InvalidObjectError as err:
                return None, Status.error(str(err))
            if ext is None:
                # An extended-resource claim differs per node (what the node's device
                # plugin lacks): no answer is kept for a pod with one.
                data.answers = self._node_memo.answers_for(store, claims_key(
                    [info.claim.obj for info in infos if not info.allocated]))
        data.claims = infos
        return None, None

    def _check_claims(self, store: DraStore, infos: list[ClaimInfo]) -> Status | None:
        for info in infos:
            claim = info.decoded
            if claim.allocated is not None:
                # v1.36.3 lets any number of pods share a claim (CanBeReserved), so an
                # allocated claim is never "in use" for this pod.
                try:
                    info.available_on = allocation_node_selector(info.claim, claim)
                except NodeSelectorError as err:
                    return Status.error(str(err))
                continue
            if store.claims.pending_allocation(claim.uid) is not None:
                return Status.unresolvable(
                    f"resource claim {claim.key} is in the process of being allocated")
            for request in claim.requests:
                if request.exactly is not None:
                    problem = _check_class(store, request.exactly.device_class_name,
                                           request.name)
                elif request.first_available:
                    if not self.allocator_features.prioritized_list:
                        return Status.unresolvable(
                            f"resource claim {claim.key}, request {request.name}: has "
                            "subrequests, but the DRAPrioritizedList feature is disabled")
                    problem = None
                    for sub in request.first_available:
                        problem = _check_class(store, sub.device_class_name,
                                               f"{request.name}/{sub.name}")
                        if problem is not None:
                            break
                else:
                    return Status.unresolvable(
                        f"resource claim {claim.key}, request {request.name}: unknown "
                        "request type")
                if problem is not None:
                    return problem
        return None

    # Filter
    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        data: DraState | None = state.get(STATE_KEY)
        if data is None:
            # PreFilter did not run (disabled in a profile): as upstream, an Error for
            # a pod with claims; nothing to check for one without.
            return Status.error(STATE_NOT_FOUND) if pod.resource_claims else None
        ext: ExtendedClaim | None = state.get(EXTENDED_KEY)
        if not data.claims and ext is None:
            return None
        for_node = None
        if ext is not None:
            store = dra_of(state.cluster)
            assert store is not None  # PreFilter found the extended resources' classes
            for_node, problem = node_claim(ext, pod, node, store.classes)
            if problem is not None:
                return problem
            if for_node is None and not data.claims:
                return None  # the node's device plugin provides them all
        target = Node(node.node.name, node.node.labels)
        unavailable = [i for i, info in enumerate(data.claims)
                       if (info.available_on is not None
                           and not matches(info.available_on, target))
                       or self._binding_failed(info)]
        results: list[AllocationResult] | None = None
        if data.allocator is not None:
            to_allocate = [data.claims[i].decoded for i in data.to_allocate()]
            if for_node is not None:
                to_allocate.append(for_node.decoded)  # last, as upstream's claim store
            try:
                if data.answers is not None:
                    results = data.answers.allocate(data.allocator, target, to_allocate,
                                                    cancelled=self._deadline())
                else:
                    results = data.allocator.allocate(target, to_allocate,
                                                      cancelled=self._deadline())
            except AllocationAborted:
                # Possibly transient: an Error retries the pod with backoff.
                return Status.error(f"node {target.name}: timed out trying to allocate "
                                    "devices")
            except NodeAllocationError as err:
                return Status.unresolvable(str(err))
            except AllocationError as err:
                # Something wrong with a claim or class: abort scheduling the pod.
                return Status.error(str(err))
            if results is None or len(results) != len(to_allocate):
                return Status.unresolvable(CANNOT_ALLOCATE)
        if unavailable:
            data.unavailable.update(unavailable)
            return Status.unresolvable(NOT_AVAILABLE_ON_NODE)
        if results is not None:
            if for_node is not None and ext is not None:
                for_node.allocation = results.pop()
                ext.node_claims[target.name] = for_node
            data.node_allocations[target.name] = results
        return None

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
                    ) -> BoolArray | None:
        """`filter` over many nodes for a pod whose claims are all unallocated: the
        memo's answers as table rows (node_memo.ShapeAnswers.mask), the per-node
        `filter` only for rows whose answer is not known valid. None (per-node
        `filter` everywhere) for any other pod, and when a node's allocation ends in
        an error, so that the error is reported as `filter` reports it."""
        data: DraState | None = state.get(STATE_KEY)
        if (data is None or not data.claims or data.allocator is None
                or data.answers is None or any(info.allocated for info in data.claims)):
            return None
        infos = table.infos

        def judge(row: int) -> bool:
            status = self.filter(state, pod, infos[row])  # allocates, keeps the answer
            return status is None or status.is_rejected

        passed = data.answers.mask(table, idx, len(data.claims), judge)
        if passed is not None:
            data.masked = True
        return passed

    def _binding_failed(self, info: ClaimInfo) -> bool:
        """An allocated claim whose binding failed or timed out: PostFilter may free
        it so that other devices can be tried."""
        if not info.allocated or not self.allocator_features.device_binding_and_status:
            return False
        ready, failure = binding_state(info.claim.obj)
        return failure is not None or (not ready and binding_timed_out(
            info.claim.obj, self.args.binding_timeout_seconds, self._wall()))

    def _deadline(self) -> Callable[[], str | None] | None:
        if self.filter_timeout <= 0:
            return None
        clock, end = self._clock, self._clock() + self.filter_timeout
        return lambda: "context deadline exceeded" if clock() >= end else None

    # Score
    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        data: DraState | None = state.get(STATE_KEY)
        if not self.score_enabled or data is None or not data.claims:
            return 0
        allocations = data.allocations_on(node.node.name)
        if allocations is None:
            return 0
        per_claim: list[tuple[Any, list[str]]] = []
        fresh = iter(allocations)
        for info in data.claims:
            if info.decoded.allocated is not None:
                requests = [d.request for d in info.decoded.allocated]
            else:
                requests = [d.request for d in next(fresh).devices]
            per_claim.append((info.decoded, requests))
        return pod_score(per_claim)

    def normalize_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo],
                        scores: list[int]) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    def score_vector(self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
                     ) -> IntArray | None:
        data: DraState | None = state.get(STATE_KEY)
        if (self.score_enabled and data is not None
                and (data.node_allocations or data.masked)
                and any(request.first_available for info in data.claims
                        for request in info.decoded.requests)):
            # Per node: only `firstAvailable` requests score (scoring.claim_score),
            # by which sub-request each node's allocation used.
            return None
        # Every node scores 0, and normalizing zeros leaves zeros.
        scores: IntArray = np.zeros(idx.size, np.int64)
        return scores

    # PostFilter
    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        data: DraState | None = state.get(STATE_KEY)
        if data is None:
            return None, Status.error(STATE_NOT_FOUND)
        ext: ExtendedClaim | None = state.get(EXTENDED_KEY)
        if not data.claims and ext is None:
            return None, _NOTHING_TO_DEALLOCATE
        # Upstream picks at random among the unavailable claims (map order); the
        # first in the pod's order is as good and repeatable.
        for index in sorted(data.unavailable):
            info = data.claims[index]
            reserved = info.decoded.reserved_for
            if not reserved or (len(reserved) == 1 and reserved[0].uid == pod.uid):
                data.deallocate = info.claim
                return None, Status.unschedulable(DEALLOCATION_COMPLETED)
        if ext is not None and not ext.in_memory:
            # From an earlier attempt: deleted, so the next one starts anew.
            ext.delete = True
            return None, Status.unschedulable(DELETION_COMPLETED)
        return None, Status.unschedulable(STILL_NOT_SCHEDULABLE)

    def post_filter_notes(self, state: CycleState) -> list[str]:
        """For explain: the claim PostFilter chose to free, if any."""
        stale = extended_claim_to_delete(state)
        if stale is not None:
            meta = stale.get("metadata") or {}
            return [f"would delete ResourceClaim {meta.get('namespace')}/{meta.get('name')} "
                    "(the pod's claim for its extended resources from an earlier "
                    "attempt), as `policyd run` does (explain writes nothing)"]
        chosen = claim_to_deallocate(state)
        if chosen is None:
            return []
        return [f"would deallocate ResourceClaim {chosen.key} (allocated, not available "
                "on any node tried, and reserved for no other pod), as `policyd run` "
                "does (explain writes nothing)"]

    # Reserve / Unreserve
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data: DraState | None = state.get(STATE_KEY)
        if data is None:
            return Status.error(STATE_NOT_FOUND) if pod.resource_claims else None
        ext: ExtendedClaim | None = state.get(EXTENDED_KEY)
        if ext is not None:
            reserve_extended(ext, node_name, dra_of(state.cluster), allocated_claim)
        to_allocate = data.to_allocate()
        if not to_allocate or data.allocator is None:
            return None
        allocations = data.allocations_on(node_name)
        if not allocations:
            return Status.error(ALLOCATION_NOT_FOUND)
        if len(allocations) != len(to_allocate):
            return Status.error(
                f"internal error, have {len(allocations)} allocations, {len(to_allocate)} "
                f"claims to allocate, want {len(to_allocate)} claims")
        store = dra_of(state.cluster)
        for index, allocation in zip(to_allocate, allocations, strict=True):
            info = data.claims[index]
            info.allocation = allocation
            if store is not None:
                store.claims.signal_pending_allocation(
                    info.decoded.uid, allocated_claim(info.claim.obj, allocation.to_api()))
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        data: DraState | None = state.get(STATE_KEY)
        store = dra_of(state.cluster)
        if data is None or store is None:
            return
        for info in data.claims:
            # The allocation stays in flight while another pod sharing it still needs
            # it; once withdrawn, the tracker shows the API server's claim again.
            if store.claims.remove_pending_allocation(info.decoded.uid):
                store.claims.restore(info.claim.key)
            info.allocation = None
        ext: ExtendedClaim | None = state.get(EXTENDED_KEY)
        if ext is not None:
            unreserve_extended(ext, store)

    def undo_pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                      handle: BindingHandle) -> None:
        """Unreserve's API half: the pod out of its claims' reservedFor (`prebind.py`)."""
        data: DraState | None = state.get(STATE_KEY)
        if data is not None and data.claims:
            unreserve_claims(handle, pod, data.claims)
        ext: ExtendedClaim | None = state.get(EXTENDED_KEY)
        if ext is not None and not ext.in_memory and isinstance(handle, ExtendedClaimWriter):
            # PreBind created it: delete it, or it would outlive the attempt.
            problem = delete_claim(handle, ext.obj, handle.wait)
            if problem is not None:
                log.error("deleting ResourceClaim %s of %s failed: %s", ext.key, pod.key,
                          problem, extra={"pod": pod.key, "claim": ext.key})

    # PreBind
    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str
                            ) -> Status | None:
        data: DraState | None = state.get(STATE_KEY)
        if data is None:
            return Status.error(STATE_NOT_FOUND)
        if not data.claims and state.get(EXTENDED_KEY) is None:
            return Status.skip()
        return None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                 handle: BindingHandle) -> Status | None:
        data: DraState | None = state.get(STATE_KEY)
        ext: ExtendedClaim | None = state.get(EXTENDED_KEY)
        if data is None or (not data.claims and ext is None):
            return None
        conditions = self.allocator_features.device_binding_and_status
        if (ext is None or ext.reserved is None) and all(
                info.allocated and any(r.uid == pod.uid for r in info.decoded.reserved_for)
                for info in data.claims):
            return None  # every claim is reserved for the pod already: nothing to write
        then = None
        if ext is not None:
            def then() -> tuple[str | None, ClaimInfo | None]:
                assert ext is not None
                return bind_extended(handle, pod, ext, binding_conditions=conditions)
        problem = bind_claims(handle, pod, data.claims, binding_conditions=conditions,
                              timeout_seconds=self.args.binding_timeout_seconds, then=then)
        return Status.error(problem) if problem is not None else None

    def verdicts(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[Verdict, ...]:
        """For explain: each claim's devices on the node, or why it has none there."""
        data: DraState | None = state.get(STATE_KEY)
        if data is None:
            return ()
        verdicts = claim_verdicts(data, Node(node.node.name, node.node.labels),
                                  self._binding_failed) if data.claims else ()
        ext: ExtendedClaim | None = state.get(EXTENDED_KEY)
        store = dra_of(state.cluster)
        if ext is not None and store is not None:
            verdicts = (*verdicts, extended_verdict(ext, pod, node, store.classes))
        return verdicts

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return hints.events()


def _check_class(store: DraStore, class_name: str, request: str) -> Status | None:
    """validateDeviceClass: the class must exist (Unresolvable until a DeviceClass
    event); an empty name is an unsupported request type."""
    if not class_name:
        return Status.error(f"request {request}: unsupported request type")
    if store.classes.get(class_name) is None:
        return Status.unresolvable(
            f"request {request}: device class {class_name} does not exist")
    return None


def allocated_claim(obj: Mapping[str, Any], allocation: dict[str, Any]) -> dict[str, Any]:
    """The claim as Reserve records it in flight: the finalizer set and the
    allocation in its status (what PreBind would write)."""
    claim = copy.deepcopy(dict(obj))
    meta = claim.setdefault("metadata", {})
    finalizers = list(meta.get("finalizers") or [])
    if CLAIM_FINALIZER not in finalizers:
        finalizers.append(CLAIM_FINALIZER)
    meta["finalizers"] = finalizers
    status = dict(claim.get("status") or {})
    status["allocation"] = allocation
    claim["status"] = status
    return claim


def extended_claim_to_delete(state: CycleState) -> Obj | None:
    """The pod's extended-resource claim from an earlier attempt that PostFilter
    decided to delete in this cycle, if any (the caller deletes it, `delete_claim`)."""
    ext: ExtendedClaim | None = state.get(EXTENDED_KEY)
    return ext.obj if ext is not None and ext.delete else None


def claim_to_deallocate(state: CycleState) -> PodClaim | None:
    """The claim PostFilter decided to deallocate in this cycle, if any: the caller
    clears its status.allocation, reservedFor and devices (upstream's UpdateStatus)."""
    data: DraState | None = state.get(STATE_KEY)
    return data.deallocate if data is not None else None


def new(args: Mapping[str, Any] | None = None, *, features: FeatureGates = DEFAULTS
        ) -> DynamicResources:
    """Build DynamicResources from DynamicResourcesArgs; raises PluginError."""
    return DynamicResources(parse_args(args), features=features)
