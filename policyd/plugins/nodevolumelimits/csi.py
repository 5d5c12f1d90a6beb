"""NodeVolumeLimits: a node's CSI drivers attach at most so many volumes
(kube-scheduler v1.36's nodevolumelimits plugin, csi.go).

The limits are the node's CSINode `spec.drivers[].allocatable.count`, per driver; a
node without a CSINode, or whose drivers state no count, has none. Filter counts, per
driver, the distinct volumes (`driver/volumeHandle`) of:
- the pod's volumes: a bound claim's PV (its CSI source, or the CSI volume an in-tree
  source migrated to); an unbound claim as its StorageClass's provisioner with a handle
  of its own (so it never matches a real one); a generic ephemeral volume likewise,
  once its claim is owned by the pod; an inline in-tree volume migrated to CSI;
- the same of every pod already on the node (a claim that is not there is not counted);
- the node's VolumeAttachments of CSI PVs no pod on the node accounts for;
and rejects the node, Unschedulable (`node(s) exceed max volume count`), when a
driver's volumes plus the pod's new ones would exceed its limit. A volume the node
already has costs nothing more.

What the pod needs but cannot have is upstream's too: a claim that is not there is
UnschedulableAndUnresolvable (`looking up PVC ns/name: persistentvolumeclaim "name" not
found`), an ephemeral claim not owned by the pod, a claim volume without a name, or an
inline volume csi-translation-lib refuses is an Error. A malformed stored object (a PV
or claim without a spec, a CSINode whose drivers are not a list) rejects as
UnschedulableAndUnresolvable with a reason naming it.

VolumeLimitScaling (alpha, off in v1.36; a `features` parameter, default DEFAULTS) adds
one check before the counting: each driver of the pod's new volumes whose CSIDriver
says `preventPodSchedulingIfMissing: true` must be listed in the node's CSINode
(no CSINode: not installed), else the node is Unschedulable with
`<driver> CSI driver is not installed on the node`. A driver without a CSIDriver object
passes. Drivers are checked in name order (upstream walks a Go map: with two missing
drivers its message names either).
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from policyd.features import DEFAULTS, FeatureGates
from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import (
    CSI_NODE,
    PERSISTENT_VOLUME_CLAIM,
    POD,
    QUEUE,
    QUEUE_SKIP,
    VOLUME_ATTACHMENT,
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
    PVC_RESOURCE,
    VolumeObjectError,
    after_own_or_ephemeral_claim_change,
    claim_storage_class,
    claim_volume_name,
    cycle_storage,
    is_owned_by,
    not_found,
    object_name,
    object_spec,
)
from policyd.plugins.nodevolumelimits.csi_translation import (
    BY_PROVISIONER,
    InTreePlugin,
    TranslationError,
    in_tree_plugin,
    source_of,
)
from policyd.problems import field_problem

NAME = names.NODE_VOLUME_LIMITS
DEFAULT_WEIGHT: int | None = None

ERR_REASON_MAX_VOLUME_COUNT = "node(s) exceed max volume count"

_REJECT = Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT)
# With VolumeLimitScaling, after the driver's name.
ERR_DRIVER_NOT_INSTALLED = "CSI driver is not installed on the node"
VOLUME_LIMIT_SCALING = "VolumeLimitScaling"
_NEEDS_CHECK_CACHE = "NodeVolumeLimits/needs-check"
_CYCLE_KEY = "NodeVolumeLimits/new-volumes"

# driver/volumeHandle -> driver
Volumes = dict[str, str]


class ClaimMissing(Exception):
    """The pod's own claim is not there: the pod cannot run until it is created."""


class AttachError(Exception):
    """What upstream returns as an error (an Error status), in its words."""


def _volumes(pod: Pod) -> list[dict[str, Any]]:
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    return [v for v in volumes if isinstance(v, dict)] if isinstance(volumes, list) else []


def _is_counted_kind(volume: Mapping[str, Any]) -> bool:
    """A claim, a generic ephemeral volume, or an in-tree volume csi-translation-lib
    can migrate: the volumes this plugin may count."""
    return (volume.get("persistentVolumeClaim") is not None
            or volume.get("ephemeral") is not None or in_tree_plugin(volume) is not None)


def needs_check(pod: Pod) -> bool:
    """Whether PreFilter lets the pod through to Filter; memoized on the pod."""
    cached: bool | None = pod.cache.get(_NEEDS_CHECK_CACHE)
    if cached is None:
        cached = any(_is_counted_kind(v) for v in _volumes(pod))
        pod.cache[_NEEDS_CHECK_CACHE] = cached
    return cached


# -- decoded stored objects (once per object version) ------------------------------

def csi_node_limits(csi_node: dict[str, Any]) -> dict[str, int]:
    """getVolumeLimits: driver name -> allocatable count, for drivers that state one.
    Raises VolumeObjectError naming the CSINode when its drivers are malformed."""
    name = object_name("CSINode", csi_node)
    drivers = object_spec("CSINode", csi_node).get("drivers")
    if drivers is None:
        return {}
    if not isinstance(drivers, list):
        raise VolumeObjectError(f"{name}: spec.drivers must be a list")
    limits: dict[str, int] = {}
    for i, driver in enumerate(drivers):
        if not isinstance(driver, dict):
            raise VolumeObjectError(f"{name}: spec.drivers[{i}] must be an object")
        allocatable = driver.get("allocatable")
        if allocatable is None:
            continue
        if not isinstance(allocatable, dict):
            raise VolumeObjectError(f"{name}: spec.drivers[{i}].allocatable must be an object")
        count = allocatable.get("count")
        if count is None:
            continue
        if not isinstance(count, int) or isinstance(count, bool):
            raise VolumeObjectError(
                f"{name}: spec.drivers[{i}].allocatable.count must be an integer")
        limits[str(driver.get("name") or "")] = count
    return limits


def _decoded_limits(csi_node: dict[str, Any]) -> dict[str, int] | VolumeObjectError:
    try:
        return csi_node_limits(csi_node)
    except VolumeObjectError as exc:
        return exc


# A PV's volume as counted: (driver, handle) of a CSI source; (in-tree plugin, handle
# or None when the translation fails) of a migratable in-tree source; None otherwise.
PVVolume = tuple[str, str] | tuple[InTreePlugin, str | None] | None


def pv_volume(pv: dict[str, Any]) -> PVVolume:
    """What the PV counts as; VolumeObjectError naming it when it has no spec."""
    spec = object_spec("PersistentVolume", pv)
    csi = spec.get("csi")
    if csi is not None:
        if not isinstance(csi, dict):
            raise VolumeObjectError(f"{object_name('PersistentVolume', pv)}: spec.csi must "
                                    "be an object")
        return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
    plugin = in_tree_plugin(spec)
    if plugin is None:
        return None
    meta = pv.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    try:
        handle: str | None = plugin.pv_handle(source_of(plugin, spec),
                                              labels if isinstance(labels, dict) else {})
    except TranslationError:
        handle = None  # upstream logs it and does not count the volume
    return plugin, handle


def _decoded_pv(pv: dict[str, Any]) -> PVVolume | VolumeObjectError:
    try:
        return pv_volume(pv)
    except VolumeObjectError as exc:
        return exc


def _attachment_volume(storage: StorageObjects, va: Any) -> tuple[str, str, str] | None:
    """(node, driver/volumeHandle, attacher) of a VolumeAttachment of a CSI PV."""
    spec = va.get("spec") if isinstance(va, dict) else None
    if not isinstance(spec, dict):
        return None
    attacher = spec.get("attacher")
    source = spec.get("source")
    pv_name = source.get("persistentVolumeName") if isinstance(source, dict) else None
    if not attacher or not isinstance(pv_name, str):
        return None
    pv = storage.pvs.api_object(pv_name)
    pv_spec = pv.get("spec") if pv is not None else None
    csi = pv_spec.get("csi") if isinstance(pv_spec, dict) else None
    if not isinstance(csi, dict):
        return None
    return str(spec.get("nodeName") or ""), f"{attacher}/{csi.get('volumeHandle') or ''}", \
        str(attacher)


def _missing_driver(storage: StorageObjects, volumes: Volumes,
                    csi_node: dict[str, Any] | None) -> str | None:
    """checkCSIDriverOnNode over the new volumes' drivers: the first (by name) whose
    CSIDriver opts into preventPodSchedulingIfMissing and that the CSINode does not
    list; None when every one is installed or does not ask."""
    listed: set[str] = set()
    if csi_node is not None:
        # Read leniently: a malformed CSINode is reported by the limits' decoding.
        node_spec = csi_node.get("spec")
        drivers = node_spec.get("drivers") if isinstance(node_spec, dict) else None
        if isinstance(drivers, list):
            listed = {str(d.get("name")) for d in drivers if isinstance(d, dict)}
    for driver in sorted(set(volumes.values())):
        obj = storage.csi_drivers.get(driver)
        spec = obj.get("spec") if isinstance(obj, dict) else None
        if not isinstance(spec, dict) or spec.get("preventPodSchedulingIfMissing") is not True:
            continue
        if driver not in listed:
            return driver
    return None


def _stored_attachments(storage: StorageObjects) -> Mapping[str, Any]:
    """The cluster's VolumeAttachments by name."""
    return storage.volume_attachments


class CSILimits:
    name = NAME
    # No PreFilterExtensions upstream: its PreFilter state reads no other pod
    # (preemption's dry runs rely on that; framework/interfaces.py).
    pre_filter_reads_other_pods = False

    def __init__(self, *, features: FeatureGates = DEFAULTS) -> None:
        self.volume_limit_scaling = features.enabled(VOLUME_LIMIT_SCALING)
        # Upstream's random prefix for the handle of a claim counted by its class: it
        # never equals a real volume handle, and is the same for the pod and the pods
        # on the node, so one unbound claim two pods share counts once.
        self._prefix = secrets.token_hex(16)
        self._existing_key = f"NodeVolumeLimits/{self._prefix}"
        self._attachments: tuple[int, int, dict[str, Volumes]] | None = None

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        return (None, None) if needs_check(pod) else (None, Status.skip())

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not _volumes(pod):
            return None
        storage = cycle_storage(state)
        csi_node = storage.csi_nodes.get(node.name)
        migrating = csi_node is not None  # isCSIMigrationOn needs a CSINode
        new_volumes = self._new_volumes(state, storage, pod, migrating)
        if isinstance(new_volumes, Status):
            return new_volumes
        if not new_volumes:
            return None  # nothing to count
        if self.volume_limit_scaling:
            missing = _missing_driver(storage, new_volumes, csi_node)
            if missing is not None:
                return Status.unschedulable(f"{missing} {ERR_DRIVER_NOT_INSTALLED}")
        if csi_node is None:
            return None  # no limits without a CSINode
        limits = storage.decoded(csi_node, "NodeVolumeLimits/limits", _decoded_limits)
        if isinstance(limits, VolumeObjectError):
            return Status.unresolvable(str(limits))
        if not limits:
            return None
        attached: Volumes = {}
        for existing in node.pods.values():
            found = self._existing_volumes(storage, existing, migrating)
            if isinstance(found, Status):
                return found
            attached.update(found)
        used = Counter(attached.values())
        for unique, driver in self._node_attachments(storage, node.name).items():
            if unique not in attached:
                used[driver] += 1
        # A volume already on the node (through a pod) adds nothing.
        wanted = Counter(d for u, d in new_volumes.items() if u not in attached)
        for driver, count in wanted.items():
            limit = limits.get(driver)
            if limit is not None and used[driver] + count > limit:
                return _REJECT
        return None

    def _new_volumes(self, state: CycleState, storage: StorageObjects, pod: Pod,
                     migrating: bool) -> Volumes | Status:
        """The pod's own volumes, or its rejection; computed once per cycle for nodes
        with a CSINode and once for nodes without (the stored objects do not change
        during a cycle)."""
        key = f"{_CYCLE_KEY}/{migrating}"
        found: Volumes | Status | None = state.get(key)
        if found is None:
            try:
                found = self.attachable(storage, pod, migrating, new_pod=True)
            except ClaimMissing as exc:
                found = Status.unresolvable(str(exc))
            except AttachError as exc:
                found = Status.error(str(exc))
            except VolumeObjectError as exc:
                found = Status.unresolvable(str(exc))
            state.write(key, found)
        return found

    # -- counting a pod's volumes (filterAttachableVolumes)

    def attachable(self, storage: StorageObjects, pod: Pod, migrating: bool,
                   new_pod: bool) -> Volumes:
        """The pod's volumes this plugin counts. Raises ClaimMissing (the new pod's
        claim is not there; an existing pod's is skipped), AttachError and
        VolumeObjectError."""
        out: Volumes = {}
        for volume in _volumes(pod):
            source = volume.get("persistentVolumeClaim")
            ephemeral = False
            if source is not None:
                claim_name = str(source.get("claimName") or "") if isinstance(
                    source, dict) else ""
            elif volume.get("ephemeral") is not None:
                claim_name = f"{pod.name}-{volume.get('name') or ''}"
                ephemeral = True
            else:
                self._add_inline(volume, migrating, out)
                continue
            if not claim_name:
                raise AttachError("PersistentVolumeClaim had no name")
            claim = storage.pvcs.api_object(f"{pod.namespace}/{claim_name}")
            if claim is None:
                if new_pod:
                    raise ClaimMissing(f"looking up PVC {pod.namespace}/{claim_name}: "
                                       f"{not_found(PVC_RESOURCE, claim_name)}")
                continue  # maybe not this pod's claim any more: not counted
            if ephemeral and not is_owned_by(claim, pod):
                raise AttachError(f"PVC {pod.namespace}/{claim_name} was not created for pod "
                                  f"{pod.namespace}/{pod.name} (pod is not owner)")
            driver, handle = self._claim_volume(storage, claim, migrating)
            if driver and handle:
                out[f"{driver}/{handle}"] = driver
        return out

    @staticmethod
    def _add_inline(volume: Mapping[str, Any], migrating: bool, out: Volumes) -> None:
        """checkAttachableInlineVolume: an in-tree inline volume whose migration is on
        counts as the CSI volume it translates to."""
        plugin = in_tree_plugin(volume)
        if plugin is None or not (migrating and plugin.counted):
            return
        try:
            handle = plugin.inline_handle(source_of(plugin, volume))
        except TranslationError as exc:
            raise AttachError(f"converting volume({volume.get('name') or ''}) from inline "
                              f"to csi: {exc}") from exc
        out[f"{plugin.driver}/{handle}"] = plugin.driver

    def _claim_volume(self, storage: StorageObjects, claim: dict[str, Any],
                      migrating: bool) -> tuple[str, str]:
        """getCSIDriverInfo: (driver, handle) of the claim's PV, or of its class when it
        is unbound or its PV is not there; ("", "") when not counted."""
        object_spec("PersistentVolumeClaim", claim)
        pv_name = claim_volume_name(claim)
        pv = storage.pvs.api_object(pv_name) if pv_name else None
        if pv is None:
            return self._class_volume(storage, claim, migrating)
        found = storage.decoded(pv, "NodeVolumeLimits/volume", _decoded_pv)
        if isinstance(found, VolumeObjectError):
            raise found
        if found is None:
            return "", ""
        first, handle = found
        if isinstance(first, str):
            return first, str(handle)
        if not (migrating and first.counted) or handle is None:
            return "", ""
        return first.driver, handle

    def _class_volume(self, storage: StorageObjects, claim: dict[str, Any],
                      migrating: bool) -> tuple[str, str]:
        """getCSIDriverInfoFromSC: a claim not bound yet counts for its class's
        provisioner (an in-tree one as the driver it migrated to)."""
        class_name = claim_storage_class(claim)
        storage_class = storage.storage_classes.get(class_name) if class_name else None
        if storage_class is None:
            # No class: an Immediate claim, bound before scheduling; not counted.
            return "", ""
        meta = claim.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        handle = f"{self._prefix}-{meta.get('namespace') or 'default'}/{meta.get('name')}"
        provisioner = str(storage_class.get("provisioner") or "")
        plugin = BY_PROVISIONER.get(provisioner)
        if plugin is None:
            return provisioner, handle
        if not (migrating and plugin.counted):
            return "", ""
        return plugin.driver, handle

    def _existing_volumes(self, storage: StorageObjects, pod: Pod, migrating: bool
                          ) -> Volumes | Status:
        """A pod on the node's volumes, memoized on the pod until a storage object
        changes: the same pods are counted again for every pod scheduled."""
        key = (id(storage), storage.generation, migrating)
        cached = pod.cache.get(self._existing_key)
        if cached is not None and cached[0] == key:
            found: Volumes | Status = cached[1]
            return found
        try:
            found = self.attachable(storage, pod, migrating, new_pod=False)
        except AttachError as exc:
            found = Status.error(str(exc))
        except VolumeObjectError as exc:
            found = Status.unresolvable(str(exc))
        pod.cache[self._existing_key] = (key, found)
        return found

    def _node_attachments(self, storage: StorageObjects, node_name: str) -> Volumes:
        """getNodeVolumeAttachmentInfo: the node's VolumeAttachments of CSI PVs, indexed
        by node once per change of the storage objects."""
        memo = self._attachments
        if memo is None or memo[0] != id(storage) or memo[1] != storage.generation:
            index: dict[str, Volumes] = {}
            for va in _stored_attachments(storage).values():
                found = _attachment_volume(storage, va)
                if found is not None:
                    index.setdefault(found[0], {})[found[1]] = found[2]
            memo = self._attachments = (id(storage), storage.generation, index)
        return memo[2].get(node_name, {})

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (
            # Any new CSINode may bring the limits that let the pod in: no hint.
            ClusterEventWithHint(ClusterEvent(CSI_NODE, ActionType.ADD)),
            ClusterEventWithHint(ClusterEvent(CSI_NODE, ActionType.UPDATE),
                                 after_csi_node_updated),
            ClusterEventWithHint(ClusterEvent(POD, ActionType.DELETE), after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
                                 after_own_or_ephemeral_claim_change),
            ClusterEventWithHint(ClusterEvent(VOLUME_ATTACHMENT, ActionType.DELETE),
                                 after_attachment_deleted),
        )


# -- queueing hints ------------------------------------------------------------------

def _hint_limits(csi_node: Any) -> dict[str, int] | None:
    """Driver -> count (0 without one), as the CSINode hint compares them; None when
    the object cannot be read."""
    if not isinstance(csi_node, dict):
        return None
    spec = csi_node.get("spec")
    drivers = spec.get("drivers") if isinstance(spec, dict) else None
    if drivers is not None and not isinstance(drivers, list):
        return None
    out: dict[str, int] = {}
    for d in drivers or ():
        if not isinstance(d, dict):
            return None
        allocatable = d.get("allocatable")
        count = allocatable.get("count") if isinstance(allocatable, dict) else None
        out[str(d.get("name") or "")] = count if isinstance(count, int) else 0
    return out


def after_csi_node_updated(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue when a driver's limit grew (a driver new to the CSINode had 0)."""
    before, after = _hint_limits(old), _hint_limits(new)
    if before is None or after is None:
        return QUEUE
    return QUEUE if any(limit > before.get(driver, 0) for driver, limit in after.items()) \
        else QUEUE_SKIP


def after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue when the deleted pod was on a node (or nominated to one) and had a volume
    of a kind this plugin counts."""
    if not isinstance(old, Pod):
        return QUEUE
    volumes = _volumes(old)
    if not volumes:
        return QUEUE_SKIP
    status = old.raw.get("status") if isinstance(old.raw, dict) else None
    nominated = status.get("nominatedNodeName") if isinstance(status, dict) else None
    if not old.node_name and not nominated:
        return QUEUE_SKIP
    return QUEUE if any(_is_counted_kind(v) for v in volumes) else QUEUE_SKIP


def after_attachment_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue when the pod has a claim (whose volume may be the one detached), or an
    inline in-tree volume whose CSI driver is the detached attachment's attacher."""
    spec = old.get("spec") if isinstance(old, dict) else None
    attacher = spec.get("attacher") if isinstance(spec, dict) else None
    for volume in _volumes(pod):
        if volume.get("persistentVolumeClaim") is not None:
            return QUEUE
        plugin = in_tree_plugin(volume)
        if plugin is None:
            continue
        try:
            plugin.inline_handle(source_of(plugin, volume))
        except TranslationError:
            return QUEUE  # upstream queues when the translation fails
        if plugin.driver == attacher:
            return QUEUE
    return QUEUE_SKIP


def new(args: Mapping[str, Any] | None = None, *, features: FeatureGates = DEFAULTS
        ) -> CSILimits:
    if args:
        raise PluginError(NAME, [field_problem("", "NodeVolumeLimits takes no arguments")])
    return CSILimits(features=features)
