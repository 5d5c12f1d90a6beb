"""DRA objects through the daemon's handlers: each change lands in `cluster.dra` and
reaches the queue as upstream's ResourceClaim / ResourceSlice / DeviceClass event; a
claim's events come from the claim cache, so a version it keeps out moves nothing and
the scheduler's own assumptions move pods as informer changes do."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_handlers import DRA_EVENT_RESOURCES
from policyd.daemon.queue import GATED, UNSCHEDULABLE
from policyd.framework.events import (
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from policyd.model.records import Pod
from tests.builders import make_pod

Obj = dict[str, Any]
A = ActionType


def _claim(rv: str, **status: Any) -> Obj:
    obj: Obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "gpu", "namespace": "ml", "uid": "c1",
                             "resourceVersion": rv},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": "gpu.example.com"}}]}}}
    if status:
        obj["status"] = status
    return obj


DRA_OBJECTS = [
    ("DeviceClass", "resource.k8s.io/DeviceClass",
     {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
      "metadata": {"name": "gpu.example.com", "resourceVersion": "3"},
      "spec": {"selectors": [{"cel": {"expression":
                                      'device.driver == "gpu.example.com"'}}]}},
     "gpu.example.com"),
    ("ResourceSlice", "resource.k8s.io/ResourceSlice",
     {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
      "metadata": {"name": "node-a-gpu", "resourceVersion": "3"},
      "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
               "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
               "devices": [{"name": "gpu-0"}]}}, "node-a-gpu"),
    ("ResourceClaim", "resource.k8s.io/ResourceClaim", _claim("3"), "ml/gpu"),
]


class Parked:
    """Pods parked unschedulable by a plugin that registered one DRA resource's
    Add/Update/Delete with a hint that records what it saw."""

    def __init__(self, sched: Scheduler, resource: str, hint: QueueingHint = QUEUE
                 ) -> None:
        self.sched = sched
        self.seen: list[tuple[str, object, object]] = []

        def record(pod: Pod, old: object, new: object) -> QueueingHint:
            self.seen.append((pod.name, old, new))
            return hint

        sched.queue.set_hints({"policyd": [
            ("DynamicResources", ClusterEventWithHint(
                ClusterEvent(resource, A.ADD | A.UPDATE | A.DELETE), record)),
            ("Other", ClusterEventWithHint(ClusterEvent("Node", A.ALL))),
        ]})
        # Moved pods sit out a long backoff: each pop below gets the pod just added.
        sched.queue.set_backoff(300, 300)

    def park(self, name: str, plugin: str = "DynamicResources") -> None:
        self.sched.on_pod_add(make_pod(name).uid(f"uid-{name}").scheduler("policyd").raw())
        qp = self.sched.queue.pop(timeout=0)
        assert qp is not None and qp.pod.name == name
        assert self.sched.queue.requeue(qp, unschedulable=True, plugins={plugin}) \
            == UNSCHEDULABLE

    def waiting(self, name: str) -> bool:
        return self.sched.queue.where(f"uid-{name}") == UNSCHEDULABLE


@pytest.mark.parametrize("kind, resource, listed, key", DRA_OBJECTS,
                         ids=[o[0] for o in DRA_OBJECTS])
def test_dra_changes_are_stored_and_moved_as_their_kinds_events(
        sched: Scheduler, kind: str, resource: str, listed: Obj, key: str) -> None:
    parked = Parked(sched, resource)
    parked.park("waits-for-other", "Other")
    parked.park("add")

    obj = copy.deepcopy(listed)
    sched.on_dra(kind, obj)
    assert sched.cluster.dra.get(kind, key) is obj
    assert parked.seen == [("add", None, obj)] and not parked.waiting("add")

    parked.park("update")
    newer = copy.deepcopy(obj)
    newer["metadata"]["resourceVersion"] = "4"
    newer["metadata"]["labels"] = {"changed": "yes"}
    sched.on_dra_update(kind, obj, newer)
    assert sched.cluster.dra.get(kind, key) is newer
    assert parked.seen[-1] == ("update", obj, newer) and not parked.waiting("update")

    parked.park("delete")
    sched.on_dra_delete(kind, newer)
    assert sched.cluster.dra.get(kind, key) is None
    assert parked.seen[-1] == ("delete", newer, None)  # type: ignore[comparison-overlap]
    assert len(parked.seen) == 3
    assert not parked.waiting("delete")
    # Another plugin's rejection is not undone by any of these.
    assert parked.waiting("waits-for-other")


def test_a_claim_version_the_cache_keeps_out_moves_nothing(sched: Scheduler) -> None:
    parked = Parked(sched, "resource.k8s.io/ResourceClaim")
    sched.on_dra("ResourceClaim", _claim("5"))
    parked.park("p")
    # A replayed older version and a re-list of the same one: not newer, no event.
    sched.on_dra_update("ResourceClaim", _claim("5"), _claim("4"))
    sched.on_dra_update("ResourceClaim", _claim("4"), _claim("5"))
    assert parked.seen == [] and parked.waiting("p")
    assert sched.cluster.dra.claims.get("ml/gpu") is not None


def test_the_schedulers_own_assumption_and_restore_are_claim_events(sched: Scheduler
                                                                    ) -> None:
    parked = Parked(sched, "resource.k8s.io/ResourceClaim")
    api = _claim("5")
    sched.on_dra("ResourceClaim", api)
    parked.park("after-assume")
    allocated = _claim("6", allocation={"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a",
         "device": "gpu-0"}]}})
    with sched.lock:  # PreBind writes under the state lock
        sched.cluster.dra.claims.assume(allocated)
    assert parked.seen[-1] == ("after-assume", api, allocated)
    assert not parked.waiting("after-assume")
    parked.park("after-restore")
    with sched.lock:
        sched.cluster.dra.claims.restore("ml/gpu")
    assert parked.seen[-1] == ("after-restore", allocated, api)
    assert not parked.waiting("after-restore")


def test_a_hint_that_says_skip_leaves_the_pod_waiting(sched: Scheduler) -> None:
    parked = Parked(sched, "resource.k8s.io/ResourceSlice", hint=QUEUE_SKIP)
    parked.park("p")
    sched.on_dra("ResourceSlice", copy.deepcopy(DRA_OBJECTS[1][2]))
    assert len(parked.seen) == 1 and parked.waiting("p")


def test_dra_event_labels_are_upstreams() -> None:
    labels = {ClusterEvent(r, a).label for r in DRA_EVENT_RESOURCES.values()
              for a in (A.ADD, A.UPDATE, A.DELETE)}
    assert labels == {f"resource.k8s.io/{kind}{action}"
                      for kind in ("ResourceClaim", "ResourceSlice", "DeviceClass")
                      for action in ("Add", "Update", "Delete")}


def test_a_pod_waits_gated_until_its_templates_claim_is_there(sched: Scheduler) -> None:
    """DynamicResources' PreEnqueue through the daemon: no cycle (so no event) while
    the claim controller has not created the pod's claim; the pod's status naming
    it is not enough while the claim is not in the cache; the claim's own event,
    through the plugin's hint, lets it into the queue."""
    pod = (make_pod("job").uid("job-uid").scheduler("policyd")
           .resource_claim("gpu", template="one-gpu").set("metadata.namespace", "ml"))
    sched.on_pod_add(pod.raw())
    assert sched.queue.where("job-uid") == GATED
    assert sched.queue.pop(timeout=0) is None
    named = pod.set("status.resourceClaimStatuses",
                    [{"name": "gpu", "resourceClaimName": "gpu"}])
    sched.on_pod_update(pod.raw(), named.raw())
    assert sched.queue.where("job-uid") == GATED  # the claim is not there yet
    owned = _claim("7")
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod",
                                             "name": "job", "uid": "job-uid",
                                             "controller": True}]
    with sched.lock:  # informer callbacks run under the state lock
        sched.on_dra("ResourceClaim", owned)
    assert sched.queue.where("job-uid") != GATED
    qp = sched.queue.pop(timeout=0)
    assert qp is not None and qp.pod.name == "job"
