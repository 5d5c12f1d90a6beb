"""The queue's move logic with queueing hints: a cluster event moves only the
unschedulable pods one of whose rejecting plugins registered it and whose hint says
QUEUE; events seen while a pod is in flight are not lost; the flush still moves all."""

from __future__ import annotations

from typing import Any

from policyd.daemon.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, SchedulingQueue
from policyd.framework.events import (
    NODE,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from policyd.model.records import Pod
from policyd.plugins.queuesort.priority_sort import PrioritySort
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock
from tests.cluster_events import NODE_ADD, NODE_LABEL, POD_DELETE

A = ActionType


def _only_labelled_nodes(pod: Pod, old: Any, new: Any) -> QueueingHint:
    return QUEUE if new is not None and "ok" in new.labels else QUEUE_SKIP


def _boom(pod: Pod, old: Any, new: Any) -> QueueingHint:
    raise RuntimeError("bug in a hint")


HINTS = {"policyd": [
    ("Labels", ClusterEventWithHint(ClusterEvent(NODE, A.ADD | A.UPDATE_NODE_LABEL),
                                    _only_labelled_nodes)),
    ("Fit", ClusterEventWithHint(ClusterEvent("Pod", A.DELETE))),
    ("Broken", ClusterEventWithHint(ClusterEvent(NODE, A.ADD), _boom)),
    ("Nothing", ClusterEventWithHint(ClusterEvent(NODE, A.ADD), lambda p, o, n: QUEUE_SKIP)),
]}


def _queue(clock: ManualClock) -> SchedulingQueue:
    q = SchedulingQueue(PrioritySort().less, clock=clock, initial_backoff=1, max_backoff=1)
    q.set_hints(HINTS)
    return q


def _rejected(q: SchedulingQueue, clock: ManualClock, name: str, *plugins: str) -> None:
    q.add(make_pod(name).uid(name).scheduler("policyd").obj())
    qp = q.pop(timeout=0)
    assert qp is not None and qp.pod.name == name
    assert q.requeue(qp, unschedulable=True, plugins=set(plugins)) == UNSCHEDULABLE


def test_an_event_moves_only_pods_whose_rejecting_plugin_registered_it() -> None:
    clock = ManualClock()
    q = _queue(clock)
    _rejected(q, clock, "by-labels", "Labels")
    _rejected(q, clock, "by-fit", "Fit")
    clock.advance(5)  # backoff over
    moved = q.move(POD_DELETE, make_pod("gone").node("n").obj(), None)
    assert [p.name for p in moved] == ["by-fit"]
    assert q.where("by-fit") == ACTIVE
    assert q.where("by-labels") == UNSCHEDULABLE


def test_the_hint_decides_within_a_registered_event() -> None:
    clock = ManualClock()
    q = _queue(clock)
    _rejected(q, clock, "a", "Labels")
    clock.advance(5)
    assert q.move(NODE_ADD, None, make_node("n").obj()) == []
    assert q.where("a") == UNSCHEDULABLE
    assert len(q.move(NODE_LABEL, make_node("n").obj(), make_node("n").label("ok", "1").obj())) == 1
    assert q.where("a") == ACTIVE


def test_a_pod_rejected_by_several_plugins_moves_if_any_hint_says_queue() -> None:
    clock = ManualClock()
    q = _queue(clock)
    _rejected(q, clock, "a", "Labels", "Fit")
    clock.advance(5)
    assert len(q.move(POD_DELETE, make_pod("x").node("n").obj(), None)) == 1


def test_a_hint_that_raises_counts_as_queue() -> None:
    clock = ManualClock()
    q = _queue(clock)
    _rejected(q, clock, "a", "Broken")
    _rejected(q, clock, "b", "Nothing")
    clock.advance(5)
    assert [p.name for p in q.move(NODE_ADD, None, make_node("n").obj())] == ["a"]


def test_a_pod_no_plugin_rejected_backs_off_instead_of_waiting() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(make_pod("a").uid("a").scheduler("policyd").obj())
    qp = q.pop(timeout=0)
    assert qp is not None
    assert q.requeue(qp, unschedulable=True, plugins=set()) == BACKOFF


def test_moved_pod_still_backing_off_goes_to_backoff() -> None:
    clock = ManualClock()
    q = _queue(clock)
    _rejected(q, clock, "a", "Fit")
    q.move(POD_DELETE, make_pod("x").node("n").obj(), None)
    assert q.where("a") == BACKOFF


def test_event_during_the_cycle_that_helps_sends_the_pod_to_backoff() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(make_pod("a").uid("a").scheduler("policyd").obj())
    qp = q.pop(timeout=0)
    assert qp is not None
    q.move(POD_DELETE, make_pod("x").node("n").obj(), None)  # arrives mid-cycle
    assert q.requeue(qp, unschedulable=True, plugins={"Fit"}) == BACKOFF


def test_event_during_the_cycle_that_cannot_help_is_ignored() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(make_pod("a").uid("a").scheduler("policyd").obj())
    qp = q.pop(timeout=0)
    assert qp is not None
    q.move(NODE_ADD, None, make_node("n").obj())  # Labels' hint says skip
    q.move(POD_DELETE, make_pod("x").node("n").obj(), None)  # Labels did not register
    assert q.requeue(qp, unschedulable=True, plugins={"Labels"}) == UNSCHEDULABLE


def test_events_before_the_pod_was_popped_do_not_count() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(make_pod("a").uid("a").scheduler("policyd").obj())
    q.add(make_pod("b").uid("b").scheduler("policyd").obj())
    first = q.pop(timeout=0)
    q.move(POD_DELETE, make_pod("x").node("n").obj(), None)  # during a's cycle only
    second = q.pop(timeout=0)
    assert first is not None and second is not None
    assert q.requeue(second, unschedulable=True, plugins={"Fit"}) == UNSCHEDULABLE
    assert q.requeue(first, unschedulable=True, plugins={"Fit"}) == BACKOFF


def test_in_flight_events_are_dropped_once_no_pod_needs_them() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(make_pod("a").uid("a").scheduler("policyd").obj())
    qp = q.pop(timeout=0)
    assert qp is not None
    q.move(POD_DELETE, make_pod("x").node("n").obj(), None)
    q.done("a")
    assert q._in_flight_events == []
    q.move(POD_DELETE, make_pod("x").node("n").obj(), None)  # nobody in flight
    assert q._in_flight_events == []


def test_own_update_moves_the_pod_only_if_a_rejecting_plugin_cares() -> None:
    tolerations = ClusterEventWithHint(ClusterEvent("Pod", A.UPDATE_POD_TOLERATION),
                                       lambda p, o, n: QUEUE if n.uid == p.uid else QUEUE_SKIP)
    clock = ManualClock()
    q = _queue(clock)
    q.set_hints({"policyd": [*HINTS["policyd"], ("Taints", tolerations)]})
    _rejected(q, clock, "t", "Taints")
    _rejected(q, clock, "f", "Fit")
    clock.advance(5)
    q.add(make_pod("f").uid("f").scheduler("policyd").toleration("k").obj())
    assert q.where("f") == UNSCHEDULABLE  # Fit registered no toleration change
    q.add(make_pod("t").uid("t").scheduler("policyd").toleration("k").obj())
    assert q.where("t") == ACTIVE


def test_flush_and_wildcard_moves_ignore_hints() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.max_in_unschedulable = 300
    _rejected(q, clock, "a", "Nothing")
    _rejected(q, clock, "b", "Nothing")
    clock.advance(5)
    assert q.move_all("PolicyReload") == 2
    for _ in range(2):
        qp = q.pop(timeout=0)
        assert qp is not None
        q.requeue(qp, unschedulable=True, plugins={"Nothing"})
    clock.advance(301)
    q.flush()
    assert q.where("a") == ACTIVE and q.where("b") == ACTIVE


def test_unknown_profile_is_never_stranded() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(make_pod("x").uid("x").scheduler("other").obj())
    qp = q.pop(timeout=0)
    assert qp is not None
    q.requeue(qp, unschedulable=True, plugins={"Labels"})
    clock.advance(5)
    assert len(q.move(NODE_ADD, None, make_node("n").obj())) == 1


def test_the_generated_claims_in_status_move_a_pod_and_other_status_does_not() -> None:
    """upstream's isPodUpdated keeps status.resourceClaimStatuses: a pod refused because
    its template's claim was not named yet moves when the resourceclaim controller
    names it (UpdatePodGeneratedResourceClaim); a phase or condition change does not."""
    clock = ManualClock()
    q = SchedulingQueue(PrioritySort().less, clock=clock, initial_backoff=1, max_backoff=1)
    q.set_hints({"policyd": [("DynamicResources", ClusterEventWithHint(
        ClusterEvent("Pod", A.UPDATE_POD_GENERATED_RESOURCE_CLAIM)))]})
    builder = make_pod("p").uid("p").scheduler("policyd").set(
        "spec.resourceClaims", [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
    q.add(builder.obj())
    qp = q.pop(timeout=0)
    assert qp is not None
    q.requeue(qp, unschedulable=True, plugins={"DynamicResources"})
    q.add(builder.set("status.conditions", [{"type": "PodScheduled", "status": "False"}])
          .obj())
    assert q.where("p") == UNSCHEDULABLE
    q.add(builder.set("status.resourceClaimStatuses",
                      [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"}]).obj())
    assert q.where("p") in (ACTIVE, BACKOFF)
