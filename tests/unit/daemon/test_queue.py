"""The scheduling queue: QueueSort order, backoff, unschedulable moves and flushes,
deletes while queued or in flight. Time is a hand-driven clock: nothing sleeps."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.daemon.queue import (
    ACTIVE,
    BACKOFF,
    GATED,
    IN_FLIGHT,
    UNSCHEDULABLE,
    QueuedPod,
    SchedulingQueue,
    backoff_duration,
)
from policyd.model.records import Pod
from policyd.plugins.queuesort.priority_sort import PrioritySort
from tests.builders import make_pod
from tests.clocks import ManualClock


def _queue(clock: ManualClock, **kw: Any) -> SchedulingQueue:
    return SchedulingQueue(PrioritySort().less, clock=clock, **kw)


def _pod(name: str, priority: int = 0, created: str = "2024-01-01T00:00:00Z") -> Pod:
    return make_pod(name).uid(f"uid-{name}").priority(priority).created(created).obj()


def _names(q: SchedulingQueue) -> list[str]:
    out = []
    while (qp := q.pop(timeout=0)) is not None:
        out.append(qp.pod.name)
    return out


@pytest.mark.parametrize(("attempts", "expected"), [
    (0, 0.0), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (50, 10.0), (2000, 10.0),
])
def test_backoff_duration_doubles_up_to_the_maximum(attempts: int, expected: float) -> None:
    assert backoff_duration(attempts, 1.0, 10.0) == expected


def test_active_queue_follows_queue_sort_then_fifo() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("low-old", 0, "2024-01-01T00:00:00Z"))
    q.add(_pod("high", 100, "2024-01-03T00:00:00Z"))
    q.add(_pod("low-new", 0, "2024-01-02T00:00:00Z"))
    q.add(_pod("same-a", 5, "2024-01-05T00:00:00Z"))
    q.add(_pod("same-b", 5, "2024-01-05T00:00:00Z"))
    assert _names(q) == ["high", "same-a", "same-b", "low-old", "low-new"]


def test_adding_a_known_pod_does_not_queue_it_twice() -> None:
    q = _queue(ManualClock())
    q.add(_pod("a"))
    q.add(_pod("a"))
    assert _names(q) == ["a"]


def test_priority_change_resorts_an_active_pod() -> None:
    q = _queue(ManualClock())
    q.add(_pod("a", 0, "2024-01-01T00:00:00Z"))
    q.add(_pod("b", 0, "2024-01-02T00:00:00Z"))
    q.add(_pod("b", 10, "2024-01-02T00:00:00Z"))
    assert _names(q) == ["b", "a"]


def test_error_goes_to_backoff_until_it_expires() -> None:
    clock = ManualClock()
    q = _queue(clock, initial_backoff=1, max_backoff=10,
               pop_from_backoff=False)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None and qp.attempts == 1 and q.where("uid-a") == IN_FLIGHT
    assert q.requeue(qp, unschedulable=False) == BACKOFF
    clock.advance(0.99)
    assert q.pop(timeout=0) is None
    clock.advance(0.01)
    qp = q.pop(timeout=0)
    assert qp is not None and qp.attempts == 2
    # Second failure: 2 s.
    q.requeue(qp, unschedulable=False)
    clock.advance(1.5)
    assert q.pop(timeout=0) is None
    clock.advance(0.5)
    assert q.pop(timeout=0) is not None


def test_unschedulable_waits_for_a_move_event() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    assert q.requeue(qp, unschedulable=True, plugins={"NodeAffinity"}) == UNSCHEDULABLE
    clock.advance(60)
    assert q.pop(timeout=0) is None  # no event: stays unschedulable
    assert q.move_all("NodeAdd") == 1
    assert q.where("uid-a") == ACTIVE
    assert _names(q) == ["a"]


def test_move_while_still_backing_off_goes_to_backoff_first() -> None:
    clock = ManualClock()
    q = _queue(clock, initial_backoff=1, max_backoff=10,
               pop_from_backoff=False)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    q.requeue(qp, unschedulable=True, plugins={"NodeAffinity"})
    clock.advance(0.5)
    q.move_all("NodeAdd")
    assert q.where("uid-a") == BACKOFF
    assert q.pop(timeout=0) is None
    clock.advance(0.5)
    assert _names(q) == ["a"]


def test_event_during_the_cycle_sends_the_pod_to_backoff_not_unschedulable() -> None:
    # upstream's moveRequestCycle: a node added while the pod was being scheduled may
    # be exactly what it needed.
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    q.move_all("NodeAdd")
    assert q.requeue(qp, unschedulable=True, plugins={"NodeAffinity"}) == BACKOFF


def test_periodic_flush_releases_long_unschedulable_pods() -> None:
    clock = ManualClock()
    q = _queue(clock, max_in_unschedulable=300)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    q.requeue(qp, unschedulable=True, plugins={"NodeAffinity"})
    clock.advance(299)
    q.flush()
    assert q.where("uid-a") == UNSCHEDULABLE
    clock.advance(1)
    q.flush()
    assert q.where("uid-a") == ACTIVE


def test_delete_while_queued_removes_the_pod_everywhere() -> None:
    clock = ManualClock()
    q = _queue(clock)
    for name in ("a", "b", "c"):
        q.add(_pod(name))
    assert q.delete("uid-b")
    assert not q.delete("uid-b")
    assert "uid-b" not in q
    assert _names(q) == ["a", "c"]


def test_delete_while_in_flight_is_never_requeued() -> None:
    q = _queue(ManualClock())
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    q.delete("uid-a")
    assert q.requeue(qp, unschedulable=True, plugins={"NodeAffinity"}) is None
    assert q.requeue(qp, unschedulable=False) is None
    assert q.counts()[UNSCHEDULABLE] == 0 and q.counts()[BACKOFF] == 0


def test_delete_while_in_backoff() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    q.requeue(qp, unschedulable=False)
    q.delete("uid-a")
    clock.advance(100)
    assert q.pop(timeout=0) is None


def test_done_releases_an_assumed_pod() -> None:
    q = _queue(ManualClock())
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    q.done("uid-a")
    assert "uid-a" not in q
    # A failed bind brings it back through requeue, always into backoff.
    assert q.requeue(qp, unschedulable=False) == BACKOFF


def test_scheduling_gates_hold_a_pod_until_removed() -> None:
    q = _queue(ManualClock())
    gated = make_pod("g").uid("uid-g").set("spec.schedulingGates", [{"name": "x"}]).obj()
    q.add(gated)
    assert q.where("uid-g") == GATED
    assert q.pop(timeout=0) is None
    q.add(make_pod("g").uid("uid-g").obj())
    assert _names(q) == ["g"]


def test_spec_change_moves_an_unschedulable_pod_but_a_status_change_does_not() -> None:
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    q.requeue(qp, unschedulable=True, plugins={"NodeAffinity"})
    clock.advance(30)
    status_only = make_pod("a").uid("uid-a").priority(0).created(
        "2024-01-01T00:00:00Z").set("status.conditions", [{"type": "PodScheduled"}]).obj()
    q.add(status_only)
    assert q.where("uid-a") == UNSCHEDULABLE
    relabeled = make_pod("a").uid("uid-a").priority(0).created(
        "2024-01-01T00:00:00Z").label("team", "x").obj()
    q.add(relabeled)
    assert q.where("uid-a") == ACTIVE


def test_counts_per_queue() -> None:
    clock = ManualClock()
    q = _queue(clock)
    for name in ("a", "b", "c", "d"):
        q.add(_pod(name))
    a = q.pop(timeout=0)
    b = q.pop(timeout=0)
    c = q.pop(timeout=0)
    assert a is not None and b is not None and c is not None
    q.requeue(a, unschedulable=True, plugins={"NodeAffinity"})
    q.requeue(b, unschedulable=False)
    assert q.counts() == {ACTIVE: 1, BACKOFF: 1, UNSCHEDULABLE: 1, GATED: 0, IN_FLIGHT: 1}


def test_set_less_resorts_the_active_queue() -> None:
    q = _queue(ManualClock())
    q.add(_pod("a", 10))
    q.add(_pod("b", 0))
    q.set_less(lambda x, y: x.name > y.name)  # reverse alphabetical
    assert _names(q) == ["b", "a"]


def test_pods_moved_together_keep_the_order_they_entered_the_queue() -> None:
    clock = ManualClock()
    q = _queue(clock)
    names = [f"p{i}" for i in range(6)]
    for n in names:
        q.add(_pod(n))  # equal priority and creation time: FIFO decides
    popped = [q.pop(timeout=0) for _ in names]
    # They fail in another order than they came in.
    for qp in reversed(popped):
        assert qp is not None and q.requeue(qp, unschedulable=True, plugins={"X"}) == \
            UNSCHEDULABLE
    clock.advance(60)
    assert q.move_all() == len(names)
    assert _names(q) == names


def test_the_unschedulable_and_in_flight_indexes_follow_every_operation() -> None:
    """Random operations; after each, the queue's indexes hold exactly the pods whose
    place says unschedulable / in flight (moves and in-flight events read only them)."""
    import random

    rng = random.Random(15)
    clock = ManualClock()
    q = _queue(clock)
    in_flight: dict[str, QueuedPod] = {}
    for step in range(3000):
        op = rng.randrange(7)
        name = f"p{rng.randrange(25)}"
        uid = f"uid-{name}"
        if op == 0:
            q.add(_pod(name))
        elif op == 1:
            qp = q.pop(timeout=0)
            if qp is not None:
                in_flight[qp.uid] = qp
        elif op == 2 and in_flight:
            qp = in_flight.pop(rng.choice(sorted(in_flight)))
            q.requeue(qp, unschedulable=rng.random() < 0.7,
                      plugins={"NodeResourcesFit"})
        elif op == 3 and uid in in_flight:
            in_flight.pop(uid)
            q.done(uid)
        elif op == 4:
            q.delete(uid)
            in_flight.pop(uid, None)
        elif op == 5:
            q.move_all()
        else:
            clock.advance(rng.random() * 5)
            q.flush()
        pods = dict(q._pods)
        assert q._unschedulable == {u: p for u, p in pods.items()
                                    if p.where == UNSCHEDULABLE}, step
        assert q._in_flight == {u: p for u, p in pods.items() if p.where == IN_FLIGHT}, step


def test_a_pod_activated_during_its_binding_cycle_backs_off_when_it_comes_back() -> None:
    """upstream's Activate of an in-flight pod: a Coscheduling member waiting at Permit
    when a sibling asks for it goes back to be retried, not to the unschedulable pool
    its rejecting plugin's events alone would empty."""
    from policyd.daemon.queue import BACKOFF, UNSCHEDULABLE, SchedulingQueue
    from tests.builders import make_pod

    now = [0.0]
    q = SchedulingQueue(lambda a, b: a.creation_timestamp < b.creation_timestamp,
                        clock=lambda: now[0], initial_backoff=1, max_backoff=2)
    for name in ("a", "b"):
        q.add(make_pod(name).uid(name).obj())
    qa, qb = q.pop(), q.pop()
    assert qa is not None and qb is not None
    q.done(qa.uid)
    q.done(qb.uid)
    q.activate_or_remember(qa.uid)  # a is binding (waiting at Permit)
    assert q.requeue(qa, unschedulable=True, plugins={"Coscheduling"}) == BACKOFF
    assert q.requeue(qb, unschedulable=True, plugins={"Coscheduling"}) == UNSCHEDULABLE
