"""VolumeRestrictions: volumes two pods may not share (kube-scheduler v1.36's
volumerestrictions plugin).

Two checks, split as upstream splits them:
- ReadWriteOncePod claims (PreFilter): a claim with that access mode may be used by one
  pod at a time. PreFilter looks up each persistentVolumeClaim volume's claim (a claim
  that does not exist rejects the pod as UnschedulableAndUnresolvable with the lister's
  own `persistentvolumeclaim "x" not found`) and counts the pod's ReadWriteOncePod claims
  some pod on a node already uses (`ClusterState.claim_in_use`). When one is, Filter
  rejects every node as Unschedulable: preempting that user could free the claim.
- In-tree disks (Filter): the same GCE PD (unless every mount is read-only), AWS EBS
  volume, iSCSI IQN (unless every mount is read-only) or Ceph RBD image (a shared
  monitor, same pool and image, unless every mount is read-only) as a pod already on
  the node: `node(s) had no available disk`.

A pod with neither kind of volume is skipped in PreFilter, from a per-pod memo: that is
every pod without volumes, the common case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import (
    NODE_ADD,
    PERSISTENT_VOLUME_CLAIM,
    POD,
    QUEUE,
    QUEUE_SKIP,
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
    after_own_claim_change,
    cycle_storage,
    not_found,
    object_name,
    object_spec,
)
from policyd.problems import field_problem

NAME = names.VOLUME_RESTRICTIONS
DEFAULT_WEIGHT: int | None = None

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod")

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
# The state key upstream uses; its Filter errors with this name when PreFilter did not run.
PRE_FILTER_KEY = "PreFilterVolumeRestrictions"

_REJECT_DISK = Status.unschedulable(ERR_REASON_DISK_CONFLICT)
_REJECT_RWOP = Status.unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
_DISKS_CACHE = "VolumeRestrictions/disks"


# -- in-tree disks ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Disk:
    """One in-tree disk source of a pod volume, reduced to what the conflict rules
    compare. `ident` is the disk's identity within its kind (GCE PD name, EBS volume ID,
    iSCSI IQN, RBD pool and image); RBD images are the same only when their monitor
    lists also overlap."""

    kind: str  # "gce", "aws", "iscsi", "rbd"
    ident: tuple[str, ...]
    read_only: bool
    monitors: frozenset[str] = frozenset()

    def conflicts(self, other: Disk) -> bool:
        if self.kind != other.kind or self.ident != other.ident:
            return False
        if self.kind == "aws":
            return True  # an EBS volume attaches to one instance, read-only or not
        if self.kind == "rbd" and not self.monitors & other.monitors:
            return False
        return not (self.read_only and other.read_only)


def _mapping(value: Any) -> Mapping[str, Any]:
    # A pod's inline volume sources are checked by the API server; a malformed one in
    # a snapshot file reads as empty instead of failing the cycle.
    return value if isinstance(value, dict) else {}


def volume_disks(volume: Mapping[str, Any]) -> tuple[Disk, ...]:
    """The in-tree disks of one pod volume that the conflict rules look at (a volume
    has one source; each kind is compared with its own kind only)."""
    out = []
    if volume.get("gcePersistentDisk") is not None:
        src = _mapping(volume["gcePersistentDisk"])
        out.append(Disk("gce", (str(src.get("pdName") or ""),), bool(src.get("readOnly"))))
    if volume.get("awsElasticBlockStore") is not None:
        src = _mapping(volume["awsElasticBlockStore"])
        out.append(Disk("aws", (str(src.get("volumeID") or ""),), bool(src.get("readOnly"))))
    if volume.get("iscsi") is not None:
        src = _mapping(volume["iscsi"])
        out.append(Disk("iscsi", (str(src.get("iqn") or ""),), bool(src.get("readOnly"))))
    if volume.get("rbd") is not None:
        src = _mapping(volume["rbd"])
        monitors = src.get("monitors")
        # The API server defaults the pool to "rbd"; a snapshot file may leave it out.
        pool = str(src.get("pool") or "rbd")
        out.append(Disk("rbd", (pool, str(src.get("image") or "")), bool(src.get("readOnly")),
                        frozenset(str(m) for m in monitors) if isinstance(monitors, list)
                        else frozenset()))
    return tuple(out)


def pod_disks(pod: Pod) -> tuple[Disk, ...]:
    """Every in-tree disk of the pod's volumes, memoized on the pod (volumes are
    immutable)."""
    cached: tuple[Disk, ...] | None = pod.cache.get(_DISKS_CACHE)
    if cached is None:
        spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
        volumes = spec.get("volumes") if isinstance(spec, dict) else None
        cached = tuple(d for v in (volumes if isinstance(volumes, list) else ())
                       if isinstance(v, dict) for d in volume_disks(v))
        pod.cache[_DISKS_CACHE] = cached
    return cached


def disks_conflict(wanted: Sequence[Disk], existing: Pod) -> bool:
    """Whether a disk of `wanted` conflicts with one of the existing pod's."""
    theirs = pod_disks(existing)
    return bool(theirs) and any(d.conflicts(e) for d in wanted for e in theirs)


# -- ReadWriteOncePod claims --------------------------------------------------------

def claim_access_modes(claim: dict[str, Any]) -> tuple[str, ...]:
    """The claim's spec.accessModes; VolumeObjectError naming the claim when it has no
    spec or they are not a list (a malformed snapshot file)."""
    modes = object_spec("PersistentVolumeClaim", claim).get("accessModes")
    if modes is not None and not isinstance(modes, list):
        raise VolumeObjectError(f"{object_name('PersistentVolumeClaim', claim)}: "
                                "spec.accessModes must be a list")
    return tuple(str(m) for m in modes or ())


def _uses_rwop(claim: dict[str, Any]) -> bool | VolumeObjectError:
    try:
        return READ_WRITE_ONCE_POD in claim_access_modes(claim)
    except VolumeObjectError as exc:
        return exc


def read_write_once_pod_claims(storage: StorageObjects, pod: Pod) -> set[str] | Status:
    """The names of the pod's ReadWriteOncePod claims (persistentVolumeClaim volumes
    only, as upstream), or the rejection for the first claim that is not there."""
    out: set[str] = set()
    for claim_name in pod.persistent_claims:
        claim = storage.pvcs.api_object(f"{pod.namespace}/{claim_name}")
        if claim is None:
            return Status.unresolvable(not_found(PVC_RESOURCE, claim_name))
        uses = storage.decoded(claim, "VolumeRestrictions/rwop", _uses_rwop)
        if isinstance(uses, VolumeObjectError):
            return Status.unresolvable(str(uses))
        if uses:
            out.add(claim_name)
    return out


@dataclass(frozen=True, slots=True)
class PreFilterState:
    disks: tuple[Disk, ...]  # the pod's in-tree disks
    rwop_claims: frozenset[str]  # its ReadWriteOncePod claims
    conflicting_claims: int  # how many of those a pod on a node already uses


class VolumeRestrictions:
    name = NAME

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        disks = pod_disks(pod)
        if not disks and not pod.persistent_claims:
            return None, Status.skip()
        claims = read_write_once_pod_claims(cycle_storage(state), pod)
        if isinstance(claims, Status):
            return None, claims
        cluster = state.cluster
        in_use = sum(1 for c in claims
                     if cluster is not None and cluster.claim_in_use(f"{pod.namespace}/{c}"))
        if not disks and in_use == 0:
            return None, Status.skip()
        state.write(PRE_FILTER_KEY, PreFilterState(disks, frozenset(claims), in_use))
        return None, None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        disks = pod_disks(pod)
        if disks and any(disks_conflict(disks, p) for p in node.pods.values()):
            return _REJECT_DISK
        pre: PreFilterState | None = state.get(PRE_FILTER_KEY)
        if pre is None:
            return Status.error(f'cannot read "{PRE_FILTER_KEY}" from cycleState')
        return _REJECT_RWOP if pre.conflicting_claims > 0 else None

    # PreFilterExtensions (upstream AddPod/RemovePod): the count of ReadWriteOncePod
    # claims in use follows the pods added or removed. As upstream, a pod's claims
    # are compared by name only, whatever its namespace.
    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node: NodeInfo
                ) -> Status | None:
        return _update_with_pod(state, pod_to_add, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node: NodeInfo
                   ) -> Status | None:
        return _update_with_pod(state, pod_to_remove, -1)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # Queueing hints are always on in v1.36 (SchedulerQueueingHints is GA), so a
        # new node is the only node event upstream registers; a pod's volumes are
        # immutable, so only a deletion can free a disk or a claim.
        return (
            ClusterEventWithHint(ClusterEvent(POD, ActionType.DELETE), after_pod_deleted),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
                                 after_own_claim_change),
        )


def after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue when the deleted pod (of the same namespace, as upstream compares) held a
    disk this pod conflicts on, or used one of its claims (whatever its access mode:
    upstream does not look the claim up here)."""
    if not isinstance(old, Pod) or old.namespace != pod.namespace:
        return QUEUE_SKIP
    disks = pod_disks(pod)
    if disks and disks_conflict(disks, old):
        return QUEUE
    mine = set(pod.persistent_claims)
    return QUEUE if any(c in mine for c in old.persistent_claims) else QUEUE_SKIP


def _update_with_pod(state: CycleState, other: Pod, sign: int) -> Status | None:
    pre: PreFilterState | None = state.get(PRE_FILTER_KEY)
    if pre is None:
        return Status.error(f'cannot read "{PRE_FILTER_KEY}" from cycleState')
    uses = sum(1 for c in other.persistent_claims if c in pre.rwop_claims)
    if uses:
        # The state is immutable (shared by cloned states): a changed copy replaces it.
        state.write(PRE_FILTER_KEY, replace(
            pre, conflicting_claims=pre.conflicting_claims + sign * uses))
    return None


def new(args: Mapping[str, Any] | None = None) -> VolumeRestrictions:
    if args:
        raise PluginError(NAME, [field_problem("", "VolumeRestrictions takes no arguments")])
    return VolumeRestrictions()
