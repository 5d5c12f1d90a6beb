"""policyd's quantity parser against Kubernetes' own, on the table tools/quantitytable
generated from k8s.io/apimachinery's resource.ParseQuantity (tests/data/quantity_table.json).

Same accept/reject and the same exact value for every case, except where policyd is
stricter on purpose (policyd/model/quantity.py): a magnitude beyond 2^63-1, or an exponent
outside int32 that Go silently wraps; those must be rejected with that reason.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from policyd.model.quantity import QuantityError, int_value, milli_value, parse_quantity

TABLE = Path(__file__).resolve().parents[2] / "data" / "quantity_table.json"
CASES: list[dict[str, Any]] = json.loads(TABLE.read_text(encoding="utf-8"))["cases"]
INT64_MAX = 2**63 - 1
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)$")


def _wrapped_exponent(text: str) -> bool:
    m = _EXPONENT.search(text)
    return m is not None and not -(2**31) <= int(m.group(1)) < 2**31


def test_the_table_is_big_and_mixed() -> None:
    # Guards against an accidentally truncated regeneration.
    assert len(CASES) >= 150
    accepted = sum(c["ok"] for c in CASES)
    assert 100 < accepted < len(CASES) - 100
    inputs = {c["input"] for c in CASES}
    assert {"1K", "1_000", " 1", "1 ", "\u0661\u0662", "\uff11", "Infinity", "NaN", "",
            "1e400", "16Ei", "1Ki5", ".5", "5.", "+1", "-1"} <= inputs


@pytest.mark.parametrize("case", CASES, ids=[repr(c["input"])[:40] for c in CASES])
def test_same_answer_as_apimachinery(case: dict[str, Any]) -> None:
    text = case["input"]
    if not case["ok"]:
        with pytest.raises(QuantityError, match=r"^invalid quantity "):
            parse_quantity(text)
        return
    exact = Decimal(case["decimal"])
    if _wrapped_exponent(text):
        with pytest.raises(QuantityError, match=r"exponent .* out of range"):
            parse_quantity(text)
        return
    if abs(exact) > INT64_MAX:
        with pytest.raises(QuantityError, match=r"larger than 2\^63-1"):
            parse_quantity(text)
        return
    assert parse_quantity(text) == exact
    # Value()/MilliValue() are what the scheduler keeps (memory, cpu). Upstream wraps
    # them past int64 and rounds negatives oddly; policyd rejects negative requests, so
    # only the values a scheduler can meet are compared.
    if exact >= 0:
        assert int_value(text) == case["value"]
        if exact * 1000 <= INT64_MAX:
            assert milli_value(text) == case["milli"]
