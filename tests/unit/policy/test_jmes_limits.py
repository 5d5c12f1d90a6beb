"""JMESPath expressions nested beyond the limits are lint problems, never a
RecursionError: not in lint, not when compiling, not when evaluating on deep data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policyd.model.records import node_from_dict
from policyd.policy import jmes
from policyd.policy.rules.filters.jmespath import JmesFilter
from policyd.policy.rules.scores.jmespath import JmesScore
from tests.builders import make_node, make_pod
from tests.unit.policy.conftest import check_docs, make_policy

DEEP = 3000

# Every way to nest: brackets of each kind, prefix operators, calls, projections,
# filters, literals, and the binary chains the parser builds into deep trees.
DEEP_EXPRESSIONS = {
    "parentheses": "(" * DEEP + "pod" + ")" * DEEP,
    "not": "!" * DEEP + "pod",
    "not with parentheses": "!(" * DEEP + "pod" + ")" * DEEP,
    "brackets": "[" * DEEP + "pod" + "]" * DEEP,
    "braces": "{a: " * DEEP + "pod" + "}" * DEEP,
    "function calls": "length(" * DEEP + "pod" + ")" * DEEP,
    "expression references": "& " * DEEP + "pod",
    "nested filters": "pod[?" * DEEP + "a" + "]" * DEEP,
    "projection chain": "pod" + "[*]" * DEEP,
    "filter chain": "pod" + "[?a]" * DEEP,
    "flatten chain": "pod" + "[]" * DEEP,
    "or chain": " || ".join(["pod"] * DEEP),
    "and chain": " && ".join(["pod"] * DEEP),
    "pipe chain": " | ".join(["pod"] * DEEP),
    "comparison chain": " && ".join(["pod.a != `1`"] * DEEP),
    "json literal": "`" + "[" * DEEP + "]" * DEEP + "`",
}


@pytest.mark.parametrize("source", DEEP_EXPRESSIONS.values(), ids=DEEP_EXPRESSIONS.keys())
def test_deep_expressions_are_one_problem(source: str) -> None:
    [error] = jmes.check(source)
    assert "nests deeper than" in error.message
    assert 0 <= error.offset < len(source)
    with pytest.raises(jmes.ExpressionTooDeep):
        jmes.Expression(source)


@pytest.mark.parametrize("source", [
    "pod.metadata.labels.app == 'web' && !contains(['a', 'b'], node.metadata.name)",
    ".".join(["a"] * DEEP),  # the parser keeps dotted chains flat
    "pod" + "[0]" * DEEP,  # and index chains
    "(" * 30 + "pod" + ")" * 30,
    " || ".join(["pod"] * 100),
    "'" + "(" * DEEP + "'",  # inside a raw string nothing nests
    '"' + "(" * DEEP + '"',  # nor inside a quoted identifier
    "pod.a != node.b && node.c != pod.d",  # != and && are not prefix operators
])
def test_long_but_shallow_expressions_pass(source: str) -> None:
    assert jmes.check(source) == []
    jmes.Expression(source)


def test_the_lexical_limit_is_exact_and_points_at_the_first_level_too_many() -> None:
    assert jmes.check("!" * jmes.MAX_NESTING + "pod") == []
    [error] = jmes.check("!" * (jmes.MAX_NESTING + 1) + "pod")
    assert error.offset == jmes.MAX_NESTING
    assert f"nests deeper than {jmes.MAX_NESTING} levels" in error.message


def test_the_caret_of_a_long_expression_is_cut_around_the_error() -> None:
    source = "(" * DEEP + "pod" + ")" * DEEP
    [error] = jmes.check(source)
    text, caret = error.caret()
    assert len(text) < 200 and text.startswith("...") and text.endswith("...")
    assert text[len(caret) - 1] == "("


# Expressions that the YAML layer itself lets through (no flow brackets).
YAML_SAFE = [k for k in ("parentheses", "not", "function calls", "or chain", "pipe chain",
                         "expression references", "comparison chain")]


@pytest.mark.parametrize("kind", YAML_SAFE)
@pytest.mark.parametrize("where", ["filter", "score", "condition"])
def test_lint_reports_deep_expressions_where_they_are(kind: str, where: str) -> None:
    source = DEEP_EXPRESSIONS[kind]
    if where == "filter":
        spec: dict[str, Any] = {"filters": [{"id": "f", "message": "m", "jmespath": source}]}
        path = "spec.filters[0].jmespath"
    elif where == "score":
        spec = {"scores": [{"id": "s", "weight": 1, "normalize": "none",
                            "jmespath": source}]}
        path = "spec.scores[0].jmespath"
    else:
        spec = {"appliesTo": {"condition": source},
                "filters": [{"id": "f", "message": "m", "maxPodsPerNode": 1}]}
        path = "spec.appliesTo.condition"
    result = check_docs(make_policy(**spec))
    [problem] = result.problems
    assert (problem.rule, problem.path, problem.level) == ("jmespath", path, "error")
    assert problem.line > 0 and problem.column > 0
    assert result.compiled == []


def _deep_data(depth: int) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for _ in range(depth):
        data = {"a": [data]}
    return data


@pytest.mark.parametrize("source", [
    "to_string(node)", "node == pod", "length(to_string(node.spec)) > `0`",
    "contains(values(node), pod)", "sort_by([node, node], &to_string(@))[0] != `null`",
])
def test_evaluation_on_deep_data_rejects_the_node_instead_of_crashing(source: str) -> None:
    raw = make_node("n").raw()
    raw["metadata"]["labels"] = {"x": "y"}
    raw["spec"] = {"deep": _deep_data(DEEP)}
    node = node_from_dict(raw)
    pod = make_pod("p").obj()
    from policyd.model.cluster import ClusterState

    [info] = ClusterState([node], []).node_infos()
    rule = JmesFilter("f", "m", source)
    check = rule.bind(None, pod)  # type: ignore[arg-type]
    assert check is not None and check(info) is False
    score = JmesScore({"id": "s", "weight": 1, "normalize": "none", "jmespath": source})
    assert score.bind(pod)(info) is None


def test_explain_and_simulate_report_the_deep_policy_exit_2(tmp_path: Path) -> None:
    policy = tmp_path / "deep.yaml"
    policy.write_text(f"""\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {{name: deep}}
spec:
  pluginName: Deep
  filters:
  - id: f
    message: m
    jmespath: "{DEEP_EXPRESSIONS['not']}"
""")
    root = Path(__file__).resolve().parents[3]
    for command in ("simulate", "explain"):
        args = [sys.executable, "-m", "policyd", command, "--cluster",
                str(root / "demo/cluster.yaml"), "--pods", str(root / "demo/pods.yaml"),
                "--policies", str(policy)]
        if command == "explain":
            args += ["--pod", "jobs/huge"]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=root)
        assert proc.returncode == 2, proc.stderr
        assert "nests deeper than" in proc.stderr and "internal error" not in proc.stderr
