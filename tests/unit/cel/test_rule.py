"""Generic rules: variables declared by type, any result type, compile errors with the
line and column of the problem, runtime errors in cel-go's words."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from policyd.cel import CelCompileError, CelRuntimeError, compile_rule
from policyd.cel.rule import cel_type
from policyd.cel.semver import Version

OBJECTS = {"node": dict, "pod": dict}
NODE = {"labels": {"tier": "gold", "zone": "a"}, "cpu": "3500m", "count": 3}
POD = {"annotations": {"myorg.io/tier": "gold"}, "containers": [{"name": "a"}, {"name": "b"}]}


@pytest.mark.parametrize(("expression", "expected"), [
    ('node.labels["tier"] == pod.annotations["myorg.io/tier"]', True),
    ('node.labels.zone in ["a", "b"]', True),
    ("pod.containers.size()", 2),
    ("pod.containers.map(c, c.name)", ["a", "b"]),
    ('pod.containers.exists(c, c.name == "b")', True),
    ('has(node.labels.rack) ? node.labels.rack : "none"', "none"),
    ("node.count * 2 + 1", 7),
    ("double(node.count) / 2.0", 1.5),
    ("node.count < 3.5", True),  # comparisons across numeric types are allowed
    ('quantity(node.cpu).isGreaterThan(quantity("3"))', True),
    ('quantity(node.cpu).add(quantity("500m"))', Decimal(4)),
    ('semver("1.2.3")', Version(1, 2, 3, (), ())),
    ('{"k": node.labels.zone}', {"k": "a"}),
    ('node.labels.?rack.orValue("r0")', "r0"),
    ('cel.bind(t, node.labels.tier, t + "-" + t)', "gold-gold"),
    ("null", None),
])
def test_evaluate(expression: str, expected: Any) -> None:
    assert compile_rule(expression, OBJECTS).evaluate({"node": NODE, "pod": POD}) == expected


def test_output_type_is_named_as_cel_go_names_it() -> None:
    assert compile_rule("node.count > 1", OBJECTS).output_type == "bool"
    assert compile_rule("node.labels", OBJECTS).output_type == "dyn"
    assert compile_rule('["a"]', OBJECTS).output_type == "list(string)"
    assert compile_rule('{"a": 1}', OBJECTS).output_type == "map(string, int)"
    assert compile_rule('quantity("1")', OBJECTS).output_type == "kubernetes.Quantity"
    assert compile_rule("n + 1u", {"n": "uint"}).output_type == "uint"


@pytest.mark.parametrize(("expression", "line", "column", "text"), [
    ("node.labels[", 1, 13, "Syntax error"),
    ('node.labels["a"] ==\n  pods.x', 2, 3, "undeclared reference to 'pods'"),
    ('node.labels["a"] == 1 &&\n\n    nope(1)', 3, 9, "undeclared reference to 'nope'"),
    ("1 + 1u", 1, 3, "found no matching overload for '_+_' applied to '(int, uint)'"),
    ('quantity(1)', 1, 9, "found no matching overload for 'quantity' applied to '(int)'"),
])
def test_compile_errors_carry_line_and_column(expression: str, line: int, column: int,
                                               text: str) -> None:
    with pytest.raises(CelCompileError) as err:
        compile_rule(expression, OBJECTS)
    assert (err.value.line, err.value.column) == (line, column)
    assert text in str(err.value)
    assert str(err.value).startswith(f"ERROR: <input>:{line}:{column}: ")


@pytest.mark.parametrize(("expression", "activation", "text"), [
    ('node.labels["rack"] == "r"', {"node": NODE, "pod": POD}, "no such key: rack"),
    ("node.count + pod.x", {"node": NODE, "pod": {"x": "s"}}, "no such overload"),
    ("node.count / 0", {"node": NODE, "pod": POD}, "division by zero"),
    ("node.count % 0", {"node": NODE, "pod": POD}, "modulus by zero"),
    ("node.big + 1", {"node": {"big": 2**63 - 1}, "pod": POD}, "integer overflow"),
    ("node.count == 1", {"pod": POD}, "no such attribute(s): node"),
    ('quantity("x") == quantity("1")', {"node": NODE, "pod": POD},
     "quantities must match the regular expression"),
])
def test_runtime_errors(expression: str, activation: dict[str, Any], text: str) -> None:
    rule = compile_rule(expression, OBJECTS)
    with pytest.raises(CelRuntimeError) as err:
        rule.evaluate(activation)
    assert text in str(err.value)
    assert err.value.expression == expression


def test_values_cel_cannot_hold_are_runtime_errors() -> None:
    rule = compile_rule("node.n > 0", OBJECTS)
    with pytest.raises(CelRuntimeError):
        rule.evaluate({"node": {"n": 2**70}, "pod": {}})


@pytest.mark.parametrize(("declared", "expression", "value", "expected"), [
    (str, 'v + "!"', "a", "a!"),
    (int, "v * 2", 4, 8),
    (float, "v * 2.0", 1.5, 3.0),
    (bool, "!v", True, False),
    ("uint", "v + 1u", 1, 2),
    (Any, "v", "x", "x"),
    (list, "v.size()", [1, 2], 2),
    ("quantity", 'v.isLessThan(quantity("1"))', None, None),
])
def test_variable_types(declared: Any, expression: str, value: Any, expected: Any) -> None:
    rule = compile_rule(expression, {"v": declared})
    if value is not None:
        assert rule.evaluate({"v": value}) == expected


def test_a_variable_typed_str_refuses_other_uses() -> None:
    with pytest.raises(CelCompileError, match="found no matching overload for '_\\+_'"):
        compile_rule("v + 1", {"v": str})


def test_unknown_type_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="unsupported variable type 'timestamp'"):
        cel_type("timestamp")
