"""Permit in the daemon: a pod told to wait keeps its node, is nominated there, and
parks without holding a binder; allowed it binds, rejected or timed out it goes back
to the queue as unschedulable (upstream's FitError over the one node), preempted it is
retried after a backoff, deleted it is let go, and a stopping scheduler gives its
waits up. Reserve plugins see exactly one Unreserve on every path that does not bind.
The API is `test_reserve_prebind`'s recording stand-in; the clock is the fake one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.daemon.queue import BACKOFF, UNSCHEDULABLE
from policyd.framework.cycle_state import CycleState
from policyd.framework.status import Code, Status
from policyd.framework.waiting_pods import WaitingPods
from policyd.kube.client import KubeClient
from policyd.model.records import Pod
from tests.binding_plugins import default_profile_with
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock
from tests.polling import wait_for
from tests.unit.daemon.test_reserve_prebind import FakeAPI


class Gate:
    """Reserve + Permit: holds every pod `wait` seconds unless told otherwise."""

    name = "Gate"

    def __init__(self, wait: float = 30.0, answer: Status | None = None) -> None:
        self.wait = wait
        self.answer = answer
        self.held: list[str] = []
        self.unreserved: list[str] = []
        self.waiting: WaitingPods | None = None

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.held.append(pod.name)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.unreserved.append(pod.name)

    def permit(self, state: CycleState, pod: Pod, node_name: str
               ) -> tuple[Status | None, float]:
        if self.answer is not None:
            return self.answer, 0.0
        return Status(Code.WAIT, ("waiting for the gang",)), self.wait

    def use_waiting_pods(self, waiting: WaitingPods) -> None:
        self.waiting = waiting


@dataclass
class Told:
    failed: list[tuple[str, str]] = field(default_factory=list)
    scheduled: list[str] = field(default_factory=list)


@dataclass
class Rig:
    s: Scheduler
    api: FakeAPI
    gate: Gate
    told: Told
    clock: ManualClock

    def schedule(self, name: str = "p") -> None:
        self.s.on_pod_add(make_pod(name).uid(f"uid-{name}").scheduler("policyd")
                          .req(cpu="1").raw())
        qp = self.s.queue.pop(timeout=0)
        assert qp is not None and qp.pod.name == name
        self.s.schedule(qp)

    def waiting(self, name: str = "p") -> bool:
        return self.s.state.waiting_pods.get(f"uid-{name}") is not None

    def assumed(self, name: str = "p") -> bool:
        with self.s.lock:
            return f"uid-{name}" in self.s.assumed

    def parked(self, name: str = "p") -> None:
        """Wait until the pod's binding cycle has nominated it and parked."""
        wait_for(lambda: ("PATCH", f"/api/v1/namespaces/default/pods/{name}/status")
                 in self.api.calls, 5, "the nomination before the wait")


@pytest.fixture
def rig() -> Iterator[Callable[..., Rig]]:
    made: list[Scheduler] = []

    def build(gate: Gate | None = None, binders: int = 2) -> Rig:
        gate = gate or Gate()
        api = FakeAPI()
        clock = ManualClock()
        told = Told()
        metrics = Metrics()
        sink = EventSink(cast(KubeClient, api), metrics, "test")  # never started

        def failed(ns: str, name: str, uid: str, message: str, component: str, *,
                   post_event: bool, patch_condition: bool,
                   reason: str = "Unschedulable", nominated_node: str | None = None
                   ) -> None:
            told.failed.append((message, reason))

        def scheduled(ns: str, name: str, uid: str, node: str, *_: Any) -> None:
            told.scheduled.append(f"{name}->{node}")

        setattr(sink, "failed", failed)  # noqa: B010 (the writer is never started)
        setattr(sink, "scheduled", scheduled)  # noqa: B010
        fw = default_profile_with(reserve=[gate], permit=[gate])
        s = Scheduler(cast(KubeClient, api), {"policyd": fw}, metrics=metrics, events=sink,
                      clock=clock, binders=binders)
        made.append(s)
        s.on_node_add(make_node("n1").capacity(cpu="8", pods="10").raw())
        return Rig(s, api, gate, told, clock)

    yield build
    for s in made:
        s.shutdown(0)


def test_the_framework_shares_the_schedulers_waiting_pods(rig: Any) -> None:
    r = rig()
    assert r.gate.waiting is r.s.state.waiting_pods


def test_a_waiting_pod_is_nominated_parked_and_bound_once_allowed(rig: Any) -> None:
    r = rig()
    r.schedule()
    r.parked()
    assert r.waiting() and r.assumed()
    assert r.api.binds == 0
    entry = r.s.state.waiting_pods.get("uid-p")
    assert entry is not None and entry.pending_plugins() == ["Gate"]
    entry.allow("Gate")
    wait_for(lambda: r.told.scheduled == ["p->n1"], 5, "the bind after the allow")
    assert r.api.binds == 1 and not r.waiting()
    assert r.gate.unreserved == []


def test_a_rejected_pod_is_unreserved_and_waits_as_unschedulable(rig: Any) -> None:
    r = rig()
    r.schedule()
    r.parked()
    assert r.s.state.waiting_pods.reject("uid-p", "Gate", "the gang cannot be placed")
    wait_for(lambda: r.told.failed != [], 5, "the failure")
    assert r.s.binder.wait(5)
    assert r.told.failed == [("0/1 nodes are available: 1 the gang cannot be placed.",
                              "Unschedulable")]
    assert r.gate.unreserved == ["p"] and not r.assumed() and not r.waiting()
    assert r.s.queue.where("uid-p") == UNSCHEDULABLE
    qp = r.s.queue.get("uid-p")
    assert qp is not None and qp.unschedulable_plugins == {"Gate"}
    assert r.api.binds == 0


def test_a_wait_times_out_with_upstreams_text(rig: Any) -> None:
    r = rig(Gate(wait=10))
    r.schedule()
    r.parked()
    assert r.s.binder.expire_waits() == 0
    r.clock.advance(10)
    assert r.s.binder.expire_waits() == 1
    wait_for(lambda: r.told.failed != [], 5, "the timeout")
    assert r.told.failed == [("0/1 nodes are available: 1 rejected due to timeout after "
                              "waiting 10s at plugin Gate.", "Unschedulable")]
    assert r.gate.unreserved == ["p"]


def test_the_timer_thread_rejects_on_its_own(rig: Any) -> None:
    r = rig(Gate(wait=5))
    r.schedule()
    r.parked()
    r.clock.advance(6)  # the timer looks at the clock at least once a second
    wait_for(lambda: r.told.failed != [], 5, "the timer's rejection")
    assert "rejected due to timeout after waiting 5s at plugin Gate" in r.told.failed[0][0]


def test_a_preempted_waiting_pod_is_retried_after_a_backoff(rig: Any) -> None:
    r = rig()
    r.schedule()
    r.parked()
    entry = r.s.state.waiting_pods.get("uid-p")
    assert entry is not None and entry.preempt("DefaultPreemption", "preempted")
    wait_for(lambda: r.told.failed != [], 5, "the failure")
    assert r.told.failed == [("waiting on permit for pod: preempted", "SchedulerError")]
    assert r.s.binder.wait(5)
    assert r.s.queue.where("uid-p") == BACKOFF and r.gate.unreserved == ["p"]


def test_a_pod_deleted_while_waiting_is_let_go(rig: Any) -> None:
    r = rig()
    r.schedule()
    r.parked()
    r.s.on_pod_delete(make_pod("p").uid("uid-p").scheduler("policyd").raw())
    assert r.s.binder.wait(5)
    assert r.gate.unreserved == ["p"] and r.told.failed == [] and r.api.binds == 0
    assert r.s.queue.where("uid-p") is None and not r.waiting()


def test_waiting_pods_do_not_hold_the_binders(rig: Any) -> None:
    gate = Gate()
    r = rig(gate, binders=1)
    r.schedule("a")
    r.parked("a")
    r.schedule("b")
    r.parked("b")  # the one binder is free again: the second pod got as far
    # A third pod Permit lets through at once binds while both others wait.
    gate.answer = Status(Code.SUCCESS)
    r.schedule("c")
    wait_for(lambda: r.told.scheduled == ["c->n1"], 5, "the third pod's bind")
    assert r.waiting("a") and r.waiting("b")


def test_a_permit_rejection_in_the_cycle_never_reaches_the_binder(rig: Any) -> None:
    r = rig(Gate(answer=Status.unschedulable("not the gang's turn")))
    r.schedule()
    assert r.told.failed == [("0/1 nodes are available: 1 not the gang's turn.",
                              "Unschedulable")]
    assert r.gate.unreserved == ["p"] and not r.assumed()
    assert r.api.calls == []


def test_a_stopping_scheduler_gives_its_waits_up(rig: Any) -> None:
    r = rig()
    r.schedule()
    r.parked()
    assert r.s.shutdown(5)  # the grace period is not spent on a pod held at Permit
    assert r.gate.unreserved == ["p"] and not r.waiting() and r.api.binds == 0
    assert r.told.failed == []  # stopping says nothing about the pod
