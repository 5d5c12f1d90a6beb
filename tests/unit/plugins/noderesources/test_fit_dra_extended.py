"""NodeResourcesFit with DRA-backed extended resources (DRAExtendedResource), the
cases of upstream's v1.36.3 `fit_test.go` (TestEnoughRequests' DRA rows,
isSchedulableAfterDeviceClassEvent, haveAnyRequestedResourcesIncreased) in tables of
our own: a request a DeviceClass serves is left to DynamicResources on a node whose
allocatable lacks it, and only there; both forms (per node and columnar) agree."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.features import with_settings
from policyd.framework import Code, CycleState
from policyd.framework.events import DEVICE_CLASS, QUEUE, QUEUE_SKIP
from policyd.model.cluster import ClusterState
from policyd.model.dra_objects import DEVICE_CLASS as DEVICE_CLASS_KIND
from policyd.model.records import Node
from policyd.plugins.noderesources.fit import NodeResourcesFit, new
from tests import plugin_harness as harness
from tests.builders import make_node, make_pod

DRA_RESOURCE = "extended.resource.dra.io/something"
PLUGIN_RESOURCE = "example.com/aaa"
UNMAPPED = "example.com/bbb"
CLASS = "device-class-name"
IMPLICIT = f"deviceclass.resource.kubernetes.io/{CLASS}"
GATE_OFF = with_settings([("DRAExtendedResource", False)])


def device_class(name: str = CLASS, extended: str | None = DRA_RESOURCE) -> dict[str, Any]:
    spec: dict[str, Any] = {"extendedResourceName": extended} if extended else {}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec}


def node(name: str, **allocatable: str) -> Node:
    base = {"cpu": "10", "memory": "20", "pods": "32"}
    return make_node(name).capacity({**base, **allocatable}).obj()


def cluster(*nodes: Node, classes: tuple[dict[str, Any], ...] = (device_class(),)
            ) -> ClusterState:
    state = ClusterState(list(nodes))
    for cls in classes:
        state.dra.upsert(DEVICE_CLASS_KIND, cls)
    return state


def statuses(plugin: NodeResourcesFit, state: ClusterState, **requests: str
             ) -> dict[str, tuple[Code, tuple[str, ...]] | None]:
    pod = make_pod("p").req({"cpu": "1m", "memory": "1", **requests}).obj()
    out = harness.run_filter(plugin, pod, state)
    assert out.stopped is None
    assert out.columnar  # the mask was compared with every per-node answer
    return {name: None if s is None else (s.code, s.reasons)
            for name, s in zip(out.names, out.statuses, strict=True)}


# name, pod requests, nodes' allocatable of the resource (absent: not listed),
# gate on?, classes, want per node (None = fits, else the reason, unresolvable or not)
CASES: list[tuple[str, dict[str, str], dict[str, str | None], bool,
                  tuple[dict[str, Any], ...], dict[str, tuple[Code, str] | None]]] = [
    ("extended resource backed by DRA: left to DynamicResources where not listed",
     {DRA_RESOURCE: "1"}, {"a": None, "b": "0"}, True, (device_class(),),
     {"a": None, "b": None}),
    ("gate off: insufficient, unresolvable, as before",
     {DRA_RESOURCE: "1"}, {"a": None, "b": "0"}, False, (device_class(),),
     {"a": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"Insufficient {DRA_RESOURCE}"),
      "b": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"Insufficient {DRA_RESOURCE}")}),
    ("no class serves it: insufficient",
     {UNMAPPED: "1"}, {"a": None}, True, (device_class(),),
     {"a": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"Insufficient {UNMAPPED}")}),
    ("a node whose device plugin lists it is checked as usual",
     {DRA_RESOURCE: "3"}, {"a": "2", "b": "4"}, True, (device_class(),),
     {"a": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"Insufficient {DRA_RESOURCE}"),
      "b": None}),
    ("a class's implicit name is served too",
     {IMPLICIT: "1"}, {"a": None}, True, (device_class(extended=None),),
     {"a": None}),
    ("the implicit name without its class: insufficient",
     {IMPLICIT: "1"}, {"a": None}, True, (),
     {"a": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"Insufficient {IMPLICIT}")}),
]


@pytest.mark.parametrize(("requests", "allocatable", "gate", "classes", "want"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter(requests: dict[str, str], allocatable: dict[str, str | None], gate: bool,
                classes: tuple[dict[str, Any], ...],
                want: dict[str, tuple[Code, str] | None]) -> None:
    nodes = [node(n, **({DRA_RESOURCE: v, IMPLICIT: v} if v is not None else {}))
             for n, v in allocatable.items()]
    plugin = new(features=with_settings([]) if gate else GATE_OFF)
    got = statuses(plugin, cluster(*nodes, classes=classes), **requests)
    assert got == {n: None if w is None else (w[0], (w[1],)) for n, w in want.items()}


def test_delegated_resource_does_not_hide_other_reasons() -> None:
    """Only the served resource is skipped: cpu still counts on the same node."""
    state = cluster(node("a"))
    got = statuses(new(), state, cpu="11", **{DRA_RESOURCE: "1"})
    assert got == {"a": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient cpu",))}


def test_explain_verdicts_leave_the_delegated_resource_out() -> None:
    state = cluster(node("a"))
    plugin = new()
    pod = make_pod("p").req({"cpu": "11", DRA_RESOURCE: "1"}).obj()
    cycle = CycleState(state.node_infos(), state)
    plugin.pre_filter(cycle, pod, state.node_infos())
    subjects = [v.subject for v in plugin.verdicts(cycle, pod, state.node_infos()[0])]
    assert subjects == ["Insufficient cpu"]


def _pod_requesting(resource: str) -> Any:
    return make_pod("p").req({resource: "1"}).obj()


def _hint(plugin: NodeResourcesFit, event: str) -> Any:
    return next(e.hint for e in plugin.events_to_register() if e.event.resource == event)


def test_device_class_event_registered_only_with_the_gate() -> None:
    assert any(e.event.resource == DEVICE_CLASS for e in new().events_to_register())
    assert not any(e.event.resource == DEVICE_CLASS
                   for e in new(features=GATE_OFF).events_to_register())


@pytest.mark.parametrize(("requested", "old", "new_", "want"), [
    (DRA_RESOURCE, None, device_class(), QUEUE),  # added, names the resource
    (IMPLICIT, None, device_class(extended=None), QUEUE),  # added: its implicit name
    (UNMAPPED, None, device_class(), QUEUE_SKIP),  # added, serves something else
    (DRA_RESOURCE, device_class(), device_class(), QUEUE_SKIP),  # same name kept
    (DRA_RESOURCE, device_class(extended=None), device_class(), QUEUE),  # name set
    (IMPLICIT, device_class(extended=None), device_class(), QUEUE_SKIP),
], ids=["add-explicit", "add-implicit", "add-other", "update-same", "update-names-it",
        "update-implicit"])
def test_device_class_hint(requested: str, old: Any, new_: Any, want: Any) -> None:
    hint = _hint(new(), DEVICE_CLASS)
    assert hint(_pod_requesting(requested), old, new_) == want


def test_node_hint_queues_when_dra_may_serve_the_resource() -> None:
    """haveAnyRequestedResourcesIncreased: a node update where the resource is left to
    DRA queues the pod, whatever else changed; with no class it stays skipped."""
    plugin = new()
    state = cluster(node("a"))
    pod = make_pod("p").req({"cpu": "1m", DRA_RESOURCE: "1"}).obj()
    plugin.pre_filter(CycleState(state.node_infos(), state), pod, state.node_infos())
    hint = _hint(plugin, "Node")
    old, updated = node("a"), node("a", **{"example.com/zzz": "1"})
    assert hint(pod, old, updated) == QUEUE
    without = new()
    bare = ClusterState([node("a")])
    without.pre_filter(CycleState(bare.node_infos(), bare), pod, bare.node_infos())
    assert _hint(without, "Node")(pod, old, updated) == QUEUE_SKIP
