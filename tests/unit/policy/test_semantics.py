"""Semantic checks: Kubernetes names, JMESPath, quantities, contradictions, duplicates
and case traps. Cases compare (rule, path), not wording."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.model import k8snames
from tests.unit.policy.conftest import check_docs, check_texts, make_policy, rules


def f(rule_id: str = "r", **kind: Any) -> dict[str, Any]:
    return {"id": rule_id, "message": "m", **kind}


def s(rule_id: str = "s", normalize: str = "none", **kind: Any) -> dict[str, Any]:
    return {"id": rule_id, "weight": 10, "normalize": normalize, **kind}


def node_labels(*exprs: tuple[str, str, list[str]]) -> dict[str, Any]:
    return {"nodeLabels": {"matchExpressions": [
        {"key": k, "operator": op, **({"values": v} if v else {})} for k, op, v in exprs]}}


P = "spec.filters[0]"

CASES: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    ("valid policy", {"filters": [f(**node_labels(("env", "In", ["prod"])))]}, []),
    ("label key with space", {"filters": [f(nodeLabels={"matchLabels": {"bad key": "v"}})]},
     [("label-key", f'{P}.nodeLabels.matchLabels["bad key"]')]),
    ("label key uppercase prefix",
     {"filters": [f(**node_labels(("Example.com/x", "Exists", [])))]},
     [("label-key", f"{P}.nodeLabels.matchExpressions[0].key")]),
    ("label key too long", {"filters": [f(**node_labels(("a" * 64, "Exists", [])))]},
     [("label-key", f"{P}.nodeLabels.matchExpressions[0].key")]),
    ("label key two slashes", {"filters": [f(**node_labels(("a/b/c", "Exists", [])))]},
     [("label-key", f"{P}.nodeLabels.matchExpressions[0].key")]),
    ("label value with slash", {"filters": [f(**node_labels(("env", "In", ["a/b"])))]},
     [("label-value", f"{P}.nodeLabels.matchExpressions[0].values[0]")]),
    ("label value too long", {"filters": [f(**node_labels(("env", "In", ["v" * 64])))]},
     [("label-value", f"{P}.nodeLabels.matchExpressions[0].values[0]")]),
    ("Gt needs an integer", {"filters": [f(**node_labels(("cores", "Gt", ["many"])))]},
     [("label-value", f"{P}.nodeLabels.matchExpressions[0].values[0]")]),
    ("In needs values", {"filters": [f(**node_labels(("env", "In", [])))]},
     [("schema", f"{P}.nodeLabels.matchExpressions[0].values")]),
    ("Exists takes no values", {"filters": [f(**node_labels(("env", "Exists", ["x"])))]},
     [("schema", f"{P}.nodeLabels.matchExpressions[0].values")]),
    ("In and NotIn the same value",
     {"filters": [f(**node_labels(("env", "In", ["prod"]), ("env", "NotIn", ["prod"])))]},
     [("never-matches", f"{P}.nodeLabels.matchExpressions[1]")]),
    ("disjoint In lists",
     {"filters": [f(**node_labels(("env", "In", ["a"]), ("env", "In", ["b"])))]},
     [("never-matches", f"{P}.nodeLabels.matchExpressions[1]")]),
    ("Exists and DoesNotExist",
     {"filters": [f(**node_labels(("gpu", "Exists", []), ("gpu", "DoesNotExist", [])))]},
     [("never-matches", f"{P}.nodeLabels.matchExpressions[1]")]),
    ("matchLabels and DoesNotExist",
     {"filters": [f(nodeLabels={"matchLabels": {"gpu": "a"}, "matchExpressions": [
         {"key": "gpu", "operator": "DoesNotExist"}]})]},
     [("never-matches", f"{P}.nodeLabels.matchExpressions[0]")]),
    ("Gt 5 and Lt 6", {"filters": [f(**node_labels(("n", "Gt", ["5"]), ("n", "Lt", ["6"])))]},
     [("never-matches", f"{P}.nodeLabels.matchExpressions[1]")]),
    ("Gt 5 and Lt 7 is satisfiable",
     {"filters": [f(**node_labels(("n", "Gt", ["5"]), ("n", "Lt", ["7"])))]}, []),
    ("In outside Gt bound",
     {"filters": [f(**node_labels(("n", "In", ["1", "2"]), ("n", "Gt", ["5"])))]},
     [("never-matches", f"{P}.nodeLabels.matchExpressions[1]")]),
    ("NotIn on another key is fine",
     {"filters": [f(**node_labels(("a", "In", ["x"]), ("b", "NotIn", ["x"])))]}, []),
    ("selector that never applies",
     {"appliesTo": {"labelSelector": {"matchLabels": {"app": "a"}, "matchExpressions": [
         {"key": "app", "operator": "NotIn", "values": ["a"]}]}},
      "filters": [f(maxPodsPerNode=1)]},
     [("never-matches", "spec.appliesTo.labelSelector.matchExpressions[0]")]),
    ("a NotIn before the In it empties",
     {"appliesTo": {"labelSelector": {"matchExpressions": [
         {"key": "app", "operator": "NotIn", "values": ["a", "b"]},
         {"key": "app", "operator": "In", "values": ["b", "a"]}]}},
      "filters": [f(maxPodsPerNode=1)]},
     [("never-matches", "spec.appliesTo.labelSelector.matchExpressions[0]")]),
    ("a NotIn before an In it narrows is fine",
     {"appliesTo": {"labelSelector": {"matchExpressions": [
         {"key": "app", "operator": "NotIn", "values": ["a"]},
         {"key": "app", "operator": "In", "values": ["b", "a"]}]}},
      "filters": [f(maxPodsPerNode=1)]}, []),
    ("a DoesNotExist before the Exists",
     {"appliesTo": {"labelSelector": {"matchExpressions": [
         {"key": "app", "operator": "DoesNotExist"},
         {"key": "app", "operator": "Exists"}]}},
      "filters": [f(maxPodsPerNode=1)]},
     [("never-matches", "spec.appliesTo.labelSelector.matchExpressions[1]")]),
    ("every included namespace excluded",
     {"appliesTo": {"namespaces": {"include": ["a"], "exclude": ["a", "b"]}},
      "filters": [f(maxPodsPerNode=1)]},
     [("never-matches", "spec.appliesTo.namespaces.include")]),
    ("bad namespace name",
     {"appliesTo": {"namespaces": {"include": ["Prod"]}}, "filters": [f(maxPodsPerNode=1)]},
     [("namespace", "spec.appliesTo.namespaces.include[0]")]),
    ("bad annotation key",
     {"appliesTo": {"annotationSelector": {"matchAnnotations": {"a b": "x"}}},
      "filters": [f(maxPodsPerNode=1)]},
     [("annotation-key", 'spec.appliesTo.annotationSelector.matchAnnotations["a b"]')]),
    ("invalid condition", {"appliesTo": {"condition": "metadata.[x"},
                           "filters": [f(maxPodsPerNode=1)]},
     [("jmespath", "spec.appliesTo.condition")]),
    ("unknown JMESPath function", {"filters": [f(jmespath="frobnicate(node)")]},
     [("jmespath", f"{P}.jmespath")]),
    ("wrong arity", {"filters": [f(jmespath="quantity(node.a, node.b)")]},
     [("jmespath", f"{P}.jmespath")]),
    ("policyd functions are known",
     {"filters": [f(jmespath="quantity(label(node, 'mem')) > `1`")]}, []),
    ("bad quantity", {"filters": [f(headroom={"resource": "memory", "quantity": "1GB"})]},
     [("quantity", f"{P}.headroom.quantity")]),
    ("negative quantity", {"filters": [f(headroom={"resource": "memory", "quantity": "-1Gi"})]},
     [("quantity", f"{P}.headroom.quantity")]),
    ("bad resource name", {"filters": [f(headroom={"resource": "my gpu", "percent": 5})]},
     [("resource-name", f"{P}.headroom.resource")]),
    ("annotation rule needs a label value",
     {"filters": [f(annotationToNodeLabel={"annotation": "a", "label": "b"})]},
     [("schema", f"{P}.annotationToNodeLabel")]),
    ("annotation rule with both", {"filters": [f(annotationToNodeLabel={
        "annotation": "a", "label": "b", "labelValue": "x", "useAnnotationValue": True})]},
     [("schema", f"{P}.annotationToNodeLabel.useAnnotationValue")]),
    ("invalid label value to require", {"filters": [f(annotationToNodeLabel={
        "annotation": "a", "label": "b", "labelValue": "not valid!"})]},
     [("label-value", f"{P}.annotationToNodeLabel.labelValue")]),
    ("duplicate rule ids", {"filters": [f("a", maxPodsPerNode=1)],
                            "scores": [s("a", labelValue={"label": "x", "values": {}})]},
     [("duplicate-id", "spec.scores[0].id")]),
    ("numeric with reverse", {"scores": [s(normalize="minmax", reverse=True,
                                           numeric={"label": "x"})]},
     [("schema", "spec.scores[0].reverse")]),
    ("duplicate allocation resource",
     {"scores": [s(allocation={"strategy": "least", "resources": [
         {"name": "cpu"}, {"name": "cpu"}]})]},
     [("duplicate-id", "spec.scores[0].allocation.resources[1].name")]),
    ("invalid score label value key",
     {"scores": [s(labelValue={"label": "tier", "values": {"not ok!": 5}})]},
     [("label-value", 'spec.scores[0].labelValue.values["not ok!"]')]),
]


@pytest.mark.parametrize(("name", "spec", "expected"), CASES, ids=[c[0] for c in CASES])
def test_semantic_errors(name: str, spec: dict[str, Any],
                         expected: list[tuple[str, str]]) -> None:
    result = check_docs(make_policy(**spec))
    assert rules(result.problems) == sorted(expected)
    assert bool(result.compiled) == (not expected)


WARNINGS: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    ("points over 100 with none",
     {"scores": [s(labelValue={"label": "tier", "values": {"gold": 500}})]},
     [("score-range", "spec.scores[0].normalize")]),
    ("allocation stretched by minmax",
     {"scores": [s(normalize="minmax", allocation={"strategy": "least"})]},
     [("score-range", "spec.scores[0].normalize")]),
    ("well-known key with wrong case",
     {"filters": [f(**node_labels(("kubernetes.io/HostName", "Exists", [])))]},
     [("key-case", f"{P}.nodeLabels.matchExpressions[0].key")]),
    ("two spellings of one key",
     {"appliesTo": {"labelSelector": {"matchLabels": {"Env": "prod"}}},
      "filters": [f(**node_labels(("env", "In", ["prod"])))]},
     [("key-case", 'spec.appliesTo.labelSelector.matchLabels.Env'),
      ("key-case", f"{P}.nodeLabels.matchExpressions[0].key")]),
    ("extended resource that is native",
     {"filters": [f(requireExtendedResource={"name": "memory"})]},
     [("resource-name", f"{P}.requireExtendedResource.name")]),
    ("policy that does nothing", {}, [("useless-policy", "spec")]),
]


@pytest.mark.parametrize(("name", "spec", "expected"), WARNINGS, ids=[c[0] for c in WARNINGS])
def test_warnings(name: str, spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    result = check_docs(make_policy(**spec))
    assert rules(result.problems, warnings=True) == sorted(expected)
    assert all(p.level == "warning" for p in result.problems)
    assert len(result.compiled) == 1  # warnings do not stop compilation


def test_cross_file_duplicates_and_case() -> None:
    a = make_policy("one", "Alpha", filters=[f(**node_labels(("env", "In", ["a"])))])
    b = make_policy("one", "Alpha", filters=[f(**node_labels(("Env", "In", ["a"])))])
    c = make_policy("three", "ALPHA", filters=[f(maxPodsPerNode=1)])
    d = make_policy("four", "NodeAffinity", filters=[f(maxPodsPerNode=1)])
    result = check_docs(a, b, c, d)
    got = sorted((p.file, p.rule, p.path, p.level) for p in result.problems)
    assert got == [
        ("f0.yaml", "key-case", "spec.filters[0].nodeLabels.matchExpressions[0].key", "warning"),
        ("f1.yaml", "duplicate-name", "metadata.name", "error"),
        ("f1.yaml", "duplicate-plugin-name", "spec.pluginName", "error"),
        ("f1.yaml", "key-case", "spec.filters[0].nodeLabels.matchExpressions[0].key", "warning"),
        ("f2.yaml", "key-case", "spec.pluginName", "warning"),
        ("f3.yaml", "builtin-plugin-name", "spec.pluginName", "error"),
    ]
    assert sorted(p.name for p in result.compiled) == ["ALPHA", "Alpha"]
    dup = next(p for p in result.problems if p.rule == "duplicate-name")
    assert "f0.yaml:" in dup.message


def test_jmespath_error_points_into_the_expression() -> None:
    text = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  pluginName: P
  filters:
    - id: a
      message: m
      jmespath: "node.metadata.labels.[x"
"""
    [p] = check_texts(text).problems
    assert (p.rule, p.line) == ("jmespath", 9)
    # The value starts at column 17 (the quote); the expression ends too early, at
    # offset 23, just after the quote's content.
    assert p.column == 17 + 1 + 23
    assert p.detail == ("node.metadata.labels.[x", " " * 23 + "^")


def test_kind_and_shape_of_documents() -> None:
    result = check_texts("- a list\n", "kind: Deployment\n",
                         "kind: PolicyTest\napiVersion: x\n")
    assert sorted((p.file, p.rule) for p in result.problems) == [
        ("f0.yaml", "not-a-policy"), ("f1.yaml", "not-a-policy")]


@pytest.mark.parametrize(("key", "ok"), [
    ("env", True), ("Env", True), ("example.com/x", True), ("a.b-c_d", True),
    ("kubernetes.io/hostname", True), ("", False), ("-a", False), ("a-", False),
    ("EXAMPLE.com/x", False), ("/x", False), ("a/", False), ("x" * 63, True),
    ("x" * 64, False), ("a" * 254 + "/b", False),
])
def test_qualified_name(key: str, ok: bool) -> None:
    assert (k8snames.qualified_name(key) == []) is ok


@pytest.mark.parametrize(("value", "ok"), [
    ("", True), ("prod", True), ("Prod-1.x_y", True), ("-a", False), ("a b", False),
    ("v" * 63, True), ("v" * 64, False),
])
def test_label_value(value: str, ok: bool) -> None:
    assert (k8snames.label_value(value) == []) is ok


def test_infinity_and_nan_are_errors() -> None:
    text = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  pluginName: P
  filters:
    - {id: a, message: m, headroom: {resource: memory, percent: .nan}}
  scores:
    - {id: s, weight: 1, normalize: max, labelValue: {label: t, values: {a: .inf}}}
"""
    result = check_texts(text)
    assert rules(result.problems) == [
        ("number", "spec.filters[0].headroom.percent"),
        ("number", "spec.scores[0].labelValue.values.a")]
    assert result.compiled == []


# Every in-tree plugin name of kube-scheduler v1.36 (pkg/scheduler/framework/plugins/
# names/names.go), implemented by policyd or not.
UPSTREAM_V136 = [
    "PrioritySort", "DefaultBinder", "DefaultPreemption", "DynamicResources",
    "GangScheduling", "ImageLocality", "InterPodAffinity", "NodeAffinity",
    "NodeDeclaredFeatures", "NodeName", "NodePorts", "NodeResourcesBalancedAllocation",
    "NodeResourcesFit", "NodeUnschedulable", "NodeVolumeLimits", "PodTopologySpread",
    "SchedulingGates", "TaintToleration", "VolumeBinding", "VolumeRestrictions",
    "VolumeZone", "TopologyPlacementGenerator", "PodGroupPodsCount",
]


@pytest.mark.parametrize("name", UPSTREAM_V136)
def test_every_kube_scheduler_plugin_name_is_reserved(name: str) -> None:
    result = check_docs(make_policy("p", name, filters=[f(maxPodsPerNode=1)]))
    [problem] = result.problems
    assert (problem.rule, problem.path, problem.level) == (
        "builtin-plugin-name", "spec.pluginName", "error")
    assert repr(name) in problem.message
    assert result.compiled == []


def test_a_reserved_upstream_name_says_why() -> None:
    result = check_docs(make_policy("p", "DefaultBinder", filters=[f(maxPodsPerNode=1)]))
    [problem] = result.problems
    assert "kube-scheduler plugin" in problem.message and "another name" in problem.message


def test_names_close_to_upstream_ones_are_free() -> None:
    for name in ("VolumeBindingPolicy", "MyDefaultBinder", "GangSchedulingLite"):
        assert check_docs(make_policy("p", name, filters=[f(maxPodsPerNode=1)])).problems == []


FM = f"{P}.message"


@pytest.mark.parametrize(("message", "expected"), [
    ("node(s) had no GPU", []),
    ("node(s) had no GPU,TPU", []),  # no space: not the reasons separator
    ("line one\nline two", [("message", FM, "error")]),
    ("windows\r\nline", [("message", FM, "error")]),
    ("unicode\u2028separator", [("message", FM, "error")]),
    ("ends with a newline\n", [("message", FM, "error")]),  # a YAML `|` block
    ("no GPU, no TPU", [("message", FM, "warning")]),
    (" leading space", [("message", FM, "warning")]),
    ("trailing tab\t", [("message", FM, "warning")]),
    ("both, and trailing ", [("message", FM, "warning"), ("message", FM, "warning")]),
])
def test_filter_messages_that_break_the_one_line_event(
        message: str, expected: list[tuple[str, str, str]]) -> None:
    result = check_docs(make_policy(filters=[f(message=message, maxPodsPerNode=1)]))
    assert sorted((p.rule, p.path, p.level) for p in result.problems) == expected
    assert all("message" in p.message for p in result.problems)


def test_a_block_scalar_message_is_reported_at_its_line() -> None:
    text = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  pluginName: P
  filters:
    - id: a
      maxPodsPerNode: 1
      message: |
        node(s) are full
"""
    [p] = check_texts(text).problems
    assert (p.rule, p.level, p.line, p.path) == ("message", "error", 9, FM)
