"""What DynamicResources reads of the cluster's DRA objects, and their decoded forms.

The objects live in `ClusterState.dra` (policyd.model.dra_objects: DeviceClasses,
ResourceSlices and ResourceClaims as raw JSON, the claims in kube-scheduler's claim
tracker with its in-flight allocations). `DraStore` names the part of it this plugin
uses (mypy checks that the model's store is one), so the plugin depends on those
calls only; `dra_of` finds it on a cycle's cluster (none for a bare CycleState,
which then has no DRA objects at all).

Objects are decoded once per stored version through the store's memo
(`DraStore.decoded`), with the project's quantity parser.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any, Protocol, TypeVar

from policyd.dra.objects import (
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
    decode_device_class,
    decode_resource_claim,
    decode_resource_slice,
)
from policyd.model.cluster import ClusterState
from policyd.model.quantity import nano_value

T = TypeVar("T")
Obj = dict[str, Any]


class ClaimTracker(Protocol):
    """ResourceClaims by `namespace/name` (assumed versions first) and the
    allocations Reserve decided but PreBind has not written yet."""

    def get(self, key: str) -> Obj | None: ...
    def values(self) -> Iterator[Obj]: ...
    def restore(self, key: str) -> None: ...
    def assume(self, obj: Obj) -> None: ...
    def signal_pending_allocation(self, uid: str, allocated: Obj) -> None: ...
    def pending_allocation(self, uid: str) -> Obj | None: ...
    def remove_pending_allocation(self, uid: str, *, force: bool = False) -> bool: ...
    def pending_allocations(self) -> Iterator[Obj]: ...
    def allocated_device_ids(self, *, consumable_capacity: bool = True
                             ) -> set[tuple[str, str, str]]: ...
    def allocated_shares(self) -> set[tuple[str, str, str, str]]: ...
    def has_shares(self) -> bool: ...
    def taken_devices(self) -> AbstractSet[tuple[str, str, str]]: ...
    def pool_changes_since(self, seen: int) -> list[tuple[str, str]] | None: ...
    @property
    def pool_changes_total(self) -> int: ...


class ByName(Protocol):
    # Changes with every change of an object held.
    generation: int

    def get(self, name: str) -> Obj | None: ...
    def values(self) -> Iterator[Obj]: ...


class ClassIndex(ByName, Protocol):
    """DeviceClasses by name, and which one serves each extended resource name."""

    def for_extended_resource(self, resource_name: str) -> Obj | None: ...


class DraStore(Protocol):
    @property
    def claims(self) -> ClaimTracker: ...
    @property
    def classes(self) -> ClassIndex: ...
    @property
    def slices(self) -> ByName: ...

    def decoded(self, obj: Obj, what: str, decode: Callable[[Obj], T]) -> T: ...


def dra_of(cluster: ClusterState | None) -> DraStore | None:
    """The cluster's DRA objects, None when the cycle has no cluster."""
    return cluster.dra if cluster is not None else None


def claim_of(store: DraStore, obj: Obj) -> ResourceClaim:
    """Raises InvalidObjectError naming the claim and field when malformed."""
    return store.decoded(obj, "dra.claim", _decode_claim)


def class_of(store: DraStore, obj: Obj) -> DeviceClass:
    return store.decoded(obj, "dra.class", decode_device_class)


def slice_of(store: DraStore, obj: Obj) -> ResourceSlice:
    return store.decoded(obj, "dra.slice", _decode_slice)


def _decode_claim(obj: Obj) -> ResourceClaim:
    return decode_resource_claim(obj, nano_value)


def _decode_slice(obj: Obj) -> ResourceSlice:
    return decode_resource_slice(obj, nano_value)
