"""What the volume plugins share about pods' claims and the stored storage objects
(component-helpers' storage/volume helpers, read from raw JSON).

Every decode goes through `StorageObjects.decoded`, so a PV's node affinity is compiled
once per PV version, whichever plugin asks first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.framework.cycle_state import CycleState
from policyd.framework.events import QUEUE, QUEUE_SKIP, QueueingHint
from policyd.model.records import Node, Pod
from policyd.model.selectors import Requirement, SelectorError, compile_node_selector_term
from policyd.model.storage import StorageObjects

# v1.BetaStorageClassAnnotation: still read before spec.storageClassName, as upstream.
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


class VolumeObjectError(ValueError):
    """A stored storage object a plugin cannot read (a malformed field): the message
    names the object and the field, and becomes the affected pod's reason."""


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One claim a pod's volume refers to."""

    volume: str  # the pod's volume name
    claim: str  # the claim's name (for generic ephemeral volumes: <pod>-<volume>)
    ephemeral: bool  # a generic ephemeral volume: the claim must be owned by the pod

    def key(self, pod: Pod) -> str:
        return f"{pod.namespace}/{self.claim}"


_CLAIMS_CACHE = "volumes/claims"


def pod_claims(pod: Pod) -> tuple[PodClaim, ...]:
    """The pod's persistentVolumeClaim and ephemeral volumes, in spec order (the pod
    decoder has checked their shape already)."""
    cached: tuple[PodClaim, ...] | None = pod.cache.get(_CLAIMS_CACHE)
    if cached is not None:
        return cached
    out = []
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    for vol in volumes if isinstance(volumes, list) else ():
        if not isinstance(vol, dict):
            continue
        name = str(vol.get("name") or "")
        source = vol.get("persistentVolumeClaim")
        if isinstance(source, dict):
            out.append(PodClaim(name, str(source.get("claimName") or ""), False))
        elif vol.get("ephemeral") is not None:
            out.append(PodClaim(name, f"{pod.name}-{name}", True))
    claims = tuple(out)
    pod.cache[_CLAIMS_CACHE] = claims
    return claims


def is_owned_by(claim: dict[str, Any], pod: Pod) -> bool:
    """Whether `claim` has the pod as its controller owner (ephemeral.VolumeIsForPod)."""
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") and ref.get("uid") == pod.uid:
            return True
    return False


def claim_storage_class(claim: dict[str, Any]) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation first, then the spec."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_STORAGE_CLASS_ANNOTATION])
    return str((claim.get("spec") or {}).get("storageClassName") or "")


def volume_storage_class(pv: dict[str, Any]) -> str:
    """GetPersistentVolumeClass: the beta annotation first, then the spec."""
    annotations = (pv.get("metadata") or {}).get("annotations") or {}
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_STORAGE_CLASS_ANNOTATION])
    return str((pv.get("spec") or {}).get("storageClassName") or "")


def claim_volume_name(claim: dict[str, Any]) -> str:
    """The PV a claim is bound (or being bound) to; "" when none."""
    return str((claim.get("spec") or {}).get("volumeName") or "")


@dataclass(frozen=True, slots=True)
class VolumeNodeAffinity:
    """A PV's required node affinity as CheckNodeAffinity evaluates it: component-helpers
    builds a Node from the node's labels alone, and its LazyErrorNodeSelector skips a
    term's matchFields when the node has no name. So each term is the AND of its label
    requirements only (a term of matchFields alone admits every node), terms are ORed,
    and an empty term is dropped (it selects nothing). A term that does not decode
    matches no node but does not stop the others; `problem` names the first such, and
    is the error only when no term matched (upstream's errors are lazy the same way)."""

    terms: tuple[tuple[Requirement, ...], ...]  # each decoded term's label requirements
    problem: str | None = None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether some term admits a node with `labels`; VolumeObjectError (naming the
        field) when none does and a term did not decode."""
        if any(all(r.matches(labels) for r in term) for term in self.terms):
            return True
        if self.problem is not None:
            raise VolumeObjectError(self.problem)
        return False


def compile_volume_node_affinity(terms: Any, pv_name: Any,
                                 path: str = "spec.nodeAffinity.required"
                                 ) -> VolumeNodeAffinity | VolumeObjectError:
    """The terms of a PV's `required` node selector -> VolumeNodeAffinity; a
    VolumeObjectError when `nodeSelectorTerms` is not a list at all."""
    if terms is None:
        terms = []
    if not isinstance(terms, list):
        return _object_error(pv_name, f"{path}.nodeSelectorTerms", "must be a list")
    decoded: list[tuple[Requirement, ...]] = []
    problem = None
    for i, term in enumerate(terms):
        if isinstance(term, dict) and not term.get("matchExpressions") \
                and not term.get("matchFields"):
            continue  # nil or empty: selects no node, and is not parsed either
        try:
            decoded.append(_term_labels(term, f"{path}.nodeSelectorTerms[{i}]"))
        except SelectorError as exc:
            problem = problem or f"PersistentVolume {pv_name}: {exc}"
    return VolumeNodeAffinity(tuple(decoded), problem)


def _term_labels(term: Any, path: str) -> tuple[Requirement, ...]:
    """A term's label requirements. Its matchFields are parsed as upstream parses them
    (In or NotIn, one value: what makes the term an error) but never kept: a nameless
    node skips them, whatever field they name."""
    if not isinstance(term, dict):
        raise SelectorError(path, "must be an object")
    fields = term.get("matchFields") or []
    if not isinstance(fields, list):
        raise SelectorError(f"{path}.matchFields", "must be a list")
    for j, req in enumerate(fields):
        at = f"{path}.matchFields[{j}]"
        if not isinstance(req, dict):
            raise SelectorError(at, "must be an object")
        if req.get("operator") not in ("In", "NotIn"):
            raise SelectorError(f"{at}.operator", f"{req.get('operator')!r} is not a valid "
                                "operator, expected one of In, NotIn")
        values = req.get("values")
        if not isinstance(values, list) or len(values) != 1:
            raise SelectorError(f"{at}.values", "must have exactly one value")
    labels = {"matchExpressions": term.get("matchExpressions")}
    return compile_node_selector_term(labels, path).label_requirements


def _object_error(pv_name: Any, path: str, message: str) -> VolumeObjectError:
    return VolumeObjectError(f"PersistentVolume {pv_name}: {SelectorError(path, message)}")


def _node_affinity(pv: dict[str, Any]) -> VolumeNodeAffinity | VolumeObjectError | None:
    affinity = (pv.get("spec") or {}).get("nodeAffinity")
    if affinity is None:
        return None
    name = (pv.get("metadata") or {}).get("name")
    if not isinstance(affinity, dict):
        return VolumeObjectError(f"PersistentVolume {name}: spec.nodeAffinity must be an "
                                 "object")
    required = affinity.get("required")
    if required is None:
        return None
    if not isinstance(required, dict):
        return _object_error(name, "spec.nodeAffinity.required", "must be an object")
    return compile_volume_node_affinity(required.get("nodeSelectorTerms"), name)


def volume_node_affinity(storage: StorageObjects, pv: dict[str, Any]
                         ) -> VolumeNodeAffinity | None:
    """The PV's required node affinity, compiled once; None when it has none. Raises
    VolumeObjectError when it is malformed as a whole (the same error every time)."""
    found = storage.decoded(pv, "nodeAffinity", _node_affinity)
    if isinstance(found, VolumeObjectError):
        raise found
    return found


def volume_fits_node(storage: StorageObjects, pv: dict[str, Any], node: Node) -> bool:
    """CheckNodeAffinity: the PV's required node affinity admits the node's labels
    (see VolumeNodeAffinity: matchFields are not compared). Raises VolumeObjectError
    when it does not and a malformed part is why it could not."""
    affinity = volume_node_affinity(storage, pv)
    return affinity is None or affinity.matches(node.labels)


# -- what a lister says about a missing object, and the cycle's storage objects

# GroupResource.String() of the kinds the volume plugins look up by name.
PVC_RESOURCE = "persistentvolumeclaim"
PV_RESOURCE = "persistentvolume"
STORAGE_CLASS_RESOURCE = "storageclass.storage.k8s.io"


def not_found(resource: str, name: str) -> str:
    """apimachinery's NewNotFound message, which the volume plugins pass on as their
    reason when a lister does not have the object: `persistentvolumeclaim "data" not
    found`. The name is quoted as Go's %q quotes it (JSON's escapes agree for every
    name the API server accepts)."""
    return f"{resource} {json.dumps(name, ensure_ascii=False)} not found"


_NO_STORAGE = StorageObjects()  # never written: the storage of a cycle without a cluster


def cycle_storage(state: CycleState) -> StorageObjects:
    """The storage objects of the cluster the cycle runs on (none without a cluster, as
    in a test that builds a bare CycleState)."""
    return state.cluster.storage if state.cluster is not None else _NO_STORAGE


def object_name(kind: str, obj: dict[str, Any]) -> str:
    """`Kind namespace/name` (or `Kind name`) for a stored object, as reasons name it."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    ns = meta.get("namespace")
    return f"{kind} {ns}/{meta.get('name')}" if ns else f"{kind} {meta.get('name')}"


def object_spec(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The object's spec; VolumeObjectError naming the object when it has none or it
    is not an object (the API server never stores such a PV, claim or CSINode: only a
    malformed snapshot file has one)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise VolumeObjectError(f"{object_name(kind, obj)}: spec must be an object")
    return spec


def _claim_hint(pod: Pod, claim: Any, names: tuple[str, ...]) -> QueueingHint:
    if not isinstance(claim, dict):
        return QUEUE  # not a claim we can read: do not risk stranding the pod
    meta = claim.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    if (meta.get("namespace") or "default") != pod.namespace:
        return QUEUE_SKIP
    return QUEUE if meta.get("name") in names else QUEUE_SKIP


def after_own_claim_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A PVC hint: QUEUE when the claim added or changed is one the pod's
    persistentVolumeClaim volumes name (VolumeZone, VolumeRestrictions)."""
    return _claim_hint(pod, new, pod.persistent_claims)


def after_own_or_ephemeral_claim_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A PVC hint: QUEUE when the claim is one of the pod's, generic ephemeral volumes'
    claims included (VolumeBinding, NodeVolumeLimits)."""
    return _claim_hint(pod, new, pod.pvc_names)
