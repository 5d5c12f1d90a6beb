"""The per-rule raw values and scores the engine keeps for explain: the same on the
explain and the reference path, equal to the columns the fast path scores from, and
normalized exactly as the policy's total."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from policyd.config.plugins import default_framework
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.framework.runtime import PluginScores
from policyd.model.cluster import ClusterState
from policyd.policy.compiler import CompiledPolicy, compile_policy
from tests.builders import make_node, make_pod

RULES: list[dict[str, Any]] = [
    {"id": "load", "weight": 3, "normalize": "max", "numeric": {"label": "load"}},
    {"id": "lat", "weight": 1, "normalize": "minmax",
     "numeric": {"annotation": "lat", "prefer": "lowest"}},
    {"id": "zone", "weight": 2, "normalize": "none",
     "labelValue": {"label": "zone", "values": {"a": 12.5, "b": 80}}},
]


def _policy(*rules: dict[str, Any]) -> CompiledPolicy:
    return compile_policy({"apiVersion": "policyd.io/v1alpha1", "kind": "SchedulingPolicy",
                           "metadata": {"name": "p"},
                           "spec": {"pluginName": "P", "scores": list(rules)}})


def _cluster() -> ClusterState:
    nodes = [
        make_node("n1").labels(load="0.4", zone="a").annotation("lat", "2.5").obj(),
        make_node("n2").labels(load="0.9", zone="b").annotation("lat", "7").obj(),
        make_node("n3").labels(load="1.6").obj(),  # no zone label, no lat annotation
    ]
    return ClusterState(nodes, [])


def _policy_scores(result: ScheduleResult) -> PluginScores:
    assert result.scores is not None
    return next(p for p in result.scores.plugins if p.plugin == "P")


@pytest.mark.parametrize("rules", [RULES[:1], RULES[1:2], RULES[2:], RULES],
                         ids=["load", "lat", "zone", "all"])
def test_rule_details_agree_across_paths(rules: list[dict[str, Any]]) -> None:
    policy = _policy(*rules)
    pod = make_pod("p").obj()
    explained = _policy_scores(schedule_one(default_framework([policy], seed=1), pod,
                                            _cluster(), explain=True))
    reference = _policy_scores(schedule_one(default_framework([policy], seed=1), pod,
                                            _cluster(), reference=True))
    assert explained.rules is not None
    assert explained.rules == reference.rules
    assert list(explained.rules) == [r["id"] for r in rules]

    # The fast path scores from these columns: the same raw values (NaN = missing).
    cluster = _cluster()
    table = cluster.table()
    idx = np.arange(len(table.infos))
    for rule in policy.score_rules:
        column = rule.values(rule.bind(pod), pod, table, idx).tolist()
        kept = [raw for raw, _ in explained.rules[rule.id]]
        assert [None if math.isnan(v) else v for v in column] == kept

    # The policy's score is the weighted mean of the rules' kept scores.
    weights = [r["weight"] for r in rules]
    per_node = list(zip(*(explained.rules[r["id"]] for r in rules), strict=True))
    assert explained.normalized == [
        sum(w * s for w, (_, s) in zip(weights, node, strict=True)) // sum(weights)
        for node in per_node]


def test_fractional_raw_values_are_kept_as_computed() -> None:
    result = schedule_one(default_framework([_policy(*RULES)], seed=1), make_pod("p").obj(),
                          _cluster(), explain=True)
    rules = _policy_scores(result).rules
    assert rules is not None
    assert rules["load"] == [(0.4, 25), (0.9, 56), (1.6, 100)]
    assert rules["lat"] == [(2.5, 100), (7.0, 0), (None, 0)]
    assert rules["zone"] == [(12.5, 12), (80.0, 80), (0.0, 0)]


def test_builtin_plugins_have_no_rule_details() -> None:
    result = schedule_one(default_framework([_policy(*RULES)], seed=1), make_pod("p").obj(),
                          _cluster(), explain=True)
    assert result.scores is not None
    builtins = [p for p in result.scores.plugins if p.plugin != "P"]
    assert builtins and all(p.rules is None for p in builtins)
    assert all(isinstance(v, int) for p in builtins for v in p.raw)
