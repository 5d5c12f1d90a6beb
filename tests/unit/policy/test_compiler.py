"""The compiled plugin: applies-to, each filter rule's verdict and code, scores,
and the extension points each policy kind exposes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from policyd.framework import (
    CycleState,
    FilterPlugin,
    NormalizeScorePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
)
from policyd.framework.status import Code
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod
from policyd.policy.compiler import CompiledPolicy, compile_policy
from tests.builders import make_node, make_pod
from tests.unit.policy.conftest import check_docs, make_policy


def compiled(**spec: Any) -> Any:
    result = check_docs(make_policy(**spec))
    assert [p for p in result.problems if p.level == "error"] == []
    [policy] = result.compiled
    return policy


def cluster(nodes: list[Node], pods: Sequence[Pod] = ()
            ) -> tuple[list[NodeInfo], CycleState]:
    cs = ClusterState(nodes, list(pods))
    infos = cs.node_infos()
    return infos, CycleState(infos, cs)


def run_filter(policy: Any, pod: Pod, nodes: list[Node], pods: Sequence[Pod] = ()
               ) -> dict[str, Any]:
    infos, state = cluster(nodes, pods)
    _, status = policy.pre_filter(state, pod, infos)
    if status is not None:
        return {"prefilter": status.code}
    out: dict[str, Any] = {}
    for info in infos:
        st = policy.filter(state, pod, info)
        out[info.name] = None if st is None else (st.code, st.reasons, st.plugin)
    return out


def run_scores(policy: Any, pod: Pod, nodes: list[Node], pods: Sequence[Pod] = ()
               ) -> list[int] | Code:
    infos, state = cluster(nodes, pods)
    status = policy.pre_score(state, pod, infos)
    if status is not None:
        return Code(status.code)
    scores = [policy.score(state, pod, i) for i in infos]
    assert all(0 <= s <= 100 for s in scores)
    policy.normalize_score(state, pod, infos, scores)
    return scores


U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
HW = {"annotation": "myorg.io/hw", "value": "true", "label": "hw", "labelValue": "yes"}


def rule(kind: str, spec: Any, rid: str = "r", message: str = "nope") -> dict[str, Any]:
    return {"id": rid, "message": message, kind: spec}


FILTER_CASES: list[tuple[str, dict[str, Any], Any, list[Any], dict[str, Any]]] = [
    ("annotation present: label required",
     {"filters": [rule("annotationToNodeLabel", HW)]},
     make_pod().annotation("myorg.io/hw", "true"),
     [make_node("a").label("hw", "yes"), make_node("b").label("hw", "no"), make_node("c")],
     {"a": None, "b": (UU, ("nope",), "P"), "c": (UU, ("nope",), "P")}),
    ("annotation with another value: rule inactive, PreFilter skips",
     {"filters": [rule("annotationToNodeLabel", HW)]},
     make_pod().annotation("myorg.io/hw", "false"), [make_node("a")],
     {"prefilter": Code.SKIP}),
    ("annotation value copied to the label",
     {"filters": [rule("annotationToNodeLabel", {"annotation": "zone", "label": "z",
                                                  "useAnnotationValue": True})]},
     make_pod().annotation("zone", "eu-1"),
     [make_node("a").label("z", "eu-1"), make_node("b").label("z", "eu-2")],
     {"a": None, "b": (UU, ("nope",), "P")}),
    ("any annotation value when value is absent",
     {"filters": [rule("annotationToNodeLabel", {"annotation": "x", "label": "l",
                                                  "labelValue": "v"})]},
     make_pod().annotation("x", ""), [make_node("a").label("l", "v"), make_node("b")],
     {"a": None, "b": (UU, ("nope",), "P")}),
    ("node labels: In, NotIn matches missing, Gt",
     {"filters": [rule("nodeLabels", {"matchExpressions": [
         {"key": "env", "operator": "In", "values": ["prod"]},
         {"key": "bad", "operator": "NotIn", "values": ["yes"]},
         {"key": "cores", "operator": "Gt", "values": ["4"]}]})]},
     make_pod(),
     [make_node("ok").labels(env="prod", cores="8"),
      make_node("bad").labels(env="prod", cores="8", bad="yes"),
      make_node("few").labels(env="prod", cores="4"),
      make_node("nan").labels(env="prod", cores="eight"),
      make_node("Env").label("Env", "prod").label("cores", "8")],
     {"ok": None, "bad": (UU, ("nope",), "P"), "few": (UU, ("nope",), "P"),
      "nan": (UU, ("nope",), "P"), "Env": (UU, ("nope",), "P")}),
    ("node labels: matchLabels, DoesNotExist, Lt",
     {"filters": [rule("nodeLabels", {"matchLabels": {"a": "1"}, "matchExpressions": [
         {"key": "b", "operator": "DoesNotExist"},
         {"key": "n", "operator": "Lt", "values": ["3"]}]})]},
     make_pod(),
     [make_node("x").labels(a="1", n="2"), make_node("y").labels(a="1", n="2", b=""),
      make_node("z").labels(a="1")],
     {"x": None, "y": (UU, ("nope",), "P"), "z": (UU, ("nope",), "P")}),
    ("headroom quantity counts existing pods and the pod itself",
     {"filters": [rule("headroom", {"resource": "memory", "quantity": "1Gi"})]},
     make_pod().req(memory="2Gi"),
     [make_node("a").capacity(memory="4Gi", pods="10"),
      make_node("b").capacity(memory="3Gi", pods="10"),
      make_node("c").capacity(memory="2Gi", pods="10")],
     {"a": None, "b": None, "c": (U, ("nope",), "P")}),
    ("headroom percent; missing resource counts as 0",
     {"filters": [rule("headroom", {"resource": "example.com/gpu", "percent": 25})]},
     make_pod().req(**{"example.com/gpu": "1"}),
     [make_node("a").resource("example.com/gpu", "4"),
      make_node("b").resource("example.com/gpu", "1"), make_node("c")],
     {"a": None, "b": (U, ("nope",), "P"), "c": (U, ("nope",), "P")}),
    ("headroom on cpu is in millicores",
     {"filters": [rule("headroom", {"resource": "cpu", "quantity": "500m"})]},
     make_pod().req(cpu="3500m"),
     [make_node("a"), make_node("b").capacity(cpu="3900m", memory="1Gi", pods="10")],
     {"a": None, "b": (U, ("nope",), "P")}),
    ("required extended resource",
     {"filters": [rule("requireExtendedResource", {"name": "example.com/fpga",
                                                   "quantity": 2})]},
     make_pod(),
     [make_node("a").resource("example.com/fpga", "2"),
      make_node("b").resource("example.com/fpga", "1"), make_node("c")],
     {"a": None, "b": (UU, ("nope",), "P"), "c": (UU, ("nope",), "P")}),
    ("JMESPath predicate; missing field is null",
     {"filters": [rule("jmespath", "quantity(node.status.allocatable.memory) >= "
                                   "quantity('8Gi') && node.metadata.labels.tier != 'spot'")]},
     make_pod(),
     [make_node("a"), make_node("b").label("tier", "spot"),
      make_node("c").capacity(cpu="1", memory="4Gi", pods="10")],
     {"a": None, "b": (UU, ("nope",), "P"), "c": (UU, ("nope",), "P")}),
    ("JMESPath runtime error rejects the node",
     {"filters": [rule("jmespath", "abs(node.metadata.name) > `0`")]},
     make_pod(), [make_node("a")], {"a": (UU, ("nope",), "P")}),
    ("several failing rules: every message; unresolvable wins",
     {"filters": [rule("headroom", {"resource": "memory", "quantity": "100Gi"}, "h", "mem"),
                  rule("nodeLabels", {"matchLabels": {"env": "prod"}}, "e", "env")]},
     make_pod(),
     [make_node("a"), make_node("b").label("env", "prod")],
     {"a": (UU, ("mem", "env"), "P"), "b": (U, ("mem",), "P")}),
    ("policy does not apply: Skip",
     {"appliesTo": {"namespaces": {"include": ["prod"]}},
      "filters": [rule("nodeLabels", {"matchLabels": {"x": "y"}})]},
     make_pod(namespace="dev"), [make_node("a")], {"prefilter": Code.SKIP}),
]


@pytest.mark.parametrize(("name", "spec", "pod", "nodes", "expected"), FILTER_CASES,
                         ids=[c[0] for c in FILTER_CASES])
def test_filter(name: str, spec: dict[str, Any], pod: Any, nodes: list[Any],
                expected: dict[str, Any]) -> None:
    policy = compiled(**spec)
    assert run_filter(policy, pod.obj(), [n.obj() for n in nodes]) == expected


def test_max_pods_per_node_counts_only_this_policys_pods() -> None:
    policy = compiled(appliesTo={"labelSelector": {"matchLabels": {"app": "db"}}},
                      filters=[rule("maxPodsPerNode", 2)])
    db = [make_pod(f"db{i}").label("app", "db").node(n).obj()
          for i, n in enumerate(["a", "a", "b"])]
    web = [make_pod(f"web{i}").label("app", "web").node("b").obj() for i in range(3)]
    nodes = [make_node("a").obj(), make_node("b").obj(), make_node("c").obj()]
    pod = make_pod("new").label("app", "db").obj()
    assert run_filter(policy, pod, nodes, db + web) == {
        "a": (U, ("nope",), "P"), "b": None, "c": None}
    # The pod itself, if already counted on a node, does not count against it.
    again = make_pod("db0").uid(db[0].uid).label("app", "db").obj()
    assert run_filter(policy, again, nodes, db + web)["a"] is None


@pytest.mark.parametrize(("applies_to", "pod", "applies"), [
    ({}, make_pod(), True),
    ({"namespaces": {"include": ["a", "b"]}}, make_pod(namespace="b"), True),
    ({"namespaces": {"include": ["a"]}}, make_pod(namespace="b"), False),
    ({"namespaces": {"exclude": ["kube-system"]}}, make_pod(namespace="kube-system"), False),
    ({"labelSelector": {}}, make_pod(), True),
    ({"labelSelector": {"matchLabels": {"app": "x"}}}, make_pod().label("app", "x"), True),
    ({"labelSelector": {"matchLabels": {"app": "x"}}}, make_pod().label("App", "x"), False),
    ({"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn",
                                              "values": ["a"]}]}}, make_pod(), True),
    ({"annotationSelector": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}},
     make_pod().annotation("x", ""), True),
    ({"annotationSelector": {"matchAnnotations": {"x": "1"}}},
     make_pod().annotation("x", "2"), False),
    ({"condition": "spec.priority > `10`"}, make_pod().priority(11), True),
    ({"condition": "spec.priority > `10`"}, make_pod(), False),  # null > 10 is false
    ({"condition": "length(spec.containers) == `2`"},
     make_pod().container("a").container("b"), True),
    ({"condition": "abs(metadata.name)"}, make_pod(), False),  # runtime error
])
def test_applies_to(applies_to: dict[str, Any], pod: Any, applies: bool) -> None:
    policy = compiled(appliesTo=applies_to, filters=[rule("maxPodsPerNode", 1)])
    p = pod.obj()
    assert policy.applies(p) is applies
    assert policy.applies(p) is applies  # memoized answer is the same


def test_applies_memo_is_per_compiled_policy() -> None:
    a = compiled(appliesTo={"namespaces": {"include": ["x"]}}, filters=[rule("maxPodsPerNode", 1)])
    b = compiled(appliesTo={"namespaces": {"include": ["default"]}},
                 filters=[rule("maxPodsPerNode", 1)])
    pod = make_pod().obj()
    assert (a.applies(pod), b.applies(pod)) == (False, True)


def score(rid: str, weight: int, normalize: str, kind: str, spec: Any,
          **extra: Any) -> dict[str, Any]:
    return {"id": rid, "weight": weight, "normalize": normalize, kind: spec, **extra}


LAT = {"annotation": "lat", "prefer": "lowest"}

SCORE_CASES: list[tuple[str, dict[str, Any], list[Any], list[int]]] = [
    ("label value points, default for missing and unlisted",
     {"scores": [score("t", 1, "none", "labelValue", {"label": "tier", "values": {
         "gold": 100, "silver": 40}, "default": 10})]},
     [make_node("g").label("tier", "gold"), make_node("s").label("tier", "silver"),
      make_node("b").label("tier", "bronze"), make_node("n")],
     [100, 40, 10, 10]),
    ("points above 100 with none are clamped",
     {"scores": [score("t", 1, "none", "labelValue", {"label": "t", "values": {"a": 250}})]},
     [make_node("a").label("t", "a"), make_node("b")], [100, 0]),
    ("label value with max: scaled by the highest",
     {"scores": [score("t", 1, "max", "labelValue", {"label": "t", "values": {
         "a": 500, "b": 250}})]},
     [make_node("a").label("t", "a"), make_node("b").label("t", "b"), make_node("c")],
     [100, 50, 0]),
    ("latency annotation, minmax, lowest wins; missing scores 0",
     {"scores": [score("l", 1, "minmax", "numeric", LAT)]},
     [make_node("a").annotation("lat", "5"), make_node("b").annotation("lat", "20"),
      make_node("c").annotation("lat", "50"), make_node("d"),
      make_node("e").annotation("lat", "fast")],
     [100, 67, 0, 0, 0]),
    ("numeric label, highest wins, max",
     {"scores": [score("c", 1, "max", "numeric", {"label": "cores"})]},
     [make_node("a").label("cores", "8"), make_node("b").label("cores", "2"),
      make_node("c").label("cores", "3")],
     [100, 25, 37]),
    ("all equal under minmax: every node 100",
     {"scores": [score("l", 1, "minmax", "numeric", LAT)]},
     [make_node("a").annotation("lat", "7"), make_node("b").annotation("lat", "7")],
     [100, 100]),
    ("max with reverse",
     {"scores": [score("j", 1, "max", "jmespath", "to_number(node.metadata.labels.n)",
                       reverse=True)]},
     [make_node("a").label("n", "10"), make_node("b").label("n", "5"),
      make_node("c").label("n", "0")],
     [0, 50, 100]),
    ("jmespath error or non-number scores 0",
     {"scores": [score("j", 1, "none", "jmespath", "node.metadata.labels.n")]},
     [make_node("a").label("n", "42"), make_node("b").label("n", "x"), make_node("c")],
     [42, 0, 0]),
    ("least allocated over cpu and memory (non-zero requests)",
     {"scores": [score("a", 1, "none", "allocation", {"strategy": "least"})]},
     [make_node("a").capacity(cpu="4", memory="4Gi", pods="10"),
      make_node("b").capacity(cpu="1", memory="1Gi", pods="10")],
     # pod asks 1 cpu / 1Gi: a: cpu 75, mem 75 -> 75; b: 0, 0 -> 0
     [75, 0]),
    ("most allocated with weights; a resource the node lacks is left out",
     {"scores": [score("a", 1, "none", "allocation", {"strategy": "most", "resources": [
         {"name": "cpu", "weight": 3}, {"name": "example.com/gpu", "weight": 1}]})]},
     [make_node("a").capacity(cpu="4", memory="4Gi", pods="10"),
      make_node("b").capacity(cpu="2", memory="4Gi", pods="10").resource("example.com/gpu", "4")],
     # a: cpu 25 (gpu absent) -> 25; b: cpu 50*3 + gpu 0*1 = 150/4 = 37
     [25, 37]),
    ("weighted combination of rules",
     {"scores": [score("l", 80, "minmax", "numeric", LAT),
                 score("z", 20, "none", "labelValue", {"label": "zone", "values": {
                     "a": 100, "b": 50}})]},
     [make_node("x").annotation("lat", "5").label("zone", "b"),
      make_node("y").annotation("lat", "20").label("zone", "a"),
      make_node("z").annotation("lat", "50").label("zone", "a")],
     [90, 73, 20]),
]


@pytest.mark.parametrize(("name", "spec", "nodes", "expected"), SCORE_CASES,
                         ids=[c[0] for c in SCORE_CASES])
def test_scores(name: str, spec: dict[str, Any], nodes: list[Any], expected: list[int]) -> None:
    policy = compiled(**spec)
    pod = make_pod().req(cpu="1", memory="1Gi").obj()
    assert run_scores(policy, pod, [n.obj() for n in nodes]) == expected


def test_scores_skip_when_the_policy_does_not_apply() -> None:
    policy = compiled(appliesTo={"namespaces": {"include": ["x"]}},
                      scores=[score("l", 1, "minmax", "numeric", LAT)])
    assert run_scores(policy, make_pod().obj(), [make_node("a").obj()]) == Code.SKIP


def test_extension_points_follow_the_policy() -> None:
    f_only = compiled(filters=[rule("maxPodsPerNode", 1)])
    s_only = compiled(scores=[score("l", 1, "minmax", "numeric", LAT)])
    both = compiled(filters=[rule("maxPodsPerNode", 1)],
                    scores=[score("l", 1, "minmax", "numeric", LAT)])
    for p in (f_only, both):
        assert isinstance(p, PreFilterPlugin) and isinstance(p, FilterPlugin)
    for p in (s_only, both):
        assert isinstance(p, PreScorePlugin) and isinstance(p, ScorePlugin)
        assert isinstance(p, NormalizeScorePlugin)
    assert not isinstance(f_only, ScorePlugin)
    assert not isinstance(s_only, FilterPlugin)
    assert all(isinstance(p, CompiledPolicy) and p.name == "P" for p in (f_only, s_only, both))


def test_spec_weight_is_the_default_weight() -> None:
    assert compiled(weight=7, filters=[rule("maxPodsPerNode", 1)]).default_weight == 7
    assert compiled(filters=[rule("maxPodsPerNode", 1)]).default_weight == 1


def test_compile_policy_directly_and_repr() -> None:
    doc = make_policy(filters=[rule("maxPodsPerNode", 1)])
    p = compile_policy(doc, "x.yaml:1")
    assert p.name == "P" and p.policy_name == "p" and "x.yaml:1" in repr(p)


def test_vectorized_annotation_scores_follow_node_updates() -> None:
    import numpy as np

    policy = compiled(scores=[score("l", 1, "minmax", "numeric", LAT)])
    cs = ClusterState([make_node("a").annotation("lat", "5").obj(),
                       make_node("b").annotation("lat", "50").obj()])
    pod = make_pod().obj()

    def vector() -> list[int]:
        table = cs.table()
        state = CycleState(table.infos, cs)
        assert policy.pre_score(state, pod, table.infos) is None
        return list(policy.score_vector(state, pod, table,
                                        np.arange(len(table.infos))).tolist())

    assert vector() == [100, 0]
    assert vector() == [100, 0]  # cached column
    cs.upsert_node(make_node("a").annotation("lat", "500").obj())
    assert vector() == [0, 100]


# -- metric rules: read the node metrics cache, never the network -------------------


def _metric_cache(values: dict[str, dict[str, tuple[float, float]]], now: float = 100.0,
                  max_age: float = 30.0) -> Any:
    from policyd.nodemetrics import MetricsCache

    cache = MetricsCache(clock=lambda: now)
    for metric, nodes in values.items():
        by_time: dict[float, dict[str, float]] = {}
        for node, (value, ts) in nodes.items():
            by_time.setdefault(ts, {})[node] = value
        for ts in sorted(by_time):
            cache.update(metric, by_time[ts], max_age=max_age, provider="p", timestamp=ts)
    return cache


FRESH = 95.0
STALE = 50.0  # 50 s old at now=100 with maxAge 30 s: missing
LATENCY = {"lat": {"a": (5.0, FRESH), "b": (50.0, FRESH), "c": (20.0, FRESH),
                   "d": (1.0, STALE)}}
NODES4 = ["a", "b", "c", "d"]

METRIC_CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any], list[int]]] = [
    ("lowest wins; a stale value is missing and scores worst (0)",
     [score("l", 1, "minmax", "metric", {"name": "lat", "prefer": "lowest"})],
     LATENCY, [100, 0, 67, 0]),
    ("highest wins",
     [score("l", 1, "minmax", "metric", {"name": "lat", "prefer": "highest"})],
     LATENCY, [0, 100, 33, 0]),
    ("missing: neutral scores 50",
     [score("l", 1, "minmax", "metric", {"name": "lat", "prefer": "lowest",
                                          "missing": "neutral"})],
     LATENCY, [100, 0, 67, 50]),
    ("missing: skip leaves the rule out of that node's mean",
     [score("l", 3, "minmax", "metric", {"name": "lat", "prefer": "lowest",
                                          "missing": "skip"}),
      score("z", 1, "none", "labelValue", {"label": "z", "values": {"x": 80}})],
     LATENCY, [(3 * 100 + 80) // 4, (0 + 80) // 4, (3 * 67 + 80) // 4, 80]),
    ("missing: skip with no other rule scores 0",
     [score("l", 1, "minmax", "metric", {"name": "lat", "prefer": "lowest",
                                          "missing": "skip"})],
     LATENCY, [100, 0, 67, 0]),
    ("a metric no provider published: every node missing",
     [score("l", 1, "max", "metric", {"name": "nothing", "prefer": "lowest",
                                       "missing": "neutral"})],
     LATENCY, [50, 50, 50, 50]),
    ("max normalization keeps proportions",
     [score("l", 1, "max", "metric", {"name": "lat", "prefer": "highest"})],
     LATENCY, [10, 100, 40, 0]),
]


@pytest.mark.parametrize(("name", "rules", "values", "expected"), METRIC_CASES,
                         ids=[c[0] for c in METRIC_CASES])
def test_metric_scores(name: str, rules: list[dict[str, Any]], values: dict[str, Any],
                       expected: list[int]) -> None:
    import numpy as np

    from policyd.policy import reference

    policy = compiled(scores=rules)
    cache = _metric_cache(values)
    policy.use_metrics(cache)
    nodes = [make_node(n).label("z", "x").obj() for n in NODES4]
    pod = make_pod().obj()
    assert run_scores(policy, pod, nodes) == expected
    cs = ClusterState(nodes)
    table = cs.table()
    state = CycleState(table.infos, cs)
    assert policy.pre_score(state, pod, table.infos) is None
    assert policy.score_vector(state, pod, table, np.arange(4)).tolist() == expected
    assert reference.scores(policy.document, pod, table.infos, cache) == expected


def test_metric_values_age_out_between_cycles_and_columns_follow_publishes() -> None:
    import numpy as np

    from policyd.nodemetrics import MetricsCache

    now = [100.0]
    cache = MetricsCache(clock=lambda: now[0])
    policy = compiled(scores=[score("l", 1, "minmax", "metric",
                                    {"name": "lat", "prefer": "lowest"})])
    policy.use_metrics(cache)
    cs = ClusterState([make_node("a").obj(), make_node("b").obj()])
    pod = make_pod().obj()

    def vector() -> list[int]:
        table = cs.table()
        state = CycleState(table.infos, cs)
        assert policy.pre_score(state, pod, table.infos) is None
        return list(policy.score_vector(state, pod, table, np.arange(2)).tolist())

    assert vector() == [0, 0]  # nothing published yet
    cache.update("lat", {"a": 5, "b": 50}, max_age=30, timestamp=100.0)
    assert vector() == [100, 0]
    cache.update("lat", {"b": 1}, max_age=30, timestamp=110.0)  # a keeps its older value
    now[0] = 120.0
    assert vector() == [0, 100]
    now[0] = 131.0  # a's value (t=100) is 31 s old: missing
    assert vector() == [0, 100]
    now[0] = 141.0  # both aged out
    assert vector() == [0, 0]


def test_metric_rule_snapshot_is_taken_once_per_cycle() -> None:
    """A publish between PreScore and NormalizeScore does not mix two snapshots."""
    from policyd.nodemetrics import MetricsCache

    cache = MetricsCache(clock=lambda: 100.0)
    cache.update("lat", {"a": 5, "b": 50}, max_age=30, timestamp=100.0)
    policy = compiled(scores=[score("l", 1, "minmax", "metric",
                                    {"name": "lat", "prefer": "lowest"})])
    policy.use_metrics(cache)
    infos, state = cluster([make_node("a").obj(), make_node("b").obj()])
    pod = make_pod().obj()
    assert policy.pre_score(state, pod, infos) is None
    cache.update("lat", {"a": 500, "b": 1}, max_age=30, timestamp=100.0)
    scores = [policy.score(state, pod, i) for i in infos]
    policy.normalize_score(state, pod, infos, scores)
    assert scores == [100, 0]


def test_metric_names_and_unattached_policies_read_nothing() -> None:
    policy = compiled(scores=[score("l", 1, "minmax", "metric",
                                    {"name": "lat", "prefer": "lowest",
                                     "missing": "neutral"})])
    assert policy.metric_names == ("lat",)
    assert run_scores(policy, make_pod().obj(), [make_node("a").obj()]) == [50]
