"""VolumeZone: a pod's bound PersistentVolumes' zone and region labels must match the
node's (kube-scheduler v1.36's volumezone plugin).

PreFilter follows each persistentVolumeClaim volume to its claim and the claim's bound
PV, and collects the PV's topology labels (topology.kubernetes.io/zone and /region and
their deprecated failure-domain.beta.kubernetes.io forms). A label value may list
several zones joined by `__` (volumehelpers.LabelZonesToSet); a value with an empty
item is ignored, as upstream ignores it. An unbound claim of a WaitForFirstConsumer
class is skipped (VolumeBinding places it); any other unbound claim, or a claim, PV or
class that is not there, rejects the pod as UnschedulableAndUnresolvable with
upstream's words. A pod with nothing to compare is skipped.

Filter passes a node without any of the four labels (a single-zone cluster), and
otherwise needs, for every collected label, the node's value (under the same key, or
under the GA key for a beta one) in the PV's set: `node(s) had no available volume
zone`, UnschedulableAndUnresolvable (no preemption moves a volume).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import (
    NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    QUEUE,
    QUEUE_SKIP,
    STORAGE_CLASS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.storage import StorageObjects
from policyd.plugins import names
from policyd.plugins.helper.volumes import (
    PV_RESOURCE,
    PVC_RESOURCE,
    STORAGE_CLASS_RESOURCE,
    VolumeObjectError,
    after_own_claim_change,
    claim_storage_class,
    claim_volume_name,
    cycle_storage,
    not_found,
    object_name,
    object_spec,
)
from policyd.problems import field_problem

NAME = names.VOLUME_ZONE
DEFAULT_WEIGHT: int | None = None

ERR_REASON_CONFLICT = "node(s) had no available volume zone"
ERR_CLAIM_NO_NAME = "PersistentVolumeClaim had no name"
ERR_CLAIM_NO_PV_NO_CLASS = "PersistentVolumeClaim had no pv name and storageClass name"
ERR_NO_PV_NAME = "PersistentVolume had no name"
ERR_BINDING_MODE_NOT_SET = 'VolumeBindingMode not set for StorageClass "{name}"'

ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
REGION_BETA = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
# In upstream's order: the first mismatch is the one logged, and hints compare lists.
TOPOLOGY_LABELS = (ZONE_BETA, REGION_BETA, ZONE, REGION)
_GA_LABEL = {ZONE_BETA: ZONE, REGION_BETA: REGION}
MULTI_ZONE_DELIMITER = "__"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

PRE_FILTER_KEY = "PreFilterVolumeZone"

_REJECT = Status.unresolvable(ERR_REASON_CONFLICT)


@dataclass(frozen=True, slots=True)
class PVTopology:
    """One topology label of a PV: the zones (or regions) the volume is in."""

    pv: str
    key: str
    values: frozenset[str]


def label_zones_to_set(value: str) -> frozenset[str] | None:
    """volumehelpers.LabelZonesToSet: the `__`-separated items, trimmed; None when one
    is empty (upstream ignores such a label)."""
    zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    if any(not z for z in zones):
        return None
    return frozenset(zones)


def pv_topologies(pv: dict[str, Any]) -> tuple[PVTopology, ...]:
    """The PV's topology labels (getPVTopologies); VolumeObjectError naming the PV when
    its labels are not a map of strings."""
    meta = pv.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if labels is None:
        return ()
    if not isinstance(labels, dict):
        raise VolumeObjectError(f"{object_name('PersistentVolume', pv)}: metadata.labels "
                                "must be a map")
    name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
    out = []
    for key in TOPOLOGY_LABELS:
        value = labels.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise VolumeObjectError(f"{object_name('PersistentVolume', pv)}: label {key} "
                                    "must be a string")
        zones = label_zones_to_set(value)
        if zones is not None:
            out.append(PVTopology(name, key, zones))
    return tuple(out)


def _decoded_topologies(pv: dict[str, Any]) -> tuple[PVTopology, ...] | VolumeObjectError:
    try:
        return pv_topologies(pv)
    except VolumeObjectError as exc:
        return exc


def pod_pv_topologies(storage: StorageObjects, pod: Pod
                      ) -> tuple[PVTopology, ...] | Status:
    """getPVbyPod: the topology labels of the PVs the pod's claims are bound to, or the
    rejection for the first claim that cannot be followed."""
    out: list[PVTopology] = []
    for claim_name in pod.persistent_claims:
        if not claim_name:
            return Status.unresolvable(ERR_CLAIM_NO_NAME)
        claim = storage.pvcs.api_object(f"{pod.namespace}/{claim_name}")
        if claim is None:
            return Status.unresolvable(not_found(PVC_RESOURCE, claim_name))
        try:
            object_spec("PersistentVolumeClaim", claim)
        except VolumeObjectError as exc:
            return Status.unresolvable(str(exc))
        pv_name = claim_volume_name(claim)
        if not pv_name:
            class_name = claim_storage_class(claim)
            if not class_name:
                return Status.unresolvable(ERR_CLAIM_NO_PV_NO_CLASS)
            storage_class = storage.storage_classes.get(class_name)
            if storage_class is None:
                return Status.unresolvable(not_found(STORAGE_CLASS_RESOURCE, class_name))
            mode = storage_class.get("volumeBindingMode")
            if mode is None:
                return Status.unresolvable(ERR_BINDING_MODE_NOT_SET.format(name=class_name))
            if mode == WAIT_FOR_FIRST_CONSUMER:
                continue  # VolumeBinding chooses the volume, and with it the zone
            return Status.unresolvable(ERR_NO_PV_NAME)
        pv = storage.pvs.api_object(pv_name)
        if pv is None:
            return Status.unresolvable(not_found(PV_RESOURCE, pv_name))
        found = storage.decoded(pv, "VolumeZone/topologies", _decoded_topologies)
        if isinstance(found, VolumeObjectError):
            return Status.unresolvable(str(found))
        out.extend(found)
    return tuple(out)


class VolumeZone:
    name = NAME
    # No PreFilterExtensions upstream: its PreFilter state reads no other pod
    # (preemption's dry runs rely on that; framework/interfaces.py).
    pre_filter_reads_other_pods = False
    # Its Filter reads the node and the pod's volumes, never the pods on the node.
    filter_reads_node_pods = False

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        if not pod.persistent_claims:
            return None, Status.skip()
        found = pod_pv_topologies(cycle_storage(state), pod)
        if isinstance(found, Status):
            return None, found
        if not found:
            return None, Status.skip()
        state.write(PRE_FILTER_KEY, found)
        return None, None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not pod.persistent_claims:
            return None  # upstream's fast path: no volumes (only claims matter here)
        topologies: tuple[PVTopology, ...] | None = state.get(PRE_FILTER_KEY)
        if topologies is None:
            # Upstream's fallback when PreFilter did not run: compute it here.
            found = pod_pv_topologies(cycle_storage(state), pod)
            if isinstance(found, Status):
                return found
            topologies = found
        labels = node.node.labels
        if not any(key in labels for key in TOPOLOGY_LABELS):
            return None  # a node without zones (a single-zone cluster) takes any volume
        for topology in topologies:
            value = labels.get(topology.key)
            if value is None:
                value = labels.get(_GA_LABEL.get(topology.key, topology.key))
            if value is None or value not in topology.values:
                return _REJECT
        return None

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # Queueing hints are always on in v1.36, so no UpdateNodeTaint registration.
        return (
            ClusterEventWithHint(ClusterEvent(STORAGE_CLASS, ActionType.ADD),
                                 after_storage_class_added),
            ClusterEventWithHint(
                ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            ClusterEventWithHint(
                ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE),
                after_own_claim_change),
            ClusterEventWithHint(
                ClusterEvent(PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE),
                after_volume_changed),
        )


def after_storage_class_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Only a WaitForFirstConsumer class can let an unbound claim through."""
    if not isinstance(new, dict):
        return QUEUE
    return QUEUE if new.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER else QUEUE_SKIP


def after_volume_changed(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A new PV, or a PV whose topology labels changed."""
    if old is None:
        return QUEUE
    if not isinstance(old, dict) or not isinstance(new, dict):
        return QUEUE
    before, after = _decoded_topologies(old), _decoded_topologies(new)
    if isinstance(before, VolumeObjectError) or isinstance(after, VolumeObjectError):
        return QUEUE  # let the cycle report the malformed PV
    return QUEUE if before != after else QUEUE_SKIP


def new(args: Mapping[str, Any] | None = None) -> VolumeZone:
    if args:
        raise PluginError(NAME, [field_problem("", "VolumeZone takes no arguments")])
    return VolumeZone()
