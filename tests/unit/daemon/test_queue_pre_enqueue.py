"""PreEnqueue in the scheduling queue (upstream's runPreEnqueuePlugins in moveToActiveQ
and moveToBackoffQ): a refused pod waits gated, silently, is moved only by an event its
gating plugin registered, meets PreEnqueue again each time it would enter activeQ or
backoffQ, and is neither popped, flushed nor moved by a wildcard while refused."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.daemon.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, SchedulingQueue
from policyd.framework.events import (
    FORCE_ACTIVATE,
    QUEUE,
    QUEUE_SKIP,
    RESOURCE_CLAIM,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from policyd.framework.status import Status
from policyd.model.records import Pod
from policyd.plugins.queuesort.priority_sort import PrioritySort
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock
from tests.cluster_events import NODE_ADD

A = ActionType
CLAIM_ADD = ClusterEvent(RESOURCE_CLAIM, A.ADD)
CLAIMS = "Claims"  # the gating plugin of these tests
FIT = "Fit"


def _claim_for_pod(pod: Pod, old: Any, new: Any) -> QueueingHint:
    return QUEUE if new == pod.name else QUEUE_SKIP


HINTS = {"policyd": [
    (CLAIMS, ClusterEventWithHint(CLAIM_ADD, _claim_for_pod)),
    (FIT, ClusterEventWithHint(NODE_ADD)),
]}


class Gate:
    """A PreEnqueue runner refusing the pods named in `missing`; records each call's
    (pod, gating plugin it was given)."""

    def __init__(self) -> None:
        self.missing: set[str] = set()
        self.calls: list[tuple[str, str]] = []

    def __call__(self, pod: Pod, gating: str) -> tuple[str, Status] | None:
        self.calls.append((pod.name, gating))
        if pod.name in self.missing:
            return CLAIMS, Status.unschedulable(f"claim of {pod.name} not found")
        return None


def _queue(clock: ManualClock, gate: Gate, *, pop_from_backoff: bool = True
           ) -> SchedulingQueue:
    q = SchedulingQueue(PrioritySort().less, clock=clock, initial_backoff=1, max_backoff=4,
                        pop_from_backoff=pop_from_backoff)
    q.set_hints(HINTS)
    q.set_pre_enqueue(gate)
    return q


def _pod(name: str) -> Pod:
    return make_pod(name).uid(name).scheduler("policyd").obj()


def test_a_refused_pod_waits_gated_and_is_never_popped() -> None:
    clock, gate = ManualClock(), Gate()
    q = _queue(clock, gate)
    gate.missing.add("a")
    q.add(_pod("a"))
    q.add(_pod("b"))
    assert q.where("a") == GATED
    assert q.counts()[GATED] == 1 and q.counts()[UNSCHEDULABLE] == 0
    popped = q.pop(timeout=0)
    assert popped is not None and popped.pod.name == "b"
    assert q.pop(timeout=0) is None
    # Shown with its gating plugin among the plugins holding it (the /debug view).
    [(_, where, _, _, _, plugins)] = [e for e in q.pending() if e[0].name == "a"]
    assert (where, plugins) == (GATED, frozenset({CLAIMS}))


def test_only_the_gating_plugins_events_move_it_and_it_meets_pre_enqueue_again() -> None:
    clock, gate = ManualClock(), Gate()
    q = _queue(clock, gate)
    gate.missing.add("a")
    q.add(_pod("a"))
    # A node event: no registration of the gating plugin covers it.
    assert q.move(NODE_ADD, None, make_node("n").obj()) == []
    # The gating plugin's event, but its hint says it is another pod's claim.
    assert q.move(CLAIM_ADD, None, "other") == []
    calls = len(gate.calls)
    # Its claim's event while the claim is still refused: PreEnqueue runs again, the
    # gating plugin first, and it stays gated.
    assert q.move(CLAIM_ADD, None, "a") == [q.get("a").pod]  # type: ignore[union-attr]
    assert gate.calls[calls:] == [("a", CLAIMS)]
    assert q.where("a") == GATED
    gate.missing.clear()
    clock.advance(2)  # out of the backoff window it entered the queue in
    q.move(CLAIM_ADD, None, "a")
    assert q.where("a") == ACTIVE
    assert gate.calls[-1] == ("a", CLAIMS)
    popped = q.pop(timeout=0)
    assert popped is not None and popped.pod.name == "a" and popped.gating_plugin == ""


def test_a_pod_rejected_by_a_filter_can_be_gated_when_it_is_moved() -> None:
    """A pod a cycle refused (Fit) whose claim is gone by the time an event moves it:
    gated; from then on only the gating plugin's events move it, though Fit's
    registered event would have moved a pod Fit alone rejected."""
    clock, gate = ManualClock(), Gate()
    q = _queue(clock, gate)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    assert q.requeue(qp, unschedulable=True, plugins={FIT}) == UNSCHEDULABLE
    gate.missing.add("a")
    clock.advance(10)
    q.move(NODE_ADD, None, make_node("n").obj())
    assert q.where("a") == GATED
    assert q.get("a").unschedulable_plugins == {FIT, CLAIMS}  # type: ignore[union-attr]
    gate.missing.clear()
    assert q.move(NODE_ADD, None, make_node("m").obj()) == []
    assert q.where("a") == GATED
    q.move(CLAIM_ADD, None, "a")
    assert q.where("a") == ACTIVE


def test_neither_the_flush_nor_a_wildcard_move_a_gated_pod_but_a_reload_asks_again() -> None:
    clock, gate = ManualClock(), Gate()
    q = _queue(clock, gate)
    gate.missing.add("a")
    q.add(_pod("a"))
    clock.advance(q.max_in_unschedulable + 1)
    calls = len(gate.calls)
    q.flush()
    assert q.move(FORCE_ACTIVATE) == []
    assert q.move_all("PolicyReload") == 0
    assert q.where("a") == GATED and len(gate.calls) == calls
    assert q.regate() == 0  # still refused
    assert q.where("a") == GATED
    gate.missing.clear()
    assert q.regate() == 1  # never tried: no backoff of its own
    assert q.where("a") == ACTIVE


def test_activate_runs_pre_enqueue() -> None:
    clock, gate = ManualClock(), Gate()
    q = _queue(clock, gate)
    gate.missing.add("a")
    q.add(_pod("a"))
    assert q.activate("a") is True  # it was waiting ...
    assert q.where("a") == GATED  # ... and is still refused
    gate.missing.clear()  # (activate skips backoff)
    q.activate("a")
    assert q.where("a") == ACTIVE


@pytest.mark.parametrize("pop_from_backoff", [True, False])
def test_entering_backoff_or_leaving_it(pop_from_backoff: bool) -> None:
    """With SchedulerPopFromBackoffQ PreEnqueue runs as a pod enters backoffQ (it may
    be popped early), not again as it leaves; without, as it leaves for activeQ."""
    clock, gate = ManualClock(), Gate()
    q = _queue(clock, gate, pop_from_backoff=pop_from_backoff)
    q.add(_pod("a"))
    qp = q.pop(timeout=0)
    assert qp is not None
    gate.missing.add("a")  # its claim is deleted during the cycle
    where = q.requeue(qp, unschedulable=False)  # an error: back off
    if pop_from_backoff:
        assert where == UNSCHEDULABLE and q.where("a") == GATED
        assert q.pop(timeout=0) is None
        return
    assert where == BACKOFF
    clock.advance(5)
    assert q.pop(timeout=0) is None  # refused on its way out of backoffQ
    assert q.where("a") == GATED


def test_without_a_runner_nothing_is_gated() -> None:
    clock = ManualClock()
    q = SchedulingQueue(PrioritySort().less, clock=clock)
    q.add(_pod("a"))
    assert q.where("a") == ACTIVE


def test_the_first_attempt_is_when_pre_enqueue_first_lets_the_pod_in() -> None:
    """Upstream's InitialAttemptTimestamp: set in moveToActiveQ once PreEnqueue passes,
    not when the pod is added or popped; the SLI metric and a pod group's member order
    start there."""
    clock, gate = ManualClock(), Gate()
    q = _queue(clock, gate)
    gate.missing.add("a")
    q.add(_pod("a"))
    q.add(_pod("b"))
    entered_b = clock.now()
    assert q.get("a").first_attempt is None  # type: ignore[union-attr]
    clock.advance(7)
    gate.missing.clear()
    q.move(CLAIM_ADD, None, "a")
    assert q.get("a").first_attempt == entered_b + 7  # type: ignore[union-attr]
    clock.advance(3)
    popped = [q.pop(timeout=0), q.pop(timeout=0)]
    assert {p.pod.name: p.first_attempt for p in popped if p is not None} == {
        "a": entered_b + 7, "b": entered_b}
    # Requeued and let in again: the first attempt stays.
    b = next(p for p in popped if p is not None and p.pod.name == "b")
    q.requeue(b, unschedulable=False)
    clock.advance(5)
    again = q.pop(timeout=0)
    assert again is b and b.first_attempt == entered_b
