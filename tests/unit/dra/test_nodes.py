"""Node selection of slices and devices (nodeaffinity semantics)."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.dra.decoding import Fields
from policyd.dra.nodes import Node, NodeSelectorError, decode_node_selector, node_matches

NODE = Node("node-1", {"region": "r1", "cores": "8", "flag": ""})


def selector(*terms: dict[str, Any]) -> Any:
    return decode_node_selector(Fields("ResourceSlice", "s"),
                                {"nodeSelectorTerms": list(terms)}, "spec.nodeSelector")


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


def name_field(op: str, *values: str) -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": op,
                             "values": list(values)}]}


@pytest.mark.parametrize(("terms", "expected"), [
    pytest.param([expr("region", "In", "r1", "r2")], True, id="in"),
    pytest.param([expr("region", "NotIn", "r1")], False, id="not-in"),
    pytest.param([expr("zone", "NotIn", "z1")], True, id="not-in-missing-key"),
    pytest.param([expr("flag", "Exists")], True, id="exists-empty-value"),
    pytest.param([expr("Region", "Exists")], False, id="keys-case-sensitive"),
    pytest.param([expr("zone", "DoesNotExist")], True, id="does-not-exist"),
    pytest.param([expr("cores", "Gt", "4")], True, id="gt"),
    pytest.param([expr("cores", "Lt", "4")], False, id="lt"),
    pytest.param([expr("region", "Gt", "4")], False, id="gt-non-integer-label"),
    pytest.param([name_field("In", "node-1")], True, id="field-in"),
    pytest.param([name_field("NotIn", "node-1")], False, id="field-not-in"),
    pytest.param([{}], False, id="empty-term-selects-nothing"),
    pytest.param([], False, id="no-terms"),
    pytest.param([expr("region", "In", "r9"), name_field("In", "node-1")], True,
                 id="terms-ored"),
    pytest.param([{**expr("region", "In", "r1"), **name_field("In", "node-2")}], False,
                 id="requirements-anded"),
])
def test_matches(terms: list[dict[str, Any]], expected: bool) -> None:
    assert node_matches(NODE, "", False, selector(*terms)) is expected


def test_name_then_all_nodes_then_selector() -> None:
    never = selector({})
    assert node_matches(NODE, "node-1", False, never)
    assert not node_matches(NODE, "node-2", True, None)
    assert node_matches(NODE, "", True, never)
    assert not node_matches(NODE, "", False, None)


@pytest.mark.parametrize(("terms", "message"), [
    pytest.param([expr("region", "Near", "r1")],
                 'nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: '
                 '"Near"', id="operator"),
    pytest.param([expr("cores", "Gt", "x")],
                 "nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: \"x\"",
                 id="gt-value"),
    pytest.param([expr("region", "In")],
                 "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []",
                 id="in-without-values"),
    pytest.param([name_field("In", "a", "b")],
                 "nodeSelectorTerms[0].matchFields[0].values: Invalid value",
                 id="field-two-values"),
])
def test_invalid_selectors(terms: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(NodeSelectorError) as raised:
        node_matches(NODE, "", False, selector(*terms))
    assert str(raised.value).startswith(message)
