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

from collections.abc import Mapping
from typing import Any, Protocol

from policyd.model import k8snames
from policyd.model.dra_objects import DEVICE_CLASS_RESOURCE_PREFIX

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
