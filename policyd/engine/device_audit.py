"""Which bound pods hold devices their ResourceClaims would not be given today.

A claim's allocation is decided once, when its first pod is scheduled; afterwards a
driver may stop publishing the device, an administrator may taint it, a DeviceClass's
selectors may be tightened. Nothing reallocates a running pod's claim, so nothing says
so, except a NoExecute taint, on which kube-controller-manager's device taint eviction
evicts the pods using the device. `audit_devices` asks, for every allocated device of
every claim a bound pod uses, the questions the allocator would ask of it today:

- is it still published (a slice of its pool's newest generation lists it)?
- does a taint with NoExecute (the pod is evicted) or NoSchedule (it would not be
  allocated again) hold that the request does not tolerate?
- does its request's DeviceClass still exist, and do the class's and the request's CEL
  selectors still select it?

Not asked: node selection (the claim's node selector is in its allocation, and the pod
is bound), capacity and counters (the device is in use by this very claim), matchAttribute
constraints (they join devices of one claim, all of them allocated together). A claim
that is missing or not allocated is a finding of its own; a pod whose template's claim
was never created has nothing allocated and is skipped (kube-scheduler would not have
bound it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from policyd.dra.objects import (
    Device,
    DeviceClass,
    Request,
    ResourceClaim,
    ResourceSlice,
    decode_device_class,
    decode_resource_claim,
    decode_resource_slice,
)
from policyd.dra.selectors import KUBERNETES_CEL, SelectorCache
from policyd.errors import InvalidObjectError
from policyd.model.cluster import ClusterState
from policyd.model.dra_objects import DraObjects, Obj
from policyd.model.quantity import nano_value
from policyd.model.records import Pod

# DeviceFinding.kind, stable for JSON consumers.
CLAIM_MISSING = "claim-missing"
NOT_ALLOCATED = "not-allocated"
DEVICE_GONE = "device-gone"
EVICTING_TAINT = "evicting-taint"
SCHEDULING_TAINT = "scheduling-taint"
CLASS_GONE = "class-gone"
NOT_SELECTED = "not-selected"
UNREADABLE = "unreadable"

_NO_EXECUTE = "NoExecute"
_NO_SCHEDULE = "NoSchedule"


@dataclass(frozen=True, slots=True)
class DeviceFinding:
    """One allocated device (or claim) a bound pod uses that today's allocator would
    not give it."""

    pod: str  # namespace/name
    node: str
    claim: str  # namespace/name
    request: str  # the allocation result's request ("" for a claim-level finding)
    device: str  # driver/pool/device ("" for a claim-level finding)
    kind: str
    message: str


def audit_devices(cluster: ClusterState, pods: Iterable[Pod]) -> list[DeviceFinding]:
    """Findings for each bound, running pod of `pods` with ResourceClaims, sorted by
    pod, claim, device. A claim shared by several pods is judged once per pod."""
    store = cluster.dra
    devices = _published_devices(store)
    selectors = SelectorCache(KUBERNETES_CEL)
    out: list[DeviceFinding] = []
    for pod in pods:
        if not pod.node_name or pod.finished or pod.deleting:
            continue
        for entry in pod.resource_claims:
            if entry.claim:
                out.extend(_claim_findings(store, devices, selectors, pod,
                                           f"{pod.namespace}/{entry.claim}"))
    out.sort(key=lambda f: (f.pod, f.claim, f.device, f.kind))
    return out


def _claim_findings(store: DraObjects, devices: dict[tuple[str, str, str], Device],
                    selectors: SelectorCache, pod: Pod, key: str
                    ) -> Iterator[DeviceFinding]:
    def finding(kind: str, message: str, request: str = "", device: str = ""
                ) -> DeviceFinding:
        return DeviceFinding(pod.key, pod.node_name, key, request, device, kind, message)

    obj = store.claims.get(key)
    if obj is None:
        yield finding(CLAIM_MISSING, f"ResourceClaim {key} does not exist")
        return
    try:
        claim = store.decoded(obj, "dra.claim", _decode_claim)
    except InvalidObjectError as err:
        yield finding(UNREADABLE, str(err))
        return
    if claim.allocated is None:
        yield finding(NOT_ALLOCATED, f"ResourceClaim {key} is not allocated")
        return
    for result in claim.allocated:
        name = f"{result.driver}/{result.pool}/{result.device}"
        request = _request_of(claim, result.request)
        device = devices.get((result.driver, result.pool, result.device))
        if device is None:
            yield finding(DEVICE_GONE, f"device {name} is no longer published in a "
                          "ResourceSlice", result.request, name)
            continue
        tolerations = request.tolerations if request is not None else ()
        for taint in device.taints:
            if taint.effect not in (_NO_EXECUTE, _NO_SCHEDULE) or any(
                    t.tolerates(taint) for t in tolerations):
                continue
            shown = f"{taint.key}={taint.value}:{taint.effect}" if taint.value \
                else f"{taint.key}:{taint.effect}"
            if taint.effect == _NO_EXECUTE:
                yield finding(EVICTING_TAINT, f"device {name} has taint {shown}, which "
                              f"request {result.request} does not tolerate: the device "
                              "taint eviction evicts the pod", result.request, name)
            else:
                yield finding(SCHEDULING_TAINT, f"device {name} has taint {shown}, which "
                              f"request {result.request} does not tolerate: it would not "
                              "be allocated today", result.request, name)
        if request is None or result.admin_access:
            continue  # a request the claim no longer has: nothing to select with
        yield from _selection_findings(store, selectors, request, device, result.driver,
                                       name, result.request, finding)


def _selection_findings(store: DraObjects, selectors: SelectorCache, request: Request,
                        device: Device, driver: str, name: str, request_name: str,
                        finding: _Finder) -> Iterator[DeviceFinding]:
    class_obj = store.classes.get(request.device_class_name)
    if class_obj is None:
        yield finding(CLASS_GONE, f"device class {request.device_class_name} of request "
                      f"{request_name} does not exist", request_name, name)
        return
    try:
        device_class: DeviceClass = store.decoded(class_obj, "dra.class",
                                                  decode_device_class)
    except InvalidObjectError as err:
        yield finding(UNREADABLE, str(err), request_name, name)
        return
    for owner, chosen in ((f"class {device_class.name}", device_class.selectors),
                          (f"request {request_name}", request.selectors)):
        for i, selector in enumerate(chosen):
            problem = _selects(selectors, selector.expression, driver, device)
            if problem is not None:
                yield finding(NOT_SELECTED, f"device {name}: {owner}: selector #{i}: "
                              f"{problem}", request_name, name)
                return


class _Finder(Protocol):
    """`_claim_findings`' local `finding`: a finding about this pod and claim."""

    def __call__(self, kind: str, message: str, request: str = "", device: str = ""
                 ) -> DeviceFinding: ...


def _selects(cache: SelectorCache, expression: str | None, driver: str, device: Device
             ) -> str | None:
    """None when the selector selects the device, else why not (upstream's words for
    the errors the allocator reports)."""
    if expression is None:
        return "CEL expression empty (unsupported selector type?)"
    compiled = cache.get(expression)
    if compiled.selector is None:
        return f"CEL compile error: {compiled.error}"
    try:
        if compiled.selector.matches(driver, device.raw):
            return None
    except cache.runtime_error as err:
        return f"CEL runtime error: {err}"
    return f"no longer selects it ({expression})"


def _request_of(claim: ResourceClaim, name: str) -> Request | None:
    """The request (or `request/sub-request`) an allocation result names."""
    base, _, sub = name.partition("/")
    for request in claim.requests:
        if request.name != base:
            continue
        if not sub:
            return request.exactly
        return next((r for r in request.first_available if r.name == sub), None)
    return None


def _published_devices(store: DraObjects) -> dict[tuple[str, str, str], Device]:
    """(driver, pool, device) -> the device, from the slices of each pool's newest
    generation (older generations are being replaced: their devices are gone)."""
    decoded: list[ResourceSlice] = []
    for obj in store.slices.values():
        try:
            decoded.append(store.decoded(obj, "dra.slice", _decode_slice))
        except InvalidObjectError:
            continue  # an unreadable slice publishes nothing the allocator could use
    newest: dict[tuple[str, str], int] = {}
    for s in decoded:
        newest[(s.driver, s.pool)] = max(newest.get((s.driver, s.pool), s.generation),
                                         s.generation)
    return {(s.driver, s.pool, d.name): d for s in decoded
            if s.generation == newest[(s.driver, s.pool)] for d in s.devices}


def _decode_claim(obj: Obj) -> ResourceClaim:
    return decode_resource_claim(obj, nano_value)


def _decode_slice(obj: Obj) -> ResourceSlice:
    return decode_resource_slice(obj, nano_value)
