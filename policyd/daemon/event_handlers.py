"""Informer events in: the cluster state kept current, and pending pods moved.

Requeueing follows upstream's queueing hints: every informer change that can matter is
turned into a cluster event (a bound pod added, confirmed, updated or deleted; a node
added, updated in the fields it changed, or deleted; a storage or DRA object added,
updated or deleted, with the raw objects for the hints; a ResourceClaim changed as the
claim cache sees it, the scheduler's own assumptions included) and handed to the queue, which
moves only the unschedulable pods whose rejecting plugins registered that event and
whose hints say it may help (see `policyd.framework.events`). At `-v 4` every event
that finds unschedulable pods logs how many it moved, and which.

An object that cannot be decoded is skipped and counted, never fatal; a pod of ours
that cannot be read gets one FailedScheduling event per resourceVersion saying why.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.daemon.scheduling_state import LOGGER, SchedulingState
from policyd.errors import InvalidObjectError
from policyd.framework import events
from policyd.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_DELETE,
    ActionType,
    ClusterEvent,
    node_update_events,
    pod_update_events,
)
from policyd.kube import api
from policyd.model import dra_objects, storage
from policyd.model.disruption import disruption_key
from policyd.model.pod_groups import COSCHEDULING_API, PodGroup, pod_group_from_dict
from policyd.model.records import Pod, node_from_dict, pod_from_dict

log = logging.getLogger(LOGGER)

Obj = dict[str, Any]

# The cluster event resource (upstream's name) each storage kind's changes are reported
# as. Upstream's eventhandlers.go turns every add, update and delete of these into one
# plain Add/Update/Delete event; the plugins' hints look at the objects themselves.
STORAGE_EVENT_RESOURCES = {
    storage.PERSISTENT_VOLUME: events.PERSISTENT_VOLUME,
    storage.PERSISTENT_VOLUME_CLAIM: events.PERSISTENT_VOLUME_CLAIM,
    storage.STORAGE_CLASS: events.STORAGE_CLASS,
    storage.CSI_NODE: events.CSI_NODE,
    storage.CSI_DRIVER: events.CSI_DRIVER,
    storage.CSI_STORAGE_CAPACITY: events.CSI_STORAGE_CAPACITY,
    storage.VOLUME_ATTACHMENT: events.VOLUME_ATTACHMENT,
}


def _storage_event(kind: str, action: ActionType) -> ClusterEvent:
    return ClusterEvent(STORAGE_EVENT_RESOURCES[kind], action)


# The same for the DRA kinds. A ResourceClaim's events come from the claim cache, not
# from the informer (upstream registers its handlers on the claim assume cache): a
# version the cache keeps out (not newer) moves nothing, and the scheduler's own
# assumptions and restores move pods as informer changes do.
DRA_EVENT_RESOURCES = {
    dra_objects.DEVICE_CLASS: events.DEVICE_CLASS,
    dra_objects.RESOURCE_SLICE: events.RESOURCE_SLICE,
    dra_objects.RESOURCE_CLAIM: events.RESOURCE_CLAIM,
}


def _action(old: Obj | None, new: Obj | None) -> ActionType:
    if old is None:
        return ActionType.ADD
    return ActionType.DELETE if new is None else ActionType.UPDATE


class EventHandlers:
    """The informers' callbacks for pods, nodes, namespaces and workloads."""

    def __init__(self, state: SchedulingState, *, metrics: Metrics, events: EventSink,
                 is_leader: Callable[[], bool]) -> None:
        self.state = state
        self.metrics = metrics
        self.events = events
        self.is_leader = is_leader
        self._bad_objects: dict[str, str] = {}  # uid -> resourceVersion already reported
        self._workloads: dict[str, dict[str, Obj]] = {}  # kind -> ns/name -> object
        state.cluster.dra.claims.subscribe(self._claim_changed)

    # -- pods -----------------------------------------------------------------------------

    def _decode_pod(self, obj: Obj) -> Pod | None:
        try:
            return pod_from_dict(obj)
        except InvalidObjectError as exc:
            raw_meta, raw_spec = obj.get("metadata"), obj.get("spec")
            meta: Obj = raw_meta if isinstance(raw_meta, dict) else {}
            spec: Obj = raw_spec if isinstance(raw_spec, dict) else {}
            uid = str(meta.get("uid") or "")
            rv = str(meta.get("resourceVersion") or "")
            self.metrics.objects_skipped.labels("pods", "invalid").inc()
            if self._bad_objects.get(uid) != rv:
                self._bad_objects[uid] = rv
                log.error("skipping malformed pod: %s", exc)
                if (self.is_leader() and spec.get("schedulerName") in self.state.frameworks
                        and meta.get("namespace") and meta.get("name")):
                    self.events.event(api.pod_ref(str(meta["namespace"]), str(meta["name"]),
                                                  uid), "Warning", "FailedScheduling",
                                      f"policyd cannot read this pod: {exc.message}",
                                      "Scheduling", str(spec["schedulerName"]))
            return None

    def on_pod_add(self, obj: Obj) -> None:
        pod = self._decode_pod(obj)
        if pod is not None:
            self._pod_changed(None, pod)

    def on_pod_update(self, old: Obj, new: Obj) -> None:
        pod = self._decode_pod(new)
        if pod is None:
            # Unreadable now: stop trying to schedule it (it stays counted as it was).
            uid = str((new.get("metadata") or {}).get("uid") or "")
            with self.state.lock:
                self.state.queue.delete(uid)
            return
        self._pod_changed(old, pod)

    def _pod_changed(self, old: Obj | None, pod: Pod) -> None:
        s = self.state
        with s.lock:
            uid = pod.uid
            was_on = s.cluster.node_of(uid)
            if uid in s.assumed and not pod.node_name and not pod.finished:
                # Our binding is in flight; the API has not caught up. Keep the
                # assumption so the pod keeps counting on its node.
                return
            confirmed = s.assumed.pop(uid, None) is not None
            before = s.counted_pod(uid) if was_on else None
            s.cluster.upsert_pod(pod)
            if s.responsible(pod) and not pod.deleting:
                # The nominator holds the pending pods of our profiles only, as
                # upstream's lives in the scheduling queue.
                s.cluster.sync_nomination(pod, None if old is None else _nominated(old))
            else:
                s.cluster.clear_nomination(uid)
            if pod.node_name or pod.finished:
                # Bound (by us or anyone) or finished: nothing left to schedule.
                s.queue.delete(uid)
                s.throttle.forget(uid)
            elif s.responsible(pod) and not pod.deleting:
                s.queue.add(pod)
                if old is None and s.gates.enabled("GangScheduling"):
                    # The pod may complete a gang whose members PreEnqueue holds back
                    # (upstream moves every pod on this event under the gate).
                    s.move(ClusterEvent(events.UNSCHEDULED_POD, ActionType.ADD), None, pod)
            else:
                s.queue.delete(uid)
            counted = s.cluster.node_of(uid) is not None
            if counted and (not was_on or confirmed):
                # Bound now: by another scheduler, created bound, or our own binding
                # confirmed (upstream's informer sees each as an assigned pod added).
                s.move(ASSIGNED_POD_ADD, None, pod)
            elif was_on and not counted:
                # Finished (or gone from its node): its resources are free now.
                s.move(ASSIGNED_POD_DELETE, before, None)
            elif was_on and counted and before is not None and old is not None:
                for event in pod_update_events(before, pod, s.gates):
                    s.move(event, before, pod)

    def on_pod_delete(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        s = self.state
        # A pod waiting at Permit stops waiting: its binding cycle ends and finds it
        # gone (upstream's RejectWaitingPod on delete).
        s.waiting_pods.reject(uid, "", "removed")
        with s.lock:
            assumed_on = s.assumed.pop(uid, None)
            removed = s.cluster.remove_pod(uid)
            s.cluster.clear_nomination(uid)
            s.throttle.forget(uid)
            self._bad_objects.pop(uid, None)
            s.queue.delete(uid)
            if removed is not None and assumed_on is not None and not removed.node_name:
                removed = dataclasses.replace(removed, node_name=assumed_on, cache={})
            if removed is not None and removed.node_name:
                s.move(ASSIGNED_POD_DELETE, removed, None)

    # -- nodes ----------------------------------------------------------------------------

    def on_node_add(self, obj: Obj) -> None:
        self._node_changed(obj)

    def on_node_update(self, old: Obj, new: Obj) -> None:
        self._node_changed(new)

    def _node_changed(self, obj: Obj) -> None:
        try:
            node = node_from_dict(obj)
        except InvalidObjectError as exc:
            self.metrics.objects_skipped.labels("nodes", "invalid").inc()
            log.error("skipping malformed node: %s", exc)
            return
        s = self.state
        with s.lock:
            known = s.cluster.get(node.name)
            before = known.node if known is not None else None
            s.cluster.upsert_node(node)
            if before is None:
                s.move(NODE_ADD, None, node)
                return
            # One event per kind of change (labels, taints, allocatable...); a status
            # heartbeat is none of them and moves nothing.
            for event in node_update_events(before, node):
                s.move(event, before, node)

    def on_node_delete(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        s = self.state
        with s.lock:
            known = s.cluster.get(name)
            s.cluster.remove_node(name, str(meta.get("uid") or name))
            if known is not None and s.cluster.get(name) is None:
                s.move(NODE_DELETE, known.node, None)

    # -- namespaces and workloads ---------------------------------------------------------

    def on_namespace(self, obj: Obj, deleted: bool = False) -> None:
        """Namespace labels, for namespaceSelector in pod (anti-)affinity terms."""
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str):
            return
        labels = meta.get("labels") or {}
        with self.state.lock:
            namespaces = self.state.cluster.namespace_labels
            if deleted:
                namespaces.pop(name, None)
            elif isinstance(labels, dict):
                namespaces[name] = {str(k): str(v) for k, v in labels.items()}

    def on_workload(self, kind: str, obj: Obj, deleted: bool = False) -> None:
        """Services, ReplicaSets, StatefulSets, ReplicationControllers: the selectors
        behind PodTopologySpread's system default constraints."""
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        with self.state.lock:
            objs = self._workloads.setdefault(kind, {})
            if deleted:
                objs.pop(key, None)
            else:
                objs[key] = obj
            # Replaced, never edited in place: plugins memoize by object identity.
            self.state.cluster.workloads[kind] = list(objs.values())

    def on_workload_update(self, kind: str, old: Obj, new: Obj) -> None:
        self.on_workload(kind, new)

    # -- storage --------------------------------------------------------------------------

    def on_storage(self, kind: str, obj: Obj) -> None:
        """A PersistentVolume, claim, StorageClass, CSINode, CSIDriver or
        CSIStorageCapacity added: into `cluster.storage`, then its Add event."""
        self._storage_changed(kind, None, obj)

    def on_storage_update(self, kind: str, old: Obj, new: Obj) -> None:
        self._storage_changed(kind, old, new)

    def _storage_changed(self, kind: str, old: Obj | None, new: Obj) -> None:
        s = self.state
        with s.lock:
            s.cluster.storage.upsert(kind, new)
            action = ActionType.ADD if old is None else ActionType.UPDATE
            s.move(_storage_event(kind, action), old, new)

    def on_storage_delete(self, kind: str, obj: Obj) -> None:
        s = self.state
        with s.lock:
            s.cluster.storage.delete(kind, storage.object_key(kind, obj))
            s.move(_storage_event(kind, ActionType.DELETE), obj, None)


    # -- DRA ------------------------------------------------------------------------------

    def on_dra(self, kind: str, obj: Obj) -> None:
        """A DeviceClass, ResourceSlice or ResourceClaim added: into `cluster.dra`,
        then its Add event (a claim's through the claim cache)."""
        self._dra_changed(kind, None, obj)

    def on_dra_update(self, kind: str, old: Obj, new: Obj) -> None:
        self._dra_changed(kind, old, new)

    def _dra_changed(self, kind: str, old: Obj | None, new: Obj) -> None:
        s = self.state
        with s.lock:
            s.cluster.dra.upsert(kind, new)
            if kind != dra_objects.RESOURCE_CLAIM:
                s.move(ClusterEvent(DRA_EVENT_RESOURCES[kind], _action(old, new)), old, new)

    def on_dra_delete(self, kind: str, obj: Obj) -> None:
        s = self.state
        with s.lock:
            s.cluster.dra.delete(kind, dra_objects.dra_key(kind, obj))
            if kind != dra_objects.RESOURCE_CLAIM:
                s.move(ClusterEvent(DRA_EVENT_RESOURCES[kind], ActionType.DELETE), obj, None)

    def _claim_changed(self, old: Obj | None, new: Obj | None) -> None:
        """The claim cache's listener: every change the scheduler sees of a claim (an
        informer version, or the scheduler's own assumption or restore), as one
        ResourceClaim Add/Update/Delete with the versions before and after."""
        s = self.state
        with s.lock:
            s.move(ClusterEvent(events.RESOURCE_CLAIM, _action(old, new)), old, new)

    # -- pod groups -----------------------------------------------------------------------

    def on_pod_group(self, api_version: str, obj: Obj) -> None:
        """A PodGroup (either API) added: into `cluster.pod_groups`, then its Add
        event (a gang member may have been waiting for it)."""
        group = self._decode_pod_group(api_version, obj)
        if group is None:
            return
        s = self.state
        with s.lock:
            s.cluster.pod_groups.upsert(group)
            s.move(ClusterEvent(_pod_group_resource(api_version), ActionType.ADD), None, group)

    def on_pod_group_update(self, api_version: str, old: Obj, new: Obj) -> None:
        group = self._decode_pod_group(api_version, new)
        if group is None:
            return
        with self.state.lock:
            self.state.cluster.pod_groups.upsert(group)
            if api_version == COSCHEDULING_API:
                # scheduler-plugins' PodGroup spec may change (minMember), and its
                # Coscheduling registers Update: any change moves its pods, as upstream.
                self.state.move(ClusterEvent(events.COSCHEDULING_POD_GROUP,
                                             ActionType.UPDATE), None, group)
            # The scheduling.k8s.io spec is immutable: only its status changed, which no
            # plugin waits for.

    def on_pod_group_delete(self, api_version: str, obj: Obj) -> None:
        group = self._decode_pod_group(api_version, obj)
        if group is not None:
            with self.state.lock:
                self.state.cluster.pod_groups.delete(group.key)

    def _decode_pod_group(self, api_version: str, obj: Obj) -> PodGroup | None:
        try:
            return pod_group_from_dict(obj, api_version)
        except InvalidObjectError as exc:
            self.metrics.objects_skipped.labels("podgroups", "invalid").inc()
            log.error("skipping malformed PodGroup: %s", exc)
            return None

    # -- what preemption reads ----------------------------------------------------------

    def on_disruption(self, kind: str, obj: Obj) -> None:
        """A PodDisruptionBudget or PriorityClass added or updated: into
        `cluster.disruption_budgets`. No cluster event: no plugin registers one for
        these kinds (upstream's DefaultPreemption reads them when it runs, and a
        budget's change cannot make a pod fit)."""
        with self.state.lock:
            self.state.cluster.disruption_budgets.upsert(kind, obj)

    def on_disruption_update(self, kind: str, old: Obj, new: Obj) -> None:
        self.on_disruption(kind, new)

    def on_disruption_delete(self, kind: str, obj: Obj) -> None:
        with self.state.lock:
            self.state.cluster.disruption_budgets.delete(kind, disruption_key(kind, obj))


def _nominated(obj: Obj) -> str:
    """status.nominatedNodeName of a raw pod ("" when absent)."""
    status = obj.get("status")
    value = status.get("nominatedNodeName") if isinstance(status, dict) else None
    return value if isinstance(value, str) else ""


def _pod_group_resource(api_version: str) -> str:
    """The event resource of a PodGroup of either API (each plugin registers its own)."""
    return events.COSCHEDULING_POD_GROUP if api_version == COSCHEDULING_API \
        else events.POD_GROUP
