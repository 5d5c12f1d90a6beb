"""Each rule kind's declaration (policyd/policy/rules/*/schemas.py) is what the schema,
the registry and the docs are built from: its example is a valid rule of that kind, and
the schema holds its fragment under its name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from ruamel.yaml import YAML

from policyd.policy.compiler import compile_policy
from policyd.policy.policy_schema import SCHEMA
from policyd.policy.rules.filters import schemas as filters
from policyd.policy.rules.kinds import FILTER_RULES, SCORE_RULES
from policyd.policy.rules.scores import schemas as scores
from policyd.policy.schema_parts import RuleKind
from tests.unit.policy.conftest import check_docs, make_policy


def _example(kind: RuleKind) -> dict[str, Any]:
    rules = YAML(typ="safe").load(kind.example)
    assert isinstance(rules, list) and len(rules) == 1, kind.example
    rule: dict[str, Any] = rules[0]
    assert kind.name in rule, f"the {kind.name} example is a rule of another kind"
    return rule


def _section(section: str) -> dict[str, Any]:
    rule: dict[str, Any] = SCHEMA["properties"]["spec"]["properties"][section]["items"]
    return rule


@pytest.mark.parametrize(("section", "kind", "registry"), [
    *(pytest.param("filters", k, FILTER_RULES, id=f"filter-{k.name}") for k in filters.KINDS),
    *(pytest.param("scores", k, SCORE_RULES, id=f"score-{k.name}") for k in scores.KINDS)])
def test_example_lints_clean_and_compiles_to_its_class(
        section: str, kind: RuleKind, registry: Mapping[str, object]) -> None:
    rules: dict[str, Any] = {section: [_example(kind)]}
    doc = make_policy(**rules)
    assert check_docs(doc).problems == []
    policy = compile_policy(doc)
    (rule,) = policy.filter_rules if section == "filters" else policy.score_rules
    assert type(rule) is registry[kind.name]
    assert type(rule).kind is kind


@pytest.mark.parametrize(("section", "kinds"), [("filters", filters.KINDS),
                                                ("scores", scores.KINDS)])
def test_schema_holds_each_fragment_and_requires_exactly_one_kind(
        section: str, kinds: tuple[RuleKind, ...]) -> None:
    items = _section(section)
    for k in kinds:
        assert items["properties"][k.name] is k.schema
    assert items["oneOf"] == [{"required": [k.name]} for k in kinds]
