"""PodTopologySpread against upstream's own tables (podtopologyspread/filtering_test.go
TestSingleConstraint / TestMultipleConstraints, scoring_test.go TestPodTopologySpreadScore
/ TestPreScoreSkip / TestPreScoreStateEmptyNodes, helper/spread_test.go,
validation_pluginargs_test.go), re-expressed with our builders; reasons and scores are
asserted exactly."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from policyd.framework import Code, CycleState, PluginError, Status
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod
from policyd.plugins.podtopologyspread import plugin as pts
from policyd.plugins.podtopologyspread.constraints import default_selector
from policyd.plugins.podtopologyspread.plugin import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PodTopologySpread,
    _CriticalPaths,
    new,
)
from tests import plugin_harness as harness
from tests.builders import make_node, make_pod

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DNS = "DoNotSchedule"
SA = "ScheduleAnyway"
FOO: dict[str, Any] = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR: dict[str, Any] = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
UNSCHEDULABLE_TAINT = ("node.kubernetes.io/unschedulable", "NoSchedule")


# --- builders -------------------------------------------------------------------------

def sc(max_skew: int, key: str, action: str, selector: dict[str, Any] | None = None,
       min_domains: int | None = None, affinity_policy: str | None = None,
       taints_policy: str | None = None, match_label_keys: list[str] | None = None
       ) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": action}
    if selector is not None:
        c["labelSelector"] = selector
    if min_domains is not None:
        c["minDomains"] = min_domains
    if affinity_policy is not None:
        c["nodeAffinityPolicy"] = affinity_policy
    if taints_policy is not None:
        c["nodeTaintsPolicy"] = taints_policy
    if match_label_keys is not None:
        c["matchLabelKeys"] = match_label_keys
    return c


def node(name: str, labels: dict[str, str], tainted: bool = False) -> Node:
    """A node with exactly these labels (no default hostname label, as upstream's tests)."""
    b = make_node(name).exact_labels(labels)
    if tainted:
        key, effect = UNSCHEDULABLE_TAINT
        b.taint(key, "", effect)
    return b.obj()


def zn(name: str, zone: str, **extra: str) -> Node:
    """Upstream's usual filter node: labels zone=<zone>, node=<name>."""
    return node(name, {"zone": zone, "node": name, **extra})


def hn(name: str, **extra: str) -> Node:
    return node(name, {HOST: name, **extra})


def hzn(name: str, zone: str) -> Node:
    return node(name, {"zone": zone, HOST: name})


def pod(name: str = "p", labels: tuple[str, ...] = ("foo",),
        spread: tuple[dict[str, Any], ...] = (), on: str = "", namespace: str = "default",
        node_selector: dict[str, str] | None = None,
        affinity: dict[str, Any] | None = None, terminating: bool = False,
        owner: tuple[str, str, str] | None = None, extra_labels: dict[str, str] | None = None
        ) -> Pod:
    b = make_pod(name, namespace).labels(dict.fromkeys(labels, "")).labels(extra_labels)
    for c in spread:
        b.spread(c)
    if on:
        b.node(on)
    if node_selector:
        b.node_selector(node_selector)
    if affinity:
        b.affinity(affinity)
    if terminating:
        b.terminating()
    if owner:
        api_version, kind, owner_name = owner
        b.owner(kind, owner_name, api_version)
    return b.obj()


def existing(*specs: str, labels: tuple[str, ...] = ("foo",), namespace: str = "default"
             ) -> list[Pod]:
    """`existing("node-a:2", "node-b")`: that many matching pods bound to each node."""
    out = []
    for spec in specs:
        node_name, _, count = spec.partition(":")
        for i in range(int(count or 1)):
            out.append(pod(f"p-{node_name}-{i}-{'-'.join(labels)}", labels=labels, on=node_name,
                           namespace=namespace))
    return out


def node_affinity_in(key: str, values: list[str]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": values}]}]}}}


def node_affinity_not_in(key: str, values: list[str]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "NotIn", "values": values}]}]}}}


def cluster(nodes: list[Node], pods: list[Pod],
            workloads: dict[str, list[dict[str, Any]]] | None = None) -> ClusterState:
    cs = ClusterState(nodes, pods)
    cs.workloads = workloads or {}
    return cs


def cycle(cs: ClusterState) -> CycleState:
    return CycleState(cs.node_infos(), cs)


OK, SKEW, LABEL = "ok", "skew", "label"


def verdict(status: Status | None) -> str:
    if status is None:
        return OK
    if status == Status(Code.UNSCHEDULABLE, (ERR_REASON_CONSTRAINTS_NOT_MATCH,)):
        return SKEW
    if status == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_NODE_LABEL_NOT_MATCH,)):
        return LABEL
    raise AssertionError(f"unexpected status {status}")


def run_filter(p: Pod, nodes: list[Node], pods: list[Pod], plugin: PodTopologySpread | None = None,
               workloads: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, str]:
    plugin = plugin or new({"defaultingType": "List"})
    cs = cluster(nodes, pods, workloads)
    state = cycle(cs)
    names, status = plugin.pre_filter(state, p, state.all_nodes)
    assert names is None
    assert status is None, status
    infos = cs.node_infos()
    single = [plugin.filter(state, p, n) for n in infos]
    assert_fast_filter_agrees(plugin, p, cs, single)
    return {n.name: verdict(s) for n, s in zip(infos, single, strict=True)}


def assert_fast_filter_agrees(plugin: PodTopologySpread, p: Pod, cs: ClusterState,
                              want: list[Status | None]) -> None:
    """Both forms give the reference results, on all nodes and on a subset of rows (as
    the runner passes after earlier filters)."""
    assert harness.run_filter(plugin, p, cs).statuses == want
    half = list(range(0, len(want), 2))
    assert harness.run_filter(plugin, p, cs, half).statuses == [want[i] for i in half]


# --- reasons --------------------------------------------------------------------------

def test_reasons_are_upstream_strings() -> None:
    assert ERR_REASON_CONSTRAINTS_NOT_MATCH == \
        "node(s) didn't match pod topology spread constraints"
    assert ERR_REASON_NODE_LABEL_NOT_MATCH == \
        "node(s) didn't match pod topology spread constraints (missing required label)"
    assert pts.DEFAULT_WEIGHT == 2
    assert new().name == "PodTopologySpread"


# --- Filter: TestSingleConstraint ---------------------------------------------------------

FOUR_ZONE_NODES = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"),
                   zn("node-y", "zone2")]

SINGLE_CASES: list[tuple[str, Pod, list[Node], list[Pod], dict[str, str]]] = [
    ("no existing pods",
     pod(spread=(sc(1, "zone", DNS, FOO),)), FOUR_ZONE_NODES, [],
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("no existing pods, incoming pod doesn't match itself",
     pod(spread=(sc(1, "zone", DNS, BAR),)), FOUR_ZONE_NODES, [],
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("existing pods in a different namespace do not count",
     pod(spread=(sc(1, "zone", DNS, FOO),)), FOUR_ZONE_NODES,
     existing("node-a", namespace="ns1") + existing("node-a", namespace="ns2")
     + existing("node-x", "node-y"),
     {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW}),
    ("existing pods do not match null selector",
     pod(spread=(sc(1, "zone", DNS, None),)), FOUR_ZONE_NODES, existing("node-x", "node-y"),
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("pods spread across zones as 3/3, all nodes fit",
     pod(spread=(sc(1, "zone", DNS, FOO),)), FOUR_ZONE_NODES,
     existing("node-a:2", "node-b", "node-y:3"),
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
     pod(spread=(sc(1, "zone", DNS, FOO),)),
     [zn("node-a", "zone1"), node("node-b", {"zon": "zone1", "node": "node-b"}),
      zn("node-x", "zone2"), zn("node-y", "zone2")],
     existing("node-a", "node-b", "node-x", "node-y"),
     {"node-a": OK, "node-b": LABEL, "node-x": SKEW, "node-y": SKEW}),
    ("pod cannot be scheduled as all nodes don't have label 'rack'",
     pod(spread=(sc(1, "rack", DNS, FOO),)), [zn("node-a", "zone1"), zn("node-x", "zone2")], [],
     {"node-a": LABEL, "node-x": LABEL}),
    ("pods spread across nodes as 2/1/0/3, only node-x fits",
     pod(spread=(sc(1, "node", DNS, FOO),)), FOUR_ZONE_NODES,
     existing("node-a:2", "node-b", "node-y:3"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}),
    ("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
     pod(spread=(sc(2, "node", DNS, FOO),)), FOUR_ZONE_NODES,
     existing("node-a:2", "node-b", "node-y:3"),
     {"node-a": SKEW, "node-b": OK, "node-x": OK, "node-y": SKEW}),
    ("pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
     pod(labels=("bar",), spread=(sc(1, "node", DNS, FOO),)), FOUR_ZONE_NODES,
     existing("node-a:2", "node-b", "node-y:3"),
     {"node-a": SKEW, "node-b": OK, "node-x": OK, "node-y": SKEW}),
    ("incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
     pod(spread=(sc(1, "node", DNS, FOO),),
         affinity=node_affinity_in("node", ["node-a", "node-y"])),
     FOUR_ZONE_NODES, existing("node-a:2", "node-b", "node-y:3"),
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": SKEW}),
    ("terminating Pods should be excluded",
     pod(spread=(sc(1, "node", DNS, FOO),)),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
     [pod("p-a", on="node-a", terminating=True), pod("p-b", on="node-b")],
     {"node-a": OK, "node-b": SKEW}),
    ("incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
     pod(spread=(sc(1, "zone", DNS, FOO),), affinity=node_affinity_not_in("node", ["node-b"])),
     FOUR_ZONE_NODES, existing("node-b:2", "node-y"),
     {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW}),
    ("pods spread across nodes as 2/2/1, maxSkew 2, domains < minDomains: third node fits",
     pod(spread=(sc(2, "node", DNS, FOO, min_domains=4),)),
     [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
     existing("node-a:2", "node-b:2", "node-c"),
     {"node-a": SKEW, "node-b": SKEW, "node-c": OK}),
    ("pods spread across nodes as 2/2/1, maxSkew 2, domains > minDomains: all nodes fit",
     pod(spread=(sc(2, "node", DNS, FOO, min_domains=2),)),
     [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
     existing("node-a:2", "node-b:2", "node-c"),
     {"node-a": OK, "node-b": OK, "node-c": OK}),
    ("pods spread across zone as 2/1, maxSkew 2, domains < minDomains: zone2 fits",
     pod(spread=(sc(2, "zone", DNS, FOO, min_domains=3),)), FOUR_ZONE_NODES,
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK}),
    ("pods spread across zone as 2/1, maxSkew 2, domains > minDomains: all nodes fit",
     pod(spread=(sc(2, "zone", DNS, FOO, min_domains=1),)), FOUR_ZONE_NODES,
     existing("node-a", "node-b", "node-y"),
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("NodeAffinityPolicy honored with labelSelectors",
     pod(spread=(sc(1, "node", DNS, FOO),), node_selector={"foo": ""}),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}),
      node("node-x", {"node": "node-x", "foo": ""}), node("node-y", {"node": "node-y"})],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK}),
    ("NodeAffinityPolicy ignored with labelSelectors",
     pod(spread=(sc(1, "node", DNS, FOO, affinity_policy="Ignore"),), node_selector={"foo": ""}),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}),
      node("node-x", {"node": "node-x", "foo": ""}), node("node-y", {"node": "node-y"})],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}),
    ("NodeAffinityPolicy honored with nodeAffinity",
     pod(spread=(sc(1, "node", DNS, FOO),), affinity=node_affinity_in("foo", [""])),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}),
      node("node-x", {"node": "node-x", "foo": ""}), node("node-y", {"node": "node-y"})],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK}),
    ("NodeAffinityPolicy ignored with nodeAffinity",
     pod(spread=(sc(1, "node", DNS, FOO, affinity_policy="Ignore"),),
         affinity=node_affinity_in("foo", [""])),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}),
      node("node-x", {"node": "node-x", "foo": ""}), node("node-y", {"node": "node-y"})],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}),
    ("NodeTaintsPolicy honored",
     pod(spread=(sc(1, "node", DNS, FOO, taints_policy="Honor"),)),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}),
      node("node-x", {"node": "node-x", "foo": ""}), node("node-y", {"node": "node-y"}, True)],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK}),
    ("NodeTaintsPolicy ignored",
     pod(spread=(sc(1, "node", DNS, FOO),)),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}),
      node("node-x", {"node": "node-x", "foo": ""}), node("node-y", {"node": "node-y"}, True)],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}),
]


@pytest.mark.parametrize(("name", "p", "nodes", "pods", "want"), SINGLE_CASES,
                         ids=[c[0] for c in SINGLE_CASES])
def test_single_constraint(name: str, p: Pod, nodes: list[Node], pods: list[Pod],
                           want: dict[str, str]) -> None:
    assert run_filter(p, nodes, pods) == want


# --- Filter: TestMultipleConstraints ------------------------------------------------------

TWO = (sc(1, "zone", DNS, FOO), sc(1, "node", DNS, FOO))
TWO_SELECTORS = (sc(1, "zone", DNS, FOO), sc(1, "node", DNS, BAR))

MULTI_CASES: list[tuple[str, Pod, list[Node], list[Pod], dict[str, str]]] = [
    ("two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
     pod(spread=TWO), FOUR_ZONE_NODES, existing("node-a:2", "node-b", "node-y:3"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}),
    ("two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
     pod(spread=TWO), FOUR_ZONE_NODES, existing("node-a:2", "node-b", "node-y:4"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": SKEW}),
    ("Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
     pod(labels=("foo", "bar"), spread=TWO_SELECTORS), FOUR_ZONE_NODES,
     existing("node-a") + existing("node-y", labels=("bar",)),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}),
    ("Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
     pod(labels=("foo", "bar"), spread=TWO_SELECTORS), FOUR_ZONE_NODES,
     existing("node-a") + existing("node-x", "node-y", labels=("bar",)),
     {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": SKEW}),
    ("Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
     pod(labels=("foo", "bar"), spread=TWO_SELECTORS), FOUR_ZONE_NODES,
     existing("node-a", "node-y:2") + existing("node-a", "node-y", labels=("foo", "bar")),
     {"node-a": SKEW, "node-b": OK, "node-x": SKEW, "node-y": SKEW}),
    ("Constraints hold different labelSelectors but pod doesn't match itself on 'zone'",
     pod(labels=("bar",), spread=TWO_SELECTORS), FOUR_ZONE_NODES,
     existing("node-a") + existing("node-x", "node-y", labels=("bar",)),
     {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW}),
    ("two Constraints on zone and node, absence of label 'node' on node-x",
     pod(spread=TWO),
     [zn("node-a", "zone1"), zn("node-b", "zone1"), node("node-x", {"zone": "zone2"}),
      zn("node-y", "zone2")],
     existing("node-a", "node-y"),
     {"node-a": SKEW, "node-b": OK, "node-x": LABEL, "node-y": SKEW}),
    ("two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
     pod(spread=(sc(1, "zone", DNS, FOO), sc(1, "node", DNS, FOO, affinity_policy="Ignore")),
         node_selector={"foo": ""}),
     [zn("node-a", "zone1", foo=""), zn("node-b", "zone1", foo=""), zn("node-x", "zone2", foo=""),
      zn("node-y", "zone2")],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}),
    ("two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
     pod(spread=(sc(1, "zone", DNS, FOO, taints_policy="Honor"), sc(1, "node", DNS, FOO))),
     [zn("node-a", "zone1", foo=""), zn("node-b", "zone1", foo=""), zn("node-x", "zone2", foo=""),
      node("node-y", {"zone": "zone2", "node": "node-y"}, tainted=True)],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}),
    ("two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
     pod(spread=TWO, node_selector={"foo": ""}),
     [zn("node-a", "zone1", foo=""), zn("node-b", "zone1"), zn("node-x", "zone2", foo=""),
      node("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, tainted=True)],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": OK, "node-x": OK, "node-y": SKEW}),
    ("two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
     pod(spread=(sc(1, "zone", DNS, FOO, taints_policy="Honor"),
                 sc(1, "node", DNS, FOO, affinity_policy="Ignore")), node_selector={"foo": ""}),
     [zn("node-a", "zone1", foo=""), zn("node-b", "zone1"), zn("node-x", "zone2", foo=""),
      node("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, tainted=True)],
     existing("node-a", "node-b", "node-y"),
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}),
    # matchLabelKeys: only pods sharing the incoming pod's value of the key count
    # (TestPreFilterState "matchLabelKeys" cases): zone1 holds 2 foo pods of another
    # version, so with the key merged in zone1 and zone2 both count 0 / 1.
    ("matchLabelKeys merged into the selector",
     pod(spread=(sc(1, "zone", DNS, FOO, match_label_keys=["version"]),),
         extra_labels={"version": "v2"}),
     FOUR_ZONE_NODES,
     [pod("old-a1", on="node-a", extra_labels={"version": "v1"}),
      pod("old-a2", on="node-b", extra_labels={"version": "v1"}),
      pod("new-x1", on="node-x", extra_labels={"version": "v2"})],
     {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW}),
    ("matchLabelKeys with a key the pod lacks adds nothing",
     pod(spread=(sc(1, "zone", DNS, FOO, match_label_keys=["version"]),)),
     FOUR_ZONE_NODES,
     [pod("old-a1", on="node-a", extra_labels={"version": "v1"}),
      pod("old-a2", on="node-b", extra_labels={"version": "v1"}),
      pod("new-x1", on="node-x", extra_labels={"version": "v2"})],
     {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK}),
    # An empty selector counts no existing pod (countPodsMatchSelector's Empty() test in
    # v1.36, kubernetes/kubernetes#141339) but the pod matches itself, so every domain
    # stays within maxSkew.
    ("empty selector counts nothing",
     pod(spread=(sc(1, "zone", DNS, {}),)), FOUR_ZONE_NODES, existing("node-a:3"),
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
]


@pytest.mark.parametrize(("name", "p", "nodes", "pods", "want"), MULTI_CASES,
                         ids=[c[0] for c in MULTI_CASES])
def test_multiple_constraints(name: str, p: Pod, nodes: list[Node], pods: list[Pod],
                              want: dict[str, str]) -> None:
    assert run_filter(p, nodes, pods) == want


def test_missing_label_reported_before_later_skew() -> None:
    # Constraints are checked in order; the first failing one decides the status.
    # node-b lacks "rack" but its zone already breaks the first constraint.
    p = pod(spread=(sc(1, "zone", DNS, FOO), sc(1, "rack", DNS, FOO)))
    nodes = [node("node-a", {"zone": "zone1", "rack": "r1"}), node("node-b", {"zone": "zone1"}),
             node("node-c", {"zone": "zone2", "rack": "r2"}), node("node-d", {"zone": "zone2"})]
    got = run_filter(p, nodes, existing("node-a:2"))
    assert got == {"node-a": SKEW, "node-b": SKEW, "node-c": OK, "node-d": LABEL}


# --- PreFilter: Skip, invalid constraints, default constraints ------------------------------

def test_pre_filter_skips_without_hard_constraints() -> None:
    plugin = new({"defaultingType": "List"})
    cs = cluster(FOUR_ZONE_NODES, [])
    state = cycle(cs)
    assert plugin.pre_filter(state, pod(spread=(sc(1, "zone", SA, FOO),)),
                             state.all_nodes) == (None, Status.skip())
    # System defaults are ScheduleAnyway only: nothing to filter either.
    assert new().pre_filter(state, pod(), state.all_nodes) == (None, Status.skip())


@pytest.mark.parametrize(("constraint", "reason"), [
    (sc(0, "zone", DNS, FOO),
     "spec.topologySpreadConstraints[0].maxSkew: must be an integer greater than zero, got 0"),
    ({"maxSkew": 1, "whenUnsatisfiable": DNS},
     "spec.topologySpreadConstraints[0].topologyKey: is required"),
    (sc(1, "zone", "Sometimes", FOO),
     "spec.topologySpreadConstraints[0].whenUnsatisfiable: must be one of DoNotSchedule, "
     "ScheduleAnyway, got 'Sometimes'"),
    (sc(1, "zone", DNS, {"matchExpressions": [{"key": "a", "operator": "Gt",
                                               "values": ["1"]}]}),
     "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator: 'Gt' is "
     "not a valid operator, expected one of In, NotIn, Exists, DoesNotExist"),
    (sc(1, "zone", DNS, FOO, min_domains=0),
     "spec.topologySpreadConstraints[0].minDomains: must be an integer greater than zero, "
     "got 0"),
    (sc(1, "zone", SA, FOO, taints_policy="honor"),
     "spec.topologySpreadConstraints[0].nodeTaintsPolicy: must be Honor or Ignore, "
     "got 'honor'"),
    (sc(1, "zone", DNS, FOO, match_label_keys="app"),  # type: ignore[arg-type]
     "spec.topologySpreadConstraints[0].matchLabelKeys: must be a list of strings"),
])
def test_invalid_constraints_are_unresolvable(constraint: dict[str, Any], reason: str) -> None:
    plugin = new({"defaultingType": "List"})
    cs = cluster(FOUR_ZONE_NODES, [])
    state = cycle(cs)
    p = pod(spread=(constraint,))
    want = Status.unresolvable(f"invalid topology spread constraint: {reason}")
    assert plugin.pre_filter(state, p, state.all_nodes) == (None, want)
    assert plugin.pre_score(state, p, cs.node_infos()) == want


def test_invalid_constraints_list_every_problem() -> None:
    p = pod(spread=(sc(1, "zone", DNS, FOO), {"maxSkew": -1, "topologyKey": "zone",
                                              "whenUnsatisfiable": DNS,
                                              "nodeAffinityPolicy": "Maybe"}))
    state = cycle(cluster(FOUR_ZONE_NODES, []))
    _, status = new().pre_filter(state, p, state.all_nodes)
    assert status is not None
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (
        "invalid topology spread constraint: spec.topologySpreadConstraints[1].maxSkew: must "
        "be an integer greater than zero, got -1",
        "invalid topology spread constraint: spec.topologySpreadConstraints[1]."
        "nodeAffinityPolicy: must be Honor or Ignore, got 'Maybe'",
    )


def test_list_default_do_not_schedule_constraints_filter() -> None:
    # List defaulting may carry DoNotSchedule constraints; their selector is the pod's
    # Service's. A pod with its own constraints ignores the defaults.
    plugin = new({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": DNS}]})
    svc = {"metadata": {"name": "s", "namespace": "default"}, "spec": {"selector": {"foo": ""}}}
    pods = existing("node-a:2", "node-b", "node-y:3")
    got = run_filter(pod(), FOUR_ZONE_NODES, pods, plugin, {"Service": [svc]})
    assert got == {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW}
    # Without any workload selecting the pod the defaults do nothing: Skip.
    state = cycle(cluster(FOUR_ZONE_NODES, pods))
    assert plugin.pre_filter(state, pod(), state.all_nodes) == (None, Status.skip())
    state = CycleState(cluster(FOUR_ZONE_NODES, pods).node_infos(), None)
    assert plugin.pre_filter(state, pod(), state.all_nodes) == (None, Status.skip())


def test_counts_follow_cluster_changes() -> None:
    # Per-node counts are memoized on the node; assuming a pod must invalidate them.
    plugin = new({"defaultingType": "List"})
    p = pod(spread=(sc(1, "node", DNS, FOO),))
    cs = cluster(FOUR_ZONE_NODES, existing("node-a", "node-b", "node-y"))
    state = cycle(cs)
    plugin.pre_filter(state, p, state.all_nodes)
    assert [plugin.filter(state, p, n) for n in cs.node_infos()].count(None) == 1
    cs.assume(pod("new", on=""), "node-x")
    state = cycle(cs)
    plugin.pre_filter(state, p, state.all_nodes)
    assert [plugin.filter(state, p, n) for n in cs.node_infos()] == [None] * 4


def test_filter_follows_the_skew_rule_on_generated_clusters() -> None:
    rng = random.Random(1234)
    plugin = new({"defaultingType": "List"})
    for _ in range(60):
        nodes = []
        for i in range(rng.randint(1, 12)):
            labels = {"node": f"n{i}"}
            if rng.random() < 0.85:
                labels["zone"] = f"z{rng.randint(0, 3)}"
            if rng.random() < 0.5:
                labels["foo"] = ""
            nodes.append(node(f"n{i}", labels, tainted=rng.random() < 0.2))
        pods = [pod(f"e{j}", labels=tuple(rng.sample(["foo", "bar"], rng.randint(0, 2))),
                    on=f"n{rng.randrange(len(nodes))}",
                    namespace=rng.choice(["default", "other"]),
                    terminating=rng.random() < 0.1)
                for j in range(rng.randint(0, 30))]
        spread = []
        for key in rng.sample(["zone", "node"], rng.randint(1, 2)):
            spread.append(sc(rng.randint(1, 3), key, DNS, rng.choice([FOO, BAR, None]),
                             min_domains=rng.choice([None, 1, 3, 6]),
                             affinity_policy=rng.choice([None, "Ignore"]),
                             taints_policy=rng.choice([None, "Honor"])))
        p = pod(labels=tuple(rng.sample(["foo", "bar"], rng.randint(0, 2))), spread=tuple(spread),
                node_selector=rng.choice([None, {"foo": ""}]))
        cs = cluster(nodes, pods)
        state = cycle(cs)
        plugin.pre_filter(state, p, state.all_nodes)
        infos = cs.node_infos()
        want = [plugin.filter(state, p, n) for n in infos]
        assert [verdict(s) for s in want] == _reference_filter(p, infos, spread)
        assert_fast_filter_agrees(plugin, p, cs, want)


def _reference_filter(p: Pod, infos: list[NodeInfo], spread: list[dict[str, Any]]) -> list[str]:
    """A plain, obviously-correct transcription of the skew rule for the generated cases."""
    def matches(sel: dict[str, Any] | None, labels: dict[str, str]) -> bool:
        if sel is None:
            return False
        key = sel["matchExpressions"][0]["key"]
        return key in labels

    keys = [c["topologyKey"] for c in spread]
    out = []
    domains: list[dict[str, int]] = []
    for c in spread:
        d: dict[str, int] = {}
        for info in infos:
            n = info.node
            if any(k not in n.labels for k in keys):
                continue
            if c.get("nodeAffinityPolicy") != "Ignore" and any(
                    n.labels.get(k) != v for k, v in p.node_selector.items()):
                continue
            if c.get("nodeTaintsPolicy") == "Honor" and n.taints:
                continue
            v = n.labels[c["topologyKey"]]
            d[v] = d.get(v, 0) + sum(
                1 for q in info.pods.values()
                if not q.deleting and q.namespace == p.namespace
                and matches(c.get("labelSelector"), q.labels))
        domains.append(d)
    for info in infos:
        result = OK
        for c, d in zip(spread, domains, strict=True):
            value = info.node.labels.get(c["topologyKey"])
            if value is None:
                result = LABEL
                break
            low = 0 if len(d) < c.get("minDomains", 1) else min(d.values())
            self_match = 1 if matches(c.get("labelSelector"), p.labels) else 0
            if d.get(value, 0) + self_match - low > c["maxSkew"]:
                result = SKEW
                break
        out.append(result)
    return out


# --- Score: TestPodTopologySpreadScore --------------------------------------------------------

def run_score(p: Pod, nodes: list[Node], pods: list[Pod], failed: list[Node] | None = None,
              workloads: dict[str, list[dict[str, Any]]] | None = None,
              args: dict[str, Any] | None = None) -> dict[str, int]:
    plugin = new(args if args is not None else {"defaultingType": "System"})
    cs = cluster(nodes + (failed or []), pods, workloads)
    state = cycle(cs)
    infos = cs.node_infos()
    candidates = [i for i in infos if i.name in {n.name for n in nodes}]
    assert plugin.pre_score(state, p, candidates) is None
    raw = [plugin.score(state, p, n) for n in candidates]
    scores = list(raw)
    assert plugin.normalize_score(state, p, candidates, scores) is None
    assert_fast_score_agrees(plugin, p, cs, [n.name for n in candidates], raw, scores)
    return {n.name: s for n, s in zip(candidates, scores, strict=True)}


def assert_fast_score_agrees(plugin: PodTopologySpread, p: Pod, cs: ClusterState,
                             candidates: list[str], raw: list[int], want: list[int]) -> None:
    positions = [i for i, n in enumerate(cs.node_infos()) if n.name in set(candidates)]
    out = harness.run_score(plugin, p, cs, positions)
    assert out.columnar
    assert (out.raw, out.normalized) == (raw, want)


HOST4 = [hn("node-a"), hn("node-b"), hn("node-c"), hn("node-d")]
ZONE4 = [hzn("node-a", "zone1"), hzn("node-b", "zone1"), hzn("node-x", "zone2"),
         hzn("node-y", "zone2")]
HOST_1 = (sc(1, HOST, SA, FOO),)

SCORE_CASES: list[tuple[str, Pod, list[Node], list[Node], list[Pod], dict[str, int]]] = [
    ("one constraint on node, no existing pods",
     pod(spread=HOST_1), [hn("node-a"), hn("node-b")], [], [],
     {"node-a": 100, "node-b": 100}),
    ("one constraint on node, only one node is candidate",
     pod(spread=HOST_1), [hn("node-a")], [hn("node-b")], existing("node-a:2", "node-b"),
     {"node-a": 100}),
    ("one constraint on node, all nodes have the same number of matching pods",
     pod(spread=HOST_1), [hn("node-a"), hn("node-b")], [], existing("node-a", "node-b"),
     {"node-a": 100, "node-b": 100}),
    ("one constraint on node, all 4 nodes are candidates",
     pod(spread=HOST_1), HOST4, [], existing("node-a:2", "node-b", "node-d:3"),
     {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}),
    ("one constraint on node, null selector",
     pod(spread=(sc(1, HOST, SA, None),)), HOST4, [], existing("node-a:2", "node-b", "node-d:3"),
     {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100}),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=2",
     pod(spread=(sc(2, HOST, SA, FOO),)), HOST4, [], existing("node-a:2", "node-b", "node-d:3"),
     {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=3",
     pod(spread=(sc(3, HOST, SA, FOO),)), HOST4, [],
     existing("node-a:4", "node-b:3", "node-c:2", "node-d"),
     {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}),
    ("one constraint on node, 3 out of 4 nodes are candidates",
     pod(spread=HOST_1), [hn("node-a"), hn("node-b"), hn("node-x")], [hn("node-y")],
     existing("node-a:4", "node-b:2", "node-x", "node-y:3"),
     {"node-a": 33, "node-b": 83, "node-x": 100}),
    ("one constraint on node, 3 out of 4 candidates, one node doesn't match topology key",
     pod(spread=HOST_1), [hn("node-a"), node("node-b", {"n": "node-b"}), hn("node-x")],
     [hn("node-y")], existing("node-a:4", "node-b:2", "node-x", "node-y:3"),
     {"node-a": 16, "node-b": 0, "node-x": 100}),
    ("one constraint on zone, 3 out of 4 nodes are candidates",
     pod(spread=(sc(1, "zone", SA, FOO),)), ZONE4[:3], ZONE4[3:],
     existing("node-a:4", "node-b:2", "node-x", "node-y:3"),
     {"node-a": 75, "node-b": 75, "node-x": 100}),
    ("two Constraints on zone and node, 2 out of 4 nodes are candidates",
     pod(spread=(sc(1, "zone", SA, FOO), sc(1, HOST, SA, FOO))),
     [ZONE4[0], ZONE4[2]], [ZONE4[1], ZONE4[3]],
     existing("node-a:2", "node-b", "node-x:2", "node-y:4"),
     {"node-a": 100, "node-x": 63}),
    ("two Constraints on zone and node, with different labelSelectors",
     pod(labels=("foo", "bar"), spread=(sc(1, "zone", SA, FOO), sc(1, HOST, SA, BAR))),
     ZONE4, [],
     existing("node-a", "node-y") + existing("node-b", labels=("foo", "bar"))
     + existing("node-y", labels=("bar",)),
     {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}),
    ("two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
     pod(labels=("foo", "bar"), spread=(sc(1, "zone", SA, FOO), sc(1, HOST, SA, BAR))),
     ZONE4, [],
     existing("node-b", labels=("bar",)) + existing("node-x")
     + existing("node-y", labels=("foo", "bar")),
     {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}),
    ("two Constraints on zone and node, with different labelSelectors, 3 of 4 candidates",
     pod(labels=("foo", "bar"), spread=(sc(1, "zone", SA, FOO), sc(1, HOST, SA, BAR))),
     ZONE4[:3], ZONE4[3:],
     existing("node-a", "node-y") + existing("node-b", labels=("foo", "bar"))
     + existing("node-y", labels=("bar",)),
     {"node-a": 50, "node-b": 25, "node-x": 100}),
    ("existing pods in a different namespace do not count",
     pod(spread=HOST_1), [hn("node-a"), hn("node-b")], [],
     existing("node-a", namespace="ns1") + existing("node-a", "node-b:2"),
     {"node-a": 100, "node-b": 33}),
    ("terminating Pods should be excluded",
     pod(spread=HOST_1), [hn("node-a"), hn("node-b")], [],
     [pod("p-a", on="node-a", terminating=True), pod("p-b", on="node-b")],
     {"node-a": 100, "node-b": 0}),
    ("minDomains has no effect when ScheduleAnyway",
     pod(spread=(sc(2, "node", SA, FOO, min_domains=10),)),
     [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")], [],
     existing("node-a:2", "node-b:2", "node-c"),
     {"node-a": 75, "node-b": 75, "node-c": 100}),
    ("NodeAffinityPolicy honored with labelSelectors",
     pod(spread=(sc(1, "node", SA, FOO),), node_selector={"foo": ""}),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}),
      node("node-c", {"node": "node-c"})], [],
     existing("node-a:2", "node-b", "node-c"),
     {"node-a": 0, "node-b": 33, "node-c": 100}),
    ("NodeAffinityPolicy ignored with labelSelectors",
     pod(spread=(sc(1, "node", SA, FOO, affinity_policy="Ignore"),), node_selector={"foo": ""}),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}),
      node("node-c", {"node": "node-c"})], [],
     existing("node-a:2", "node-b", "node-c"),
     {"node-a": 66, "node-b": 100, "node-c": 100}),
    ("NodeAffinityPolicy honored with nodeAffinity",
     pod(spread=(sc(1, "node", SA, FOO),), affinity=node_affinity_in("foo", [""])),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}),
      node("node-c", {"node": "node-c"})], [],
     existing("node-a:2", "node-b", "node-c"),
     {"node-a": 0, "node-b": 33, "node-c": 100}),
    ("NodeTaintsPolicy honored",
     pod(spread=(sc(1, "node", SA, FOO, taints_policy="Honor"),)),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"}),
      node("node-c", {"node": "node-c"}, tainted=True)], [],
     existing("node-a:2", "node-b", "node-c"),
     {"node-a": 0, "node-b": 33, "node-c": 100}),
    ("NodeTaintsPolicy ignored",
     pod(spread=(sc(1, "node", SA, FOO),)),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"}),
      node("node-c", {"node": "node-c"}, tainted=True)], [],
     existing("node-a:2", "node-b", "node-c"),
     {"node-a": 66, "node-b": 100, "node-c": 100}),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
     pod(labels=("foo", "bar"), spread=(sc(1, "zone", SA, {}, match_label_keys=["foo"]),
                                       sc(1, HOST, SA, {}, match_label_keys=["bar"]))),
     [hzn("node-a", "zone1"), hzn("node-b", "zone1"), hzn("node-c", "zone2"),
      hzn("node-d", "zone2")], [],
     existing("node-a", "node-c") + existing("node-b", labels=("foo", "bar"))
     + existing("node-c", labels=("bar",)),
     {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100}),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
     pod(labels=("foo", "bar", "baz"),
         spread=(sc(1, "zone", SA, FOO), sc(1, HOST, SA, BAR, match_label_keys=["baz"]))),
     [hzn("node-a", "zone1"), hzn("node-b", "zone1"), hzn("node-c", "zone2"),
      hzn("node-d", "zone2")], [],
     existing("node-a", "node-c") + existing("node-b", labels=("foo", "bar", "baz"))
     + existing("node-c", labels=("bar",)) + existing("node-c", labels=("bar", "baz")),
     {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100}),
]


@pytest.mark.parametrize(("name", "p", "nodes", "failed", "pods", "want"), SCORE_CASES,
                         ids=[c[0] for c in SCORE_CASES])
def test_score(name: str, p: Pod, nodes: list[Node], failed: list[Node], pods: list[Pod],
               want: dict[str, int]) -> None:
    assert run_score(p, nodes, pods, failed) == want


SERVICE_FOO = {"metadata": {"name": "svc", "namespace": "default"},
               "spec": {"selector": {"foo": ""}}}


def test_score_system_defaults_with_service() -> None:
    # "system defaulting, nodes don't have zone, pods match service": the hostname default
    # (maxSkew 3) alone decides; nodes without a zone label are not ignored.
    got = run_score(pod(), HOST4, existing("node-a:4", "node-b:3", "node-c:2", "node-d"),
                    workloads={"Service": [SERVICE_FOO]})
    assert got == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_score_system_defaults_with_replicaset_and_zones() -> None:
    # TestPreScoreStateEmptyNodes "system default constraints and a replicaset": nodes
    # without a zone form their own ("") domain and still get hostname spreading.
    nodes = [node("node-a", {HOST: "node-a", ZONE: "mars"}),
             node("node-b", {HOST: "node-b", ZONE: "mars"}),
             hn("node-c"), hn("node-d")]
    rs = {"metadata": {"name": "rs1", "namespace": "default"}, "spec": {"selector": FOO}}
    p = pod(extra_labels={"foo": "tar", "baz": "sup"}, labels=(),
            owner=("apps/v1", "ReplicaSet", "rs1"))
    pods = existing("node-a:2", "node-c") + existing("node-b", labels=("bar",))
    plugin = new()
    cs = cluster(nodes, pods, {"ReplicaSet": [rs]})
    state = cycle(cs)
    infos = cs.node_infos()
    assert plugin.pre_score(state, p, infos) is None
    s = state.read(pts.PRE_SCORE_KEY).python()
    assert s.ignored == set()
    assert [c.topology_key for c in s.constraints] == [HOST, ZONE]
    assert [c.max_skew for c in s.constraints] == [3, 5]
    assert s.domain_counts == [{}, {"mars": 2, "": 1}]
    assert s.weights == [pts.topology_normalizing_weight(4), pts.topology_normalizing_weight(2)]
    scores = [plugin.score(state, p, n) for n in infos]
    # hostname: count*log(6)+2 ; zone (mars only): 2*log(4)+4
    assert scores == [round(2 * 1.791759469228055 + 2 + 2 * 1.3862943611198906 + 4),
                      round(0 + 2 + 2 * 1.3862943611198906 + 4), round(1.791759469228055 + 2), 2]
    assert plugin.normalize_score(state, p, infos, scores) is None
    assert scores == [100 * (12 + 2 - 12) // 12, 100 * (12 + 2 - 9) // 12,
                      100 * (12 + 2 - 4) // 12, 100]


@pytest.mark.parametrize(("name", "p", "args", "workloads"), [
    ("the pod doesn't have soft topology spread constraints",
     pod(), {"defaultingType": "List"}, {}),
    ("only hard constraints",
     pod(spread=(sc(1, "zone", DNS, FOO),)), {"defaultingType": "System"},
     {"Service": [SERVICE_FOO]}),
    ("default constraints and a replicaset that doesn't match",
     pod(labels=(), extra_labels={"foo": "bar", "baz": "sup"},
         owner=("apps/v1", "ReplicaSet", "rs2")),
     {"defaultingType": "List", "defaultConstraints": [
         {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SA}]},
     {"ReplicaSet": [{"metadata": {"name": "rs1", "namespace": "default"},
                      "spec": {"selector": {"matchExpressions": [
                          {"key": "tar", "operator": "Exists"}]}}}]}),
    ("system defaults without any workload",
     pod(), {}, {}),
])
def test_pre_score_skip(name: str, p: Pod, args: dict[str, Any],
                        workloads: dict[str, list[dict[str, Any]]]) -> None:
    cs = cluster([node("node-a", {"planet": "mars", HOST: "node-a"})], [], workloads)
    state = cycle(cs)
    assert new(args).pre_score(state, p, cs.node_infos()) == Status.skip()


def test_pre_score_list_defaults_with_replicaset() -> None:
    # "default constraints and a replicaset": only the ScheduleAnyway defaults score, with
    # the ReplicaSet's selector.
    args = {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": SA},
        {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": DNS},
        {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SA}]}
    rs = {"metadata": {"name": "rs1", "namespace": "default"}, "spec": {"selector": FOO}}
    p = pod(labels=(), extra_labels={"foo": "tar", "baz": "sup"},
            owner=("apps/v1", "ReplicaSet", "rs1"))
    cs = cluster([node("node-a", {"rack": "rack1", HOST: "node-a", "planet": "mars"})], [],
                 {"ReplicaSet": [rs]})
    state = cycle(cs)
    plugin = new(args)
    assert plugin.pre_score(state, p, cs.node_infos()) is None
    s = state.read(pts.PRE_SCORE_KEY).python()
    assert [(c.topology_key, c.max_skew) for c in s.constraints] == [(HOST, 1), ("planet", 2)]
    assert s.domain_counts == [{}, {"mars": 0}]
    assert s.weights == [pts.topology_normalizing_weight(1)] * 2
    # The DoNotSchedule default filters with the same selector.
    _, status = plugin.pre_filter(state, p, state.all_nodes)
    assert status is None


def test_pre_score_ignores_nodes_missing_keys() -> None:
    # TestPreScoreStateEmptyNodes "node-x doesn't have label zone".
    p = pod(spread=(sc(1, "zone", SA, FOO), sc(1, HOST, SA, BAR)))
    nodes = [hzn("node-a", "zone1"), hzn("node-b", "zone1"), hn("node-x")]
    cs = cluster(nodes, [])
    state = cycle(cs)
    assert new().pre_score(state, p, cs.node_infos()) is None
    s = state.read(pts.PRE_SCORE_KEY).python()
    assert s.ignored == {"node-x"}
    assert s.domain_counts == [{"zone1": 0}, {}]
    assert s.weights == [pts.topology_normalizing_weight(1), pts.topology_normalizing_weight(2)]


def test_normalize_all_ignored_nodes_score_zero() -> None:
    p = pod(spread=(sc(1, "zone", SA, FOO),))
    cs = cluster([hn("node-a"), hn("node-b")], [])
    state = cycle(cs)
    plugin = new()
    infos = cs.node_infos()
    assert plugin.pre_score(state, p, infos) is None
    scores = [plugin.score(state, p, n) for n in infos]
    assert plugin.normalize_score(state, p, infos, scores) is None
    assert scores == [0, 0]


def test_normalize_without_pre_score_is_an_error() -> None:
    status = new().normalize_score(CycleState(), pod(), [], [])
    assert status is not None and status.code is Code.ERROR


# --- DefaultSelector (helper/spread_test.go) ---------------------------------------------------

def _labels_selected(p: Pod, workloads: dict[str, list[dict[str, Any]]],
                     candidates: list[dict[str, str]]) -> list[bool]:
    sel = default_selector(p, workloads)
    return [sel.matches(c) for c in candidates]


def test_default_selector_services_merge() -> None:
    p = pod(labels=(), extra_labels={"app": "web", "tier": "fe"})
    svcs = [
        {"metadata": {"name": "a", "namespace": "default"}, "spec": {"selector": {"app": "web"}}},
        {"metadata": {"name": "b", "namespace": "default"}, "spec": {"selector": {"tier": "fe"}}},
        # other namespace, not selecting the pod, nil selector: all ignored
        {"metadata": {"name": "c", "namespace": "other"}, "spec": {"selector": {"x": "y"}}},
        {"metadata": {"name": "d", "namespace": "default"}, "spec": {"selector": {"app": "db"}}},
        {"metadata": {"name": "e", "namespace": "default"}, "spec": {}},
    ]
    sel = default_selector(p, {"Service": svcs})
    assert {(r.key, tuple(r.values)) for r in sel.requirements} == {
        ("app", ("web",)), ("tier", ("fe",))}
    assert default_selector(p, {}).is_empty
    assert default_selector(p, {"Service": svcs[2:]}).is_empty


@pytest.mark.parametrize(("owner", "kind", "selector", "want"), [
    (("v1", "ReplicationController", "rc"), "ReplicationController", {"app": "web"},
     [True, False]),
    (("apps/v1", "ReplicaSet", "rc"), "ReplicaSet",
     {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, [True, False]),
    (("apps/v1", "StatefulSet", "rc"), "StatefulSet", {"matchLabels": {"app": "web"}},
     [True, False]),
    # Wrong apiVersion for the kind: not a supported controller.
    (("extensions/v1beta1", "ReplicaSet", "rc"), "ReplicaSet", {"matchLabels": {"app": "web"}},
     None),
])
def test_default_selector_controllers(owner: tuple[str, str, str], kind: str,
                                      selector: dict[str, Any], want: list[bool] | None) -> None:
    p = pod(labels=(), extra_labels={"app": "web"}, owner=owner)
    workload = {"metadata": {"name": "rc", "namespace": "default"}, "spec": {"selector": selector}}
    sel = default_selector(p, {kind: [workload]})
    if want is None:
        assert sel.is_empty
    else:
        assert [sel.matches({"app": "web"}), sel.matches({"app": "db"})] == want


def test_default_selector_controller_in_other_namespace_is_not_found() -> None:
    p = pod(labels=(), extra_labels={"app": "web"}, owner=("apps/v1", "ReplicaSet", "rs"))
    rs = {"metadata": {"name": "rs", "namespace": "other"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    assert default_selector(p, {"ReplicaSet": [rs]}).is_empty


# --- args (validation_pluginargs_test.go) ----------------------------------------------------

def test_args_defaults() -> None:
    plugin = new(None)
    assert plugin.system_defaulted
    assert [(c.topology_key, c.max_skew, c.action) for c in plugin.default_constraints] == [
        (HOST, 3, SA), (ZONE, 5, SA)]
    listed = new({"defaultingType": "List"})
    assert not listed.system_defaulted and listed.default_constraints == ()


@pytest.mark.parametrize(("args", "problems"), [
    ({"defaultingType": "System", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA}]},
     [("defaultingType", 'Invalid value: "System": when .defaultConstraints are not empty')]),
    # defaultingType defaults to System, so constraints alone are rejected too (upstream).
    ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA}]},
     [("defaultingType", 'Invalid value: "System": when .defaultConstraints are not empty')]),
    ({"defaultingType": "Sometimes"},
     [("defaultingType", 'Unsupported value: "Sometimes": supported values: "System", "List"')]),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": -1, "topologyKey": "", "whenUnsatisfiable": "", "labelSelector": {}}]},
     [("defaultConstraints[0].maxSkew", "Invalid value: -1: not in valid range (0, inf)"),
      ("defaultConstraints[0].topologyKey", "Required value: can not be empty"),
      ("defaultConstraints[0].whenUnsatisfiable", "Required value: can not be empty"),
      ("defaultConstraints[0].labelSelector",
       "Forbidden: constraint must not define a selector, as they deduced for each pod")]),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "k8s.io/zone", "whenUnsatisfiable": "Never"}]},
     [("defaultConstraints[0].whenUnsatisfiable",
       'Unsupported value: "Never": supported values: "DoNotSchedule", "ScheduleAnyway"')]),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "bad key", "whenUnsatisfiable": SA}]},
     [("defaultConstraints[0].topologyKey",
       'Invalid value: "bad key": name part must consist of alphanumeric characters, \'-\', '
       "'_' or '.', and must start and end with an alphanumeric character")]),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": SA}]},
     [("defaultConstraints[1]", 'Duplicate value: "{zone, ScheduleAnyway}"')]),
    ({"defaultingType": "List", "extra": 1}, [("extra", 'unknown field "extra"')]),
])
def test_args_validation(args: dict[str, Any], problems: list[tuple[str, str]]) -> None:
    with pytest.raises(PluginError) as exc:
        new(args)
    assert exc.value.plugin == "PodTopologySpread"
    assert [(p.path, p.message) for p in exc.value.problems] == problems


def test_args_accept_list_with_constraints_and_kind() -> None:
    plugin = new({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "PodTopologySpreadArgs",
                  "defaultingType": "List", "defaultConstraints": [
                      {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DNS},
                      {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA}]})
    assert [c.action for c in plugin.default_constraints] == [DNS, SA]


def test_vector_counts_follow_cluster_changes() -> None:
    # Count columns are kept across cycles; an assumed pod must be recounted on its row,
    # and a new node (table rebuild) must get a column row of its own.
    plugin = new({"defaultingType": "List"})
    p = pod(spread=(sc(1, "node", DNS, FOO),))
    cs = cluster(list(FOUR_ZONE_NODES), existing("node-a", "node-b", "node-y"))

    def passing() -> list[str]:
        table = cs.table()
        state = CycleState(table.infos, cs)
        state.table = table
        plugin.pre_filter(state, p, state.all_nodes)
        mask = plugin.filter_mask(state, p, table, np.arange(len(table.infos)))
        assert mask is not None
        return [table.names[i] for i in np.flatnonzero(mask).tolist()]

    assert passing() == ["node-x"]
    cs.assume(pod("new1"), "node-x")
    assert passing() == ["node-a", "node-b", "node-x", "node-y"]
    cs.assume(pod("new2"), "node-x")
    assert passing() == ["node-a", "node-b", "node-y"]
    cs.upsert_node(zn("node-z", "zone3"))
    assert passing() == ["node-z"]
    # A change log that no longer reaches back forces a full recount.
    cs.assume(pod("new3"), "node-z")
    cs.changes_since = lambda epoch: None  # type: ignore[method-assign]
    assert passing() == ["node-a", "node-b", "node-y", "node-z"]


def test_score_vector_matches_score_on_generated_clusters() -> None:
    rng = random.Random(99)
    services = {"Service": [
        {"metadata": {"name": "s", "namespace": "default"}, "spec": {"selector": {"foo": ""}}}]}
    for trial in range(60):
        system = rng.random() < 0.4
        nodes = []
        for i in range(rng.randint(1, 12)):
            labels = {HOST: f"n{i}"} if rng.random() < 0.9 else {}
            if rng.random() < 0.7:
                labels[ZONE] = rng.choice(["z0", "z1", "z2", ""])
            if rng.random() < 0.5:
                labels["foo"] = ""
            nodes.append(node(f"n{i}", labels, tainted=rng.random() < 0.2))
        pods = [pod(f"e{j}", labels=tuple(rng.sample(["foo", "bar"], rng.randint(0, 2))),
                    on=f"n{rng.randrange(len(nodes))}",
                    namespace=rng.choice(["default", "default", "other"]),
                    terminating=rng.random() < 0.1)
                for j in range(rng.randint(0, 30))]
        spread: tuple[dict[str, Any], ...] = ()
        if not system:
            spread = tuple(
                sc(rng.randint(1, 4), key, SA, rng.choice([FOO, BAR, None, {}]),
                   affinity_policy=rng.choice([None, "Ignore"]),
                   taints_policy=rng.choice([None, "Honor"]),
                   match_label_keys=rng.choice([None, ["foo"]]))
                for key in rng.sample([ZONE, HOST], rng.randint(1, 2)))
        p = pod(labels=tuple(rng.sample(["foo", "bar"], rng.randint(0, 2))), spread=spread,
                node_selector=rng.choice([None, {"foo": ""}]))
        cs = cluster(nodes, pods, services)
        plugin = new({} if system else {"defaultingType": "List"})
        state = cycle(cs)
        infos = cs.node_infos()
        candidates = [n for n in infos if rng.random() < 0.7] or infos[:1]
        status = plugin.pre_score(state, p, candidates)
        if status is not None:
            assert status == Status.skip(), (trial, status)
            continue
        raw = [plugin.score(state, p, n) for n in candidates]
        scores = list(raw)
        assert plugin.normalize_score(state, p, candidates, scores) is None
        assert all(0 <= x <= 100 for x in scores)
        assert_fast_score_agrees(plugin, p, cs, [n.name for n in candidates], raw, scores)


def test_default_selector_follows_replaced_objects() -> None:
    p = pod(labels=(), extra_labels={"app": "web"})
    svc = {"metadata": {"name": "a", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}
    workloads: dict[str, list[dict[str, Any]]] = {"Service": [svc]}
    assert not default_selector(p, workloads).is_empty
    # The informer replaces the object; the memo is keyed on the object itself.
    workloads["Service"] = [{"metadata": {"name": "a", "namespace": "default"},
                             "spec": {"selector": {"app": "db"}}}]
    assert default_selector(p, workloads).is_empty


# PreFilterExtensions (AddPod/RemovePod)
def test_critical_paths_keep_upstreams_two_smallest_approximation() -> None:
    paths = _CriticalPaths.of({"a": 1, "b": 2, "c": 3})
    assert (paths.values, paths.nums) == (["a", "b"], [1, 2])
    paths.update("c", 0)
    assert (paths.values, paths.nums) == (["c", "a"], [0, 1])
    paths.update("c", 3)
    assert (paths.values, paths.nums) == (["a", "c"], [1, 3])
    # "b" (2) is no longer tracked: upstream's minimum is now 3, not the true 2.
    paths.update("a", 4)
    assert (paths.values, paths.nums) == (["c", "a"], [3, 4])


def test_remove_and_add_pod_move_the_domain_count_and_the_minimum() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = [make_node(f"n{i}").label(zone, z).obj() for i, z in enumerate("aab")]
    existing = [make_pod(f"e{i}").node(n).labels(app="x").obj()
                for i, n in enumerate(["n0", "n0", "n2"])]
    terminating = make_pod("t").node("n2").labels(app="x").terminating().obj()
    cluster = ClusterState(nodes, [*existing, terminating])
    pod = make_pod("p").labels(app="x").spread({
        "maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "x"}}}).obj()
    plugin = new()
    state = CycleState(cluster.node_infos(), cluster)
    assert plugin.pre_filter(state, pod, cluster.node_infos()) == (None, None)
    n0, _, n2 = cluster.node_infos()
    # zone a: 2, zone b: 1 (the terminating pod does not count): a is too full.
    assert plugin.filter(state, pod, n0) is not None
    dry = state.clone()
    assert plugin.remove_pod(dry, pod, existing[0], n0) is None
    assert plugin.filter(dry, pod, n0) is None  # a: 1, b: 1
    assert plugin.filter(state, pod, n0) is not None  # the original is untouched
    assert plugin.add_pod(dry, pod, existing[0], n0) is None
    assert plugin.filter(dry, pod, n0) is not None
    # As upstream's updateWithPod, removing the terminating pod counts: b drops to 0.
    assert plugin.remove_pod(dry, pod, terminating, n2) is None
    assert plugin.filter(dry, pod, n2) is None
    assert plugin.filter(dry, pod, n0) is not None  # a: 2 against a minimum of 0
