"""Cluster events and queueing hints: which changes can make a rejected pod fit
(upstream's ClusterEvent, ActionType, EnqueueExtensions and QueueingHintFn,
`k8s.io/kube-scheduler/framework` and `pkg/scheduler/framework/events.go`, v1.36).

Each plugin says, in `events_to_register()`, which events can undo a rejection of
its own, each with an optional hint `(pod, old, new) -> QueueingHint` that looks at
the changed object (a `Pod` or `Node` record; `old` is None for an add, `new` None
for a delete). The scheduling queue moves a pod that some plugins rejected only on an
event one of *those* plugins registered, and only when that plugin's hint says QUEUE.
A plugin without `events_to_register` is taken to care about every event (upstream
unrolls such a plugin to the wildcard).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum, IntFlag
from typing import Any, Protocol, runtime_checkable

from policyd.features import DEFAULTS, FeatureGates
from policyd.model.records import Node, Pod
from policyd.model.resources import pod_requests


class ActionType(IntFlag):
    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16  # taints, or spec.unschedulable turned off
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    # status.declaredFeatures changed (upstream's place for it, before the pod kinds:
    # `matches` compares the values, so the order is upstream's order).
    UPDATE_NODE_DECLARED_FEATURE = 128
    UPDATE_POD_LABEL = 256
    UPDATE_POD_SCALE_DOWN = 512
    UPDATE_POD_TOLERATION = 1024
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 2048
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 4096
    UPDATE = 4 | 8 | 16 | 32 | 64 | 128 | 256 | 512 | 1024 | 2048 | 4096
    ALL = 8191


# Upstream's names, used in event labels and logs.
_ACTION_NAMES = {
    ActionType.ADD: "Add", ActionType.DELETE: "Delete",
    ActionType.UPDATE_NODE_ALLOCATABLE: "UpdateNodeAllocatable",
    ActionType.UPDATE_NODE_LABEL: "UpdateNodeLabel",
    ActionType.UPDATE_NODE_TAINT: "UpdateNodeTaint",
    ActionType.UPDATE_NODE_CONDITION: "UpdateNodeCondition",
    ActionType.UPDATE_NODE_ANNOTATION: "UpdateNodeAnnotation",
    ActionType.UPDATE_NODE_DECLARED_FEATURE: "UpdateNodeDeclaredFeature",
    ActionType.UPDATE_POD_LABEL: "UpdatePodLabel",
    ActionType.UPDATE_POD_SCALE_DOWN: "UpdatePodScaleDown",
    ActionType.UPDATE_POD_TOLERATION: "UpdatePodToleration",
    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED: "UpdatePodSchedulingGatesEliminated",
    ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM: "UpdatePodGeneratedResourceClaim",
    ActionType.UPDATE: "Update", ActionType.ALL: "All",
}

# Resources. Plugins register POD, which matches both kinds of incoming pod events.
POD = "Pod"
NODE = "Node"
ASSIGNED_POD = "AssignedPod"
UNSCHEDULED_POD = "UnschedulablePod"
# Storage resources (upstream's names); their hints get the raw objects as old/new.
PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
STORAGE_CLASS = "storage.k8s.io/StorageClass"
CSI_NODE = "storage.k8s.io/CSINode"
CSI_DRIVER = "storage.k8s.io/CSIDriver"
CSI_STORAGE_CAPACITY = "storage.k8s.io/CSIStorageCapacity"
VOLUME_ATTACHMENT = "storage.k8s.io/VolumeAttachment"
# DRA resources (upstream's names); their hints get the raw objects as old/new too.
RESOURCE_CLAIM = "resource.k8s.io/ResourceClaim"
RESOURCE_SLICE = "resource.k8s.io/ResourceSlice"
DEVICE_CLASS = "resource.k8s.io/DeviceClass"
# PodGroups (scheduling.k8s.io, GenericWorkload): their hints get PodGroup records.
POD_GROUP = "scheduling.k8s.io/PodGroup"
# scheduler-plugins' PodGroup CRD, named as its Coscheduling registers it (a custom
# resource's event name is resource.version.group); hints get PodGroup records.
COSCHEDULING_POD_GROUP = "podgroups.v1alpha1.scheduling.x-k8s.io"
WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: str
    action: ActionType
    custom_label: str = ""

    @property
    def label(self) -> str:
        if self.custom_label:
            return self.custom_label
        return f"{self.resource}{_ACTION_NAMES.get(self.action, str(int(self.action)))}"

    @property
    def is_wildcard(self) -> bool:
        return self.resource == WILDCARD and self.action == ActionType.ALL


def matches(registered: ClusterEvent, incoming: ClusterEvent) -> bool:
    """Whether a plugin's registration covers an incoming event (MatchClusterEvents).

    A general Update (a change that is none of the specific kinds) only matches a
    registration of Update or All, never one of a specific UpdateXxx kind.
    """
    if registered.is_wildcard:
        return True
    resource_ok = (registered.resource == incoming.resource
                   or registered.resource == WILDCARD
                   or (registered.resource == POD
                       and incoming.resource in (ASSIGNED_POD, UNSCHEDULED_POD)))
    return (resource_ok and bool(registered.action & incoming.action)
            and int(incoming.action) <= int(registered.action))


class QueueingHint(Enum):
    QUEUE_SKIP = 0
    QUEUE = 1


QUEUE = QueueingHint.QUEUE
QUEUE_SKIP = QueueingHint.QUEUE_SKIP

# (the pending pod, old object or None, new object or None) -> hint
HintFn = Callable[[Pod, Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: HintFn | None = None  # None: the event always may help (QUEUE)


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """The events that can make a pod this plugin rejected schedulable."""


WILDCARD_EVENT = ClusterEvent(WILDCARD, ActionType.ALL)
# Special events that move every unschedulable pod (upstream's wildcard events).
UNSCHEDULABLE_TIMEOUT = ClusterEvent(WILDCARD, ActionType.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(WILDCARD, ActionType.ALL, "ForceActivate")

ASSIGNED_POD_ADD = ClusterEvent(ASSIGNED_POD, ActionType.ADD)
ASSIGNED_POD_DELETE = ClusterEvent(ASSIGNED_POD, ActionType.DELETE)
NODE_ADD = ClusterEvent(NODE, ActionType.ADD)
NODE_DELETE = ClusterEvent(NODE, ActionType.DELETE)


def registrations(plugin: object) -> Sequence[ClusterEventWithHint]:
    """What `plugin` registered; every event for a plugin that registers nothing."""
    if isinstance(plugin, EnqueueExtensions):
        return plugin.events_to_register()
    return (ClusterEventWithHint(WILDCARD_EVENT),)


# -- interpreting updates (PodSchedulingPropertiesChange, NodeSchedulingPropertiesChange)

def pod_update_events(old: Pod, new: Pod, features: FeatureGates = DEFAULTS
                      ) -> list[ClusterEvent]:
    """The specific events a pod update is; a general Update when it is none of them.
    `features` decides how a resized pod's requests compare (extractPodScaleDown)."""
    resource = ASSIGNED_POD if new.node_name else UNSCHEDULED_POD
    actions = []
    if old.labels != new.labels:
        actions.append(ActionType.UPDATE_POD_LABEL)
    if _scaled_down(old, new, features):
        actions.append(ActionType.UPDATE_POD_SCALE_DOWN)
    if old.scheduling_gates and not new.scheduling_gates:
        actions.append(ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    if len(old.tolerations) != len(new.tolerations):
        actions.append(ActionType.UPDATE_POD_TOLERATION)
    if _claim_statuses(old) != _claim_statuses(new):
        # The claim controller named a template's generated claim (DynamicResources).
        actions.append(ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
    if not actions:
        actions.append(ActionType.UPDATE)
    return [ClusterEvent(resource, a) for a in actions]


def _claim_statuses(pod: Pod) -> list[tuple[Any, Any]]:
    """status.resourceClaimStatuses as resourceclaim.PodStatusEqual compares them (in
    order, by name and claim name; none and an empty list alike)."""
    status = pod.raw.get("status")
    entries = status.get("resourceClaimStatuses") if isinstance(status, dict) else None
    return [(e.get("name"), e.get("resourceClaimName")) for e in entries or ()
            if isinstance(e, dict)] if isinstance(entries, list) else []


def _scaled_down(old: Pod, new: Pod, features: FeatureGates) -> bool:
    # extractPodScaleDown reads requests with UseStatusResources: a resize the kubelet
    # actuated (status) counts, not only a change of the spec.
    before = pod_requests(old, use_status=True, features=features)
    after = pod_requests(new, use_status=True, features=features)
    return any(name not in after or after[name] < value for name, value in before.items())


def node_update_events(old: Node, new: Node) -> list[ClusterEvent]:
    """The events a node update is, in upstream's order; none for a status heartbeat."""
    actions = []
    if old.unschedulable and not new.unschedulable:
        actions.append(ActionType.UPDATE_NODE_TAINT)
    if old.allocatable != new.allocatable:
        actions.append(ActionType.UPDATE_NODE_ALLOCATABLE)
    if old.labels != new.labels:
        actions.append(ActionType.UPDATE_NODE_LABEL)
    if old.taints != new.taints:
        actions.append(ActionType.UPDATE_NODE_TAINT)
    if _conditions(old) != _conditions(new):
        actions.append(ActionType.UPDATE_NODE_CONDITION)
    if old.annotations != new.annotations:
        actions.append(ActionType.UPDATE_NODE_ANNOTATION)
    # Compared as lists: the API server keeps them sorted and unique.
    if old.declared_features != new.declared_features:
        actions.append(ActionType.UPDATE_NODE_DECLARED_FEATURE)
    return [ClusterEvent(NODE, a) for a in actions]


def _conditions(node: Node) -> dict[str, str]:
    status = node.raw.get("status") if isinstance(node.raw, dict) else None
    conds = status.get("conditions") if isinstance(status, dict) else None
    out: dict[str, str] = {}
    for c in conds if isinstance(conds, list) else ():
        if isinstance(c, dict):
            out[str(c.get("type"))] = str(c.get("status"))
    return out


# -- small helpers the hints of several plugins share

def is_self(pod: Pod, changed: Pod | None) -> bool:
    return changed is not None and changed.uid == pod.uid


def queue_if_self(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """The pending pod itself changed (an update of its own): try it again."""
    return QUEUE if isinstance(new, Pod) and is_self(pod, new) else QUEUE_SKIP


def queue_if_assigned_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A pod that held a node's resources went away (a delete of a bound pod)."""
    if new is None and isinstance(old, Pod) and old.node_name:
        return QUEUE
    return QUEUE_SKIP
