"""The JSON Schema: the committed file is the generated one, examples are valid, and
schema problems are readable and placed at the right key or value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from policyd.policy.policy_schema import SCHEMA
from policyd.sourcefile import load_file
from tests.unit.policy.conftest import check_docs, check_texts, errors, make_policy, rules

ROOT = Path(__file__).resolve().parents[3]


def test_committed_schema_is_generated_from_the_code() -> None:
    committed = json.loads((ROOT / "schemas" / "policy.schema.json").read_text())
    assert committed == SCHEMA, \
        "run: python -m policyd.policy.policy_schema > schemas/policy.schema.json"


def test_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


EXAMPLES = sorted((ROOT / "policies").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_validate_and_reference_the_schema(path: Path) -> None:
    assert path.read_text().startswith(
        "# yaml-language-server: $schema=../schemas/policy.schema.json\n")
    src = load_file(path)
    assert src.problems == []
    for doc in src.documents:
        assert list(Draft202012Validator(SCHEMA).iter_errors(doc.data)) == []


def test_unknown_field_points_at_the_key_and_suggests() -> None:
    text = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: p
spec:
  pluginName: P
  filter:
    - id: a
"""
    result = check_texts(text)
    [p] = errors(result.problems)
    assert (p.rule, p.line, p.column, p.path) == ("schema", 7, 3, "spec.filter")
    assert "unknown field 'filter'" in p.message and "did you mean 'filters'" in p.message


def test_one_of_shows_what_is_needed_not_every_branch() -> None:
    doc = make_policy(filters=[{"id": "a", "message": "m"}])
    [p] = check_docs(doc).problems
    assert p.path == "spec.filters[0]"
    assert p.message.startswith("set exactly one of annotationToNodeLabel, nodeLabels")

    doc = make_policy(filters=[{"id": "a", "message": "m", "maxPodsPerNode": 1,
                                "jmespath": "node"}])
    [p] = check_docs(doc).problems
    assert p.message.endswith("found maxPodsPerNode and jmespath")


def test_nested_one_of_uses_the_best_match() -> None:
    doc = make_policy(scores=[{"id": "s", "weight": 1, "normalize": "minmax",
                               "numeric": {"label": "x", "prefer": "fastest"}}])
    problems = check_docs(doc).problems
    assert [(p.path, p.message) for p in problems] == [
        ("spec.scores[0].numeric.prefer", "'fastest' is not one of: highest, lowest")]


@pytest.mark.parametrize(("spec", "expected"), [
    ({"pluginName": "lowerCase"}, [("schema", "spec.pluginName")]),
    ({"pluginName": "Has-Dash"}, [("schema", "spec.pluginName")]),
    ({"pluginName": "Ok", "weight": 0}, [("schema", "spec.weight")]),
    ({"pluginName": "Ok", "scores": [{"id": "s", "weight": 101, "normalize": "none",
                                      "jmespath": "`1`"}]}, [("schema", "spec.scores[0].weight")]),
    ({"pluginName": "Ok", "scores": [{"id": "s", "weight": 5, "jmespath": "`1`"}]},
     [("schema", "spec.scores[0]")]),
    ({"pluginName": "Ok", "filters": [{"id": "Bad_Id", "message": "m", "maxPodsPerNode": 1}]},
     [("schema", "spec.filters[0].id")]),
    ({"pluginName": "Ok", "filters": [{"id": "a", "message": "m", "maxPodsPerNode": 0}]},
     [("schema", "spec.filters[0].maxPodsPerNode")]),
    ({"pluginName": "Ok", "filters": [{"id": "a", "message": "m",
                                       "headroom": {"resource": "cpu", "percent": 150}}]},
     [("schema", "spec.filters[0].headroom.percent")]),
    ({"pluginName": "Ok", "filters": [{"id": "a", "message": "",
                                       "maxPodsPerNode": 1}]},
     [("schema", "spec.filters[0].message")]),
    # metric rules: a metric name, a direction, what missing values score
    ({"pluginName": "Ok", "scores": [{"id": "m", "weight": 1, "normalize": "minmax",
                                      "metric": {"name": "latency-ms", "prefer": "lowest"}}]},
     [("schema", "spec.scores[0].metric.name")]),
    ({"pluginName": "Ok", "scores": [{"id": "m", "weight": 1, "normalize": "minmax",
                                      "metric": {"name": "latency_ms"}}]},
     [("schema", "spec.scores[0].metric")]),
    ({"pluginName": "Ok", "scores": [{"id": "m", "weight": 1, "normalize": "minmax",
                                      "metric": {"name": "l", "prefer": "lowest",
                                                 "missing": "zero"}}]},
     [("schema", "spec.scores[0].metric.missing")]),
    ({"pluginName": "Ok", "scores": [{"id": "m", "weight": 1, "normalize": "minmax",
                                      "reverse": True,
                                      "metric": {"name": "l", "prefer": "lowest"}}]},
     [("schema", "spec.scores[0].reverse")]),
    ({"pluginName": "Ok", "scores": [{"id": "m", "weight": 1, "normalize": "minmax",
                                      "metric": {"name": "l", "prefer": "lowest",
                                                 "missing": "skip"}}]},
     []),
])
def test_schema_problems(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    doc = make_policy(**spec)
    doc["spec"]["pluginName"] = spec["pluginName"]
    assert rules(check_docs(doc).problems) == expected


def test_missing_and_wrong_top_level_fields() -> None:
    text = "apiVersion: policyd.io/v1\nkind: SchedulingPolicy\nspec: {pluginName: P}\n"
    problems = errors(check_texts(text).problems)
    assert sorted((p.rule, p.path, p.line) for p in problems) == [
        ("schema", "", 1), ("schema", "apiVersion", 1)]
    assert any("missing required field 'metadata'" in p.message for p in problems)


def test_type_errors_read_well() -> None:
    doc = make_policy(filters="nope")
    [p] = check_docs(doc).problems
    assert p.message == "must be a list, not a string"


# -- numbers at their limits (issue 26, class 2) ----------------------------------------

_LIMIT_CASES = [
    # (spec or metadata fragment, the path refused, the bound the message names)
    ({"filters": [{"id": "cap", "message": "m", "maxPodsPerNode": 2**31}]},
     "spec.filters[0].maxPodsPerNode", "[1..2147483647]"),
    ({"scores": [{"id": "s", "weight": 1, "normalize": "max",
                  "labelValue": {"label": "d", "values": {"a": 1e308}}}]},
     "spec.scores[0].labelValue.values.a", "[0..9007199254740992]"),
    ({"scores": [{"id": "s", "weight": 1, "normalize": "max",
                  "labelValue": {"label": "d", "values": {"a": 1}, "default": 2**53 + 1}}]},
     "spec.scores[0].labelValue.default", "[0..9007199254740992]"),
    ({"weight": 2**31}, "spec.weight", "[1..100]"),
    ({"scores": [{"id": "s", "weight": 2**63, "normalize": "max",
                  "numeric": {"label": "d"}}]}, "spec.scores[0].weight", "[1..100]"),
]


@pytest.mark.parametrize(("spec", "path", "bound"), _LIMIT_CASES,
                         ids=[c[1] for c in _LIMIT_CASES])
def test_numbers_beyond_their_bounds_are_refused(spec: dict[str, Any], path: str,
                                                 bound: str) -> None:
    doc = make_policy(**{"filters": [{"id": "f", "message": "m", "maxPodsPerNode": 1}],
                         **spec})
    result = check_docs(doc)
    assert rules(result.problems) == [("schema", path)], result.problems
    assert bound in errors(result.problems)[0].message
    assert result.compiled == []


@pytest.mark.parametrize(("field", "value", "ok"), [
    ("generation", 2**63 - 1, True), ("generation", 2**63, False),
    ("generation", -(2**63) - 1, False), ("deletionGracePeriodSeconds", 2**63, False),
])
def test_server_set_integers_are_int64(field: str, value: int, ok: bool) -> None:
    doc = make_policy(filters=[{"id": "f", "message": "m", "maxPodsPerNode": 2**31 - 1}])
    doc["metadata"][field] = value
    result = check_docs(doc)
    assert rules(result.problems) == ([] if ok else [("schema", f"metadata.{field}")])
