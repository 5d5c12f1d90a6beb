"""The scheduler's informer handlers and failure path, driven synchronously.

No request is sent: the paths exercised here (decoding, queueing, assumptions,
unschedulable cycles) only enqueue events; the event writer thread is never started.
Binding is covered end to end in tests/e2e.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

import pytest

from policyd.daemon.coordinator import Scheduler
from policyd.daemon.queue import ACTIVE, UNSCHEDULABLE
from policyd.framework.events import (
    QUEUE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from policyd.model.records import Pod
from tests.builders import make_node, make_pod


def _pod(name: str, **kw: str) -> dict[str, object]:
    b = make_pod(name).uid(f"uid-{name}").scheduler("policyd")
    if "cpu" in kw:
        b = b.req(cpu=kw["cpu"])
    if "node" in kw:
        b = b.node(kw["node"])
    return b.raw()


def test_only_this_schedulers_pending_pods_are_queued(sched: Scheduler) -> None:
    sched.on_pod_add(_pod("mine"))
    sched.on_pod_add(make_pod("theirs").uid("uid-theirs").scheduler("other").raw())
    sched.on_pod_add(_pod("bound", node="n1"))
    sched.on_pod_add(make_pod("done").uid("uid-done").scheduler("policyd").phase(
        "Succeeded").raw())
    assert "uid-mine" in sched.queue
    for uid in ("uid-theirs", "uid-bound", "uid-done"):
        assert uid not in sched.queue


def test_a_malformed_pod_is_skipped_not_fatal(sched: Scheduler) -> None:
    bad = _pod("bad")
    bad["spec"]["containers"][0]["resources"] = {  # type: ignore[index]
        "requests": {"cpu": "lots"}}
    sched.on_pod_add(bad)
    sched.on_pod_update(bad, bad)
    assert "uid-bad" not in sched.queue
    sched.on_pod_add(_pod("good"))
    assert "uid-good" in sched.queue


def test_unschedulable_pod_waits_and_a_new_node_brings_it_back(sched: Scheduler) -> None:
    sched.on_node_add(make_node("small").capacity(cpu="1", memory="1Gi", pods="10").raw())
    sched.on_pod_add(_pod("big", cpu="2"))
    qp = sched.queue.pop(timeout=0)
    assert qp is not None
    result = sched.schedule(qp)
    assert result is not None and result.node is None
    assert result.message == ("0/1 nodes are available: 1 Insufficient cpu. "
                              "no new claims to deallocate, preemption: "
                              "0/1 nodes are available: 1 Preemption is not helpful for "
                              "scheduling.")
    assert sched.queue.where("uid-big") == UNSCHEDULABLE
    # A heartbeat-only update does not move it; a new node does.
    node = make_node("small").capacity(cpu="1", memory="1Gi", pods="10").raw()
    sched.on_node_update(node, {**node, "status": {**node["status"], "conditions": []}})
    assert sched.queue.where("uid-big") == UNSCHEDULABLE
    sched.on_node_add(make_node("large").capacity(cpu="8", memory="8Gi", pods="10").raw())
    assert sched.queue.where("uid-big") in (ACTIVE, "backoff")


def test_an_assumed_pod_keeps_counting_until_the_api_shows_it_bound(
        sched: Scheduler) -> None:
    sched.on_node_add(make_node("n1").raw())
    raw = _pod("p", cpu="1")
    sched.on_pod_add(raw)
    qp = sched.queue.pop(timeout=0)
    assert qp is not None
    pod = qp.pod
    with sched.lock:  # what a successful cycle does before binding
        sched.cluster.assume(pod, "n1")
        sched.assumed[pod.uid] = "n1"
        sched.queue.done(pod.uid)
    # A status update without nodeName (the bind is still in flight) changes nothing.
    sched.on_pod_update(raw, raw)
    assert sched.cluster.node_of("uid-p") == "n1"
    assert "uid-p" not in sched.queue
    # The API shows it bound: the assumption becomes the real placement.
    bound = _pod("p", cpu="1", node="n1")
    sched.on_pod_update(raw, bound)
    assert "uid-p" not in sched.assumed
    assert sched.cluster.node_of("uid-p") == "n1"
    info = sched.cluster.get("n1")
    assert info is not None and info.requested["cpu"] == 1000


def test_deleting_a_bound_pod_frees_room_for_waiting_pods(sched: Scheduler) -> None:
    sched.on_node_add(make_node("n1").capacity(cpu="2", memory="4Gi", pods="10").raw())
    sched.on_pod_add(_pod("resident", cpu="2", node="n1"))
    sched.on_pod_add(_pod("waiting", cpu="1"))
    qp = sched.queue.pop(timeout=0)
    assert qp is not None and qp.pod.name == "waiting"
    sched.schedule(qp)
    assert sched.queue.where("uid-waiting") == UNSCHEDULABLE
    sched.on_pod_delete(_pod("resident", cpu="2", node="n1"))
    assert sched.queue.where("uid-waiting") in (ACTIVE, "backoff")
    assert sched.cluster.node_of("uid-resident") is None


def test_workloads_and_namespaces_feed_the_cluster_state(sched: Scheduler) -> None:
    svc = {"kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"selector": {"app": "web"}}}
    sched.on_workload("Service", svc)
    first = sched.cluster.workloads["Service"]
    assert first == [svc]
    changed = {**svc, "spec": {"selector": {"app": "web2"}}}
    sched.on_workload_update("Service", svc, changed)
    assert sched.cluster.workloads["Service"] == [changed]
    assert sched.cluster.workloads["Service"] is not first  # replaced, not edited
    sched.on_workload("Service", changed, deleted=True)
    assert sched.cluster.workloads["Service"] == []
    sched.on_namespace({"metadata": {"name": "shop", "labels": {"team": "a"}}})
    assert sched.cluster.namespace_labels["shop"] == {"team": "a"}
    sched.on_namespace({"metadata": {"name": "shop"}}, deleted=True)
    assert "shop" not in sched.cluster.namespace_labels


def test_a_pod_deleted_as_its_failure_is_recorded_leaves_no_throttle_entry(
        sched: Scheduler) -> None:
    """The delete arrives on the informer's thread between the failed pod's requeue and
    its throttle entry: it must wait for both, so the entry it forgets exists."""
    sched.on_node_add(make_node("small").capacity(cpu="1", memory="1Gi", pods="10").raw())
    raw = _pod("big", cpu="2")
    sched.on_pod_add(raw)
    qp = sched.queue.pop(timeout=0)
    assert qp is not None
    requeue = sched.queue.requeue
    deleter = threading.Thread(target=sched.on_pod_delete, args=(raw,))

    def requeue_then_delete(*args: object, **kw: object) -> str | None:
        where = requeue(*args, **kw)  # type: ignore[arg-type]
        deleter.start()
        deleter.join(0.2)  # it cannot finish before the failure is fully recorded
        return where

    sched.queue.requeue = requeue_then_delete  # type: ignore[method-assign]
    sched.schedule(qp)
    deleter.join(5)
    assert not deleter.is_alive()
    assert "uid-big" not in sched.queue
    assert sched.throttle.last_message("uid-big") is None


# -- storage objects ------------------------------------------------------------------

STORAGE_OBJECTS = [
    # (model kind, event resource, a listed object without kind, its key)
    ("PersistentVolume", "PersistentVolume",
     {"apiVersion": "v1", "metadata": {"name": "pv-a", "resourceVersion": "3"}}, "pv-a"),
    ("PersistentVolumeClaim", "PersistentVolumeClaim",
     {"apiVersion": "v1", "metadata": {"name": "data", "namespace": "db",
                                       "resourceVersion": "4"}}, "db/data"),
    ("StorageClass", "storage.k8s.io/StorageClass",
     {"apiVersion": "storage.k8s.io/v1", "metadata": {"name": "local"},
      "provisioner": "kubernetes.io/no-provisioner"}, "local"),
    ("CSINode", "storage.k8s.io/CSINode",
     {"apiVersion": "storage.k8s.io/v1", "metadata": {"name": "n1"},
      "spec": {"drivers": []}}, "n1"),
    ("CSIDriver", "storage.k8s.io/CSIDriver",
     {"apiVersion": "storage.k8s.io/v1", "metadata": {"name": "ebs.csi.aws.com"}},
     "ebs.csi.aws.com"),
    ("CSIStorageCapacity", "storage.k8s.io/CSIStorageCapacity",
     {"apiVersion": "storage.k8s.io/v1", "metadata": {"name": "cap", "namespace": "kube"},
      "storageClassName": "local"}, "kube/cap"),
    ("VolumeAttachment", "storage.k8s.io/VolumeAttachment",
     {"apiVersion": "storage.k8s.io/v1", "metadata": {"name": "csi-123"},
      "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
               "source": {"persistentVolumeName": "pv-a"}}}, "csi-123"),
]


def _stored(sched: Scheduler, kind: str, key: str) -> object:
    st = sched.cluster.storage
    holders: dict[str, Callable[[str], object]] = {
               "PersistentVolume": st.pvs.get, "PersistentVolumeClaim": st.pvcs.get,
               "StorageClass": st.storage_classes.get, "CSINode": st.csi_nodes.get,
               "CSIDriver": st.csi_drivers.get, "CSIStorageCapacity": st.capacities.get,
               "VolumeAttachment": st.volume_attachments.get}
    return holders[kind](key)


@pytest.mark.parametrize("kind, resource, listed, key", STORAGE_OBJECTS,
                         ids=[o[0] for o in STORAGE_OBJECTS])
def test_storage_changes_are_stored_and_moved_as_their_kinds_events(
        sched: Scheduler, kind: str, resource: str, listed: dict[str, Any], key: str
        ) -> None:
    """Each change lands in cluster.storage and is handed to the queue as an
    Add/Update/Delete of the kind's resource, the hint seeing the raw objects; a pod
    rejected by a plugin that registered another resource stays where it is."""
    seen: list[tuple[str, object, object]] = []

    def hint(pod: Pod, old: object, new: object) -> QueueingHint:
        seen.append((pod.name, old, new))
        return QUEUE

    A = ActionType
    sched.queue.set_hints({"policyd": [
        ("Volumes", ClusterEventWithHint(ClusterEvent(resource, A.ADD | A.UPDATE | A.DELETE),
                                         hint)),
        ("Other", ClusterEventWithHint(ClusterEvent("Node", A.ALL))),
    ]})
    # Moved pods sit out a long backoff: each pop below gets the pod just added.
    sched.queue.set_backoff(300, 300)

    def park(name: str, plugin: str) -> None:
        sched.on_pod_add(_pod(name))
        qp = sched.queue.pop(timeout=0)
        assert qp is not None and qp.pod.name == name
        assert sched.queue.requeue(qp, unschedulable=True, plugins={plugin}) == UNSCHEDULABLE

    park("waits-for-other", "Other")
    park("add", "Volumes")

    obj = copy.deepcopy(listed)
    sched.on_storage(kind, obj)
    assert _stored(sched, kind, key) is obj
    assert seen == [("add", None, obj)]
    assert sched.queue.where("uid-add") != UNSCHEDULABLE

    park("update", "Volumes")
    newer = copy.deepcopy(obj)
    newer["metadata"]["labels"] = {"changed": "yes"}
    sched.on_storage_update(kind, obj, newer)
    assert _stored(sched, kind, key) is newer
    assert seen[-1] == ("update", obj, newer)
    assert sched.queue.where("uid-update") != UNSCHEDULABLE

    park("delete", "Volumes")
    sched.on_storage_delete(kind, newer)
    assert _stored(sched, kind, key) is None
    assert len(seen) == 3 and seen[2] == ("delete", newer, None)
    assert sched.queue.where("uid-delete") != UNSCHEDULABLE
    # Another plugin's rejection is not undone by any of these.
    assert sched.queue.where("uid-waits-for-other") == UNSCHEDULABLE


def test_storage_event_labels_are_upstreams() -> None:
    from policyd.daemon.event_handlers import STORAGE_EVENT_RESOURCES
    labels = {ClusterEvent(r, ActionType.UPDATE).label for r in
              STORAGE_EVENT_RESOURCES.values()}
    assert labels == {"PersistentVolumeUpdate", "PersistentVolumeClaimUpdate",
                      "storage.k8s.io/StorageClassUpdate", "storage.k8s.io/CSINodeUpdate",
                      "storage.k8s.io/CSIDriverUpdate",
                      "storage.k8s.io/CSIStorageCapacityUpdate",
                      "storage.k8s.io/VolumeAttachmentUpdate"}
