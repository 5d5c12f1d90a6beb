from __future__ import annotations

from typing import Any

import pytest

from policyd.model.selectors import (
    SelectorError,
    compile_label_selector,
    compile_node_selector,
)


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    ({}, {"a": "b"}, True),
    (None, {"a": "b"}, False),
    ({"matchLabels": {"app": "web"}}, {"app": "web"}, True),
    ({"matchLabels": {"app": "web"}}, {"App": "web"}, False),
    ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, {}, True),
    ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}, {}, False),
    ({"matchExpressions": [{"key": "env", "operator": "Exists"}]}, {"env": ""}, True),
    ({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}, {"Env": "x"}, True),
])
def test_label_selector(selector: Any, labels: dict[str, str], expected: bool) -> None:
    assert compile_label_selector(selector).matches(labels) is expected


def term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields:
        out["matchFields"] = fields
    return out


@pytest.mark.parametrize(("terms", "labels", "name", "expected"), [
    ([term({"key": "gpu", "operator": "Gt", "values": ["2"]})], {"gpu": "3"}, "n", True),
    ([term({"key": "gpu", "operator": "Gt", "values": ["2"]})], {"gpu": "2"}, "n", False),
    ([term({"key": "gpu", "operator": "Lt", "values": ["2"]})], {"gpu": "x"}, "n", False),
    ([term({"key": "gpu", "operator": "Lt", "values": ["2"]})], {}, "n", False),
    ([{}], {"a": "b"}, "n", False),  # an empty term matches nothing
    ([term({"key": "a", "operator": "In", "values": ["x"]}),
      term({"key": "b", "operator": "Exists"})], {"b": "1"}, "n", True),  # terms are ORed
    ([term(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}])], {}, "n1",
     True),
    ([term(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}])], {}, "n2",
     False),
])
def test_node_selector(terms: list[dict[str, Any]], labels: dict[str, str], name: str,
                       expected: bool) -> None:
    sel = compile_node_selector({"nodeSelectorTerms": terms})
    assert sel.matches(labels, name) is expected


@pytest.mark.parametrize(("expr", "path"), [
    ({"key": "a", "operator": "In", "values": []}, "matchExpressions[0].values"),
    ({"key": "a", "operator": "Exists", "values": ["x"]}, "matchExpressions[0].values"),
    ({"key": "a", "operator": "Gt", "values": ["1", "2"]}, "matchExpressions[0].values"),
    ({"key": "a", "operator": "Gt", "values": ["one"]}, "matchExpressions[0].values[0]"),
    ({"key": "a", "operator": "Like", "values": ["x"]}, "matchExpressions[0].operator"),
])
def test_invalid_requirements_name_their_path(expr: dict[str, Any], path: str) -> None:
    with pytest.raises(SelectorError) as e:
        compile_node_selector({"nodeSelectorTerms": [term(expr)]})
    assert e.value.path == f"nodeSelectorTerms[0].{path}"
