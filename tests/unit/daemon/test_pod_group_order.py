"""The order the daemon tries a pod group's members in: priority, then when each was
first let into the active queue (upstream's InitialAttemptTimestamp, set when PreEnqueue
first passes), not when it was created. A member held back for its gang's quorum comes
after the member that completed the quorum; members let in by one event keep the queue's
order. Seen through what each member is told when only one of them fits.

And a member left out of a group that was placed is tried once more at once, as
upstream's group cycle sends it through the backoff queue: what it is told then counts
the siblings placed after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from policyd.config.plugins import default_framework
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.features import with_settings
from policyd.kube.client import KubeClient
from policyd.model.pod_groups import WORKLOAD_API
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock

Obj = dict[str, Any]
GATES = with_settings([("GenericWorkload", True), ("GangScheduling", True)])
WAITING = ("pod group is unschedulable, waiting for minCount pods from a gang to be "
           "scheduled, one or more plugins asked to wait and no plugin rejected pod")


class NoAPI:
    def request(self, method: str, path: str, **_: Any) -> Obj:
        return {}


@pytest.fixture
def scheduler() -> Iterator[tuple[Scheduler, dict[str, str], ManualClock]]:
    told: dict[str, str] = {}
    metrics = Metrics()
    api = cast(KubeClient, NoAPI())
    sink = EventSink(api, metrics, "test")  # never started
    sink.failed = lambda ns, name, uid, message, *a, **kw: (  # type: ignore[method-assign]
        told.__setitem__(name, message))
    sink.pod_group_condition = lambda group, status, *a: (  # type: ignore[method-assign]
        told.__setitem__(f"PodGroup {group.key.name}", status))
    clock = ManualClock()
    s = Scheduler(api, {"policyd": default_framework([], features=GATES)},
                  metrics=metrics, events=sink, clock=clock, gates=GATES)
    # Room for one of the members below, not two.
    s.on_node_add(make_node("n1").capacity(cpu="3", memory="4Gi", pods="10").raw())
    yield s, told, clock
    s.shutdown(0)


def _group(min_count: int) -> Obj:
    return {"apiVersion": WORKLOAD_API, "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "default", "uid": "uid-train",
                         "generation": 1},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def _member(name: str, priority: int = 0, memory: str = "1Gi") -> Obj:
    return (make_pod(name).uid(f"uid-{name}").scheduler("policyd")
            .req(cpu="2", memory=memory)
            .set("spec.schedulingGroup", {"podGroupName": "train"})
            .set("spec.priority", priority).raw())


def _run_group_cycle(s: Scheduler) -> None:
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    s.schedule(qp)
    assert s.queue.pop(timeout=0) is None  # the whole group was tried in that cycle


def test_the_member_that_completed_the_quorum_goes_first(scheduler: Any) -> None:
    s, told, clock = scheduler
    s.handlers.on_pod_group(WORKLOAD_API, _group(2))
    s.on_pod_add(_member("early"))  # held back: one pod of a gang of two
    assert s.queue.where("uid-early") == "gated"
    clock.advance(5)
    s.on_pod_add(_member("late"))  # completes the quorum: let in, and lets "early" in
    _run_group_cycle(s)
    # "late" entered the active queue first, so it took the room and waits for the
    # quorum; "early" met the node full. In creation order it would be the other way.
    assert told == {"late": WAITING, "early": told["early"], "PodGroup train": "False"}
    assert "Insufficient cpu" in told["early"]


def test_members_let_in_together_keep_the_queue_order(scheduler: Any) -> None:
    s, told, clock = scheduler
    s.on_pod_add(_member("first"))  # both held back: their PodGroup does not exist yet
    clock.advance(5)
    s.on_pod_add(_member("second"))
    clock.advance(5)
    s.handlers.on_pod_group(WORKLOAD_API, _group(2))
    _run_group_cycle(s)
    assert told["first"] == WAITING and "Insufficient cpu" in told["second"]


def test_priority_comes_before_the_first_attempt(scheduler: Any) -> None:
    s, told, clock = scheduler
    s.handlers.on_pod_group(WORKLOAD_API, _group(2))
    s.on_pod_add(_member("low"))
    clock.advance(5)
    s.on_pod_add(_member("high", priority=10))
    _run_group_cycle(s)
    assert told["high"] == WAITING and "Insufficient cpu" in told["low"]


def test_a_member_left_out_is_told_again_after_its_siblings_are_placed(scheduler: Any
                                                                      ) -> None:
    s, told, _ = scheduler
    s.handlers.on_pod_group(WORKLOAD_API, _group(1))
    s.on_pod_add(_member("big", priority=10, memory="8Gi"))  # tried first, fits nowhere
    s.on_pod_add(_member("small"))
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    s.schedule(qp)
    assert "uid-small" in s.assumed
    assert told["big"].startswith("0/1 nodes are available: 1 Insufficient memory.")
    # Backing off, and popped at once by the idle queue (SchedulerPopFromBackoffQ).
    assert s.queue.where("uid-big") == "backoff"
    qp = s.queue.pop(timeout=0)
    assert qp is not None and qp.uid == "uid-big"
    s.schedule(qp)
    assert told["big"].startswith(
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.")
    # Nothing was placed this time: it waits for an event, as any member. The group
    # stays Scheduled, though the watch has not shown the True written (no API here).
    assert s.queue.where("uid-big") == "unschedulable"
    assert told["PodGroup train"] == "True"


def test_the_remembered_verdict_is_the_group_objects_own() -> None:
    """Scheduled once, a group's condition is never written False again; the same name
    created anew (another uid), or deleted, starts afresh."""
    from policyd.model.pod_groups import PodGroups, pod_group_from_dict

    groups = PodGroups()
    first = pod_group_from_dict(_group(2))
    groups.upsert(first)
    assert groups.record_scheduled(first, False)  # never scheduled: False is written
    assert groups.record_scheduled(first, True)
    assert not groups.record_scheduled(first, False)
    again = pod_group_from_dict({**_group(2), "metadata": {
        **_group(2)["metadata"], "uid": "uid-train-2"}})
    groups.upsert(again)
    assert groups.record_scheduled(again, False)
    assert groups.record_scheduled(again, True)
    groups.delete(again.key)
    groups.upsert(again)
    assert groups.record_scheduled(again, False)
