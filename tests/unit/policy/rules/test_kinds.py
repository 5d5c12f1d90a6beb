"""The registry names exactly the schema's rule kinds, builds each kind's class, and a
rule that never went through the schema fails with a message naming it."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.policy.compiler import compile_policy
from policyd.policy.policy_schema import FILTER_KINDS, SCORE_KINDS
from policyd.policy.rules.kinds import FILTER_RULES, SCORE_RULES, filter_rule, score_rule
from tests.unit.policy.conftest import make_policy


def test_registry_kinds_are_the_schemas() -> None:
    # In the schema's order: the order `rule_kind`'s message lists them in.
    assert tuple(FILTER_RULES) == FILTER_KINDS
    assert tuple(SCORE_RULES) == SCORE_KINDS


FILTER_SPECS: dict[str, Any] = {
    "annotationToNodeLabel": {"annotation": "a", "label": "l"},
    "nodeLabels": {"matchLabels": {"a": "b"}},
    "headroom": {"resource": "cpu", "percent": 10},
    "requireExtendedResource": {"name": "example.com/gpu"},
    "maxPodsPerNode": 3,
    "sameTopology": {"key": "topology.kubernetes.io/zone"},
    "jmespath": "node.metadata.name",
    "cel": "node.labels.tier == 'a'",
}
SCORE_SPECS: dict[str, Any] = {
    "labelValue": {"label": "l", "values": {"a": 1}},
    "numeric": {"label": "l"},
    "allocation": {"strategy": "least"},
    "jmespath": "`1`",
    "metric": {"name": "m", "prefer": "lowest"},
    "cel": "1",
}


@pytest.mark.parametrize("kind", FILTER_KINDS)
def test_each_filter_kind_builds_its_class(kind: str) -> None:
    rule = filter_rule({"id": "r", "message": "m", kind: FILTER_SPECS[kind]})
    assert type(rule) is FILTER_RULES[kind]
    assert (rule.id, rule.message) == ("r", "m")


@pytest.mark.parametrize("kind", SCORE_KINDS)
def test_each_score_kind_builds_its_class(kind: str) -> None:
    rule = score_rule({"id": "s", "weight": 2, "normalize": "max", kind: SCORE_SPECS[kind]})
    assert type(rule) is SCORE_RULES[kind]
    assert (rule.id, rule.weight, rule.normalize) == ("s", 2, "max")


def test_a_rule_without_a_known_kind_fails_clearly() -> None:
    with pytest.raises(ValueError, match=r"filter rule 'x' has no rule kind; expected one "
                                         r"of: annotationToNodeLabel, nodeLabels"):
        filter_rule({"id": "x", "message": "m", "nodeTaints": {}})
    with pytest.raises(ValueError, match=r"score rule 's' has several rule kinds "
                                         r"\(numeric, jmespath\)"):
        score_rule({"id": "s", "weight": 1, "normalize": "none", "numeric": {"label": "l"},
                    "jmespath": "`1`"})


@pytest.mark.parametrize("kind", FILTER_KINDS)
def test_each_filter_kind_names_the_events_that_can_undo_it(kind: str) -> None:
    policy = compile_policy(make_policy(filters=[
        {"id": "r", "message": "m", kind: FILTER_SPECS[kind]}]))
    [rule] = policy.filter_rules
    own = [e.event for e in rule.events(policy)]
    assert own
    assert [e.event for e in policy.events_to_register()][:len(own)] == own
