"""TaintToleration, with the cases of upstream's taint_toleration_test.go (reason text
as of 1.34+: `node(s) had untolerated taint(s)`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyd.framework import Code, CycleState, PluginError, Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.plugins import names
from policyd.plugins.tainttoleration.taint_toleration import (
    DEFAULT_WEIGHT,
    ERR_REASON_UNTOLERATED,
    new,
)
from tests.builders import make_node, make_pod
from tests.plugin_harness import filter_statuses

REJECT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_UNTOLERATED,))

Taints = list[tuple[str, str, str]]
Tols = list[dict[str, str]]


def pod_with(tolerations: Tols) -> Pod:
    b = make_pod("pod1")
    for t in tolerations:
        b = b.toleration(**t)
    return b.obj()


def node_with(name: str, taints: Taints) -> NodeInfo:
    b = make_node(name)
    for key, value, effect in taints:
        b = b.taint(key, value, effect)
    return NodeInfo(b.obj())


def run_scores(pod: Pod, nodes: list[NodeInfo]) -> dict[str, int]:
    """PreScore, Score per node, NormalizeScore: the framework's sequence."""
    plugin = new()
    state = CycleState(nodes)
    assert plugin.pre_score(state, pod, nodes) is None
    scores = [plugin.score(state, pod, n) for n in nodes]
    assert plugin.normalize_score(state, pod, nodes, scores) is None
    return {n.name: s for n, s in zip(nodes, scores, strict=True)}


PNS = "PreferNoSchedule"


@pytest.mark.parametrize(
    ("name", "tolerations", "nodes", "want"),
    [
        ("node with taints tolerated by the pod gets a higher score than intolerable ones",
         [{"key": "foo", "value": "bar", "effect": PNS}],
         [("nodeA", [("foo", "bar", PNS)]), ("nodeB", [("foo", "blah", PNS)])],
         {"nodeA": 100, "nodeB": 0}),
        ("all taints tolerated: same score however many tolerable taints",
         [{"key": "cpu-type", "value": "arm64", "effect": PNS},
          {"key": "disk-type", "value": "ssd", "effect": PNS}],
         [("nodeA", []), ("nodeB", [("cpu-type", "arm64", PNS)]),
          ("nodeC", [("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS)])],
         {"nodeA": 100, "nodeB": 100, "nodeC": 100}),
        ("the more intolerable taints a node has, the lower its score",
         [{"key": "foo", "value": "bar", "effect": PNS}],
         [("nodeA", []), ("nodeB", [("cpu-type", "arm64", PNS)]),
          ("nodeC", [("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS)])],
         {"nodeA": 100, "nodeB": 50, "nodeC": 0}),
        ("only PreferNoSchedule taints and tolerations count for the score",
         [{"key": "cpu-type", "value": "arm64", "effect": "NoSchedule"},
          {"key": "disk-type", "value": "ssd", "effect": "NoSchedule"}],
         [("nodeA", []), ("nodeB", [("cpu-type", "arm64", "NoSchedule")]),
          ("nodeC", [("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS)])],
         {"nodeA": 100, "nodeB": 100, "nodeC": 0}),
        ("no taints and tolerations: lands on the node without taints",
         [],
         [("nodeA", []), ("nodeB", [("cpu-type", "arm64", PNS)])],
         {"nodeA": 100, "nodeB": 0}),
        # Beyond upstream's table: a toleration with an empty effect covers PreferNoSchedule.
        ("a toleration with no effect tolerates PreferNoSchedule",
         [{"key": "foo", "operator": "Exists"}],
         [("nodeA", [("foo", "x", PNS)]), ("nodeB", [("bar", "x", PNS)])],
         {"nodeA": 100, "nodeB": 0}),
        ("no node has an intolerable taint: all get the maximum",
         [], [("nodeA", []), ("nodeB", [])], {"nodeA": 100, "nodeB": 100}),
    ],
)
def test_score(name: str, tolerations: Tols, nodes: list[tuple[str, Taints]],
               want: dict[str, int]) -> None:
    infos = [node_with(n, t) for n, t in nodes]
    assert run_scores(pod_with(tolerations), infos) == want


def test_score_without_pre_score() -> None:
    pod = pod_with([{"key": "foo", "value": "bar", "effect": PNS}])
    plugin = new()
    node = node_with("a", [("foo", "bar", PNS), ("x", "y", PNS)])
    assert plugin.score(CycleState(), pod, node) == 1


@pytest.mark.parametrize(
    ("name", "tolerations", "taints", "want"),
    [
        ("a pod with no tolerations can't land on a node with a NoSchedule taint",
         [], [("dedicated", "user1", "NoSchedule")], REJECT),
        ("a toleration of the dedicated node's taint lets the pod on",
         [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
         [("dedicated", "user1", "NoSchedule")], None),
        ("a toleration for another value does not",
         [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
         [("dedicated", "user1", "NoSchedule")], REJECT),
        ("operator Exists tolerates any value",
         [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
         [("foo", "bar", "NoSchedule")], None),
        ("all of several taints tolerated",
         [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
          {"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
         [("dedicated", "user2", "NoSchedule"), ("foo", "bar", "NoSchedule")], None),
        ("key and value match but a different non-empty effect does not tolerate",
         [{"key": "foo", "operator": "Equal", "value": "bar", "effect": PNS}],
         [("foo", "bar", "NoSchedule")], REJECT),
        ("key and value match and an empty effect tolerates NoSchedule",
         [{"key": "foo", "operator": "Equal", "value": "bar"}],
         [("foo", "bar", "NoSchedule")], None),
        ("an untolerated PreferNoSchedule taint does not filter",
         [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
         [("dedicated", "user1", PNS)], None),
        ("no tolerations and only a PreferNoSchedule taint",
         [], [("dedicated", "user1", PNS)], None),
        # Beyond upstream's table.
        ("an untolerated NoExecute taint filters", [], [("k", "v", "NoExecute")], REJECT),
        ("one untolerated taint among tolerated ones filters",
         [{"key": "a", "operator": "Exists"}],
         [("a", "1", "NoSchedule"), ("b", "2", "NoExecute")], REJECT),
        ("empty key with Exists tolerates everything",
         [{"operator": "Exists"}],
         [("a", "1", "NoSchedule"), ("b", "2", "NoExecute")], None),
        ("label keys are case-sensitive",
         [{"key": "Dedicated", "operator": "Exists"}], [("dedicated", "", "NoSchedule")],
         REJECT),
    ],
)
def test_filter(name: str, tolerations: Tols, taints: Taints, want: Status | None) -> None:
    pod = pod_with(tolerations)
    node = node_with("nodeA", taints)
    plugin = new()
    assert plugin.filter(CycleState(), pod, node) == want
    assert filter_statuses(plugin, pod, node) == [want]


_key = st.sampled_from(["a", "b", "c", ""])
_value = st.sampled_from(["", "1", "2"])
_effect = st.sampled_from(["NoSchedule", "NoExecute", PNS])
_taint = st.tuples(_key.filter(bool), _value, _effect)
_toleration: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries({
    "key": _key, "value": _value,
    "effect": st.sampled_from(["", "NoSchedule", "NoExecute", PNS]),
    "operator": st.sampled_from(["Equal", "Exists"]),
}).map(lambda t: {**t, "value": "" if t["operator"] == "Exists" else t["value"]})


@settings(max_examples=200, deadline=None)
@given(tolerations=st.lists(_toleration, max_size=3),
       nodes=st.lists(st.lists(_taint, max_size=3), min_size=1, max_size=8))
def test_mask_matches_filter_on_generated_taints(tolerations: Tols, nodes: list[Taints]) -> None:
    pod = pod_with(tolerations)
    infos = [node_with(f"n{i}", t) for i, t in enumerate(nodes)]
    filter_statuses(new(), pod, *infos)  # asserts that both forms agree


def test_factory() -> None:
    assert DEFAULT_WEIGHT == 3
    assert new(None).name == names.TAINT_TOLERATION
    with pytest.raises(PluginError):
        new({"x": 1})
