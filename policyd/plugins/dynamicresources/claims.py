"""The ResourceClaims a pod uses (upstream's foreachPodResourceClaim, v1.36.3).

Each `spec.resourceClaims` entry names its claim directly, or through a template, in
which case the claim controller records the generated claim's name in the pod's
`status.resourceClaimStatuses`. A pod cannot be scheduled while a claim is missing,
being deleted, or (for a template's claim) not controlled by the pod; the texts are
upstream's, and every one of them is an UnschedulableAndUnresolvable reason.

A template entry whose status names no claim (`resourceClaimName` null) is skipped, as
upstream does: the controller decided the pod needs none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.model.records import Pod
from policyd.plugins.dynamicresources.store import DraStore, Obj

# resourceclaim.ErrClaimNotFound
CLAIM_NOT_CREATED = "ResourceClaim not created yet"


class ClaimLookupError(Exception):
    """The pod cannot use its claims now (the message is upstream's)."""


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One claim of the pod: its spec.resourceClaims entry name and the object."""

    entry: str
    key: str  # namespace/name
    obj: Obj


def claim_name(pod: Pod, entry: Mapping[str, Any]) -> tuple[str | None, bool]:
    """resourceclaim.Name: (claim name or None to skip, whether the pod must own it).
    Raises ClaimLookupError while a template's claim is not created yet."""
    named = entry.get("resourceClaimName")
    if isinstance(named, str) and named:
        return named, False
    for status in _statuses(pod):
        if status.get("name") == entry.get("name"):
            generated = status.get("resourceClaimName")
            return (generated if isinstance(generated, str) and generated else None), True
    raise ClaimLookupError(f'pod "{pod.namespace}/{pod.name}": {CLAIM_NOT_CREATED}')


def pod_claims(store: DraStore | None, pod: Pod) -> list[PodClaim]:
    """The pod's claims in spec order; raises ClaimLookupError (upstream's texts)."""
    out: list[PodClaim] = []
    for entry in pod_claim_entries(pod):
        name, must_own = claim_name(pod, entry)
        if name is None:
            continue
        key = f"{pod.namespace}/{name}"
        obj = store.claims.get(key) if store is not None else None
        if obj is None:
            raise ClaimLookupError(f'could not find ResourceClaim "{key}"')
        found = obj.get("metadata")
        meta: Mapping[str, Any] = found if isinstance(found, dict) else {}
        if meta.get("deletionTimestamp") is not None:
            raise ClaimLookupError(f'resourceclaim "{name}" is being deleted')
        if must_own and not controlled_by(meta, pod.uid):
            raise ClaimLookupError(
                f"ResourceClaim {pod.namespace}/{name} was not created for Pod "
                f"{pod.namespace}/{pod.name} (Pod is not owner)")
        out.append(PodClaim(str(entry.get("name", "")), key, obj))
    return out


def controlled_by(meta: Mapping[str, Any], uid: str) -> bool:
    """metav1.IsControlledBy: the controller owner reference names this uid."""
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return bool(ref.get("uid") == uid)
    return False


def pod_claim_entries(pod: Pod) -> list[Mapping[str, Any]]:
    """spec.resourceClaims as the API shows it (validated when the pod was read)."""
    spec = pod.raw.get("spec")
    entries = spec.get("resourceClaims") if isinstance(spec, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _statuses(pod: Pod) -> list[Mapping[str, Any]]:
    status = pod.raw.get("status")
    found = status.get("resourceClaimStatuses") if isinstance(status, dict) else None
    return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []
