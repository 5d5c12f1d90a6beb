"""Numbers in policies use JSON's grammar: `numeric` rules, JMESPath `to_number` and
JMESPath score results read "Infinity", "1e400", "1_000", " 1", "0x10" or "١٢" as not a
number (missing), on the compiled path and in the reference evaluator alike."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from policyd.framework import CycleState
from policyd.model.cluster import ClusterState
from policyd.policy import reference
from policyd.policy.jmes import Expression, json_number, number
from tests.builders import make_node, make_pod
from tests.unit.policy.conftest import check_docs, make_policy

NOT_NUMBERS = [
    "Infinity", "-Infinity", "+Infinity", "inf", "NaN", "nan", "1e400", "-1e400",
    "1" * 400, "1_000", " 1", "1 ", "\t1", "1\n", "0x10", "0b1", "0o7",
    "\u0661\u0662", "\uff11", "1\u00a0", "+1", "01", "-01", ".5", "5.", "1.", "-", "",
    "1e", "1e+", "1,5", "1/2", "true", "null", "1K", "1Gi", "--1", "1" * 5000,
]
NUMBERS = [("0", 0), ("-0", 0), ("7", 7), ("-3", -3), ("12.5", 12.5), ("1e2", 100.0),
           ("1E+2", 100.0), ("2.5e-1", 0.25), ("1e-400", 0.0), ("1e308", 1e308),
           ("123456789012345678901234567890", 123456789012345678901234567890)]


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_strings_that_are_not_json_numbers(text: str) -> None:
    assert json_number(text) is None
    assert number(text) is None
    assert reference._number(text) is None
    assert Expression("to_number(@)").search(text) is None


@pytest.mark.parametrize(("text", "value"), NUMBERS)
def test_json_numbers(text: str, value: float) -> None:
    got = Expression("to_number(@)").search(text)
    assert got == value and type(got) is type(value)
    assert number(text) == float(value)
    assert reference._number(text) is not None


@pytest.mark.parametrize(("value", "expected"), [
    (3, 3), (2.5, 2.5), (True, None), (False, None), (None, None), ([1], None),
    ({"a": 1}, None),
])
def test_to_number_of_other_types(value: Any, expected: Any) -> None:
    assert Expression("to_number(@)").search(value) == expected


@pytest.mark.parametrize("value", [10**400, float("inf"), float("-inf"), float("nan"),
                                   True, None, [1], {"a": 1}])
def test_non_finite_or_non_numbers_are_missing_on_both_paths(value: Any) -> None:
    assert number(value) is None
    assert reference._number(value) is None


# -- end to end: a bad value is a missing one, compiled and reference agree ----------------

def _scores(doc: dict[str, Any], nodes: list[Any]) -> tuple[list[int], list[int], list[int]]:
    """(per-node scores, the column path's scores, the reference's scores)."""
    result = check_docs(doc)
    assert [p for p in result.problems if p.level == "error"] == []
    policy: Any  # a Filter and/or Score plugin, by its rules
    [policy] = result.compiled
    cluster = ClusterState([n.obj() for n in nodes])
    table = cluster.table()
    infos = table.infos
    pod = make_pod().obj()
    state = CycleState(infos, cluster)
    assert policy.pre_score(state, pod, infos) is None
    scores = [policy.score(state, pod, i) for i in infos]
    policy.normalize_score(state, pod, infos, scores)
    state = CycleState(infos, cluster)
    assert policy.pre_score(state, pod, infos) is None
    idx = np.arange(len(infos), dtype=np.int64)
    vector = policy.score_vector(state, pod, table, idx).tolist()
    want = reference.scores(doc, pod, infos)
    assert want is not None
    return scores, vector, want


def _score_doc(kind: str, spec: Any) -> dict[str, Any]:
    return make_policy(scores=[{"id": "s", "weight": 1, "normalize": "max", kind: spec}])


@pytest.mark.parametrize("bad", NOT_NUMBERS[:30])
@pytest.mark.parametrize(("kind", "spec", "where"), [
    ("numeric", {"label": "n"}, "label"),
    ("numeric", {"annotation": "n"}, "annotation"),
    ("numeric", {"annotation": "n", "prefer": "lowest"}, "annotation"),
    ("jmespath", "to_number(label(node, 'n'))", "label"),
    ("jmespath", "annotation(node, 'n')", "annotation"),
])
def test_a_value_that_is_not_a_json_number_scores_as_missing(
        bad: str, kind: str, spec: Any, where: str) -> None:
    nodes = [getattr(make_node(name), where)("n", value)
             for name, value in (("a", "5"), ("b", "10"), ("c", bad))]
    scores, vector, want = _scores(_score_doc(kind, spec), nodes)
    assert scores == vector == want
    assert scores[2] == 0  # missing scores 0 whatever prefer/reverse say
    lowest = isinstance(spec, dict) and spec.get("prefer") == "lowest"
    assert scores[:2] == ([50, 0] if lowest else [50, 100])


@pytest.mark.parametrize("bad", ["Infinity", "1e400", "1_000", " 3", "0x10", "\u0663"])
def test_jmespath_filter_with_to_number_rejects_the_node(bad: str) -> None:
    doc = make_policy(filters=[{"id": "f", "message": "too small",
                                "jmespath": "to_number(label(node, 'n')) > `2`"}])
    policy: Any  # a Filter and/or Score plugin, by its rules
    [policy] = check_docs(doc).compiled
    nodes = [make_node("ok").label("n", "3").obj(), make_node("bad").label("n", bad).obj()]
    cluster = ClusterState(nodes)
    infos = cluster.node_infos()
    pod = make_pod().obj()
    state = CycleState(infos, cluster)
    policy.pre_filter(state, pod, infos)
    got = [policy.filter(state, pod, i) is None for i in infos]
    assert got == [not reference.filter_node(doc, pod, i) for i in infos] == [True, False]
