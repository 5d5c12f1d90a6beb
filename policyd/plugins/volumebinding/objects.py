"""The claim, PV and CSIStorageCapacity fields VolumeBinding reads, decoded from raw
JSON once per object version (`StorageObjects.decoded`), and the annotations and
small predicates of component-helpers' storage/volume that the binder shares.

A field no API server would accept (a snapshot's malformed quantity or selector)
raises `VolumeObjectError` naming the object and the field, which the plugin turns
into the pod's reason instead of letting it escape the cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policyd.model.quantity import QuantityError, int_value, nano_value
from policyd.model.selectors import LabelSelector, SelectorError, compile_label_selector
from policyd.model.storage import PERSISTENT_VOLUME_CLAIM, StorageObjects, object_key
from policyd.plugins.helper.volumes import (
    VolumeObjectError,
    claim_storage_class,
    volume_storage_class,
)

# component-helpers storage/volume annotations and values.
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
FILESYSTEM = "Filesystem"


def metadata(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def spec(obj: dict[str, Any]) -> dict[str, Any]:
    s = obj.get("spec")
    return s if isinstance(s, dict) else {}


def annotations_of(obj: dict[str, Any]) -> dict[str, Any]:
    ann = metadata(obj).get("annotations")
    return ann if isinstance(ann, dict) else {}


def name_of(obj: dict[str, Any]) -> str:
    return str(metadata(obj).get("name") or "")


def claim_key(claim: dict[str, Any]) -> str:
    return object_key(PERSISTENT_VOLUME_CLAIM, claim)


def claim_volume(claim: dict[str, Any]) -> str:
    return str(spec(claim).get("volumeName") or "")


def is_claim_fully_bound(claim: dict[str, Any]) -> bool:
    """isPVCFullyBound: the claim names its PV and the PV controller finished binding."""
    return bool(claim_volume(claim)) and ANN_BIND_COMPLETED in annotations_of(claim)


def resource_version(obj: dict[str, Any]) -> int:
    """The resourceVersion as a number (-1 when there is none: a snapshot)."""
    rv = metadata(obj).get("resourceVersion")
    return int(rv) if isinstance(rv, str) and rv.isdigit() else -1


def is_deleting(obj: dict[str, Any]) -> bool:
    return metadata(obj).get("deletionTimestamp") is not None


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    """What FindMatchingVolume and the provisioning checks read from a claim."""

    key: str  # namespace/name
    namespace: str
    name: str
    uid: str
    storage_class: str
    request_nanos: int  # spec.resources.requests.storage (0 when absent), exact
    request_bytes: int | None  # the same rounded up (Quantity.Value); None when absent
    access_modes: frozenset[str]
    volume_mode: str
    attributes_class: str
    selector: LabelSelector | None  # None: no selector (every PV passes)


@dataclass(frozen=True, slots=True)
class VolumeInfo:
    """What FindMatchingVolume reads from a PersistentVolume."""

    name: str
    storage_class: str
    capacity_nanos: int  # spec.capacity.storage (0 when absent), exact
    claim_ref: tuple[str, str, str] | None  # (namespace, name, uid)
    volume_mode: str
    attributes_class: str
    deleting: bool
    available: bool  # status.phase == Available
    labels: dict[str, str]
    access_modes: frozenset[str]


def _claim_info(claim: dict[str, Any]) -> ClaimInfo | VolumeObjectError:
    meta = metadata(claim)
    key = claim_key(claim)
    raw_spec = claim.get("spec")
    if raw_spec is not None and not isinstance(raw_spec, dict):
        return VolumeObjectError(f"PersistentVolumeClaim {key}: spec must be an object")
    s = raw_spec or {}
    try:
        requests = (s.get("resources") or {}).get("requests") or {}
        quantity = requests.get("storage") if isinstance(requests, dict) else None
        request_nanos = 0 if quantity is None else nano_value(quantity)
        request_bytes = None if quantity is None else int_value(quantity)
    except (QuantityError, AttributeError) as exc:
        return VolumeObjectError(f"PersistentVolumeClaim {key}: "
                                 f"spec.resources.requests.storage: {exc}")
    selector = None
    if s.get("selector") is not None:
        try:
            selector = compile_label_selector(s["selector"])
        except SelectorError as exc:
            return VolumeObjectError(f"PersistentVolumeClaim {key}: spec.selector: {exc}")
    return ClaimInfo(
        key=key, namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""), uid=str(meta.get("uid") or ""),
        storage_class=claim_storage_class(claim), request_nanos=request_nanos,
        request_bytes=request_bytes, access_modes=_modes(s.get("accessModes")),
        volume_mode=str(s.get("volumeMode") or FILESYSTEM),
        attributes_class=str(s.get("volumeAttributesClassName") or ""), selector=selector)


def _volume_info(pv: dict[str, Any]) -> VolumeInfo | VolumeObjectError:
    name = name_of(pv)
    raw_spec = pv.get("spec")
    if raw_spec is not None and not isinstance(raw_spec, dict):
        return VolumeObjectError(f"PersistentVolume {name}: spec must be an object")
    s = raw_spec or {}
    try:
        capacity = s.get("capacity") or {}
        quantity = capacity.get("storage") if isinstance(capacity, dict) else None
        capacity_nanos = 0 if quantity is None else nano_value(quantity)
    except QuantityError as exc:
        return VolumeObjectError(f"PersistentVolume {name}: spec.capacity.storage: {exc}")
    ref = s.get("claimRef")
    if ref is not None and not isinstance(ref, dict):
        return VolumeObjectError(f"PersistentVolume {name}: spec.claimRef must be an object")
    claim_ref = None if ref is None else (str(ref.get("namespace") or ""),
                                          str(ref.get("name") or ""),
                                          str(ref.get("uid") or ""))
    labels = metadata(pv).get("labels")
    status = pv.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    return VolumeInfo(
        name=name, storage_class=volume_storage_class(pv), capacity_nanos=capacity_nanos,
        claim_ref=claim_ref, volume_mode=str(s.get("volumeMode") or FILESYSTEM),
        attributes_class=str(s.get("volumeAttributesClassName") or ""),
        deleting=is_deleting(pv), available=phase == "Available",
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict)
        else {},
        access_modes=_modes(s.get("accessModes")))


def _modes(value: Any) -> frozenset[str]:
    return frozenset(str(m) for m in value) if isinstance(value, list) else frozenset()


def claim_info(storage: StorageObjects, claim: dict[str, Any]) -> ClaimInfo:
    """The claim's fields, decoded once; raises VolumeObjectError when malformed."""
    found = storage.decoded(claim, "volumebinding/claim", _claim_info)
    if isinstance(found, VolumeObjectError):
        raise found
    return found


def volume_info(storage: StorageObjects, pv: dict[str, Any]) -> VolumeInfo:
    """The PV's fields, decoded once; raises VolumeObjectError when malformed."""
    found = storage.decoded(pv, "volumebinding/volume", _volume_info)
    if isinstance(found, VolumeObjectError):
        raise found
    return found


def is_volume_bound_to_claim(pv: VolumeInfo, claim: ClaimInfo) -> bool:
    """IsVolumeBoundToClaim: the PV's claimRef names the claim (and its uid, if set)."""
    if pv.claim_ref is None:
        return False
    namespace, name, uid = pv.claim_ref
    if name != claim.name or namespace != claim.namespace:
        return False
    return not uid or uid == claim.uid


def capacity_limit(capacity: dict[str, Any]) -> int | None:
    """volumeLimit of a CSIStorageCapacity in bytes (rounded up): maximumVolumeSize when
    set, as the more precise figure, else capacity; None when neither is (or one is not
    a quantity: no size can be promised)."""
    value = capacity.get("maximumVolumeSize")
    if value is None:
        value = capacity.get("capacity")
    if value is None:
        return None
    try:
        return int_value(value)
    except QuantityError:
        return None
