"""One pod's claims prepared for allocation (the data of upstream's PreFilter):
which are allocated already (and where they can be used), which the allocator must
allocate, and the allocator itself, built over every slice and class with the
devices that allocated claims and allocations in flight take.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policyd.dra.allocator import Allocator, SliceLayout
from policyd.dra.decoding import Fields
from policyd.dra.features import AllocatorFeatures
from policyd.dra.nodes import Node, NodeSelector, decode_node_selector, node_matches
from policyd.dra.objects import DeviceClass, ResourceClaim, decode_resource_claim
from policyd.dra.results import AllocationResult
from policyd.dra.selectors import SelectorCache
from policyd.dra.state import AllocatedState, gather_allocated_state
from policyd.model.quantity import nano_value
from policyd.plugins.dynamicresources.claims import PodClaim
from policyd.plugins.dynamicresources.node_memo import ShapeAnswers
from policyd.plugins.dynamicresources.store import DraStore, claim_of, class_of, slice_of


@dataclass(slots=True)
class ClaimInfo:
    """One claim of the pod (upstream's informationForClaim, with the claim)."""

    claim: PodClaim
    decoded: ResourceClaim
    # The allocation's node selector when the claim is allocated and has one.
    available_on: NodeSelector | None = None
    # Set by Reserve: the allocation decided for this claim on the chosen node.
    allocation: AllocationResult | None = None

    @property
    def allocated(self) -> bool:
        return self.decoded.allocated is not None


@dataclass(slots=True)
class DraState:
    """What PreFilter found for the pod and Filter decided per node (stateData)."""

    claims: list[ClaimInfo] = field(default_factory=list)
    allocator: Allocator | None = None
    # Set with `allocator`: the nodes' answers kept for claims of this pod's shape.
    answers: ShapeAnswers | None = None
    # Indices of allocated claims unusable on some node (PostFilter may free one).
    unavailable: set[int] = field(default_factory=set)
    # Per node: one result per unallocated claim, in claim order.
    node_allocations: dict[str, list[AllocationResult]] = field(default_factory=dict)
    # Set by PostFilter: the claim whose allocation it decided to drop.
    deallocate: PodClaim | None = None
    # Set when Filter ran as a mask: the nodes it let through have their results
    # in `answers`, not in `node_allocations`.
    masked: bool = False

    def allocations_on(self, node: str) -> list[AllocationResult] | None:
        """The results Filter decided on the node (None if it did not let it through)."""
        found = self.node_allocations.get(node)
        if found is None and self.masked and self.answers is not None:
            found = self.answers.results_of(node)
        return found

    def to_allocate(self) -> list[int]:
        return [i for i, c in enumerate(self.claims) if not c.allocated]


def allocation_node_selector(info: PodClaim, claim: ResourceClaim) -> NodeSelector | None:
    """status.allocation.nodeSelector, checked as nodeaffinity builds it; raises
    NodeSelectorError (or InvalidObjectError for a malformed one)."""
    raw = (claim.allocation or {}).get("nodeSelector")
    selector = decode_node_selector(Fields("ResourceClaim", info.key), raw,
                                    "status.allocation.nodeSelector")
    if selector is not None:
        matches(selector, Node(""))  # builds it: an invalid one fails here, once
    return selector


def matches(selector: NodeSelector, node: Node) -> bool:
    return node_matches(node, "", False, selector)


def allocated_state(store: DraStore, features: AllocatorFeatures) -> AllocatedState:
    """Devices taken by every allocated claim the scheduler knows (assumed versions
    included) and by every allocation in flight (GatherAllocatedState).

    Read from the claim tracker's device index, kept up to date claim by claim as
    upstream's allocated-devices tracker is, rather than by decoding every claim in
    every cycle; the exception is shares of devices with consumable capacity, whose
    consumed capacity only the decoded claims give. (A claim whose allocation
    cannot be read takes the devices the index could read of it, where decoding it
    would have failed the cycle; the API server never serves such a claim.)"""
    tracker = store.claims
    if not tracker.has_shares():
        # Live, and fixed while the cycle runs: every change is made under the lock
        # the cycle holds.
        return AllocatedState(tracker.taken_devices())
    if not features.consumable_capacity:  # a share then takes its whole device
        return AllocatedState(frozenset(tracker.allocated_device_ids(
            consumable_capacity=False)))
    claims = [claim_of(store, obj) for obj in tracker.values()]
    claims.extend(decode_resource_claim(obj, nano_value)
                  for obj in tracker.pending_allocations())
    return gather_allocated_state(
        (c for c in claims if c.allocated is not None), consumable_capacity=True)


class ClusterView:
    """Every DeviceClass and ResourceSlice decoded, the slices laid out for the
    allocator: built once per version of them (the plugin keeps one), not per pod.
    Raises InvalidObjectError for a malformed object, and then keeps nothing."""

    __slots__ = ("_classes", "_generations", "_layout", "_store")

    def __init__(self) -> None:
        self._store: DraStore | None = None
        self._generations = (-1, -1)
        self._classes: dict[str, DeviceClass] = {}
        self._layout = SliceLayout.of(())

    def get(self, store: DraStore) -> tuple[dict[str, DeviceClass], SliceLayout]:
        generations = (store.classes.generation, store.slices.generation)
        if store is not self._store or generations != self._generations:
            classes = {}
            for obj in store.classes.values():
                decoded = class_of(store, obj)
                classes[decoded.name] = decoded
            layout = SliceLayout.of([slice_of(store, obj) for obj in store.slices.values()])
            self._classes, self._layout = classes, layout
            self._store, self._generations = store, generations
        return self._classes, self._layout


def build_allocator(store: DraStore, features: AllocatorFeatures,
                    selectors: SelectorCache, view: ClusterView | None = None) -> Allocator:
    """The cycle's allocator; the devices taken are gathered only if a search runs."""
    classes, layout = (view or ClusterView()).get(store)
    return Allocator(features=features, allocated=lambda: allocated_state(store, features),
                     classes=classes, slices=layout, selectors=selectors)
