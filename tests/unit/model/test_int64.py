"""Integers where Kubernetes reads them with strconv.ParseInt (label selector Gt/Lt):
Python's int() would also take " 5", "5_0" and "٥"."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework import CycleState
from policyd.model.cluster import ClusterState
from policyd.model.int64 import parse_int64
from policyd.model.selectors import SelectorError, compile_node_selector
from policyd.policy import reference
from tests.builders import make_node, make_pod
from tests.unit.policy.conftest import check_docs, make_policy

NOT_INT64 = [" 5", "5 ", "\t5", "5_0", "\u0665", "\uff15", "0x5", "5.0", "5e0", "", "+",
             "-", "--5", "+-5", "9223372036854775808", "-9223372036854775809", "1" * 5000,
             "Infinity"]
INT64 = [("5", 5), ("+5", 5), ("-5", -5), ("007", 7), ("-0", 0),
         ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -(2**63)),
         ("0" * 5000 + "1", 1)]


@pytest.mark.parametrize("text", NOT_INT64)
def test_not_int64(text: str) -> None:
    assert parse_int64(text) is None


@pytest.mark.parametrize(("text", "value"), INT64)
def test_int64(text: str, value: int) -> None:
    assert parse_int64(text) == value


def _gt(value: str) -> dict[str, object]:
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gpu", "operator": "Gt", "values": [value]}]}]}


@pytest.mark.parametrize("label", NOT_INT64)
def test_gt_never_matches_a_label_go_cannot_parse(label: str) -> None:
    assert not compile_node_selector(_gt("1")).matches({"gpu": label}, "n")


@pytest.mark.parametrize(("label", "expected"), [("+5", True), ("007", True), ("1", False)])
def test_gt_matches_what_go_parses(label: str, expected: bool) -> None:
    assert compile_node_selector(_gt("1")).matches({"gpu": label}, "n") is expected


@pytest.mark.parametrize("value", [" 5", "5_0", "\u0665", "9223372036854775808"])
def test_gt_value_go_cannot_parse_is_invalid(value: str) -> None:
    with pytest.raises(SelectorError, match="is not an integer"):
        compile_node_selector(_gt(value))
    doc = make_policy(filters=[{"id": "r", "message": "m", "nodeLabels": {"matchExpressions": [
        {"key": "gpu", "operator": "Gt", "values": [value]}]}}])
    assert "label-value" in {p.rule for p in check_docs(doc).problems}


@pytest.mark.parametrize("label", [" 5", "5_0", "\u0665", "+5", "5", "1" * 30])
def test_policy_gt_compiled_and_reference_agree(label: str) -> None:
    doc = make_policy(filters=[{"id": "r", "message": "m", "nodeLabels": {"matchExpressions": [
        {"key": "gpu", "operator": "Gt", "values": ["1"]}]}}])
    policy: Any  # a Filter and/or Score plugin, by its rules
    [policy] = check_docs(doc).compiled
    nodes = [make_node("n").label("gpu", label).obj()]
    cluster = ClusterState(nodes)
    infos = cluster.node_infos()
    pod = make_pod().obj()
    state = CycleState(infos, cluster)
    policy.pre_filter(state, pod, infos)
    passes = policy.filter(state, pod, infos[0]) is None
    assert passes is (not reference.filter_node(doc, pod, infos[0]))
    assert passes is (label in ("+5", "5"))
