"""Which values providers keep, and parsing Prometheus instant-query responses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policyd.nodemetrics import values as v
from tests.unit.nodemetrics.helpers import vector


@pytest.mark.parametrize(("raw", "allow_negative", "expected"), [
    (3, False, (3.0, None)),
    (2.5, False, (2.5, None)),
    ("12.5", False, (12.5, None)),
    (" 7 ", False, (None, v.NOT_A_NUMBER)),  # numbers are JSON numbers, as in policies
    ("1_000", False, (None, v.NOT_A_NUMBER)),
    ("0x10", False, (None, v.NOT_A_NUMBER)),
    ("١٢", False, (None, v.NOT_A_NUMBER)),
    ("Infinity", False, (None, v.NOT_A_NUMBER)),
    ("1e400", False, (None, v.INFINITE)),
    ("1e+06", False, (1e6, None)),  # how Prometheus (Go) writes a million
    (10**400, False, (None, v.INFINITE)),
    ("1e3", False, (1000.0, None)),
    (0, False, (0.0, None)),
    ("NaN", False, (None, v.NAN)),
    (float("nan"), False, (None, v.NAN)),
    ("+Inf", False, (None, v.INFINITE)),
    ("-Inf", True, (None, v.INFINITE)),
    (float("inf"), False, (None, v.INFINITE)),
    (-1, False, (None, v.NEGATIVE)),
    ("-0.5", False, (None, v.NEGATIVE)),
    ("-0.5", True, (-0.5, None)),
    ("fast", False, (None, v.NOT_A_NUMBER)),
    ("", False, (None, v.NOT_A_NUMBER)),
    (True, False, (None, v.NOT_A_NUMBER)),
    (None, False, (None, v.NOT_A_NUMBER)),
    ([1], False, (None, v.NOT_A_NUMBER)),
    # Integers beyond any float (YAML and JSON allow them) are infinite, not a crash.
    (10**400, False, (None, v.INFINITE)),
    (-(10**400), True, (None, v.INFINITE)),
    ("9" * 5000, False, (None, v.INFINITE)),
])
def test_clean_value(raw: Any, allow_negative: bool, expected: tuple[Any, Any]) -> None:
    assert v.clean_value(raw, allow_negative=allow_negative) == expected


def test_parse_vector_keeps_good_values_and_counts_the_rest() -> None:
    body = vector(({"node": "a"}, "5"), ({"node": "b"}, "NaN"), ({"node": "c"}, "-3"),
                  ({"node": "d"}, "+Inf"), ({"instance": "x"}, "1"), ({"node": "e"}, "zz"),
                  ({"node": "f"}, "1"), ({"node": "f"}, "2"), ({"node": "g"}, "0"))
    values, dropped = v.parse_vector(body, "node")
    assert values == {"a": 5.0, "g": 0.0}
    assert sorted(dropped) == sorted([v.NAN, v.NEGATIVE, v.INFINITE, v.MISSING_NODE_LABEL,
                                      v.NOT_A_NUMBER, v.DUPLICATE])


def test_parse_vector_other_node_label_and_negatives_allowed() -> None:
    body = vector(({"kubernetes_node": "a"}, "-2"))
    assert v.parse_vector(body, "kubernetes_node", allow_negative=True) == ({"a": -2.0}, [])


@pytest.mark.parametrize(("body", "fragment"), [
    (b"<html>502 Bad Gateway</html>", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (json.dumps({"status": "error", "error": "parse error at char 3"}).encode(),
     "parse error"),
    (json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}
                ).encode(), "instant vector"),
    (json.dumps({"status": "success", "data": {"resultType": "scalar",
                                               "result": [1, "2"]}}).encode(),
     "instant vector"),
    (json.dumps({"status": "success"}).encode(), "no data.result"),
])
def test_parse_vector_rejects_bodies_that_are_not_a_vector(body: bytes, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        v.parse_vector(body, "node")


def test_parse_vector_malformed_series() -> None:
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        "x", {"metric": {"node": "a"}}, {"metric": {"node": "b"}, "value": [1]},
        {"metric": {"node": "c"}, "value": [1, "4"]}]}}).encode()
    values, dropped = v.parse_vector(body, "node")
    assert values == {"c": 4.0}
    assert dropped == [v.BAD_RESPONSE] * 3
