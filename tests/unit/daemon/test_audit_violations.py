"""The daemon's side of Audit mode, driven synchronously with plain objects: each
(pod, policy, rule) is counted in `policyd_policy_violations_total` and told in one
Normal event once, however often the pod is retried; forgotten when the pod goes.

No request is sent: the event writer thread is never started (the sink records what it
is asked to post) and binds are caught before the binder's pool."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from policyd.config.plugins import default_framework
from policyd.daemon.binder import BindRequest
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import POLICY_VIOLATION, EventSink, FailureThrottle
from policyd.daemon.metrics import Metrics
from policyd.kube import api
from policyd.kube.client import ConnectionSettings, KubeClient
from policyd.policy.compiler import compile_policy
from tests.builders import make_pod
from tests.unit.engine.test_audit_mode import ENCRYPT, REASON_HW, nodes, policy_doc


class RecordingSink(EventSink):
    """Records the events it is asked for instead of queueing their writes."""

    def __init__(self, kube: KubeClient, metrics: Metrics) -> None:
        super().__init__(kube, metrics, "test")
        self.posted: list[tuple[str, str, str, str]] = []

    def event(self, ref: api.ObjectRef, event_type: str, reason: str, message: str,
              action: str, component: str, related: api.ObjectRef | None = None) -> None:
        self.posted.append((ref.name, event_type, reason, message))


@pytest.fixture
def audited() -> Iterator[tuple[Scheduler, RecordingSink, list[BindRequest]]]:
    kube = KubeClient(k8s.ApiClient(k8s.Configuration()), ConnectionSettings())
    metrics = Metrics()
    sink = RecordingSink(kube, metrics)
    fw = default_framework([compile_policy(policy_doc("Audit"))], seed=1)
    s = Scheduler(kube, {"policyd": fw}, metrics=metrics, events=sink)
    binds: list[BindRequest] = []
    s.loop.binder.submit = binds.append  # type: ignore[method-assign, assignment]
    for n in nodes():
        s.on_node_add(n.raw)
    try:
        yield s, sink, binds
    finally:
        s.shutdown(0)
        kube.close()


def pod(name: str, *, encrypted: bool = True) -> dict[str, Any]:
    b = make_pod(name).uid(f"uid-{name}").scheduler("policyd").req(cpu="500m")
    if encrypted:
        b = b.annotation(ENCRYPT, "true")
    return b.raw()


def violations(s: Scheduler, rule: str) -> float:
    value = s.metrics.registry.get_sample_value(
        "policyd_policy_violations_total", {"policy": "hw-encrypt", "rule": rule})
    return value or 0.0


def schedule_next(s: Scheduler) -> Any:
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    return qp, s.schedule(qp)


def undo(s: Scheduler, qp: Any) -> None:
    """What a failed bind does before the pod is retried."""
    with s.lock:
        del s.assumed[qp.pod.uid]
        s.cluster.forget(qp.pod)


def test_one_event_and_one_count_per_pod_and_rule_however_often_retried(
        audited: tuple[Scheduler, RecordingSink, list[BindRequest]]) -> None:
    s, sink, binds = audited
    s.on_pod_add(pod("a"))
    qp, result = schedule_next(s)
    assert result.node is not None and len(binds) == 1  # scheduled as if absent
    assert [(n, t, r) for n, t, r, _ in sink.posted] == [("a", "Normal", POLICY_VIOLATION)]
    message = sink.posted[0][3]
    assert message.startswith("policy hw-encrypt (Audit), rule hw-node: would not fit on "
                              "2 of 5 feasible nodes (the chosen node ")
    assert f": {REASON_HW}; policy hw-encrypt (Audit), rule zone-a: would not fit on " \
           "3 of 5 feasible nodes" in message
    assert violations(s, "hw-node") == violations(s, "zone-a") == 1
    for _ in range(5):  # the bind fails and the pod is retried, five times
        undo(s, qp)
        again = s.schedule(qp)
        assert again is not None and again.findings
    assert len(sink.posted) == 1
    assert violations(s, "hw-node") == violations(s, "zone-a") == 1
    s.on_pod_add(pod("b"))
    schedule_next(s)
    assert [n for n, *_ in sink.posted] == ["a", "b"]
    assert violations(s, "hw-node") == violations(s, "zone-a") == 2


def test_no_event_for_a_pod_the_policy_does_not_apply_to(
        audited: tuple[Scheduler, RecordingSink, list[BindRequest]]) -> None:
    s, sink, _ = audited
    s.on_pod_add(pod("plain", encrypted=False))
    _, result = schedule_next(s)
    assert result.node is not None and sink.posted == []
    assert violations(s, "hw-node") == 0
    assert len(s.throttle) == 0  # nothing remembered for it


def test_the_memory_goes_with_the_pod(
        audited: tuple[Scheduler, RecordingSink, list[BindRequest]]) -> None:
    s, sink, _ = audited
    raw = pod("gone")
    s.on_pod_add(raw)
    schedule_next(s)
    assert len(sink.posted) == 1 and len(s.throttle) == 1
    s.on_pod_delete(raw)
    assert len(s.throttle) == 0
    bound = pod("bound")
    s.on_pod_add(bound)
    _, result = schedule_next(s)
    assert len(s.throttle) == 1
    s.on_pod_update(bound, {**bound, "spec": {**bound["spec"], "nodeName": result.node}})
    assert len(s.throttle) == 0


def test_throttle_audit_news() -> None:
    t = FailureThrottle(lambda: 0.0)
    assert t.audit_news("u", [("p", "r1"), ("p", "r2"), ("p", "r1")]) == [("p", "r1"),
                                                                         ("p", "r2")]
    assert t.audit_news("u", [("p", "r2")]) == []
    # A rule the pod had not violated before is news, on its own.
    assert t.audit_news("u", [("p", "r2"), ("q", "r1")]) == [("q", "r1")]
    assert t.audit_news("v", [("p", "r1")]) == [("p", "r1")]
    t.forget("u")
    assert t.audit_news("u", [("p", "r1")]) == [("p", "r1")]


def test_the_audit_is_timed_as_an_extension_point(
        audited: tuple[Scheduler, RecordingSink, list[BindRequest]]) -> None:
    s, _, _ = audited
    s.on_pod_add(pod("timed"))
    schedule_next(s)
    count = s.metrics.registry.get_sample_value(
        "scheduler_framework_extension_point_duration_seconds_count",
        {"extension_point": "Audit", "status": "Success", "profile": "policyd"})
    assert count == 1


def test_a_node_that_is_not_feasible_for_anyone_is_not_counted(
        audited: tuple[Scheduler, RecordingSink, list[BindRequest]]) -> None:
    s, sink, _ = audited
    huge = make_pod("huge").uid("uid-huge").scheduler("policyd").annotation(
        ENCRYPT, "true").req(cpu="64").raw()
    s.on_pod_add(huge)
    _, result = schedule_next(s)
    assert result.node is None and result.audits == []
    assert [r for _, _, r, _ in sink.posted] == ["FailedScheduling"]
    assert violations(s, "hw-node") == 0
