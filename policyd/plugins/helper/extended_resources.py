"""Which extended resources DRA serves (DRAExtendedResource, beta and on in v1.36.3),
shared by NodeResourcesFit, NodeResourcesBalancedAllocation and DynamicResources.

A DeviceClass serves the extended resource its `spec.extendedResourceName` names and
its implicit `deviceclass.resource.kubernetes.io/<class>`; the cluster's
`DeviceClasses` (policyd.model.dra_objects) resolve a name to the class, as upstream's
DeviceClassResolver. On a node whose allocatable does not provide such a resource (no
device plugin advertises it), NodeResourcesFit does not check it and DynamicResources
allocates it (`delegated_to_dra`, upstream's shouldDelegateResourceToDRA).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from policyd.dra.nodes import Node as DraNode
from policyd.dra.nodes import NodeSelectorError, node_matches
from policyd.dra.objects import (
    Device,
    DeviceClass,
    ResourceSlice,
    decode_device_class,
    decode_resource_slice,
)
from policyd.dra.selectors import SelectorCache
from policyd.dra.state import DeviceID
from policyd.errors import InvalidObjectError
from policyd.model import k8snames
from policyd.model.dra_objects import DEVICE_CLASS_RESOURCE_PREFIX, DraObjects
from policyd.model.quantity import nano_value
from policyd.model.records import Node

GATE = "DRAExtendedResource"

_REQUESTS_PREFIX = "requests."
_NATIVE_DOMAIN = "kubernetes.io/"


class ClassResolver(Protocol):
    """upstream's DeviceClassResolver: the class serving an extended resource name."""

    def for_extended_resource(self, resource_name: str) -> dict[str, Any] | None: ...


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a domain-prefixed name outside kubernetes.io that
    would still be a valid quota name once `requests.` is put in front of it."""
    if "/" not in name or _NATIVE_DOMAIN in name or name.startswith(_REQUESTS_PREFIX):
        return False
    return not k8snames.qualified_name(_REQUESTS_PREFIX + name)


def is_dra_extended_resource_name(name: str) -> bool:
    """schedutil.IsDRAExtendedResourceName: an extended resource name, or a class's
    implicit `deviceclass.resource.kubernetes.io/<class>`."""
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_RESOURCE_PREFIX)


def delegated_to_dra(name: str, allocatable: Mapping[str, int],
                     classes: ClassResolver | None) -> bool:
    """shouldDelegateResourceToDRA (the gate on, `classes` None when off): the node's
    allocatable does not provide `name` (zero or absent) and a class serves it."""
    if classes is None or allocatable.get(name, 0) > 0:
        return False
    return classes.for_extended_resource(name) is not None


class DraCapacity:
    """What the resource scorers count for an extended resource DRA serves on a node
    whose allocatable lacks it (getDRAPreScoredParams + calculateDRAResourceTotals):
    the node's devices the serving class selects as allocatable, those allocated (by
    an allocated claim or an allocation in flight) as allocated. Built once per
    cycle (PreScore) over the cluster's slices and claims as they are then.

    A slice counts on a node as upstream's scorer decides it (not quite as the
    allocator does): per device when it selects nodes per device (all nodes, the
    node's name, or a node selector that matches), else the whole slice unless its
    node name is another node's or its node selector does not match. A CEL error, or
    an expression that does not compile, leaves the resource out of the score on that
    node (upstream logs it and counts zero)."""

    def __init__(self, dra: DraObjects, selectors: SelectorCache) -> None:
        self._dra = dra
        self._selectors = selectors
        self._taken = dra.claims.allocated_device_ids(consumable_capacity=False)
        self._slices: list[ResourceSlice] = []
        for obj in dra.slices.values():
            # A slice the API server would refuse counts nowhere (the allocator
            # reports it; a score has nothing to say).
            with contextlib.suppress(InvalidObjectError):
                self._slices.append(dra.decoded(obj, "dra.slice", _decode_slice))
        self._memo: dict[tuple[str, str], tuple[int, int]] = {}

    @classmethod
    def for_resources(cls, dra: DraObjects, names: Sequence[str], selectors: SelectorCache
                      ) -> DraCapacity | None:
        """None when no scored resource is one a class serves (nothing to count)."""
        if not any(is_dra_extended_resource_name(n)
                   and dra.classes.for_extended_resource(n) is not None for n in names):
            return None
        return cls(dra, selectors)

    def counts_for(self, names: Sequence[str], request: Sequence[int]) -> bool:
        """Whether the pod (its `request`, aligned with the scored `names`) requests a
        resource a class serves: only then may a node's score differ from the
        columnar one, which reads allocatable alone."""
        return any(value and self._dra.classes.for_extended_resource(name) is not None
                   for name, value in zip(names, request, strict=True))

    def totals(self, node: Node, resource: str) -> tuple[int, int]:
        """(devices, allocated devices) of the class serving `resource` on `node`;
        (0, 0) when no class serves it."""
        key = (node.name, resource)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._count(node, resource)
        return found

    def _count(self, node: Node, resource: str) -> tuple[int, int]:
        cls_obj = self._dra.classes.for_extended_resource(resource)
        if cls_obj is None:
            return 0, 0
        try:
            device_class = self._dra.decoded(cls_obj, "dra.class", decode_device_class)
        except InvalidObjectError:
            return 0, 0
        target = DraNode(node.name, node.labels)
        capacity = allocated = 0
        try:
            for slice_ in self._slices:
                for device in _devices_on(slice_, target):
                    if not self._selected(device_class, slice_.driver, device):
                        continue
                    capacity += 1
                    if DeviceID(slice_.driver, slice_.pool, device.name) in self._taken:
                        allocated += 1
        except (NodeSelectorError, _SelectorFailed):
            return 0, 0
        return capacity, allocated

    def _selected(self, device_class: DeviceClass, driver: str, device: Device) -> bool:
        for selector in device_class.selectors:
            if selector.expression is None:
                continue
            compiled = self._selectors.get(selector.expression)
            if compiled.selector is None:
                raise _SelectorFailed(compiled.error)
            try:
                if not compiled.selector.matches(driver, device.raw):
                    return False
            except self._selectors.runtime_error as err:
                raise _SelectorFailed(str(err)) from err
        return True


class _SelectorFailed(Exception):
    pass


def _devices_on(slice_: ResourceSlice, node: DraNode) -> Sequence[Device]:
    if slice_.per_device_node_selection:
        return [d for d in slice_.devices
                if d.all_nodes or (d.node_name and d.node_name == node.name)
                or (d.node_selector is not None
                    and node_matches(node, d.node_name or "", bool(d.all_nodes),
                                     d.node_selector))]
    name = slice_.node_name or ""
    if not slice_.all_nodes and name != node.name and slice_.node_selector is not None:
        if not node_matches(node, name, False, slice_.node_selector):
            return ()
    elif not slice_.all_nodes and name and name != node.name:
        return ()
    return slice_.devices


def _decode_slice(obj: dict[str, Any]) -> ResourceSlice:
    return decode_resource_slice(obj, nano_value)
