"""VolumeBinding's cluster events and queueing hints (EventsToRegister, v1.36, with
SchedulerQueueingHints GA: Node events are Add and UpdateNodeLabel only).

Storage hints get the raw objects: `old` None for an add. Anything that is not an
object gets QUEUE, as upstream's hints do on a type conversion error.
"""

from __future__ import annotations

from typing import Any

from policyd.framework.events import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
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
from policyd.model.records import Pod
from policyd.plugins.helper.volumes import after_own_or_ephemeral_claim_change
from policyd.plugins.volumebinding.objects import capacity_limit, metadata, spec

# v1.MigratedPluginsAnnotationKey
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"

_ADD_OR_UPDATE = ActionType.ADD | ActionType.UPDATE


def events() -> tuple[ClusterEventWithHint, ...]:
    return (
        # A class created or its allowedTopologies changed (binding mode is immutable).
        ClusterEventWithHint(ClusterEvent(STORAGE_CLASS, _ADD_OR_UPDATE),
                             after_storage_class_change),
        # A claim of the pod created or changed (bound, annotated, ...).
        ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME_CLAIM, _ADD_OR_UPDATE),
                             after_own_or_ephemeral_claim_change),
        ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME, _ADD_OR_UPDATE)),
        # A node's labels decide PV node affinity and allowedTopologies.
        ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
        # In-tree PVs are translated to CSI by what a CSINode says is migrated.
        ClusterEventWithHint(ClusterEvent(CSI_NODE, _ADD_OR_UPDATE), after_csi_node_change),
        ClusterEventWithHint(ClusterEvent(CSI_DRIVER, ActionType.UPDATE),
                             after_csi_driver_change),
        ClusterEventWithHint(ClusterEvent(CSI_STORAGE_CAPACITY, _ADD_OR_UPDATE),
                             after_capacity_change),
    )


def after_storage_class_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if old is None or not isinstance(old, dict) or not isinstance(new, dict):
        return QUEUE
    if _topologies(old) != _topologies(new):
        return QUEUE
    return QUEUE_SKIP


def _topologies(storage_class: dict[str, Any]) -> Any:
    # Semantic.DeepEqual treats a nil and an empty list alike.
    return storage_class.get("allowedTopologies") or []


def after_csi_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if old is None or not isinstance(old, dict) or not isinstance(new, dict):
        return QUEUE
    before = (metadata(old).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION)
    after = (metadata(new).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION)
    return QUEUE if (before or "") != (after or "") else QUEUE_SKIP


def after_csi_driver_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue when a CSI driver the pod's inline CSI volumes use stops tracking
    capacity (as upstream: only inline `csi` volumes are looked at)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return QUEUE
    driver = metadata(new).get("name")
    was = spec(old).get("storageCapacity") is True
    now = spec(new).get("storageCapacity") is True
    for volume in (pod.raw.get("spec") or {}).get("volumes") or ():
        csi = volume.get("csi") if isinstance(volume, dict) else None
        if isinstance(csi, dict) and csi.get("driver") == driver and was and not now:
            return QUEUE
    return QUEUE_SKIP


def after_capacity_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue on a new pool, or one whose volume limit grew."""
    if old is None or not isinstance(old, dict) or not isinstance(new, dict):
        return QUEUE
    before, after = capacity_limit(old), capacity_limit(new)
    if after is not None and (before is None or after > before):
        return QUEUE
    return QUEUE_SKIP
