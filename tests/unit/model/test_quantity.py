"""The quantity parser beyond the generated table: messages, non-string inputs, inputs too
big or too long for the table, and every caller giving the same message."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest

from policyd.errors import InvalidObjectError
from policyd.model.quantity import (
    QuantityError,
    int_value,
    milli_value,
    nano_value,
    parse_quantity,
    resource_value,
)
from policyd.model.records import node_from_dict, pod_from_dict
from policyd.model.spelling import show_value
from policyd.policy.jmes import Expression
from tests.builders import make_node, make_pod
from tests.unit.policy.conftest import check_docs, check_texts, make_policy

INT64_MAX = 2**63 - 1


def _short(value: Any) -> str:
    """A test id for inputs of 100,000 characters (or digits)."""
    text = f"int {len(hex(value))} hex digits" if isinstance(value, int) else repr(value)
    return text if len(text) < 30 else f"{text[:12]}...({len(text)} chars)"


@pytest.mark.parametrize(("value", "reason"), [
    ("1K", 'unknown suffix "K"'),
    ("1KB", 'unknown suffix "KB"'),
    ("1gi", 'unknown suffix "gi"'),
    ("1Ki5", 'unknown suffix "Ki5"'),
    ("1e", 'unknown suffix "e"'),
    ("1e+", 'unknown suffix "e+"'),
    ("1_000", 'unexpected "_" at character 2'),
    ("1,5", 'unexpected "," at character 2'),
    (" 1", 'unexpected " " at character 1'),
    ("1 ", 'unexpected " " at character 2'),
    ("\t2Gi", 'unexpected "\\t" at character 1'),
    ("2Gi\n", 'unexpected "\\n" at character 4'),
    ("1 Gi", 'unexpected " " at character 2'),
    ("\u0661\u0662", 'unexpected "\u0661" at character 1'),  # Arabic-Indic 12
    ("\uff11\uff10", 'unexpected "\uff11" at character 1'),  # fullwidth 10
    ("1\u00a0", 'unexpected "\u00a0" at character 2'),
    ("0x10", 'unknown suffix "x10"'),
    ("1.5.2", 'unexpected "." at character 4'),
    ("Infinity", 'unknown suffix "Infinity"'),
    ("NaN", 'unknown suffix "NaN"'),
    ("--1", 'unexpected "-" at character 2'),
    ("", "empty"),
    (".e-10", "no digits"),
    ("1e4294967296", "exponent 4294967296 is out of range"),
    ("1e9223372036854775808", 'unknown suffix "e9223372036854775808"'),
    ("1e400", "larger than 2^63-1"),
    ("9223372036854775808", "larger than 2^63-1"),
    ("-9223372036854775808", "larger than 2^63-1"),
    ("10E", "larger than 2^63-1"),
])
def test_rejections_name_the_value_and_the_reason(value: str, reason: str) -> None:
    with pytest.raises(QuantityError) as e:
        parse_quantity(value)
    assert str(e.value).startswith(f"invalid quantity {show_value(value)}: ")
    assert reason in str(e.value)


@pytest.mark.parametrize(("value", "spelled"), [
    (True, "true"), (False, "false"), (None, "null"), ([1], "[1]"),
    ({"a": 1}, '{"a": 1}'), (float("inf"), ".inf"), (float("-inf"), "-.inf"),
    (float("nan"), ".nan"), (2**63, "9223372036854775808"),
])
def test_non_quantities_are_spelled_as_yaml(value: Any, spelled: str) -> None:
    with pytest.raises(QuantityError) as e:
        parse_quantity(value)
    message = str(e.value)
    assert message.startswith(f"invalid quantity {spelled}: ")
    for python in ("True", "False", "None", "inf:", "nan:", "'"):
        assert python not in message.split(": ", 1)[0]


@pytest.mark.parametrize(("value", "exact"), [
    (2, "2"), (0, "0"), (0.5, "0.5"), (1e16, "1e16"), (1.5e-10, "0.000000001"),
    (INT64_MAX, str(INT64_MAX)), ("1.5Gi", "1610612736"), ("100m", "0.1"),
    ("0.1n", "0.000000001"), ("-0.1n", "-0.000000001"), ("+1", "1"), (".5", "0.5"),
    ("5.", "5"), ("1E", "1e18"), ("1e-3", "0.001"), ("16Ei", str(INT64_MAX)),
    ("-16Ei", str(-INT64_MAX)), ("8Ei", str(INT64_MAX)), ("7Ei", str(7 * 2**60)),
    # Kubernetes' grammar admits a sign, a dot or a suffix alone: all zero.
    (".", "0"), ("+", "0"), ("m", "0"), ("Ki", "0"), ("e3", "0"),
])
def test_accepted_values_are_exact(value: Any, exact: str) -> None:
    assert parse_quantity(value) == Decimal(exact)


def test_scheduler_units_round_up() -> None:
    assert milli_value("0.1m") == 1 and milli_value("1001u") == 2
    assert int_value("1.5") == 2 and int_value("1n") == 1
    assert nano_value("1.5n") == 2 and nano_value("250m") == 250_000_000
    assert resource_value("cpu", "1.5") == 1500
    assert resource_value("memory", "1Ki") == 1024
    # cpu near int64: exact Python ints, not Go's wrapped MilliValue
    assert resource_value("cpu", str(INT64_MAX)) == INT64_MAX * 1000


@pytest.mark.parametrize(("value", "nanos"), [
    ("1e-2147483647", 1),  # Go itself never finishes this one
    ("-1e-2147483648", -1),
    ("0." + "0" * 100_000 + "1", 1),
    ("1." + "0" * 100_000 + "1", 10**9 + 1),
    ("1" + "0" * 100_000 + "e-100000", 10**9),
    ("0." + "0" * 100_000 + "1Ki", 1),
    ("1" * 100_000 + "Ki", INT64_MAX * 10**9),
    ("0" * 100_000 + "7", 7 * 10**9),
    ("1e0000000000000000000000000000003", 1000 * 10**9),
], ids=_short)
def test_extreme_inputs_are_exact_and_fast(value: str, nanos: int) -> None:
    start = time.perf_counter()
    assert nano_value(value) == nanos
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("value", [
    "1e2147483647", "1" * 100_000, "9" * 30 + "e-5", 10**5000, "1" + "0" * 5000 + "m",
], ids=_short)
def test_extreme_too_large_inputs_fail_fast(value: Any) -> None:
    start = time.perf_counter()
    with pytest.raises(QuantityError, match=r"larger than 2\^63-1"):
        parse_quantity(value)
    assert time.perf_counter() - start < 0.5


# -- every caller says the same -------------------------------------------------------

@pytest.mark.parametrize("value", ["1K", "1_000", " 1", "1e400", True, None, "\uff11"])
def test_pod_and_node_decoders_use_the_parser_message(value: Any) -> None:
    raw = make_pod("p", "ns").raw()
    raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": value}}
    if value is None:  # the API server decodes a null Quantity as 0
        assert pod_from_dict(raw).containers[0].requests == {"cpu": 0}
        return
    with pytest.raises(InvalidObjectError) as e:
        pod_from_dict(raw)
    with pytest.raises(QuantityError) as q:
        parse_quantity(value)
    assert e.value.field == "spec.containers[0].resources.requests.cpu"
    assert str(q.value) in str(e.value)
    node = make_node("n").raw()
    node["status"]["allocatable"]["memory"] = value
    with pytest.raises(InvalidObjectError) as e:
        node_from_dict(node)
    assert str(q.value) in str(e.value)


@pytest.mark.parametrize(("value", "shown"), [(-1, "-1"), ("-1", "'-1'"), (-0.5, "-0.5")])
def test_negative_requests_are_spelled_as_written(value: Any, shown: str) -> None:
    raw = make_pod("p", "ns").raw()
    raw["spec"]["containers"][0]["resources"] = {"requests": {"memory": value}}
    with pytest.raises(InvalidObjectError, match=f"must not be negative, got {shown}$"):
        pod_from_dict(raw)


@pytest.mark.parametrize("value", ["1K", "1_000", "1 ", "1e400", "\u0661", 1e300])
def test_policy_lint_uses_the_parser_message(value: Any) -> None:
    doc = make_policy(filters=[{"id": "r", "message": "m", "headroom": {
        "resource": "memory", "quantity": value}}])
    problems = [p for p in check_docs(doc).problems if p.level == "error"]
    with pytest.raises(QuantityError) as q:
        parse_quantity(value)
    assert [(p.rule, p.message) for p in problems] == [("quantity", str(q.value))]


@pytest.mark.parametrize(("value", "rule"), [
    ("true", "schema"), ("null", "schema"), (".inf", "number"), ("-.inf", "number"),
    (".nan", "number"), ("1e400", "number"), ("[1]", "schema")])
def test_policy_lint_reports_a_wrong_type_once_without_python_spelling(
        value: str, rule: str) -> None:
    text = ("apiVersion: policyd.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: p}\n"
            "spec:\n  pluginName: P\n  filters:\n  - id: r\n    message: m\n"
            f"    headroom: {{resource: memory, quantity: {value}}}\n")
    problems = [p for p in check_texts(text).problems if p.level == "error"]
    assert [p.rule for p in problems] == [rule]
    words = set(problems[0].message.replace(",", " ").split())
    assert not words & {"True", "False", "None", "inf", "-inf", "nan"}


@pytest.mark.parametrize(("expr", "expected"), [
    ("quantity('1Gi')", 1073741824.0), ("quantity('1K')", None),
    ("quantity('1_000')", None), ("quantity(' 1')", None), ("quantity('Infinity')", None),
    ("quantity('1e400')", None), ("quantity(`1.5`)", 1.5), ("quantity(null)", None),
])
def test_jmespath_quantity_uses_the_parser(expr: str, expected: float | None) -> None:
    assert Expression(expr).search({}) == expected
