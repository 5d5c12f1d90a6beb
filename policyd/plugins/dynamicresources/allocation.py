"""One pod's claims prepared for allocation (the data of upstream's PreFilter):
which are allocated already (and where they can be used), which the allocator must
allocate, and the allocator itself, built over every slice and class with the
devices that allocated claims and allocations in flight take.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policyd.dra.allocator import Allocator
from policyd.dra.decoding import Fields
from policyd.dra.features import AllocatorFeatures
from policyd.dra.nodes import Node, NodeSelector, decode_node_selector, node_matches
from policyd.dra.objects import ResourceClaim, decode_resource_claim
from policyd.dra.results import AllocationResult
from policyd.dra.selectors import SelectorCache
from policyd.dra.state import AllocatedState, gather_allocated_state
from policyd.model.quantity import nano_value
from policyd.plugins.dynamicresources.claims import PodClaim
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
    # Indices of allocated claims unusable on some node (PostFilter may free one).
    unavailable: set[int] = field(default_factory=set)
    # Per node: one result per unallocated claim, in claim order.
    node_allocations: dict[str, list[AllocationResult]] = field(default_factory=dict)
    # Set by PostFilter: the claim whose allocation it decided to drop.
    deallocate: PodClaim | None = None

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
    included) and by every allocation in flight (GatherAllocatedState)."""
    claims = [claim_of(store, obj) for obj in store.claims.values()]
    claims.extend(decode_resource_claim(obj, nano_value)
                  for obj in store.claims.pending_allocations())
    return gather_allocated_state(
        (c for c in claims if c.allocated is not None),
        consumable_capacity=features.consumable_capacity)


def build_allocator(store: DraStore, features: AllocatorFeatures,
                    selectors: SelectorCache) -> Allocator:
    classes = {}
    for obj in store.classes.values():
        decoded = class_of(store, obj)
        classes[decoded.name] = decoded
    slices = [slice_of(store, obj) for obj in store.slices.values()]
    return Allocator(features=features, allocated=allocated_state(store, features),
                     classes=classes, slices=slices, selectors=selectors)

