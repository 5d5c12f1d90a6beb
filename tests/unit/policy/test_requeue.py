"""The events a compiled policy registers, derived from what its filter rules read,
and their hints: a policy's rejection is retried by exactly the changes that can undo
it (a node label its rule reads, room freed on a node, the pod's own update...)."""

from __future__ import annotations

from typing import Any

from policyd.framework.events import (
    ASSIGNED_POD,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
)
from policyd.model.records import Pod, pod_from_dict
from tests.builders import make_node, make_pod
from tests.cluster_events import (
    NODE_ADD,
    NODE_ALLOC,
    NODE_ANNOTATION,
    NODE_LABEL,
    NODE_TAINT,
    OWN_UPDATE,
    POD_ADD,
    POD_DELETE,
    POD_LABEL,
    hint,
)
from tests.unit.policy.conftest import check_docs, make_policy

A = ActionType


def compiled(**spec: Any) -> Any:
    result = check_docs(make_policy(**spec))
    assert [p for p in result.problems if p.level == "error"] == []
    [policy] = result.compiled
    return policy


def rule(kind: str, spec: Any) -> dict[str, Any]:
    return {"id": "r", "message": "nope", kind: spec}


POD = make_pod("p").uid("p").obj()


def test_node_labels_rule_registers_node_label_changes() -> None:
    p = compiled(filters=[rule("nodeLabels", {"matchLabels": {"tier": "gold"}})])
    plain, gold = make_node("n").obj(), make_node("n").label("tier", "gold").obj()
    assert hint(p, NODE_LABEL, POD, plain, gold) is QUEUE
    assert hint(p, NODE_LABEL, POD, gold, plain) is QUEUE_SKIP
    assert hint(p, NODE_ADD, POD, None, gold) is QUEUE
    assert hint(p, NODE_ADD, POD, None, plain) is QUEUE_SKIP
    for event in (NODE_ALLOC, NODE_TAINT, POD_DELETE, POD_ADD, OWN_UPDATE):
        assert hint(p, event, POD, plain, gold) is None


def test_annotation_to_node_label_reads_the_node_label_and_the_pods_annotation() -> None:
    p = compiled(filters=[rule("annotationToNodeLabel", {
        "annotation": "hw", "value": "true", "label": "hw", "labelValue": "yes"})])
    pod = make_pod("p").uid("p").annotation("hw", "true").obj()
    plain, hw = make_node("n").obj(), make_node("n").label("hw", "yes").obj()
    assert hint(p, NODE_LABEL, pod, plain, hw) is QUEUE
    assert hint(p, NODE_LABEL, POD, plain, hw) is QUEUE_SKIP  # the rule is inactive for it
    assert hint(p, OWN_UPDATE, pod, POD, pod) is QUEUE  # the pod's annotation changed
    other = make_pod("o").uid("o").obj()
    assert hint(p, OWN_UPDATE, pod, other, other) is QUEUE_SKIP


def test_require_extended_resource_registers_allocatable() -> None:
    p = compiled(filters=[rule("requireExtendedResource", {"name": "example.com/gpu"})])
    plain, gpu = make_node("n").obj(), make_node("n").resource("example.com/gpu", "1").obj()
    assert hint(p, NODE_ALLOC, POD, plain, gpu) is QUEUE
    assert hint(p, NODE_LABEL, POD, plain, gpu) is None


def test_headroom_registers_allocatable_and_freed_room() -> None:
    p = compiled(filters=[rule("headroom", {"resource": "cpu", "percent": 50})])
    pod = make_pod("p").uid("p").req(cpu="1").obj()
    bound = make_pod("b").uid("b").req(cpu="2").node("n").obj()
    assert hint(p, POD_DELETE, pod, bound, None) is QUEUE
    assert hint(p, POD_DELETE, pod, make_pod("x").uid("x").obj(), None) is QUEUE_SKIP
    shrunk = make_pod("b").uid("b").req(cpu="1").node("n").obj()
    assert hint(p, ClusterEvent(ASSIGNED_POD, A.UPDATE_POD_SCALE_DOWN), pod, bound,
                shrunk) is QUEUE
    small = make_node("n").resource("cpu", "1").obj()
    assert hint(p, NODE_ALLOC, pod, small, make_node("n").obj()) is QUEUE
    assert hint(p, POD_ADD, pod, None, bound) is None


def test_headroom_freed_by_a_resize_the_kubelet_carried_out() -> None:
    # The node counts a resizing pod by its status too, so a status-only drop frees room.
    p = compiled(filters=[rule("headroom", {"resource": "cpu", "percent": 50})])
    pod = make_pod("p").uid("p").req(cpu="1").obj()

    def resized(actual: str) -> Pod:
        raw = make_pod("b").uid("b").node("n").pod_requests(cpu="1").raw()
        raw["status"]["resources"] = {"requests": {"cpu": actual}}
        return pod_from_dict(raw)

    event = ClusterEvent(ASSIGNED_POD, A.UPDATE_POD_SCALE_DOWN)
    assert hint(p, event, pod, resized("3"), resized("2")) is QUEUE
    assert hint(p, event, pod, resized("2"), resized("3")) is QUEUE_SKIP


def test_max_pods_per_node_registers_pods_leaving_the_count() -> None:
    p = compiled(appliesTo={"labelSelector": {"matchLabels": {"app": "db"}}},
                 filters=[rule("maxPodsPerNode", 1)])
    pod = make_pod("p").uid("p").labels(app="db").obj()
    db = make_pod("d").uid("d").labels(app="db").node("n").obj()
    web = make_pod("w").uid("w").labels(app="web").node("n").obj()
    assert hint(p, POD_DELETE, pod, db, None) is QUEUE
    assert hint(p, POD_DELETE, pod, web, None) is QUEUE_SKIP  # never counted
    relabelled = make_pod("d").uid("d").labels(app="web").node("n").obj()
    assert hint(p, POD_LABEL, pod, db, relabelled) is QUEUE  # no longer counted
    assert hint(p, POD_LABEL, pod, relabelled, db) is QUEUE_SKIP
    assert hint(p, NODE_ADD, pod, None, make_node("n").obj()) is QUEUE
    assert hint(p, OWN_UPDATE, pod, pod, pod) is QUEUE  # appliesTo reads its labels


def test_jmespath_over_the_node_registers_any_node_update() -> None:
    p = compiled(filters=[rule("jmespath", "node.metadata.annotations.ready == 'yes'")])
    plain = make_node("n").obj()
    ready = make_node("n").annotation("ready", "yes").obj()
    assert hint(p, NODE_ANNOTATION, POD, plain, ready) is QUEUE
    assert hint(p, NODE_ANNOTATION, POD, ready, ready) is QUEUE_SKIP
    assert hint(p, NODE_TAINT, POD, plain, plain) is QUEUE_SKIP  # registered, cannot help
    assert hint(p, OWN_UPDATE, POD, POD, POD) is QUEUE  # JMESPath may read the pod


def test_score_only_policy_registers_nothing() -> None:
    p = compiled(scores=[{"id": "s", "weight": 1, "normalize": "none",
                          "labelValue": {"label": "x", "values": {"a": 100}}}])
    assert p.events_to_register() == ()
