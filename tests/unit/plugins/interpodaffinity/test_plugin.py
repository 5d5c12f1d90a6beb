"""InterPodAffinity: cases from upstream's interpodaffinity filtering_test.go and
scoring_test.go (v1.36), re-expressed with our records, plus the memo and batch paths
checked against a plain reference evaluation on generated clusters.

Upstream's tests use the namespace "" for "the default namespace"; ours is "default".
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from policyd.framework import Code, CycleState, PluginError, Status
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod, node_from_dict
from policyd.model.table import IntArray, NodeTable
from policyd.plugins.interpodaffinity import filtering, index
from policyd.plugins.interpodaffinity import plugin as ipa
from policyd.plugins.interpodaffinity.terms import pod_affinity_terms
from tests import plugin_harness as harness
from tests.builders import make_node, make_pod

AFF = filtering.ERR_REASON_AFFINITY_RULES_NOT_MATCH
ANTI = filtering.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
EXISTING = filtering.ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
SKIP = "skip"

AFF_REJECT = Status.unresolvable(AFF)
ANTI_REJECT = Status.unschedulable(ANTI)
EXISTING_REJECT = Status.unschedulable(EXISTING)

# upstream's `namespaces` fixture
NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}


# ---------------------------------------------------------------------------
# builders


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def term(topology: str, *exprs: dict[str, Any], namespaces: list[str] | None = None,
         ns_selector: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"labelSelector": {"matchExpressions": list(exprs)},
                         "topologyKey": topology, **extra}
    if namespaces is not None:
        t["namespaces"] = namespaces
    if ns_selector is not None:
        t["namespaceSelector"] = ns_selector
    return t


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


def affinity(req: Sequence[dict[str, Any]] = (), anti: Sequence[dict[str, Any]] = (),
             pref: Sequence[dict[str, Any]] = (),
             pref_anti: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if req or pref:
        out["podAffinity"] = {}
        if req:
            out["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(req)
        if pref:
            out["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = list(pref)
    if anti or pref_anti:
        out["podAntiAffinity"] = {}
        if anti:
            out["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(anti)
        if pref_anti:
            out["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = (
                list(pref_anti))
    return out


_n = iter(range(10**9))


def pod(labels: Mapping[str, str] | None = None, node: str = "", ns: str = "default",
        aff: dict[str, Any] | None = None) -> Pod:
    b = make_pod(f"p{next(_n)}", ns).labels(labels)
    if node:
        b.node(node)
    if aff:
        b.affinity(aff)
    return b.obj()


def node(name: str, **labels: str) -> Node:
    return make_node(name).exact_labels(labels).capacity(pods="110").obj()


def cluster(nodes: Sequence[Node], pods: Sequence[Pod],
            namespaces: Mapping[str, Mapping[str, str]] | None = None) -> ClusterState:
    c = ClusterState(nodes, pods)
    c.namespace_labels = {k: dict(v) for k, v in (namespaces or {}).items()}
    return c


def run_filter(incoming: Pod, c: ClusterState,
               plugin: ipa.InterPodAffinity | None = None) -> Any:
    """SKIP, a PreFilter rejection, or the per-node filter statuses (the harness also
    checks that filter_mask agrees with filter)."""
    out = harness.run_filter(plugin or ipa.new(), incoming, c)
    if out.stopped is not None:
        return SKIP if out.stopped.is_skip else out.stopped
    return out.statuses


def run_score(incoming: Pod, c: ClusterState,
              plugin: ipa.InterPodAffinity | None = None) -> Any:
    """SKIP, a PreScore error, or the normalized scores (the harness also checks the
    columnar form)."""
    out = harness.run_score(plugin or ipa.new(), incoming, c)
    if out.stopped is not None:
        return SKIP if out.skipped else out.stopped
    return out.normalized


def _table(c: ClusterState, infos: list[NodeInfo]) -> tuple[NodeTable, IntArray]:
    """The columnar view, in the same node order, for the vectorized hooks."""
    table = c.table()
    assert [i.name for i in table.infos] == [i.name for i in infos]
    return table, np.arange(len(infos), dtype=np.int64)


# ---------------------------------------------------------------------------
# Filtering: TestRequiredAffinitySingleNode

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NODE1 = node("node1", region="r1", zone="z11")


def _existing() -> Pod:
    return pod(POD_LABEL, node="node1")


SINGLE_NODE_CASES: list[tuple[str, Pod, list[Pod], Any]] = [
    ("no required pod affinity, no existing pods", pod(), [], SKIP),
    ("affinity In matches the existing pod",
     pod(POD_LABEL2, aff=affinity([term("region", expr("service", "In", "securityscan",
                                                       "value2"))])),
     [_existing()], None),
    ("affinity NotIn matches the existing pod",
     pod(POD_LABEL2, aff=affinity([term("region", expr("service", "NotIn", "securityscan3",
                                                       "value3"))])),
     [_existing()], None),
    ("affinity in another namespace",
     pod(POD_LABEL2, aff=affinity([term("", expr("service", "In", "securityscan", "value2"),
                                        namespaces=["DiffNameSpace"])])),
     [pod(POD_LABEL, node="node1", ns="ns")], AFF_REJECT),
    ("affinity selector does not match the existing pod",
     pod(POD_LABEL, aff=affinity([term("", expr("service", "In", "antivirusscan",
                                                "value2"))])),
     [_existing()], AFF_REJECT),
    ("several affinity terms with different operators all match",
     pod(POD_LABEL2, aff=affinity([
         term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
         term("region", expr("service", "In", "securityscan"),
              expr("service", "NotIn", "WrongValue"))])),
     [_existing()], None),
    ("requirements are ANDed: one does not match",
     pod(POD_LABEL2, aff=affinity([
         term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
         term("region", expr("service", "In", "securityscan2"),
              expr("service", "NotIn", "WrongValue"))])),
     [_existing()], AFF_REJECT),
    ("affinity and anti-affinity both satisfied",
     pod(POD_LABEL2, aff=affinity(
         [term("region", expr("service", "In", "securityscan", "value2"))],
         [term("node", expr("service", "In", "antivirusscan", "value2"))])),
     [_existing()], None),
    ("affinity, anti-affinity and the existing pod's anti-affinity satisfied",
     pod(POD_LABEL2, aff=affinity(
         [term("region", expr("service", "In", "securityscan", "value2"))],
         [term("node", expr("service", "In", "antivirusscan", "value2"))])),
     [pod(POD_LABEL, node="node1", aff=affinity(
         anti=[term("node", expr("service", "In", "antivirusscan", "value2"))]))], None),
    ("affinity satisfied, anti-affinity not",
     pod(POD_LABEL2, aff=affinity(
         [term("region", expr("service", "In", "securityscan", "value2"))],
         [term("zone", expr("service", "In", "securityscan", "value2"))])),
     [_existing()], ANTI_REJECT),
    ("the existing pod's anti-affinity is violated",
     pod(POD_LABEL, aff=affinity(
         [term("region", expr("service", "In", "securityscan", "value2"))],
         [term("node", expr("service", "In", "antivirusscan", "value2"))])),
     [pod(POD_LABEL, node="node1", aff=affinity(
         anti=[term("zone", expr("service", "In", "securityscan", "value2"))]))],
     EXISTING_REJECT),
    ("the pod matches its own affinity but so does a pod on a node not in the snapshot",
     pod(POD_LABEL, aff=affinity([term("region", expr("service", "NotIn", "securityscan",
                                                      "value2"))])),
     [pod(POD_LABEL, node="node2")], AFF_REJECT),
    ("existing anti-affinity applies to a pod without affinity",
     pod(POD_LABEL),
     [pod(POD_LABEL, node="node1", aff=affinity(
         anti=[term("zone", expr("service", "In", "securityscan", "value2"))]))],
     EXISTING_REJECT),
    ("existing anti-affinity that does not select the pod: Skip",
     pod(POD_LABEL),
     [pod(POD_LABEL, node="node1", aff=affinity(
         anti=[term("zone", expr("service", "NotIn", "securityscan", "value2"))]))],
     SKIP),
    ("incoming anti-affinity selects the existing pod",
     pod(POD_LABEL, aff=affinity(anti=[term("region", expr("service", "Exists")),
                                       term("region", expr("security", "Exists"))])),
     [pod(POD_LABEL2, node="node1", aff=affinity(
         anti=[term("zone", expr("security", "Exists"))]))],
     ANTI_REJECT),
    ("symmetry a1: partial match on terms",
     pod(POD_LABEL, aff=affinity(anti=[term("zone", expr("service", "Exists")),
                                       term("zone", expr("security", "Exists"))])),
     [pod(POD_LABEL2, node="node1", aff=affinity(
         anti=[term("zone", expr("security", "Exists"))]))],
     ANTI_REJECT),
    ("symmetry a2: partial match on terms",
     pod(POD_LABEL2, aff=affinity(anti=[term("zone", expr("security", "Exists"))])),
     [pod(POD_LABEL, node="node1", aff=affinity(
         anti=[term("zone", expr("service", "Exists")),
               term("zone", expr("security", "Exists"))]))],
     EXISTING_REJECT),
    ("symmetry b1",
     pod({"abc": "", "xyz": ""}, aff=affinity(anti=[term("zone", expr("abc", "Exists")),
                                                   term("zone", expr("def", "Exists"))])),
     [pod({"def": "", "xyz": ""}, node="node1", aff=affinity(
         anti=[term("zone", expr("abc", "Exists")), term("zone", expr("def", "Exists"))]))],
     ANTI_REJECT),
    ("symmetry b2",
     pod({"def": "", "xyz": ""}, aff=affinity(anti=[term("zone", expr("abc", "Exists")),
                                                   term("zone", expr("def", "Exists"))])),
     [pod({"abc": "", "xyz": ""}, node="node1", aff=affinity(
         anti=[term("zone", expr("abc", "Exists")), term("zone", expr("def", "Exists"))]))],
     ANTI_REJECT),
    ("affinity with a matching namespaceSelector",
     pod(POD_LABEL2, aff=affinity([term("region", expr("service", "In", "securityscan",
                                                       "value2"),
                                        ns_selector={"matchExpressions": [
                                            expr("team", "In", "team1")]})])),
     [pod(POD_LABEL, node="node1", ns="subteam1.team1")], None),
    ("affinity with a namespaceSelector that does not match",
     pod(POD_LABEL2, aff=affinity([term("region", expr("service", "In", "securityscan",
                                                       "value2"),
                                        ns_selector={"matchExpressions": [
                                            expr("team", "In", "team1")]})])),
     [pod(POD_LABEL, node="node1", ns="subteam1.team2")], AFF_REJECT),
    ("anti-affinity with a matching namespaceSelector",
     pod(POD_LABEL2, ns="subteam1.team1", aff=affinity(anti=[
         term("zone", expr("service", "In", "securityscan", "value2"),
              ns_selector={"matchExpressions": [expr("team", "In", "team1")]})])),
     [pod(POD_LABEL, node="node1", ns="subteam2.team1")], ANTI_REJECT),
    ("anti-affinity with an empty namespaceSelector: all namespaces",
     pod(POD_LABEL2, ns="subteam1.team1", aff=affinity(anti=[
         term("zone", expr("service", "In", "securityscan", "value2"), ns_selector={})])),
     [pod(POD_LABEL, node="node1", ns="subteam2.team1")], ANTI_REJECT),
    ("anti-affinity with a namespaceSelector that does not match",
     pod(POD_LABEL2, ns="subteam1.team1", aff=affinity(anti=[
         term("zone", expr("service", "In", "securityscan", "value2"),
              ns_selector={"matchExpressions": [expr("team", "In", "team1")]})])),
     [pod(POD_LABEL, node="node1", ns="subteam1.team2")], None),
]


@pytest.mark.parametrize(("incoming", "pods", "want"),
                         [c[1:] for c in SINGLE_NODE_CASES],
                         ids=[c[0] for c in SINGLE_NODE_CASES])
def test_required_affinity_single_node(incoming: Pod, pods: list[Pod], want: Any) -> None:
    got = run_filter(incoming, cluster([NODE1], pods, NAMESPACES))
    assert got == (want if want == SKIP else [want])


@pytest.mark.parametrize("which", ["podAffinity", "podAntiAffinity"])
def test_invalid_label_value_fails_pre_filter(which: str) -> None:
    bad = term("region", expr("service", "In", "{{.bad-value.}}"))
    aff = affinity([bad]) if which == "podAffinity" else affinity(anti=[bad])
    got = run_filter(pod(POD_LABEL, aff=aff), cluster([NODE1], []))
    assert isinstance(got, Status)
    assert got.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got.message.startswith("parsing pod: ")
    assert "{{.bad-value.}}" in got.message


# ---------------------------------------------------------------------------
# Filtering: TestRequiredAffinityMultipleNodes

CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def _nodes3(a: str = "node", **kw: Any) -> list[Node]:
    return [node(f"{a}A" if a == "node" else "node1", **CHINA),
            node("nodeB" if a == "node" else "node2", **CHINA_AZ1),
            node("nodeC" if a == "node" else "node3", **INDIA)]


def _abc_nodes(zone_b: str = "z2") -> list[Node]:
    return [node("nodeA", region="r1", zone="z1", hostname="nodeA"),
            node("nodeB", region="r1", zone=zone_b, hostname="nodeB")]


MULTI_NODE_CASES: list[tuple[str, Pod, list[Pod], list[Node], Any]] = [
    ("nodes sharing the topology value with a matching pod all fit",
     pod(aff=affinity([term("region", expr("foo", "In", "bar"))])),
     [pod({"foo": "bar"}, node="node1")],
     [node("node1", **CHINA), node("node2", **CHINA_AZ1), node("node3", **INDIA)],
     [None, None, AFF_REJECT]),
    ("the first pod of a group goes anywhere the topology keys exist",
     pod({"foo": "bar", "service": "securityscan"}, aff=affinity([
         term("zone", expr("foo", "In", "bar")),
         term("zone", expr("service", "In", "securityscan"))])),
     [pod({"foo": "bar"}, node="nodeA")],
     [node("nodeA", zone="az1", hostname="h1"), node("nodeB", zone="az2", hostname="h2")],
     [None, None]),
    ("the first pod of a group still needs the topology keys",
     pod({"foo": "bar", "service": "securityscan"}, aff=affinity([
         term("zone", expr("foo", "In", "bar")),
         term("zone", expr("service", "In", "securityscan"))])),
     [pod({"foo": "bar"}, node="nodeA")],
     [node("nodeA", zoneLabel="az1", hostname="h1"),
      node("nodeB", zoneLabel="az2", hostname="h2")],
     [AFF_REJECT, AFF_REJECT]),
    ("anti-affinity rejects every node of the matching pod's topology",
     pod(aff=affinity(anti=[term("region", expr("foo", "In", "abc"))])),
     [pod({"foo": "abc"}, node="nodeA")],
     [node("nodeA", region="r1", hostname="nodeA"),
      node("nodeB", region="r1", hostname="nodeB")],
     [ANTI_REJECT, ANTI_REJECT]),
    ("anti-affinity matches when any term matches",
     pod(aff=affinity(anti=[term("region", expr("foo", "In", "abc")),
                            term("zone", expr("service", "In", "securityscan"))])),
     [pod({"foo": "abc", "service": "securityscan"}, node="nodeA")],
     [node("nodeA", region="r1", zone="z1", hostname="nodeA"),
      node("nodeB", region="r1", zone="z2", hostname="nodeB")],
     [ANTI_REJECT, ANTI_REJECT]),
    ("anti-affinity: nodes outside the topology fit",
     pod(aff=affinity(anti=[term("region", expr("foo", "In", "abc"))])),
     [pod({"foo": "abc"}, node="nodeA")],
     [node("nodeA", **CHINA), node("nodeB", **CHINA_AZ1), node("nodeC", **INDIA)],
     [ANTI_REJECT, ANTI_REJECT, None]),
    ("anti-affinity terms of a pod in another namespace do not apply",
     pod({"foo": "123"}, ns="NS1", aff=affinity(anti=[term("region", expr("foo", "In",
                                                                          "bar"))])),
     [pod({"foo": "bar"}, node="nodeA", ns="NS1"),
      pod(node="nodeC", ns="NS2", aff=affinity(anti=[term("region", expr("foo", "In",
                                                                          "123"))]))],
     [node("nodeA", **CHINA), node("nodeB", **CHINA_AZ1), node("nodeC", **INDIA)],
     [ANTI_REJECT, ANTI_REJECT, None]),
    ("existing anti-affinity with a topology key no node has: Skip",
     pod({"foo": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("invalid-node-label",
                                                expr("foo", "Exists"))]))],
     _abc_nodes("z1"), SKIP),
    ("incoming anti-affinity: the topology key must match as well as the selector",
     pod(aff=affinity(anti=[term("invalid-node-label", expr("foo", "Exists"))])),
     [pod({"foo": ""}, node="nodeA")],
     _abc_nodes("z1"), [None, None]),
    ("existing anti-affinity: each existing pod's terms violated on all nodes",
     pod({"foo": "", "bar": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("zone", expr("foo", "Exists"))])),
      pod(node="nodeA", aff=affinity(anti=[term("region", expr("bar", "Exists"))]))],
     _abc_nodes(), [EXISTING_REJECT, EXISTING_REJECT]),
    ("incoming anti-affinity: one violated rule is enough",
     pod(aff=affinity(anti=[term("zone", expr("foo", "Exists")),
                            term("region", expr("bar", "Exists"))])),
     [pod({"foo": ""}, node="nodeA"), pod({"bar": ""}, node="nodeB")],
     _abc_nodes(), [ANTI_REJECT, ANTI_REJECT]),
    ("existing anti-affinity: a term with a missing topology key never counts",
     pod({"foo": "", "bar": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("invalid-node-label", expr("foo", "Exists")),
                                           term("zone", expr("bar", "Exists"))]))],
     _abc_nodes(), [EXISTING_REJECT, None]),
    ("incoming anti-affinity: a term with a missing topology key never counts",
     pod(aff=affinity(anti=[term("invalid-node-label", expr("foo", "Exists")),
                            term("zone", expr("bar", "Exists"))])),
     [pod({"foo": "", "bar": ""}, node="nodeA")],
     _abc_nodes(), [ANTI_REJECT, None]),
    ("existing anti-affinity: all terms with valid topology keys",
     pod({"foo": "", "bar": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("region", expr("foo", "Exists")),
                                           term("zone", expr("bar", "Exists"))]))],
     _abc_nodes(), [EXISTING_REJECT, EXISTING_REJECT]),
    ("incoming anti-affinity: all terms with valid topology keys",
     pod(aff=affinity(anti=[term("region", expr("foo", "Exists")),
                            term("zone", expr("bar", "Exists"))])),
     [pod({"foo": "", "bar": ""}, node="nodeA")],
     _abc_nodes(), [ANTI_REJECT, ANTI_REJECT]),
    ("existing anti-affinity on two nodes leaves only the third",
     pod({"foo": "", "bar": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("zone", expr("foo", "Exists")),
                                           term("zone", expr("labelA", "Exists"))])),
      pod(node="nodeB", aff=affinity(anti=[term("zone", expr("bar", "Exists")),
                                           term("zone", expr("labelB", "Exists"))]))],
     [*_abc_nodes(), node("nodeC", region="r1", zone="z3", hostname="nodeC")],
     [EXISTING_REJECT, EXISTING_REJECT, None]),
    ("incoming affinity: all terms matched by one pod, then every topology key",
     pod(aff=affinity([term("region", expr("foo", "Exists")),
                       term("zone", expr("bar", "Exists"))])),
     [pod({"foo": "", "bar": ""}, node="nodeA")],
     _abc_nodes("z1"), [None, None]),
    ("incoming affinity: the terms must be matched by the same pod",
     pod(aff=affinity([term("region", expr("foo", "Exists")),
                       term("zone", expr("bar", "Exists"))])),
     [pod({"foo": ""}, node="nodeA"), pod({"bar": ""}, node="nodeB")],
     _abc_nodes(), [AFF_REJECT, AFF_REJECT]),
]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "want"),
                         [c[1:] for c in MULTI_NODE_CASES],
                         ids=[c[0] for c in MULTI_NODE_CASES])
def test_required_affinity_multiple_nodes(incoming: Pod, pods: list[Pod], nodes: list[Node],
                                          want: Any) -> None:
    assert run_filter(incoming, cluster(nodes, pods, {"NS1": {}})) == want


def test_first_pod_rule_needs_no_match_anywhere() -> None:
    """A pod matching its own terms is not "first" once any pod matches them somewhere:
    then only nodes in that pod's topology fit."""
    incoming = pod({"app": "db"}, aff=affinity([term("zone", expr("app", "In", "db"))]))
    nodes = [node("a", zone="z1"), node("b", zone="z2"), node("c")]
    assert run_filter(incoming, cluster(nodes, [])) == [None, None, AFF_REJECT]
    assert run_filter(incoming, cluster(nodes, [pod({"app": "db"}, node="a")])) == [
        None, AFF_REJECT, AFF_REJECT]
    # Not matching its own terms: no exception for the first pod.
    stranger = pod({"app": "web"}, aff=affinity([term("zone", expr("app", "In", "db"))]))
    assert run_filter(stranger, cluster(nodes, [])) == [AFF_REJECT] * 3


# ---------------------------------------------------------------------------
# Scoring: TestPreferredAffinity

S1 = {"security": "S1"}
S2 = {"security": "S2"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}

STAY_WITH_S1_IN_REGION = affinity(pref=[weighted(5, term("region",
                                                         expr("security", "In", "S1")))])
STAY_WITH_S2_IN_REGION = affinity(pref=[weighted(6, term("region",
                                                         expr("security", "In", "S2")))])
AFFINITY3 = affinity(pref=[
    weighted(8, term("region", expr("security", "NotIn", "S1"), expr("security", "In", "S2"))),
    weighted(2, term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist")))])
HARD_AFFINITY = affinity([
    term("region", expr("security", "In", "S1", "value2")),
    term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist"))])
AWAY_FROM_S1_IN_AZ = affinity(pref_anti=[weighted(5, term("az", expr("security", "In", "S1")))])
AWAY_FROM_S2_IN_AZ = affinity(pref_anti=[weighted(5, term("az", expr("security", "In", "S2")))])
STAY_WITH_S1_AWAY_FROM_S2 = affinity(
    pref=[weighted(8, term("region", expr("security", "In", "S1")))],
    pref_anti=[weighted(5, term("az", expr("security", "In", "S2")))])
_TEAM1 = {"matchExpressions": [expr("team", "In", "team1")]}
AFFINITY_NS_SELECTOR = affinity(pref=[weighted(5, term(
    "region", expr("security", "In", "S1"), namespaces=["subteam2.team2"],
    ns_selector=_TEAM1))])
ANTI_AFFINITY_NS_SELECTOR = affinity(pref_anti=[weighted(5, term(
    "region", expr("security", "In", "S1"), namespaces=["subteam2.team2"],
    ns_selector=_TEAM1))])


def _n3(l1: dict[str, str], l2: dict[str, str], l3: dict[str, str]) -> list[Node]:
    return [node("node1", **l1), node("node2", **l2), node("node3", **l3)]


SCORE_CASES: list[tuple[str, Pod, list[Pod], list[Node], Any, bool]] = [
    ("no affinity anywhere: Skip", pod(S1), [], _n3(CHINA, INDIA, AZ1), SKIP, False),
    ("affinity: matching topology and pods score high",
     pod(S1, aff=STAY_WITH_S1_IN_REGION),
     [pod(S1, node="node1"), pod(S2, node="node2"), pod(S1, node="node3")],
     _n3(CHINA, INDIA, AZ1), [100, 0, 0], False),
    ("affinity: same topology value, same score",
     pod(aff=STAY_WITH_S1_IN_REGION), [pod(S1, node="node1")],
     _n3(CHINA, CHINA_AZ1, INDIA), [100, 100, 0], False),
    ("affinity: the region with more matches scores higher",
     pod(S1, aff=STAY_WITH_S2_IN_REGION),
     [pod(S2, node=n) for n in ("node1", "node1", "node2", "node3", "node4", "node5")],
     [node("node1", **CHINA), node("node2", **INDIA), node("node3", **CHINA),
      node("node4", **CHINA), node("node5", **INDIA)], [100, 0, 100, 100, 0], False),
    ("affinity: different operators, some terms do not match",
     pod(S1, aff=AFFINITY3),
     [pod(S1, node="node1"), pod(S2, node="node2"), pod(S1, node="node3")],
     _n3(CHINA, INDIA, AZ1), [20, 100, 0], False),
    ("affinity symmetry: existing pods' preferred affinity",
     pod(S2),
     [pod(S1, node="node1", aff=STAY_WITH_S1_IN_REGION),
      pod(S2, node="node2", aff=STAY_WITH_S2_IN_REGION)],
     _n3(CHINA, INDIA, AZ1), [0, 100, 0], False),
    ("affinity symmetry with a namespace selector",
     pod(S1, ns="subteam1.team1"),
     [pod(S1, node="node1", aff=AFFINITY_NS_SELECTOR),
      pod(S2, node="node2", aff=STAY_WITH_S2_IN_REGION)],
     _n3(CHINA, INDIA, AZ1), [100, 0, 0], False),
    ("anti-affinity symmetry with a namespace selector",
     pod(S1, ns="subteam1.team1"),
     [pod(S1, node="node1", aff=ANTI_AFFINITY_NS_SELECTOR),
      pod(S2, node="node2", aff=STAY_WITH_S2_IN_REGION)],
     _n3(CHINA, INDIA, AZ1), [0, 100, 100], False),
    ("affinity symmetry: existing pods' required affinity at hardPodAffinityWeight",
     pod(S1),
     [pod(S1, node="node1", aff=HARD_AFFINITY), pod(S2, node="node2", aff=HARD_AFFINITY)],
     _n3(CHINA, INDIA, AZ1), [100, 100, 0], False),
    ("anti-affinity: a node without matching pods scores high",
     pod(S1, aff=AWAY_FROM_S1_IN_AZ), [pod(S1, node="node1"), pod(S2, node="node2")],
     [node("node1", **AZ1), node("node2", **CHINA)], [0, 100], False),
    ("anti-affinity: a node without the topology key scores high",
     pod(S1, aff=AWAY_FROM_S1_IN_AZ), [pod(S1, node="node1"), pod(S1, node="node2")],
     [node("node1", **AZ1), node("node2", **CHINA)], [0, 100], False),
    ("anti-affinity: more matching pods, lower score",
     pod(S1, aff=AWAY_FROM_S1_IN_AZ),
     [pod(S1, node="node1"), pod(S1, node="node1"), pod(S2, node="node2")],
     [node("node1", **AZ1), node("node2", **INDIA)], [0, 100], False),
    ("anti-affinity symmetry",
     pod(S2),
     [pod(S1, node="node1", aff=AWAY_FROM_S2_IN_AZ), pod(S2, node="node2",
                                                         aff=AWAY_FROM_S1_IN_AZ)],
     [node("node1", **AZ1), node("node2", **AZ2)], [0, 100], False),
    ("affinity and anti-affinity",
     pod(S1, aff=STAY_WITH_S1_AWAY_FROM_S2), [pod(S1, node="node1"), pod(S1, node="node2")],
     [node("node1", **CHINA), node("node2", **AZ1)], [100, 0], False),
    ("affinity and anti-affinity, pods with the same labels",
     pod(S1, aff=STAY_WITH_S1_AWAY_FROM_S2),
     [pod(S1, node=n) for n in ("node1", "node1", "node2", "node3", "node3", "node4",
                                "node5")],
     [node("node1", **CHINA_AZ1), node("node2", **INDIA), node("node3", **CHINA),
      node("node4", **CHINA), node("node5", **INDIA)], [100, 0, 100, 100, 0], False),
    ("affinity, anti-affinity and symmetry together",
     pod(S1, aff=STAY_WITH_S1_AWAY_FROM_S2),
     [pod(S1, node="node1"), pod(S2, node="node2"),
      pod(node="node3", aff=STAY_WITH_S1_AWAY_FROM_S2),
      pod(node="node4", aff=AWAY_FROM_S1_IN_AZ)],
     [node("node1", **CHINA), node("node2", **AZ1), node("node3", **INDIA),
      node("node4", **AZ2)], [100, 0, 100, 0], False),
    ("some nodes of a topology have pods with affinity, the pod has none",
     pod(S1), [pod(S1, node="node1"), pod(node="node2", aff=STAY_WITH_S1_AWAY_FROM_S2)],
     [node("node1", **CHINA), node("node2", **CHINA)], [0, 0], False),
    ("affinity with pods matching the namespaceSelector",
     pod(S1, ns="subteam1.team1", aff=AFFINITY_NS_SELECTOR),
     [pod(S1, node="node1", ns="subteam1.team1"), pod(S1, node="node1", ns="subteam1.team1"),
      pod(S1, node="node1", ns="subteam1.team2"), pod(S1, node="node2", ns="subteam2.team1")],
     [node("node1", **CHINA), node("node2", **INDIA)], [100, 0], False),
    ("affinity with pods matching both namespaceSelector and namespaces",
     pod(S1, ns="subteam1.team1", aff=AFFINITY_NS_SELECTOR),
     [pod(S1, node="node1", ns="subteam1.team1"), pod(S1, node="node1", ns="subteam1.team1"),
      pod(S1, node="node1", ns="subteam2.team2"), pod(S1, node="node2", ns="subteam2.team1")],
     [node("node1", **CHINA), node("node2", **INDIA)], [100, 0], False),
    ("anti-affinity with pods matching the namespaceSelector",
     pod(S1, ns="subteam1.team1", aff=ANTI_AFFINITY_NS_SELECTOR),
     [pod(S1, node="node1", ns="subteam1.team1"), pod(S1, node="node1", ns="subteam1.team1"),
      pod(S1, node="node1", ns="subteam1.team2"), pod(S1, node="node2", ns="subteam2.team1")],
     [node("node1", **CHINA), node("node2", **INDIA)], [0, 100], False),
    ("anti-affinity with pods matching both namespaceSelector and namespaces",
     pod(S1, ns="subteam1.team1", aff=ANTI_AFFINITY_NS_SELECTOR),
     [pod(S1, node="node1", ns="subteam1.team1"), pod(S1, node="node1", ns="subteam1.team1"),
      pod(S1, node="node1", ns="subteam2.team2"), pod(S1, node="node2", ns="subteam2.team1")],
     [node("node1", **CHINA), node("node2", **INDIA)], [0, 100], False),
    ("ignore preferred terms of existing pods",
     pod(S2),
     [pod(S1, node="node1", aff=STAY_WITH_S1_AWAY_FROM_S2),
      pod(S2, node="node2", aff=STAY_WITH_S2_IN_REGION)],
     [node("node1", **CHINA), node("node2", **INDIA)], SKIP, True),
    ("do not ignore preferred terms of existing pods",
     pod(S2),
     [pod(S1, node="node1", aff=STAY_WITH_S1_AWAY_FROM_S2),
      pod(S2, node="node2", aff=STAY_WITH_S2_IN_REGION)],
     [node("node1", **CHINA), node("node2", **INDIA)], [0, 100], False),
    ("no nodes to score", pod(S2), [], [], SKIP, False),
]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "want", "ignore"),
                         [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_preferred_affinity(incoming: Pod, pods: list[Pod], nodes: list[Node], want: Any,
                            ignore: bool) -> None:
    pl = ipa.new({"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": ignore})
    assert run_score(incoming, cluster(nodes, pods, NAMESPACES), pl) == want


@pytest.mark.parametrize("which", ["pref", "pref_anti"])
def test_invalid_preferred_term_fails_pre_score(which: str) -> None:
    bad = [weighted(8, term("region", expr("security", "In", "{{.bad-value.}}")))]
    incoming = pod(aff=affinity(**{which: bad}))
    got = run_score(incoming, cluster([node("node1", **CHINA)], []))
    assert isinstance(got, Status)
    assert got.code is Code.ERROR
    assert "{{.bad-value.}}" in got.message


# TestPreferredAffinityWithHardPodAffinitySymmetricWeight
HARD_POD_AFFINITY = affinity([term("region", expr("service", "In", "S1"),
                                   namespaces=["default", "subteam2.team2"],
                                   ns_selector=_TEAM1)])

HARD_WEIGHT_CASES: list[tuple[str, str, int, Any]] = [
    ("with default weight", "default", 1, [100, 100, 0]),
    ("with zero weight", "default", 0, SKIP),
    ("with no matching namespace", "subteam1.team2", 1, SKIP),
    ("with matching namespaceSelector", "subteam1.team1", 1, [100, 100, 0]),
    ("with matching namespaces", "subteam2.team2", 1, [100, 100, 0]),
]


@pytest.mark.parametrize(("ns", "weight", "want"), [c[1:] for c in HARD_WEIGHT_CASES],
                         ids=[c[0] for c in HARD_WEIGHT_CASES])
def test_hard_pod_affinity_weight(ns: str, weight: int, want: Any) -> None:
    pods = [pod(node="node1", aff=HARD_POD_AFFINITY), pod(node="node2", aff=HARD_POD_AFFINITY)]
    c = cluster(_n3(CHINA, INDIA, AZ1), pods, NAMESPACES)
    got = run_score(pod({"service": "S1"}, ns=ns), c, ipa.new({"hardPodAffinityWeight": weight}))
    assert got == want


def test_normalize_truncates_like_go() -> None:
    # raw scores 0, 1, 3 -> 0, 33 (33.33...), 100
    pref = affinity(pref=[weighted(1, term("zone", expr("app", "In", "x")))])
    nodes = [node("a", zone="z0"), node("b", zone="z1"), node("c", zone="z3")]
    pods = [pod({"app": "x"}, node="b")] + [pod({"app": "x"}, node="c") for _ in range(3)]
    assert run_score(pod(aff=pref), cluster(nodes, pods)) == [0, 33, 100]


def test_cancelling_weights_still_score() -> None:
    """Terms that matched but cancel out are not "nothing to do": upstream does not Skip,
    and every node normalizes to 0."""
    aff = affinity(pref=[weighted(5, term("zone", expr("app", "In", "x")))],
                   pref_anti=[weighted(5, term("zone", expr("app", "In", "x")))])
    c = cluster([node("a", zone="z1"), node("b", zone="z2")], [pod({"app": "x"}, node="a")])
    assert run_score(pod(aff=aff), c) == [0, 0]


# ---------------------------------------------------------------------------
# namespaces, matchLabelKeys, args


def test_namespace_selector_without_namespace_labels() -> None:
    """No namespace labels known: a selector selects no namespace, listed namespaces
    and the empty selector still work."""
    sel = term("zone", expr("app", "In", "x"), ns_selector=_TEAM1)
    nodes = [node("a", zone="z1")]
    existing = [pod({"app": "x"}, node="a", ns="subteam1.team1")]
    got = run_filter(pod(aff=affinity(anti=[sel])), cluster(nodes, existing))
    assert got == [None]
    listed = term("zone", expr("app", "In", "x"), namespaces=["subteam1.team1"],
                  ns_selector=_TEAM1)
    got = run_filter(pod(aff=affinity(anti=[listed])), cluster(nodes, existing))
    assert got == [ANTI_REJECT]
    everything = term("zone", expr("app", "In", "x"), ns_selector={})
    got = run_filter(pod(aff=affinity(anti=[everything])), cluster(nodes, existing))
    assert got == [ANTI_REJECT]


def test_existing_namespace_selector_matches_incoming_namespace_labels() -> None:
    anti = affinity(anti=[term("zone", expr("app", "In", "x"), ns_selector=_TEAM1)])
    nodes = [node("a", zone="z1"), node("b", zone="z2")]
    existing = [pod(node="a", ns="other", aff=anti)]
    c = cluster(nodes, existing, NAMESPACES)
    assert run_filter(pod({"app": "x"}, ns="subteam2.team1"), c) == [EXISTING_REJECT, None]
    assert run_filter(pod({"app": "x"}, ns="subteam2.team2"), c) == SKIP


def test_match_label_keys_merge_with_own_labels() -> None:
    # Spread replicas of one revision: anti-affinity to pods of the same app and hash.
    t = term("zone", expr("app", "In", "web"), matchLabelKeys=["hash"])
    incoming = pod({"app": "web", "hash": "v2"}, aff=affinity(anti=[t]))
    nodes = [node("a", zone="z1"), node("b", zone="z2")]
    old = pod({"app": "web", "hash": "v1"}, node="a")
    assert run_filter(incoming, cluster(nodes, [old])) == [None, None]
    new_ = pod({"app": "web", "hash": "v2"}, node="b")
    assert run_filter(incoming, cluster(nodes, [old, new_])) == [None, ANTI_REJECT]


def test_mismatch_label_keys_merge_with_own_labels() -> None:
    # Exclusive zones per tenant: keep away from pods of any other tenant.
    t = term("zone", expr("tenant", "Exists"), mismatchLabelKeys=["tenant"])
    incoming = pod({"tenant": "t1"}, aff=affinity(anti=[t]))
    nodes = [node("a", zone="z1"), node("b", zone="z2")]
    pods = [pod({"tenant": "t1"}, node="a"), pod({"tenant": "t2"}, node="b")]
    assert run_filter(incoming, cluster(nodes, pods)) == [None, ANTI_REJECT]


def test_match_label_keys_already_merged_by_api_server() -> None:
    """The API server appended `hash In (v1)` at creation; the label changed since.
    Upstream uses the stored selector only, so must we."""
    t = term("zone", expr("app", "In", "web"), expr("hash", "In", "v1"),
             matchLabelKeys=["hash"])
    terms = pod_affinity_terms(pod({"app": "web", "hash": "v2"}, aff=affinity(anti=[t])))
    (compiled,) = terms.required_anti_affinity
    assert [(r.key, r.operator, sorted(r.values)) for r in compiled.selector.requirements] == [
        ("app", "In", ["web"]), ("hash", "In", ["v1"])]


def test_match_label_keys_with_nil_selector_match_nothing() -> None:
    t = {"topologyKey": "zone", "matchLabelKeys": ["app"]}
    terms = pod_affinity_terms(pod({"app": "web"}, aff=affinity(anti=[t])))
    assert terms.required_anti_affinity[0].selector.match_nothing


def test_terms_are_compiled_once_per_pod() -> None:
    p = pod({"app": "x"}, aff=affinity(anti=[term("zone", expr("app", "In", "x"))]))
    assert pod_affinity_terms(p) is pod_affinity_terms(p)


def test_args_defaults_and_validation() -> None:
    pl = ipa.new(None)
    assert pl.hard_pod_affinity_weight == 1
    assert pl.ignore_preferred_terms_of_existing_pods is False
    assert ipa.DEFAULT_WEIGHT == 2
    with pytest.raises(PluginError) as err:
        ipa.new({"hardPodAffinityWeight": 101, "ignorePreferredTermsOfExistingPods": "yes",
                 "bogus": 1})
    assert [(p.path, p.message) for p in err.value.problems] == [
        ("bogus", "unknown field"),
        ("hardPodAffinityWeight", "Invalid value: 101: not in valid range [0-100]"),
        ("ignorePreferredTermsOfExistingPods", 'Invalid value: "yes": must be a boolean'),
    ]
    with pytest.raises(PluginError):
        ipa.new({"hardPodAffinityWeight": -1})
    assert ipa.new({"hardPodAffinityWeight": 0}).hard_pod_affinity_weight == 0


# ---------------------------------------------------------------------------
# Memo invalidation, and everything against a plain reference on generated clusters


def test_counts_follow_cluster_changes() -> None:
    incoming = pod({"app": "x"}, aff=affinity(anti=[term("zone", expr("app", "In", "x"))]))
    nodes = [node("a", zone="z1"), node("b", zone="z2")]
    c = cluster(nodes, [])
    assert run_filter(incoming, c) == [None, None]
    other = pod({"app": "x"}, node="b")
    c.upsert_pod(other)
    assert run_filter(incoming, c) == [None, ANTI_REJECT]
    c.remove_pod(other.uid)
    assert run_filter(incoming, c) == [None, None]
    # a relabelled node is a new Node record
    c.upsert_pod(pod({"app": "x"}, node="a"))
    assert run_filter(incoming, c) == [ANTI_REJECT, None]
    c.upsert_node(node("a", zone="z2"))
    assert run_filter(incoming, c) == [ANTI_REJECT, ANTI_REJECT]


def _ref_matches(t: dict[str, Any], owner: Pod, target: Pod,
                 ns_labels: Mapping[str, Mapping[str, str]], incoming_side: bool) -> bool:
    """Plain evaluation of a raw term of `owner` against `target`."""
    namespaces = set(t.get("namespaces") or [])
    nsel = t.get("namespaceSelector")
    if not namespaces and nsel is None:
        namespaces = {owner.namespace}

    def sel_matches(sel: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
        if sel is None:
            return False
        for k, v in (sel.get("matchLabels") or {}).items():
            if labels.get(k) != v:
                return False
        for e in sel.get("matchExpressions") or []:
            k, op, vals = e["key"], e["operator"], e.get("values") or []
            if op == "In" and labels.get(k) not in vals:
                return False
            if op == "NotIn" and k in labels and labels[k] in vals:
                return False
            if op == "Exists" and k not in labels:
                return False
            if op == "DoesNotExist" and k in labels:
                return False
        return True

    if incoming_side:
        # the selector unrolled over the known namespaces, or {} for all
        if nsel is not None and not nsel:
            ns_ok = True
        else:
            ns_ok = target.namespace in namespaces or (
                nsel is not None and target.namespace in ns_labels
                and sel_matches(nsel, ns_labels[target.namespace]))
    else:
        ns_ok = target.namespace in namespaces or (
            nsel is not None and sel_matches(nsel, ns_labels.get(target.namespace, {})))
    return ns_ok and sel_matches(t.get("labelSelector"), target.labels)


def _raw_terms(p: Pod, kind: str, req: bool) -> list[tuple[dict[str, Any], int]]:
    section = p.affinity.get(kind) or {}
    if req:
        return [(t, 1) for t in section.get(
            "requiredDuringSchedulingIgnoredDuringExecution") or []]
    return [(w["podAffinityTerm"], w["weight"]) for w in section.get(
        "preferredDuringSchedulingIgnoredDuringExecution") or []]


def _reference(incoming: Pod, c: ClusterState, hard: int) -> tuple[Any, Any]:
    ns_labels = c.namespace_labels
    placed = [(info.node, p) for info in c.node_infos() for p in info.pods.values()]

    def bump(counts: dict[tuple[str, str], int], n: Node, key: str, by: int = 1) -> None:
        if key in n.labels:
            counts[(key, n.labels[key])] = counts.get((key, n.labels[key]), 0) + by

    existing: dict[tuple[str, str], int] = {}
    aff: dict[tuple[str, str], int] = {}
    anti: dict[tuple[str, str], int] = {}
    req_aff = [t for t, _ in _raw_terms(incoming, "podAffinity", True)]
    req_anti = [t for t, _ in _raw_terms(incoming, "podAntiAffinity", True)]
    for n, p in placed:
        for t, _ in _raw_terms(p, "podAntiAffinity", True):
            if _ref_matches(t, p, incoming, ns_labels, False):
                bump(existing, n, t["topologyKey"])
        if req_aff and all(_ref_matches(t, incoming, p, ns_labels, True) for t in req_aff):
            for t in req_aff:
                bump(aff, n, t["topologyKey"])
        for t in req_anti:
            if _ref_matches(t, incoming, p, ns_labels, True):
                bump(anti, n, t["topologyKey"])
    if not existing and not req_aff and not req_anti:
        filtered: Any = SKIP
    else:
        filtered = []
        self_match = all(_ref_matches(t, incoming, incoming, ns_labels, True) for t in req_aff)
        for info in c.node_infos():
            labels = info.node.labels
            if req_aff and (any(t["topologyKey"] not in labels for t in req_aff) or (
                    any(aff.get((t["topologyKey"], labels[t["topologyKey"]]), 0) <= 0
                        for t in req_aff) and not (not aff and self_match))):
                filtered.append(AFF_REJECT)
            elif any(anti.get((t["topologyKey"], labels.get(t["topologyKey"], "\0")), 0) > 0
                     for t in req_anti):
                filtered.append(ANTI_REJECT)
            elif any(existing.get(kv, 0) > 0 for kv in labels.items()):
                filtered.append(EXISTING_REJECT)
            else:
                filtered.append(None)

    topo: dict[tuple[str, str], int] = {}
    for n, p in placed:
        if not n.labels:
            continue
        for t, w in _raw_terms(incoming, "podAffinity", False):
            if _ref_matches(t, incoming, p, ns_labels, True):
                bump(topo, n, t["topologyKey"], w)
        for t, w in _raw_terms(incoming, "podAntiAffinity", False):
            if _ref_matches(t, incoming, p, ns_labels, True):
                bump(topo, n, t["topologyKey"], -w)
        if hard > 0:
            for t, _ in _raw_terms(p, "podAffinity", True):
                if _ref_matches(t, p, incoming, ns_labels, False):
                    bump(topo, n, t["topologyKey"], hard)
        for t, w in _raw_terms(p, "podAffinity", False):
            if _ref_matches(t, p, incoming, ns_labels, False):
                bump(topo, n, t["topologyKey"], w)
        for t, w in _raw_terms(p, "podAntiAffinity", False):
            if _ref_matches(t, p, incoming, ns_labels, False):
                bump(topo, n, t["topologyKey"], -w)
    if not topo:
        scored: Any = SKIP
    else:
        raw = [sum(v for (k, val), v in topo.items() if info.node.labels.get(k) == val)
               for info in c.node_infos()]
        lo, hi = min(raw), max(raw)
        scored = [int(100.0 * ((s - lo) / (hi - lo))) if hi > lo else 0 for s in raw]
    return filtered, scored


def _random_term(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(["app", "tier", "team"])
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
    values = rng.sample(["a", "b", "c"], rng.randint(1, 2)) if op in ("In", "NotIn") else []
    t = term(rng.choice(["zone", "region", "kubernetes.io/hostname", "rack"]),
             expr(key, op, *values))
    choice = rng.random()
    if choice < 0.15:
        t["namespaces"] = rng.sample(["ns1", "ns2", "ns3"], rng.randint(1, 2))
    elif choice < 0.3:
        t["namespaceSelector"] = {"matchLabels": {"env": rng.choice(["prod", "dev"])}}
    elif choice < 0.35:
        t["namespaceSelector"] = {}
    return t


def _random_affinity(rng: random.Random) -> dict[str, Any] | None:
    if rng.random() < 0.5:
        return None

    def some(f: Any) -> list[Any]:
        return [f() for _ in range(rng.choice([0, 0, 1, 2]))]

    return affinity(
        req=some(lambda: _random_term(rng)), anti=some(lambda: _random_term(rng)),
        pref=some(lambda: weighted(rng.randint(1, 100), _random_term(rng))),
        pref_anti=some(lambda: weighted(rng.randint(1, 100), _random_term(rng))))


def _random_pod(rng: random.Random, node_name: str = "") -> Pod:
    labels = {k: rng.choice(["a", "b", "c"]) for k in ("app", "tier", "team")
              if rng.random() < 0.6}
    return pod(labels, node=node_name, ns=rng.choice(["ns1", "ns2", "ns3"]),
               aff=_random_affinity(rng))


@pytest.mark.parametrize("seed", range(60))
def test_matches_reference_on_generated_clusters(seed: int) -> None:
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(1, 8)):
        labels = {"kubernetes.io/hostname": f"n{i}"}
        if rng.random() < 0.8:
            labels["zone"] = rng.choice(["z1", "z2", "z3"])
        if rng.random() < 0.7:
            labels["region"] = rng.choice(["r1", "r2"])
        nodes.append(node_from_dict({"metadata": {"name": f"n{i}", "labels": labels}}))
    pods = [_random_pod(rng, rng.choice(nodes).name) for _ in range(rng.randint(0, 25))]
    c = cluster(nodes, pods, {"ns1": {"env": "prod"}, "ns2": {"env": "dev"}})
    hard = rng.choice([0, 1, 5])
    pl = ipa.new({"hardPodAffinityWeight": hard})
    for _ in range(4):  # same plugin and cluster: later rounds exercise the memos
        incoming = _random_pod(rng)
        want_filter, want_score = _reference(incoming, c, hard)
        assert run_filter(incoming, c, pl) == want_filter
        assert run_score(incoming, c, pl) == want_score
        # move the cluster on a bit so memo entries must be revalidated
        c.upsert_pod(_random_pod(rng, rng.choice(nodes).name))


def test_matches_reference_when_kept_totals_are_evicted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny limits: totals for incoming terms are evicted and the change log truncated
    all the time, so the rebuild paths run; results must not change."""
    monkeypatch.setattr(index, "_TERM_SET_LIMIT", 2)
    monkeypatch.setattr(index, "_LOG_MIN", 1)
    for seed in range(60, 75):
        test_matches_reference_on_generated_clusters(seed)


def test_single_existing_key_shape() -> None:
    anti = affinity(anti=[term("kubernetes.io/hostname", expr("app", "In", "x"))])
    nodes = [node(f"n{i}", **{"kubernetes.io/hostname": f"n{i}"}) for i in range(4)]
    nodes.append(node("bare"))
    c = cluster(nodes, [pod(node="n1", aff=anti), pod(node="n3", aff=anti)])
    assert run_filter(pod({"app": "x"}), c) == [
        None, EXISTING_REJECT, None, EXISTING_REJECT, None]


# ---------------------------------------------------------------------------
# Through the engine: the default profile, fast (columnar) and reference paths


HOSTNAME_ANTI = affinity(anti=[term("kubernetes.io/hostname", expr("app", "In", "web"))])


def test_engine_spreads_replicas_then_reports_anti_affinity() -> None:
    from policyd.config.plugins import default_framework
    from policyd.engine.cycle import schedule_one

    for reference in (False, True):
        c = cluster([node(f"n{i}", **{"kubernetes.io/hostname": f"n{i}"}) for i in range(3)],
                    [])
        fw = default_framework(seed=1)
        placed, messages = set(), []
        for _ in range(4):
            p = pod({"app": "web"}, aff=HOSTNAME_ANTI)
            r = schedule_one(fw, p, c, reference=reference)
            if r.node is not None:
                placed.add(r.node)
                c.assume(p, r.node)
            else:
                messages.append(r.message)
        assert placed == {"n0", "n1", "n2"}
        # The replicas share one priority, so preemption finds no victims.
        assert messages == [
            "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
            "no new claims to deallocate, preemption: 0/3 nodes are available: 3 No "
            "preemption victims found for incoming pod."]


@pytest.mark.parametrize("seed", range(10))
def test_engine_fast_and_reference_paths_agree(seed: int) -> None:
    from policyd.config.plugins import default_framework
    from policyd.engine.cycle import schedule_one

    def run(reference: bool) -> list[tuple[str | None, str]]:
        rng = random.Random(seed)
        nodes = [node_from_dict({"metadata": {"name": f"n{i}", "labels": {
            "kubernetes.io/hostname": f"n{i}", "zone": f"z{i % 3}", "region": f"r{i % 2}"}},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}})
            for i in range(rng.randint(2, 12))]
        c = cluster(nodes, [_random_pod(rng, rng.choice(nodes).name) for _ in range(20)],
                    {"ns1": {"env": "prod"}, "ns2": {"env": "dev"}})
        fw = default_framework(seed=seed)
        out = []
        for _ in range(15):
            p = _random_pod(rng)
            r = schedule_one(fw, p, c, reference=reference)
            out.append((r.node, r.message))
            if r.node is not None:
                c.assume(p, r.node)
        return out

    assert run(False) == run(True)


# PreFilterExtensions (AddPod/RemovePod)
def _anti(app: str, key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}


def test_remove_and_add_pod_update_the_three_counts_on_a_clone() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = [make_node("n1").label(zone, "a").obj(), make_node("n2").label(zone, "a").obj()]
    # Its anti-affinity selects the incoming pod (existing counts, hostname n1); it is
    # also what the incoming pod's affinity wants (zone a) and its anti-affinity avoids.
    guard = make_pod("guard").node("n1").labels(app="db").affinity(_anti("web")).obj()
    cluster = ClusterState(nodes, [guard])
    pod = make_pod("p").labels(app="web").affinity({
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": zone}]},
        **_anti("db")}).obj()
    plugin = ipa.new()
    state = CycleState(cluster.node_infos(), cluster)
    assert plugin.pre_filter(state, pod, cluster.node_infos()) == (None, None)
    n1, n2 = cluster.node_infos()
    assert plugin.filter(state, pod, n1) is not None  # existing anti-affinity (and own)
    assert plugin.filter(state, pod, n2) is None
    dry = state.clone()
    assert plugin.remove_pod(dry, pod, guard, n1) is None
    s: filtering.PreFilterState = dry.read(filtering.PRE_FILTER_KEY)
    assert s.existing_anti_affinity_counts == {} and s.existing_anti_affinity_keys == ()
    assert s.anti_affinity_counts == {} and s.affinity_counts == {}
    # No pod for the affinity any more, and the pod does not match its own term.
    assert plugin.filter(dry, pod, n1) == Status.unresolvable(
        filtering.ERR_REASON_AFFINITY_RULES_NOT_MATCH)
    assert plugin.filter(state, pod, n2) is None  # the original is untouched
    assert plugin.add_pod(dry, pod, guard, n1) is None
    assert plugin.filter(dry, pod, n1) == Status.unschedulable(
        filtering.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)  # affinity holds again
    s = dry.read(filtering.PRE_FILTER_KEY)
    assert s.existing_anti_affinity_counts == {("kubernetes.io/hostname", "n1"): 1}
    assert s.existing_anti_affinity_keys == ("kubernetes.io/hostname",)
    assert plugin.filter(dry, pod, n2) is None
