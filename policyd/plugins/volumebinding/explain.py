"""Each claim's verdict on one node, for `policyd explain`: which PV it is bound to or
would take, whether it would be provisioned, and if not, why.

Upstream reports only the node's conflict reasons. On a node that passed, the
verdicts are the decision Filter made (the PV each claim takes); on a rejected node
each claim is judged on its own (no PV excluded by the pod's other claims), which
says which claim is the problem without changing the decision.
"""

from __future__ import annotations

from typing import Any

from policyd.framework.interfaces import Verdict
from policyd.model.records import Node
from policyd.model.storage import StorageObjects
from policyd.plugins.helper.volumes import VolumeObjectError, volume_fits_node
from policyd.plugins.volumebinding.binder import PodVolumeClaims, PodVolumes, UnboundClaim
from policyd.plugins.volumebinding.csi_translation import bound_volume_fits_node
from policyd.plugins.volumebinding.objects import (
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    annotations_of,
    claim_key,
    claim_volume,
    name_of,
)
from policyd.plugins.volumebinding.provisioning import (
    has_enough_capacity,
    matches_allowed_topologies,
)
from policyd.plugins.volumebinding.pv_matcher import find_matching_volume


def claim_verdicts(storage: StorageObjects, claims: PodVolumeClaims, node: Node,
                   decided: PodVolumes | None) -> tuple[Verdict, ...]:
    out = [_bound_verdict(storage, claim, node) for claim in claims.bound]
    chosen = {claim_key(b.pvc): name_of(b.pv) for b in decided.static_bindings} \
        if decided else {}
    provisioned = {claim_key(p.pvc) for p in decided.dynamic_provisions} if decided else set()
    for uc in claims.unbound_delay:
        key = uc.info.key
        if key in chosen:
            out.append(Verdict(key, True, f"binds PersistentVolume {chosen[key]}"))
        elif key in provisioned:
            out.append(Verdict(key, True, "is provisioned on this node (StorageClass "
                                               f"{uc.info.storage_class})"))
        else:
            out.append(_unbound_verdict(storage, uc, node))
    for claim in claims.unbound_immediate:
        out.append(Verdict(claim_key(claim), False,
                                "is unbound and its StorageClass binds Immediate"))
    return tuple(out)


def _bound_verdict(storage: StorageObjects, claim: dict[str, Any], node: Node
                   ) -> Verdict:
    key, pv_name = claim_key(claim), claim_volume(claim)
    pv = storage.pvs.get(pv_name)
    if pv is None:
        return Verdict(key, False, f"is bound to PersistentVolume {pv_name}, which "
                                        "does not exist")
    try:
        fits = bound_volume_fits_node(storage, pv, node)
    except VolumeObjectError as exc:
        return Verdict(key, False, str(exc))
    if not fits:
        return Verdict(key, False, f"is bound to PersistentVolume {pv_name}, whose "
                                        "node affinity does not match the node")
    return Verdict(key, True, f"is bound to PersistentVolume {pv_name}")


def _unbound_verdict(storage: StorageObjects, uc: UnboundClaim, node: Node) -> Verdict:
    key, info = uc.info.key, uc.info
    selected = annotations_of(uc.claim).get(ANN_SELECTED_NODE)
    if selected is not None and selected != node.name:
        return Verdict(key, False, f"is being provisioned for node {selected}")
    if selected is None:
        pv = find_matching_volume(storage, uc.candidates, node, set())
        if pv is not None:
            return Verdict(key, True, f"can bind PersistentVolume {name_of(pv)}")
    unreadable = [*uc.candidates.ignored, *_unreadable_affinities(storage, uc, node)]
    ignored = f" (ignored: {'; '.join(unreadable)})" if unreadable else ""
    none_left = "no available PersistentVolume fits the claim and the node" + ignored
    storage_class = storage.storage_classes.get(info.storage_class)
    if not info.storage_class or storage_class is None:
        return Verdict(key, False, f"{none_left}, and StorageClass "
                                        f'"{info.storage_class}" does not exist')
    provisioner = str(storage_class.get("provisioner") or "")
    if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
        return Verdict(key, False, f"{none_left}, and StorageClass "
                                        f"{info.storage_class} does not provision")
    if not matches_allowed_topologies(storage_class.get("allowedTopologies"), node.labels):
        return Verdict(key, False, f"{none_left}, and the node is outside StorageClass "
                                        f"{info.storage_class}'s allowedTopologies")
    enough, _ = has_enough_capacity(storage, provisioner, info, info.storage_class, node)
    if not enough:
        return Verdict(key, False, f"can be provisioned only with {info.request_bytes} "
                                        "bytes of free storage the node does not reach")
    return Verdict(key, True, f"can be provisioned on this node (StorageClass "
                                   f"{info.storage_class})")


def _unreadable_affinities(storage: StorageObjects, uc: UnboundClaim, node: Node
                           ) -> list[str]:
    """The claim's free PVs whose node affinity has a malformed part and no other term
    admitting `node`: they count as not fitting it (as upstream), and explain says
    which and why."""
    out = []
    for pv in uc.candidates.free:
        try:
            volume_fits_node(storage, pv, node)
        except VolumeObjectError as exc:
            out.append(str(exc))
    return out
