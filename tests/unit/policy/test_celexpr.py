"""CEL in policies: which fields an expression reads, the views built from them, and
lint's problems with their positions in the file."""

from __future__ import annotations

import random
from typing import Any

import pytest
from ruamel.yaml import YAML

from policyd.cel import CelRuntimeError
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict, pod_from_dict
from policyd.policy import celexpr, reference
from policyd.policy.compiler import compile_policy
from policyd.policy.rules.filters import schemas as filters
from policyd.policy.rules.scores import schemas as scores
from tests.builders import make_node, make_pod
from tests.gen.policies import CEL_FILTERS, CEL_SCORES, policy_node, policy_pod
from tests.unit.policy.conftest import check_docs, check_texts, make_policy


def _paths(expression: str) -> dict[str, set[tuple[str, ...]]]:
    return {k: set(v) for k, v in celexpr.paths(celexpr.compile_cel(expression).ast).items()}


@pytest.mark.parametrize(("expression", "expected"), [
    ('node.labels["tier"] == pod.annotations["myorg.io/tier"]',
     {"node": {("labels", "tier")}, "pod": {("annotations", "myorg.io/tier")}}),
    ("node.status.allocatable.cpu", {"node": {("status", "allocatable", "cpu")}}),
    # Optional selects and indexes, has(): constant keys all the way.
    ('node.?spec.taints.orValue([]) == [] && node.labels[?"a"].hasValue()',
     {"node": {("spec", "taints"), ("labels", "a")}}),
    ("has(node.metadata.labels.zone)", {"node": {("metadata", "labels", "zone")}}),
    # A key that is not a constant string ends the path where it is used.
    ("node.labels[pod.metadata.name] == 'x'",
     {"node": {("labels",)}, "pod": {("metadata", "name")}}),
    ("node.status.conditions[0].type == 'Ready'", {"node": {("status", "conditions")}}),
    ("node.status.images.exists(i, i.sizeBytes > 0)", {"node": {("status", "images")}}),
    # The variable by itself: the whole object.
    ("size(node) > 0", {"node": {()}}),
    ("cel.bind(n, node, n.metadata.name) == 'a'", {"node": {()}}),
    ("1 == 1", {}),
])
def test_paths(expression: str, expected: dict[str, set[tuple[str, ...]]]) -> None:
    assert _paths(expression) == expected


RAW: dict[str, Any] = {"metadata": {"name": "n", "labels": {"tier": "gold", "zone": "a"}},
       "status": {"allocatable": {"cpu": "4", "memory": "1Gi"}, "conditions": [{"t": 1}]}}


@pytest.mark.parametrize(("selected", "view"), [
    ({("labels", "tier")}, {"labels": {"tier": "gold"}}),
    ({("labels", "missing")}, {"labels": {}}),
    ({("annotations",)}, {"annotations": {}}),
    ({("status", "allocatable", "cpu"), ("metadata", "name")},
     {"status": {"allocatable": {"cpu": "4"}}, "metadata": {"name": "n"}}),
    # Selecting inside a list or a scalar keeps it whole: the expression decides.
    ({("status", "conditions", "t")}, {"status": {"conditions": [{"t": 1}]}}),
    ({("spec", "taints")}, {}),
    ({()}, {**RAW, "labels": RAW["metadata"]["labels"], "annotations": {}}),
])
def test_view(selected: set[tuple[str, ...]], view: dict[str, Any]) -> None:
    assert celexpr.view(RAW, frozenset(selected)) == view


@pytest.mark.parametrize("metadata", [None, "x", {"labels": "x"}])
def test_shortcuts_of_a_malformed_object_are_empty(metadata: Any) -> None:
    out = celexpr.with_shortcuts({"metadata": metadata})
    assert (out["labels"], out["annotations"]) == ({}, {})


def _lint(expression: str, section: str = "filters") -> list[celexpr.CelProblem]:
    wanted, what = ((celexpr.FILTER_TYPES, "a filter") if section == "filters"
                    else (celexpr.SCORE_TYPES, "a score"))
    return celexpr.check(expression, wanted, what)


@pytest.mark.parametrize(("expression", "section", "line", "column", "text"), [
    ("node.labels.tier ==", "filters", 1, 20, "invalid CEL: ERROR: <input>:1:20: Syntax "
                                              "error: mismatched input '<EOF>'"),
    ("nodes.labels.tier == 'a'", "filters", 1, 1,
     "invalid CEL: ERROR: <input>:1:1: undeclared reference to 'nodes'"),
    ("node.labels.tier == 'a' &&\n  pod.labels.x = 'b'", "filters", 2, 16,
     "invalid CEL: ERROR: <input>:2:16: Syntax error"),
    ("size(node.labels)", "filters", 0, 0,
     "CEL expression of a filter must give bool, but it gives int"),
    ("node.metadata.name + 'x'", "scores", 0, 0,
     "CEL expression of a score must give double, int or uint, but it gives string"),
    ("node.status.images.all(i, node.status.images.exists(j, i == j))", "filters", 0, 0,
     "CEL expression may be slow: its estimated worst-case cost (about 10^"),
])
def test_lint_problems(expression: str, section: str, line: int, column: int,
                       text: str) -> None:
    [problem] = _lint(expression, section)
    assert (problem.line, problem.column) == (line, column)
    assert problem.message.startswith(text)
    assert "\n" not in problem.message


@pytest.mark.parametrize("expression", [
    *CEL_FILTERS, "node.labels.tier", "has(node.labels.tier)",
    # One pass over the data, even comparing data with data, is allowed.
    'node.status.conditions.exists(c, c.type == "Ready" && c.status == "True")',
    "pod.spec.containers.all(c, c.image != node.metadata.name)",
    # Values drawn from the data are as bounded as the data (cel-go would call an
    # optional's or a map()'s size unbounded).
    "node.?status.images.orValue([]).exists(i, i.sizeBytes > 0)",
    "node.status.images.map(i, i.sizeBytes).exists(s, s > 0)",
    'node.labels.?n.orValue("").matches("^[0-9]+$")',
])
def test_filters_that_lint_clean(expression: str) -> None:
    assert _lint(expression) == []


@pytest.mark.parametrize("expression", CEL_SCORES)
def test_scores_that_lint_clean(expression: str) -> None:
    assert _lint(expression, "scores") == []


POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  pluginName: P
  filters:
    - id: a
      message: m
      cel: %s
"""


@pytest.mark.parametrize(("value", "column"), [
    # The value starts at column 12; the error is at offset 17 of the expression.
    ("node.labels.a == = 'x'", 12 + 17),
    ('"node.labels.a == = \'x\'"', 12 + 1 + 17),  # after the opening quote
])
def test_lint_points_into_a_one_line_expression(value: str, column: int) -> None:
    [p] = check_texts(POLICY % value).problems
    assert (p.rule, p.path, p.line, p.column) == ("cel", "spec.filters[0].cel", 9, column)
    assert p.detail == ("node.labels.a == = 'x'", " " * 17 + "^")


def test_a_block_scalar_problem_is_at_the_key_with_the_line_and_caret() -> None:
    text = POLICY % "|\n        node.labels.a == 'x' &&\n          nodes.x"
    [p] = check_texts(text).problems
    assert (p.rule, p.line) == ("cel", 9)
    assert "<input>:2:3: undeclared reference to 'nodes'" in p.message
    assert p.detail == ("  nodes.x", "  ^")


def test_a_costly_expression_is_a_warning_and_still_compiles() -> None:
    expression = "node.status.images.exists(i, node.status.images.exists(j, i != j))"
    doc = make_policy(filters=[{"id": "f", "message": "m", "cel": expression}])
    [p] = check_docs(doc).problems
    assert (p.rule, p.level, p.detail) == ("cel", "warning", ())
    assert check_docs(doc).compiled


def test_score_rule_type_is_linted() -> None:
    doc = make_policy(scores=[{"id": "s", "weight": 1, "normalize": "none",
                               "cel": "node.labels.tier > 'a'"}])
    [p] = check_docs(doc).problems
    assert (p.rule, p.path) == ("cel", "spec.scores[0].cel")
    assert "must give double, int or uint, but it gives bool" in p.message
    assert p.detail == ()  # the whole expression: no caret


def _example(kind: Any) -> dict[str, Any]:
    [rule] = YAML(typ="safe").load(kind.example)
    return dict(rule)


def test_docs_examples_behave_as_documented() -> None:
    gold = make_node("gold").label("tier", "gold").capacity(memory="32Gi").obj()
    silver = make_node("silver").label("tier", "silver").capacity(memory="8Gi").obj()
    infos = ClusterState([gold, silver], []).node_infos()
    doc = make_policy(filters=[_example(filters.CEL)], scores=[_example(scores.CEL)])
    assert check_docs(doc).problems == []
    policy = compile_policy(doc)
    pod = make_pod("p").annotation("myorg.io/tier", "gold").obj()
    (frule,) = policy.filter_rules
    check = frule.bind(policy, pod)
    assert check is not None
    assert [check(i) for i in infos] == [True, False]
    (srule,) = policy.score_rules
    assert [srule.bind(pod)(i) for i in infos] == [32 * 2.0**30, 8 * 2.0**30]
    # Without the annotation the key is missing: every node is rejected.
    bare = frule.bind(policy, make_pod("q").obj())
    assert bare is not None and [bare(i) for i in infos] == [False, False]


def test_generated_cel_rules_pass_fail_and_error() -> None:
    """The generated rules the differential tests use reach every outcome: a node
    passing, failing on false and failing on an error; a score value and a missing
    one. Reference and compiled rule agree on each."""
    rng = random.Random(7)
    nodes = [node_from_dict(policy_node(rng, f"n{i}")) for i in range(40)]
    infos = ClusterState(nodes, []).node_infos()
    pods = [pod_from_dict(policy_pod(rng, f"p{i}")) for i in range(6)]
    outcomes: set[str] = set()
    for expression in CEL_FILTERS:
        doc = make_policy(filters=[{"id": "f", "message": "m", "cel": expression}])
        policy = compile_policy(doc)
        (rule,) = policy.filter_rules
        for pod in pods:
            check = rule.bind(policy, pod)
            assert check is not None
            for info in infos:
                verdict = check(info)
                ref = reference.filter_node(doc, pod, info)
                assert ref == ([] if verdict else [("m", True)])
                try:
                    outcomes.add(str(celexpr.compile_cel(expression).evaluate(
                        reference._cel_objects(pod, info))))
                except CelRuntimeError:
                    outcomes.add("error")
    assert {"True", "False", "error"} <= outcomes
    values: set[bool] = set()
    for expression in CEL_SCORES:
        score = compile_policy(make_policy(scores=[{"id": "s", "weight": 1,
                                                   "normalize": "none",
                                                   "cel": expression}])).score_rules[0]
        for pod in pods:
            values.update(score.bind(pod)(info) is None for info in infos)
    assert values == {True, False}
