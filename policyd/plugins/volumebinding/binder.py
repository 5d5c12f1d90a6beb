"""The scheduler side of volume binding: upstream's volumeBinder (binder.go) up to
Reserve. PreBind's API writes and wait are in `prebind.py`.

- `pod_volume_claims` (GetPodVolumeClaims): the pod's claims split into bound,
  unbound with WaitForFirstConsumer, and unbound otherwise (which should have been
  bound already), and, per unbound claim, the PVs it could take.
- `find_pod_volumes` (FindPodVolumes): per node, the PV each unbound claim takes and
  the claims to provision there, or the conflict reasons.
- `assume_pod_volumes` / `revert_assumed` (Reserve/Unreserve): the choice written into
  the assume caches, so the next pod's cycle sees the PVs taken.

Every claim and PV is read through `cluster.storage`'s assume caches (assumed versions
first), as upstream reads its pvCache/pvcCache.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass, field
from typing import Any

from policyd.model.records import Node, Pod
from policyd.model.storage import StaleObjectError, StorageObjects
from policyd.plugins.helper.volumes import (
    PodClaim,
    VolumeObjectError,
    claim_storage_class,
    is_owned_by,
    pod_claims,
    volume_storage_class,
)
from policyd.plugins.volumebinding.csi_translation import bound_volume_fits_node
from policyd.plugins.volumebinding.objects import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    WAIT_FOR_FIRST_CONSUMER,
    ClaimInfo,
    annotations_of,
    claim_info,
    claim_key,
    claim_volume,
    is_claim_fully_bound,
    metadata,
    name_of,
)
from policyd.plugins.volumebinding.provisioning import (
    ProvisioningError,
    check_volume_provisions,
)
from policyd.plugins.volumebinding.pv_matcher import (
    Candidates,
    candidates,
    find_matching_volume,
)

# Upstream's ConflictReasons, in the order FindPodVolumes appends them.
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = ("node(s) unavailable due to one or more pvc(s) bound to "
                           "non-existent pv(s)")


class BinderError(Exception):
    """Upstream returns an error here (an Error status, not a rejection)."""


@dataclass(frozen=True, slots=True)
class UnboundClaim:
    """An unbound WaitForFirstConsumer claim and the PVs it could take."""

    claim: dict[str, Any]
    info: ClaimInfo
    candidates: Candidates


@dataclass(frozen=True, slots=True)
class PodVolumeClaims:
    """GetPodVolumeClaims' answer, kept in the cycle state from PreFilter."""

    bound: tuple[dict[str, Any], ...]
    unbound_delay: tuple[UnboundClaim, ...]
    unbound_immediate: tuple[dict[str, Any], ...]


@dataclass(slots=True)
class StaticBinding:
    """An unbound claim and the existing PV chosen for it."""

    pvc: dict[str, Any]
    pv: dict[str, Any]


@dataclass(slots=True)
class DynamicProvision:
    """A claim to provision on the node, and the capacity pool it counted on."""

    pvc: dict[str, Any]
    capacity: dict[str, Any] | None = None


@dataclass(slots=True)
class PodVolumes:
    """The pod's volume decisions for one node (upstream's PodVolumes). Reserve
    replaces the objects by the assumed ones, which PreBind then writes."""

    static_bindings: list[StaticBinding] = field(default_factory=list)
    dynamic_provisions: list[DynamicProvision] = field(default_factory=list)


# -- PreFilter

def claim_lookup_error(storage: StorageObjects, pod: Pod) -> str | None:
    """podHasPVCs: the first problem with the pod's claims as the API server shows
    them (missing, lost, being deleted, an ephemeral claim the pod does not own)."""
    for pc in pod_claims(pod):
        claim = storage.pvcs.api_object(pc.key(pod))
        if claim is None:
            if pc.ephemeral:
                return ("waiting for ephemeral volume controller to create the "
                        f'persistentvolumeclaim "{pc.claim}"')
            return f'persistentvolumeclaim "{pc.claim}" not found'
        status = claim.get("status")
        if isinstance(status, dict) and status.get("phase") == "Lost":
            return (f'persistentvolumeclaim "{name_of(claim)}" bound to non-existent '
                    f'persistentvolume "{claim_volume(claim)}"')
        if metadata(claim).get("deletionTimestamp") is not None:
            return f'persistentvolumeclaim "{name_of(claim)}" is being deleted'
        if pc.ephemeral and not is_owned_by(claim, pod):
            return _not_owner(claim, pod)
    return None


def _not_owner(claim: dict[str, Any], pod: Pod) -> str:
    """ephemeral.VolumeIsForPod's error."""
    return (f"PVC {claim_key(claim)} was not created for pod {pod.namespace}/{pod.name} "
            "(pod is not owner)")


def pod_volume_claims(storage: StorageObjects, pod: Pod) -> PodVolumeClaims:
    """GetPodVolumeClaims. Raises BinderError (upstream's errors) and VolumeObjectError
    (an unbound claim whose fields do not decode)."""
    bound: list[dict[str, Any]] = []
    delay: list[dict[str, Any]] = []
    immediate: list[dict[str, Any]] = []
    for pc in pod_claims(pod):
        claim = _claim_for(storage, pod, pc)
        if is_claim_fully_bound(claim):
            bound.append(claim)
        elif is_delay_binding_mode(storage, claim) and not claim_volume(claim):
            delay.append(claim)
        else:
            # Pre-bound claims (volumeName set, not yet complete) count as immediate.
            immediate.append(claim)
    unbound = []
    by_class: dict[str, list[dict[str, Any]]] = {}
    for claim in delay:
        info = claim_info(storage, claim)
        if info.storage_class not in by_class:
            by_class[info.storage_class] = volumes_of_class(storage, info.storage_class)
        unbound.append(UnboundClaim(claim, info,
                                    candidates(storage, info, by_class[info.storage_class])))
    return PodVolumeClaims(tuple(bound), tuple(unbound), tuple(immediate))


def _claim_for(storage: StorageObjects, pod: Pod, pc: PodClaim) -> dict[str, Any]:
    key = pc.key(pod)
    claim = storage.pvcs.get(key)
    if claim is None:
        raise BinderError(f'error getting PVC "{key}": persistentvolumeclaims "{key}" '
                          "not found")
    if pc.ephemeral and not is_owned_by(claim, pod):
        raise BinderError(_not_owner(claim, pod))
    return claim


def is_delay_binding_mode(storage: StorageObjects, claim: dict[str, Any]) -> bool:
    """IsDelayBindingMode: the claim's class exists and binds WaitForFirstConsumer. A
    claim without a class, or whose class is missing, binds immediately."""
    class_name = claim_storage_class(claim)
    if not class_name:
        return False
    storage_class = storage.storage_classes.get(class_name)
    if storage_class is None:
        return False
    mode = storage_class.get("volumeBindingMode")
    if mode is None:
        raise BinderError(f'VolumeBindingMode not set for StorageClass "{class_name}"')
    return bool(mode == WAIT_FOR_FIRST_CONSUMER)


# Per StorageObjects: (the PV cache's generation, class -> PVs), upstream's storage
# class index over its PV cache; rebuilt when a PV changed or was assumed.
_CLASS_INDEX: weakref.WeakKeyDictionary[
    StorageObjects, tuple[int, dict[str, list[dict[str, Any]]]]] = weakref.WeakKeyDictionary()


def volumes_of_class(storage: StorageObjects, class_name: str) -> list[dict[str, Any]]:
    """The PVs (assumed versions) of a class (GetPersistentVolumeClass)."""
    index = _CLASS_INDEX.get(storage)
    if index is None or index[0] != storage.pvs.generation:
        by_class: dict[str, list[dict[str, Any]]] = {}
        for pv in storage.pvs.values():
            by_class.setdefault(volume_storage_class(pv), []).append(pv)
        index = _CLASS_INDEX[storage] = (storage.pvs.generation, by_class)
    return index[1].get(class_name, [])


# -- Filter

def find_pod_volumes(storage: StorageObjects, claims: PodVolumeClaims, node: Node
                     ) -> tuple[PodVolumes, list[str]]:
    """FindPodVolumes: the node's PodVolumes and the conflict reasons (empty: fits).
    Raises BinderError for upstream's errors."""
    volumes = PodVolumes()
    bound_ok = unbound_ok = sufficient = pvs_found = True
    object_problem = None
    if claims.bound:
        bound_ok, pvs_found, object_problem = check_bound_claims(storage, claims.bound, node)
    if claims.unbound_delay:
        unbound_ok, sufficient = _find_unbound(storage, claims.unbound_delay, node, volumes)
    reasons = []
    if not bound_ok:
        # A PV whose affinity does not decode is named instead of the bare conflict.
        reasons.append(object_problem or ERR_REASON_NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(ERR_REASON_BIND_CONFLICT)
    if not sufficient:
        reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
    if not pvs_found:
        reasons.append(ERR_REASON_PV_NOT_EXIST)
    return volumes, reasons


def _find_unbound(storage: StorageObjects, unbound: tuple[UnboundClaim, ...], node: Node,
                  volumes: PodVolumes) -> tuple[bool, bool]:
    """(unbound claims satisfied, enough storage); fills `volumes`."""
    to_match: list[UnboundClaim] = []
    to_provision: list[UnboundClaim] = []
    for uc in unbound:
        ann = annotations_of(uc.claim)
        if ANN_SELECTED_NODE in ann:
            if ann[ANN_SELECTED_NODE] != node.name:
                return False, True  # provisioning already started for another node
            to_provision.append(uc)
        else:
            to_match.append(uc)
    satisfied = True
    if to_match:
        # Smallest request first, so each claim gets the smallest PV left that fits.
        chosen: set[str] = set()
        for uc in sorted(to_match, key=lambda u: u.info.request_nanos):
            pv = find_matching_volume(storage, uc.candidates, node, chosen)
            if pv is None:
                to_provision.append(uc)
                satisfied = False
                continue
            chosen.add(name_of(pv))
            volumes.static_bindings.append(StaticBinding(uc.claim, pv))
    if not to_provision:
        return satisfied, True
    try:
        result = check_volume_provisions(storage, [uc.info for uc in to_provision], node)
    except ProvisioningError as exc:
        raise BinderError(str(exc)) from exc
    if result.satisfied and result.sufficient_storage:
        volumes.dynamic_provisions = [
            DynamicProvision(uc.claim, cap)
            for uc, cap in zip(to_provision, result.capacities, strict=True)]
    return result.satisfied, result.sufficient_storage


def check_bound_claims(storage: StorageObjects, bound: tuple[dict[str, Any], ...],
                       node: Node) -> tuple[bool, bool, str | None]:
    """checkBoundClaims: (every bound PV fits the node, every bound PV exists, the
    problem with a PV that does not decode). Stops at the first that fails."""
    for claim in bound:
        pv = storage.pvs.get(claim_volume(claim))
        if pv is None:
            return True, False, None
        try:
            fits = bound_volume_fits_node(storage, pv, node)
        except VolumeObjectError as exc:
            return False, True, str(exc)
        if not fits:
            return False, True, None
    return True, True, None


# -- Reserve / Unreserve

def are_pod_volumes_bound(storage: StorageObjects, pod: Pod) -> bool:
    """arePodVolumesBound: every claim of the pod is fully bound (assumed versions)."""
    for pc in pod_claims(pod):
        claim = storage.pvcs.get(pc.key(pod))
        if claim is None or not is_claim_fully_bound(claim):
            return False
        if pc.ephemeral and not is_owned_by(claim, pod):
            return False
    return True


def bind_volume_to_claim(pv: dict[str, Any], claim: dict[str, Any]
                         ) -> tuple[dict[str, Any], bool]:
    """GetBindVolumeToClaim: a copy of `pv` whose claimRef names the claim, marked
    bound by the controller when it was not pre-bound to it; and whether it changed."""
    new_pv = copy.deepcopy(pv)
    new_pv.setdefault("apiVersion", "v1")
    new_pv.setdefault("kind", "PersistentVolume")
    pv_spec = new_pv.setdefault("spec", {})
    meta = metadata(claim)
    ref = pv_spec.get("claimRef")
    ref = ref if isinstance(ref, dict) else None
    pre_bound = (ref is not None and ref.get("name") == meta.get("name")
                 and ref.get("namespace") == meta.get("namespace")
                 and (not ref.get("uid") or ref.get("uid") == meta.get("uid")))
    dirty = False
    if (ref is None or ref.get("name") != meta.get("name")
            or ref.get("namespace") != meta.get("namespace")
            or ref.get("uid") != meta.get("uid")):
        # reference.GetReference: what names this exact version of the claim.
        pv_spec["claimRef"] = {
            "kind": "PersistentVolumeClaim", "namespace": meta.get("namespace"),
            "name": meta.get("name"), "uid": meta.get("uid"), "apiVersion": "v1",
            "resourceVersion": meta.get("resourceVersion")}
        pv_spec["claimRef"] = {k: v for k, v in pv_spec["claimRef"].items() if v}
        dirty = True
    new_meta = new_pv.setdefault("metadata", {})
    ann = new_meta.get("annotations")
    if not pre_bound and not (isinstance(ann, dict) and ANN_BOUND_BY_CONTROLLER in ann):
        new_meta["annotations"] = {**(ann if isinstance(ann, dict) else {}),
                                   ANN_BOUND_BY_CONTROLLER: "yes"}
        dirty = True
    return new_pv, dirty


def with_selected_node(claim: dict[str, Any], node_name: str) -> dict[str, Any]:
    """A copy of the claim annotated with the node to provision for."""
    new_claim = copy.deepcopy(claim)
    new_claim.setdefault("apiVersion", "v1")
    new_claim.setdefault("kind", "PersistentVolumeClaim")
    meta = new_claim.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), ANN_SELECTED_NODE: node_name}
    return new_claim


def assume_pod_volumes(storage: StorageObjects, pod: Pod, node_name: str,
                       volumes: PodVolumes) -> bool:
    """AssumePodVolumes: True when every claim is bound already (nothing to do);
    otherwise each chosen PV is assumed bound to its claim and each claim to provision
    assumed annotated with the node, and `volumes` now holds those objects. Raises
    StaleObjectError after undoing what it assumed, when an object changed since."""
    if are_pod_volumes_bound(storage, pod):
        return True
    bindings: list[StaticBinding] = []
    for binding in volumes.static_bindings:
        new_pv, dirty = bind_volume_to_claim(binding.pv, binding.pvc)
        if dirty:
            try:
                storage.pvs.assume(new_pv)
            except StaleObjectError:
                revert_assumed(storage, PodVolumes(bindings))
                raise
        bindings.append(StaticBinding(binding.pvc, new_pv))
    provisions: list[DynamicProvision] = []
    for provision in volumes.dynamic_provisions:
        new_claim = with_selected_node(provision.pvc, node_name)
        try:
            storage.pvcs.assume(new_claim)
        except StaleObjectError:
            revert_assumed(storage, PodVolumes(bindings, provisions))
            raise
        provisions.append(DynamicProvision(new_claim))
    volumes.static_bindings = bindings
    volumes.dynamic_provisions = provisions
    return False


def revert_assumed(storage: StorageObjects, volumes: PodVolumes) -> None:
    """RevertAssumedPodVolumes: the API server's versions count again."""
    for binding in volumes.static_bindings:
        storage.pvs.restore(name_of(binding.pv))
    for provision in volumes.dynamic_provisions:
        storage.pvcs.restore(claim_key(provision.pvc))

