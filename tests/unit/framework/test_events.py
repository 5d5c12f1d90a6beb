"""Cluster events: matching a registration against an incoming event, and turning pod
and node updates into the specific events upstream derives from them."""

from __future__ import annotations

import pytest

from policyd.features import with_settings
from policyd.framework.events import (
    ASSIGNED_POD,
    NODE,
    POD,
    UNSCHEDULED_POD,
    WILDCARD_EVENT,
    ActionType,
    ClusterEvent,
    matches,
    node_update_events,
    pod_update_events,
)
from policyd.model.records import Pod, pod_from_dict
from tests.builders import make_node, make_pod

A = ActionType


@pytest.mark.parametrize(("registered", "incoming", "expected"), [
    (ClusterEvent(POD, A.ADD | A.DELETE), ClusterEvent(ASSIGNED_POD, A.ADD), True),
    (ClusterEvent(POD, A.ADD | A.DELETE), ClusterEvent(UNSCHEDULED_POD, A.DELETE), True),
    (ClusterEvent(POD, A.ADD), ClusterEvent(ASSIGNED_POD, A.DELETE), False),
    (ClusterEvent(NODE, A.ADD), ClusterEvent(ASSIGNED_POD, A.ADD), False),
    (ClusterEvent(NODE, A.UPDATE_NODE_LABEL), ClusterEvent(NODE, A.UPDATE_NODE_LABEL), True),
    (ClusterEvent(NODE, A.UPDATE_NODE_LABEL), ClusterEvent(NODE, A.UPDATE_NODE_TAINT), False),
    # A registration of the general Update matches every specific update...
    (ClusterEvent(NODE, A.ADD | A.UPDATE), ClusterEvent(NODE, A.UPDATE_NODE_ANNOTATION), True),
    # ...but a general Update (no specific kind) never matches a specific registration.
    (ClusterEvent(POD, A.UPDATE_POD_LABEL), ClusterEvent(ASSIGNED_POD, A.UPDATE), False),
    (ClusterEvent(POD, A.UPDATE), ClusterEvent(UNSCHEDULED_POD, A.UPDATE), True),
    (WILDCARD_EVENT, ClusterEvent(NODE, A.DELETE), True),
])
def test_matches(registered: ClusterEvent, incoming: ClusterEvent, expected: bool) -> None:
    assert matches(registered, incoming) is expected


def test_labels_name_resource_and_action() -> None:
    assert ClusterEvent(ASSIGNED_POD, A.ADD).label == "AssignedPodAdd"
    assert ClusterEvent(NODE, A.UPDATE_NODE_TAINT).label == "NodeUpdateNodeTaint"


def _actions(events: list[ClusterEvent]) -> list[ActionType]:
    return [e.action for e in events]


def test_pod_update_events() -> None:
    base = make_pod("p").uid("u").labels(app="a").req(cpu="500m")
    relabelled = make_pod("p").uid("u").labels(app="b").req(cpu="500m")
    smaller = make_pod("p").uid("u").labels(app="a").req(cpu="100m")
    tolerant = make_pod("p").uid("u").labels(app="a").req(cpu="500m").toleration("k")
    annotated = make_pod("p").uid("u").labels(app="a").req(cpu="500m").annotation("x", "1")
    assert _actions(pod_update_events(base.obj(), relabelled.obj())) == [A.UPDATE_POD_LABEL]
    assert _actions(pod_update_events(base.obj(), smaller.obj())) == [A.UPDATE_POD_SCALE_DOWN]
    assert _actions(pod_update_events(base.obj(), tolerant.obj())) == [A.UPDATE_POD_TOLERATION]
    assert _actions(pod_update_events(base.obj(), annotated.obj())) == [A.UPDATE]
    assert pod_update_events(base.obj(), relabelled.obj())[0].resource == UNSCHEDULED_POD
    bound = pod_update_events(base.node("n").obj(), relabelled.node("n").obj())
    assert bound[0].resource == ASSIGNED_POD


def test_a_generated_claim_named_in_the_pod_status_is_its_own_event() -> None:
    waiting = make_pod("p").uid("u").resource_claim("gpu", template="t")
    named = make_pod("p").uid("u").resource_claim("gpu", template="t").set(
        "status.resourceClaimStatuses", [{"name": "gpu", "resourceClaimName": "p-gpu"}])
    assert _actions(pod_update_events(waiting.obj(), named.obj())) == [
        A.UPDATE_POD_GENERATED_RESOURCE_CLAIM]
    assert _actions(pod_update_events(named.obj(), named.obj())) == [A.UPDATE]


def test_node_update_events_ignore_heartbeats() -> None:
    base = make_node("n").label("a", "1")
    assert node_update_events(base.obj(), make_node("n").label("a", "1").obj()) == []
    assert _actions(node_update_events(base.obj(), make_node("n").label("a", "2").obj())) \
        == [A.UPDATE_NODE_LABEL]
    assert _actions(node_update_events(base.obj(), make_node("n").label("a", "1").taint(
        "k").obj())) == [A.UPDATE_NODE_TAINT]
    cordoned = make_node("n").label("a", "1").unschedulable().obj()
    # Uncordoning is a taint change upstream; cordoning is not an event that helps.
    assert _actions(node_update_events(cordoned, base.obj())) == [A.UPDATE_NODE_TAINT]
    assert node_update_events(base.obj(), cordoned) == []
    grown = make_node("n").label("a", "1").resource("cpu", "8").obj()
    assert _actions(node_update_events(base.obj(), grown)) == [A.UPDATE_NODE_ALLOCATABLE]
    noted = make_node("n").label("a", "1").annotation("x", "y").obj()
    assert _actions(node_update_events(base.obj(), noted)) == [A.UPDATE_NODE_ANNOTATION]


def test_a_resize_the_kubelet_actuated_is_a_scale_down() -> None:
    # extractPodScaleDown reads requests with UseStatusResources: the pod-level spec
    # stays at 2 cpu, but the status going from 3 to 1 frees a cpu on the node.
    def resized(actual: str) -> Pod:
        raw = make_pod("p").uid("u").node("n").pod_requests(cpu="2").raw()
        raw["status"]["resources"] = {"requests": {"cpu": actual}}
        return pod_from_dict(raw)

    assert _actions(pod_update_events(resized("3"), resized("1"))) == [
        A.UPDATE_POD_SCALE_DOWN]
    gate_off = with_settings([("InPlacePodLevelResourcesVerticalScaling", False)])
    assert _actions(pod_update_events(resized("3"), resized("1"), gate_off)) == [A.UPDATE]
