"""Extended resources backed by DRA (DRAExtendedResource, beta and on in v1.36.3):
DynamicResources' side of upstream's `extendeddynamicresources.go`.

A container may request an extended resource (`example.com/gpu: 1`, or
`deviceclass.resource.kubernetes.io/<class>`) that a DeviceClass serves
(`spec.extendedResourceName`, or its implicit name). On a node whose allocatable does
not list it (zero), NodeResourcesFit leaves it to this plugin, which allocates it
through one claim per pod that exists only in memory until PreBind:

- PreFilter (`pre_filter_extended`): when some non-zero request of the pod maps to a
  class, either the pod's claim from an earlier attempt (annotated
  `resource.kubernetes.io/extended-resource-claim: "true"`, controlled by the pod) or
  an in-memory claim named `<extended-resources>` with a fresh uid and no requests.
- Filter (`node_claim`): a claim found from an earlier attempt that has requests is
  stale: `cannot schedule extended resource claim` on every node, so PostFilter
  deletes it and the pod tries anew. Otherwise each mapped resource the node's
  allocatable does not provide becomes requests of a node-specific copy of the claim
  (one per container and resource, `container-<i>-request-<j>`, init containers
  reusing what later long-lived containers request, as `requests_and_mappings`), which
  the allocator allocates with the pod's other claims. A request neither on the node
  nor mapped to a class is `cannot fit resource`.
- Reserve: the node's copy with its allocation is in flight (under the in-memory uid).
- PreBind (`bind_extended`): the copy is created (generateName `<pod>-extended-
  resources-`), its finalizer, allocation and reservedFor written as for any claim,
  the created claim awaited in the claim tracker (the informer's copy, up to 120 s,
  as upstream's waitForExtendedClaimInAssumeCache; a timeout is only logged), then the
  pod's `status.extendedResourceClaimStatus` patched with the request mappings.
- Unreserve withdraws the in-flight allocation; its API half (`undo_pre_bind`)
  deletes a claim PreBind created (finalizer removed first).
- PostFilter: a claim found from an earlier attempt is deleted (by the daemon, after
  the cycle): `deletion of ResourceClaim completed`.

One deliberate difference: when the pod also has claims of its own and every mapped
resource is provided by the node's device plugin, upstream still allocates the empty
in-memory claim and its PreBind then fails (no node-specific claim, no request
mappings); policyd allocates nothing for it there, as it does for a pod without claims
of its own (docs/compatibility.md).
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from policyd.dra.objects import ResourceClaim, decode_resource_claim
from policyd.dra.results import AllocationResult
from policyd.framework import Status
from policyd.framework.interfaces import BindingApiError, BindingHandle, Verdict
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.quantity import nano_value
from policyd.model.records import Container, Pod
from policyd.model.resources import pod_requests
from policyd.model.storage import StaleObjectError
from policyd.plugins.dynamicresources.allocation import ClaimInfo
from policyd.plugins.dynamicresources.claims import PodClaim
from policyd.plugins.dynamicresources.prebind import (
    CANCELED,
    CLAIM_FINALIZER,
    CONFLICT_ATTEMPTS,
    CONFLICT_BACKOFF_SECONDS,
    ClaimStatusWriter,
    write_claim,
)
from policyd.plugins.dynamicresources.store import DraStore, Obj, dra_of
from policyd.plugins.helper.extended_resources import ClassResolver, is_dra_extended_resource_name

log = logging.getLogger(__name__)

# specialClaimInMemName: not a valid object name, so no claim in the API has it.
IN_MEMORY_NAME = "<extended-resources>"
# resourceapi.ExtendedResourceClaimAnnotation
CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# Filter's reasons (both UnschedulableAndUnresolvable, as upstream's statusUnschedulable).
STALE_CLAIM = "cannot schedule extended resource claim"
CANNOT_FIT = "cannot fit resource"
# PostFilter's answer after deleting a claim from an earlier attempt.
DELETION_COMPLETED = "deletion of ResourceClaim completed"
# AssumeExtendedResourceTimeoutDefaultSeconds, polled every second.
ASSUME_TIMEOUT_SECONDS = 120.0
ASSUME_POLL_SECONDS = 1.0
_NANO = 1_000_000_000


def mapped_resources(pod: Pod, classes: ClassResolver) -> dict[str, int]:
    """The pod's non-zero scalar requests when one of them is an extended resource a
    class serves (hasDeviceClassMappedExtendedResource), else nothing."""
    requests = pod_requests(pod)
    if not any(value and is_dra_extended_resource_name(name)
               and classes.for_extended_resource(name) is not None
               for name, value in requests.items()):
        return {}
    return {name: value for name, value in requests.items()
            if is_dra_extended_resource_name(name)}


@dataclass(slots=True)
class NodeClaim:
    """The claim as allocated for one node: its requests and the pod's mappings."""

    obj: Obj
    decoded: ResourceClaim
    mappings: list[dict[str, str]]
    allocation: AllocationResult | None = None


@dataclass(slots=True)
class ExtendedClaim:
    """The pod's claim for its DRA-backed extended resources in this cycle."""

    obj: Obj
    decoded: ResourceClaim
    requests: dict[str, int]  # the pod's DRA-nameable requests (podScalarResources)
    initial_uid: str  # the uid its allocation is in flight under
    node_claims: dict[str, NodeClaim] = field(default_factory=dict)
    # Set by Reserve: the chosen node's claim (with its allocation).
    reserved: NodeClaim | None = None
    # Set by PostFilter: delete this (a claim from an earlier attempt).
    delete: bool = False

    @property
    def in_memory(self) -> bool:
        return _meta(self.obj).get("name") == IN_MEMORY_NAME

    @property
    def key(self) -> str:
        meta = _meta(self.obj)
        return f'{meta.get("namespace", "")}/{meta.get("name", "")}'

    @property
    def allocated(self) -> bool:
        return self.decoded.allocated is not None


def pre_filter_extended(store: DraStore | None, pod: Pod,
                        classes: ClassResolver | None) -> ExtendedClaim | None:
    """preFilterExtendedResources: the pod's extended-resource claim, found or in
    memory, or None when no request of the pod is served by a class."""
    if store is None or classes is None:
        return None
    requests = mapped_resources(pod, classes)
    if not requests:
        return None
    obj = find_claim(store.claims.values(), pod) or in_memory_claim(pod)
    decoded = decode_resource_claim(obj, nano_value)
    return ExtendedClaim(obj, decoded, requests, decoded.uid)


def find_claim(claims: Iterator[Obj], pod: Pod) -> Obj | None:
    """findExtendedResourceClaim: annotated, and controlled by the pod (name and uid)."""
    for claim in claims:
        meta = _meta(claim)
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict) or annotations.get(CLAIM_ANNOTATION) != "true":
            continue
        for ref in meta.get("ownerReferences") or ():
            if (isinstance(ref, dict) and ref.get("name") == pod.name
                    and ref.get("controller") is True and ref.get("uid") == pod.uid):
                return claim
    return None


def in_memory_claim(pod: Pod) -> Obj:
    """The claim before PreBind creates it: no requests yet, a temporary uid."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace, "name": IN_MEMORY_NAME, "uid": str(uuid.uuid4()),
            "generateName": f"{pod.name}-extended-resources-",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name,
                                 "uid": pod.uid, "controller": True}],
            "annotations": {CLAIM_ANNOTATION: "true"}},
        "spec": {"devices": {}},
    }


def node_claim(ext: ExtendedClaim, pod: Pod, node: NodeInfo, classes: ClassResolver
               ) -> tuple[NodeClaim | None, Status | None]:
    """filterExtendedResources: the claim to allocate on this node (None when the
    node's device plugin provides everything, or the claim is allocated already), or
    Filter's rejection."""
    if _requests_of(ext.obj):
        return None, Status.unresolvable(STALE_CLAIM)
    allocatable = node.node.allocatable
    via_dra: dict[str, int] = {}
    for name, value in ext.requests.items():
        if not value:
            continue
        if allocatable.get(name, 0) == 0 and classes.for_extended_resource(name) is not None:
            via_dra[name] = value
        elif name not in allocatable:
            return None, Status.unresolvable(CANNOT_FIT)
    if not via_dra or ext.allocated:
        return None, None
    requests, mappings = requests_and_mappings(pod, via_dra, classes)
    obj = copy.deepcopy(ext.obj)
    obj["spec"] = {"devices": {"requests": requests}}
    return NodeClaim(obj, decode_resource_claim(obj, nano_value), mappings), None


def requests_and_mappings(pod: Pod, resources: Mapping[str, int], classes: ClassResolver
                          ) -> tuple[list[Obj], list[dict[str, str]]]:
    """createRequestsAndMappings: one ExactCount request per (container, resource),
    named `container-<index among init + regular containers>-request-<index of the
    resource among the container's sorted request names>`. A non-sidecar init
    container first reuses the requests of long-lived containers after it; of the
    init containers' own requests only the largest is kept and their mappings point
    at it. Requests sorted by name; mappings long-lived first, per resource by name."""
    containers = [*pod.init_containers, *pod.containers]
    n_init = len(pod.init_containers)
    long_lived = [i for i, c in enumerate(containers)
                  if i >= n_init or c.restart_policy == "Always"]
    short_lived = [i for i, c in enumerate(containers)
                   if i < n_init and c.restart_policy != "Always"]
    requests: list[Obj] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(resources):
        cls = classes.for_extended_resource(resource)
        if cls is None:
            continue
        class_name = str(_meta(cls).get("name", ""))
        per_container: list[Obj | None] = [None] * len(containers)
        long_maps: list[dict[str, str]] = []
        for i in long_lived:
            request, maps = _container_request(i, containers[i], resource, class_name, ())
            per_container[i] = request
            long_maps += maps
        largest: Obj | None = None
        short_names: set[str] = set()
        short_maps: list[dict[str, str]] = []
        for i in short_lived:
            request, maps = _container_request(i, containers[i], resource, class_name,
                                               per_container[i:])
            if request is not None:
                short_names.add(request["name"])
                if largest is None or _count(largest) < _count(request):
                    largest = request
            short_maps += maps
        if largest is not None and len(short_names) > 1:
            short_names.discard(largest["name"])
            for m in short_maps:
                if m["requestName"] in short_names:
                    m["requestName"] = largest["name"]
        if largest is not None:
            requests.append(largest)
        requests += [r for r in per_container if r is not None]
        mappings += long_maps + short_maps
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings


def _container_request(index: int, container: Container, resource: str, class_name: str,
                       reusable: Sequence[Obj | None]) -> tuple[Obj | None, list[dict[str, str]]]:
    """createResourceRequestAndMappings for one container and resource."""
    nanos = container.requests.get(resource)
    if not nanos or nanos % _NANO:
        return None, []  # absent, zero, or not a whole number (AsInt64 fails)
    wanted = nanos // _NANO
    mappings: list[dict[str, str]] = []
    covered = 0
    for other in reusable:
        if other is None:
            continue
        covered += _count(other)
        mappings.append(_mapping(container.name, resource, str(other["name"])))
        if covered >= wanted:
            return None, mappings
    position = sorted(container.requests).index(resource)
    name = f"container-{index}-request-{position}"
    request = {"name": name, "exactly": {"deviceClassName": class_name,
                                         "allocationMode": "ExactCount",
                                         "count": wanted - covered}}
    mappings.append(_mapping(container.name, resource, name))
    return request, mappings


def _mapping(container: str, resource: str, request: str) -> dict[str, str]:
    return {"containerName": container, "resourceName": resource, "requestName": request}


def _count(request: Obj) -> int:
    return int(request["exactly"]["count"])


def extended_verdict(ext: ExtendedClaim, pod: Pod, node: NodeInfo, classes: ClassResolver
                     ) -> Verdict:
    """For explain: the devices the pod's extended resources get on the node (each
    with the container and resource it serves), or why they get none."""
    subject = f"extended resources ({', '.join(sorted(n for n, v in ext.requests.items() if v))})"
    decided = ext.node_claims.get(node.node.name)
    if decided is not None and decided.allocation is not None:
        serves: dict[str, list[str]] = {}
        for m in decided.mappings:
            serves.setdefault(m["requestName"], []).append(
                f'{m["containerName"]}: {m["resourceName"]}')
        devices = ", ".join(
            f"{d.driver}/{d.pool}/{d.device} (request {d.request}, "
            f"{'; '.join(serves.get(d.request, ()))})"
            for d in decided.allocation.devices)
        return Verdict(subject, True, f"get {devices or 'no devices'} through DRA")
    wanted, problem = node_claim(ext, pod, node, classes)
    if problem is not None:
        reason = (f"ResourceClaim {ext.key} from an earlier attempt has requests: it is "
                  "deleted and the pod tried anew" if problem.reasons == (STALE_CLAIM,)
                  else "some request is neither on the node nor served by a DeviceClass")
        return Verdict(subject, False, reason)
    if wanted is None:
        return Verdict(subject, True, "provided by the node's allocatable (device plugin)")
    return Verdict(subject, False, "no devices for them through DRA here (alone or "
                                   "together with the pod's claims)")


# -- Reserve / Unreserve -----------------------------------------------------------------

def reserve_extended(ext: ExtendedClaim, node_name: str, store: DraStore | None,
                     allocated: Callable[[Obj, Obj], Obj]) -> None:
    """The node's claim with its allocation in flight under the in-memory uid, so the
    next cycle does not take its devices. `allocated(obj, allocation)` is the claim
    as Reserve records it (finalizer and allocation set)."""
    chosen = ext.node_claims.get(node_name)
    if chosen is None or chosen.allocation is None:
        return  # the node's device plugin provides it: nothing to allocate
    ext.reserved = chosen
    if store is not None:
        store.claims.signal_pending_allocation(
            ext.initial_uid, allocated(chosen.obj, chosen.allocation.to_api()))


def unreserve_extended(ext: ExtendedClaim, store: DraStore | None) -> None:
    """The in-flight allocation withdrawn and the tracker's claim restored."""
    if store is not None and store.claims.remove_pending_allocation(ext.initial_uid):
        store.claims.restore(ext.key)
    ext.reserved = None


# -- the API writes (PreBind, Unreserve, PostFilter) ---------------------------------------

@runtime_checkable
class ExtendedClaimWriter(ClaimStatusWriter, Protocol):
    """What a binding handle needs beyond a claim's status for these claims."""

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """POST `obj` (named by generateName); what the server stored. Raises
        `BindingApiError`."""

    def delete(self, obj: dict[str, Any]) -> None:
        """DELETE `obj`. Raises `BindingApiError`."""

    def patch_pod_status(self, pod: Pod, patch: dict[str, Any]) -> None:
        """A strategic-merge patch of the pod's status. Raises `BindingApiError`."""


NO_EXTENDED_WRITER = ("policyd cannot create ResourceClaims here: the claim for the "
                      "pod's extended resources is not written")


def bind_extended(handle: BindingHandle, pod: Pod, ext: ExtendedClaim, *,
                  binding_conditions: bool) -> tuple[str | None, ClaimInfo | None]:
    """bindClaim for the extended-resource claim: create it, write its allocation and
    reservation, wait for the tracker to have it, patch the pod's status. Returns
    (upstream's error text or None, the claim as stored, for the binding-conditions
    wait)."""
    problem, stored = _bind_extended(handle, pod, ext, binding_conditions=binding_conditions)
    if stored is None:
        return problem, None
    key = f"{pod.namespace}/{_meta(stored).get('name', '')}"
    return problem, ClaimInfo(PodClaim("", key, stored),
                              decode_resource_claim(stored, nano_value))


def _bind_extended(handle: BindingHandle, pod: Pod, ext: ExtendedClaim, *,
                   binding_conditions: bool) -> tuple[str | None, Obj | None]:
    chosen = ext.reserved
    if chosen is None:
        return None, None  # satisfied by the device plugin: nothing to write
    if not isinstance(handle, ExtendedClaimWriter):
        handle.locked(_withdraw(ext.initial_uid))
        return NO_EXTENDED_WRITER, None
    stored: Obj | None = None
    try:
        body = copy.deepcopy(chosen.obj)
        meta = body["metadata"]
        for key in ("name", "uid", "resourceVersion"):
            meta.pop(key, None)
        body.pop("status", None)
        try:
            created = handle.create(body)
        except BindingApiError as err:
            return (f"create claim for extended resources {pod.namespace}/: {err}", None)
        # From now on Unreserve deletes it.
        ext.obj = created
        name = f'{pod.namespace}/{_meta(created).get("name", "")}'
        allocation = chosen.allocation.to_api() if chosen.allocation is not None else None
        stored, problem = write_claim(handle, pod, created, name, allocation,
                                      binding_conditions=binding_conditions)
        if problem is not None:
            return problem, None
        assert stored is not None
        ext.obj = stored
        _await_in_tracker(handle, stored)
    finally:
        handle.locked(_withdraw(ext.initial_uid))
    mappings = chosen.mappings
    if not mappings:
        return (f"nil or empty request mappings, no update of pod {pod.namespace}/"
                f"{pod.name} ExtendedResourceClaimStatus"), stored
    patch = {"status": {"extendedResourceClaimStatus": {
        "requestMappings": mappings, "resourceClaimName": _meta(stored).get("name")}}}
    try:
        handle.patch_pod_status(pod, patch)
    except BindingApiError as err:
        return (f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: "
                f"{err}"), stored
    return None, stored


def _withdraw(uid: str) -> Callable[[ClusterState], None]:
    def withdraw(cluster: ClusterState) -> None:
        store = dra_of(cluster)
        if store is not None:
            store.claims.remove_pending_allocation(uid)
    return withdraw


def _await_in_tracker(handle: BindingHandle, stored: Obj) -> None:
    """waitForExtendedClaimInAssumeCache: the created claim reaches the tracker only
    through the informer; assume the written version once it has, polling every
    second up to 120 s. Giving up is logged, never an error (the claim exists)."""
    def try_assume(cluster: ClusterState) -> str | None:
        store = dra_of(cluster)
        if store is None:
            return None
        try:
            store.claims.assume(stored)
        except StaleObjectError as err:
            return "" if str(err).startswith("could not find") else str(err)
        return None

    deadline = handle.now() + ASSUME_TIMEOUT_SECONDS
    while True:
        problem = handle.locked(try_assume)
        if problem is None:
            return
        if problem:
            log.debug("claim %s not stored in the claim tracker: %s",
                      _meta(stored).get("name"), problem)
            return
        remaining = deadline - handle.now()
        if remaining <= 0 or handle.wait(min(ASSUME_POLL_SECONDS, remaining)):
            log.debug("claim %s not in the claim tracker after waiting",
                      _meta(stored).get("name"))
            return


class ClaimDeleter(Protocol):
    """What deleting a claim takes (a binding handle, or the client after a cycle)."""

    def get(self, obj: dict[str, Any]) -> dict[str, Any]: ...
    def update(self, obj: dict[str, Any]) -> dict[str, Any]: ...
    def delete(self, obj: dict[str, Any]) -> None: ...


def delete_claim(writer: ClaimDeleter, claim: Obj,
                 wait: Callable[[float], bool] | None = None) -> str | None:
    """deleteClaim: the delete-protection finalizer removed (an update, retried on a
    conflict on the claim read again, as retry.DefaultRetry), then the claim deleted.
    None, or the error."""
    current = copy.deepcopy(claim)
    name = f'{_meta(claim).get("namespace", "")}/{_meta(claim).get("name", "")}'
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        if attempt > 1:
            if wait is not None and wait(CONFLICT_BACKOFF_SECONDS):
                return CANCELED
            try:
                current = writer.get(current)
            except BindingApiError as err:
                return f"get resourceclaim {name}: {err}"
        meta = current.setdefault("metadata", {})
        finalizers = [f for f in meta.get("finalizers") or () if f != CLAIM_FINALIZER]
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
        try:
            current = writer.update(current)
            break
        except BindingApiError as err:
            if not err.conflict or attempt == CONFLICT_ATTEMPTS:
                return f"update resourceclaim {name}: {err}"
    try:
        writer.delete(current)
    except BindingApiError as err:
        return str(err)
    return None


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _requests_of(obj: Obj) -> list[Any]:
    spec = obj.get("spec")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    found = devices.get("requests") if isinstance(devices, dict) else None
    return found if isinstance(found, list) else []
