"""SchedulerPopFromBackoffQ (beta, on by default since v1.33): an idle queue takes the
next rejected pod from backoffQ at once; errored pods, and pods behind a non-empty
activeQ, keep their backoff, which is rounded to 1 s windows."""

from __future__ import annotations

from typing import Any

from policyd.daemon.queue import ACTIVE, BACKOFF, IN_FLIGHT, SchedulingQueue
from policyd.model.records import Pod
from policyd.plugins.queuesort.priority_sort import PrioritySort
from tests.builders import make_pod
from tests.clocks import ManualClock


def _queue(clock: ManualClock, **kw: Any) -> SchedulingQueue:
    return SchedulingQueue(PrioritySort().less, clock=clock, initial_backoff=1,
                           max_backoff=10, **kw)


def _pod(name: str, priority: int = 0) -> Pod:
    return make_pod(name).uid(f"uid-{name}").priority(priority).obj()


def _rejected(q: SchedulingQueue, name: str, priority: int = 0) -> None:
    """`name` tried, rejected by NodeAffinity, and moved back by an event while it
    still backs off: it waits in backoffQ."""
    q.add(_pod(name, priority))
    qp = q.pop(timeout=0)
    assert qp is not None and qp.pod.name == name
    q.requeue(qp, unschedulable=True, plugins={"NodeAffinity"})
    q.move_all("NodeAdd")
    assert q.where(f"uid-{name}") == BACKOFF


def test_an_idle_queue_pops_a_rejected_pod_before_its_backoff_ends() -> None:
    clock = ManualClock()
    q = _queue(clock)
    _rejected(q, "a")
    qp = q.pop(timeout=0)
    assert qp is not None and qp.pod.name == "a" and qp.attempts == 2
    assert q.where("uid-a") == IN_FLIGHT


def test_without_the_gate_the_pod_waits_out_its_backoff() -> None:
    clock = ManualClock()
    q = _queue(clock, pop_from_backoff=False)
    _rejected(q, "a")
    assert q.pop(timeout=0) is None
    clock.advance(1.0)
    assert q.pop(timeout=0) is not None


def test_active_pods_go_first_then_the_backoff_head() -> None:
    clock = ManualClock()
    q = _queue(clock)
    _rejected(q, "backing-off", priority=100)
    q.add(_pod("fresh", priority=0))
    assert q.where("uid-fresh") == ACTIVE
    first, second = q.pop(timeout=0), q.pop(timeout=0)
    assert first is not None and second is not None
    assert (first.pod.name, second.pod.name) == ("fresh", "backing-off")


def test_an_errored_pod_is_not_popped_early_and_backs_off_by_windows() -> None:
    clock = ManualClock(start=1000.3)
    q = _queue(clock)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    assert q.requeue(qp, unschedulable=False) == BACKOFF  # an API error: no plugin named
    # Expiry 1001.3, in the window that starts at 1001: backing off until 1002.
    clock.advance(1.69)
    assert q.pop(timeout=0) is None
    clock.advance(0.01)
    assert q.pop(timeout=0) is qp


def test_one_windows_pods_leave_in_activeqs_order_earlier_windows_first() -> None:
    clock = ManualClock()
    q = _queue(clock)
    _rejected(q, "early-low", priority=0)  # expiry 1001: its own window
    clock.advance(1.2)
    _rejected(q, "late-low", priority=0)  # expiry 1002.2 -> window 1002
    clock.advance(0.5)
    _rejected(q, "late-high", priority=50)  # expiry 1002.7 -> window 1002, higher priority
    names = []
    while (qp := q.pop(timeout=0)) is not None:
        names.append(qp.pod.name)
    assert names == ["early-low", "late-high", "late-low"]


def test_no_backoff_at_all_when_the_maximum_is_zero() -> None:
    clock = ManualClock()
    q = SchedulingQueue(PrioritySort().less, clock=clock, initial_backoff=0, max_backoff=0)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    q.requeue(qp, unschedulable=False)
    assert q.pop(timeout=0) is qp
