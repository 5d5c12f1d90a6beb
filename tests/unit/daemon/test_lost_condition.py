"""A PodScheduled=False patch that never landed (403 while the API server's RBAC warms
up after a restart, an outage longer than the event writer's retries, a full queue) is
sent again on the pod's next failed attempt: whether to patch is decided from the
condition the API server last showed, not only from what was sent before. Found by the
chaos soak (bench/soak.py): a non-transient failure left the pod without the condition
for as long as its failure message stayed the same."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from policyd.config.plugins import default_framework
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.kube.client import ConnectionSettings, KubeClient
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock

MESSAGE = ("0/1 nodes are available: 1 Insufficient cpu. "
           "no new claims to deallocate, preemption: 0/1 nodes are "
           "available: 1 Preemption is not helpful for scheduling.")


@pytest.fixture
def setup() -> Iterator[tuple[Scheduler, ManualClock, list[dict[str, Any]]]]:
    kube = KubeClient(k8s.ApiClient(k8s.Configuration()), ConnectionSettings())
    metrics = Metrics()
    clock = ManualClock()
    s = Scheduler(kube, {"policyd": default_framework([])}, metrics=metrics,
                  events=EventSink(kube, metrics, "test"), clock=clock)
    calls: list[dict[str, Any]] = []

    def failed(namespace: str, name: str, uid: str, message: str, component: str, *,
               post_event: bool, patch_condition: bool, reason: str = "Unschedulable"
               ) -> None:
        calls.append({"message": message, "patch": patch_condition, "reason": reason})

    s.events.failed = failed  # type: ignore[method-assign, assignment]
    s.on_node_add(make_node("small").capacity(cpu="1", memory="1Gi", pods="10").raw())
    try:
        yield s, clock, calls
    finally:
        s.shutdown(0)
        kube.close()


def _attempt(s: Scheduler, clock: ManualClock, pod: dict[str, Any], previous: dict[str, Any]
             ) -> None:
    """The pod as the API server now shows it, then its next attempt."""
    s.on_pod_update(previous, pod)
    clock.advance(3600)  # past any backoff and the unschedulable timeout
    s.queue.move_all()
    s.queue.flush()
    qp = s.queue.pop(timeout=0)
    assert qp is not None and qp.pod.raw is pod
    s.schedule(qp)


def _with_condition(pod: dict[str, Any], message: str, reason: str = "Unschedulable",
                    generation: str = "2") -> dict[str, Any]:
    new = copy.deepcopy(pod)
    new["metadata"]["resourceVersion"] = generation
    new["metadata"].setdefault("labels", {})["gen"] = generation  # a visible update
    new.setdefault("status", {})["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}]
    return new


def _first_failure(s: Scheduler, calls: list[dict[str, Any]]) -> dict[str, Any]:
    pod = make_pod("big").uid("uid-big").scheduler("policyd").req(cpu="2").raw()
    s.on_pod_add(pod)
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    s.schedule(qp)
    assert calls == [{"message": MESSAGE, "patch": True, "reason": "Unschedulable"}]
    return pod


def test_a_lost_patch_is_sent_again_on_the_next_attempt(setup: Any) -> None:
    s, clock, calls = setup
    pod = _first_failure(s, calls)
    # The API server never got the patch: the pod shows no PodScheduled condition.
    unchanged = copy.deepcopy(pod)
    unchanged["metadata"]["labels"] = {"gen": "2"}
    _attempt(s, clock, unchanged, pod)
    assert calls[-1]["patch"] is True


def test_a_condition_from_an_older_message_is_replaced(setup: Any) -> None:
    s, clock, calls = setup
    pod = _first_failure(s, calls)
    stale = _with_condition(pod, "0/0 nodes are available.")
    _attempt(s, clock, stale, pod)
    assert calls[-1]["patch"] is True


def test_a_condition_with_another_reason_is_replaced(setup: Any) -> None:
    s, clock, calls = setup
    pod = _first_failure(s, calls)
    other = _with_condition(pod, MESSAGE, reason="SchedulerError")
    _attempt(s, clock, other, pod)
    assert calls[-1]["patch"] is True


def test_a_condition_that_landed_is_not_patched_again(setup: Any) -> None:
    s, clock, calls = setup
    pod = _first_failure(s, calls)
    landed = _with_condition(pod, MESSAGE)
    _attempt(s, clock, landed, pod)
    assert len(calls) == 2 and calls[-1]["patch"] is False
