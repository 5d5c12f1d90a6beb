"""CEL's quantity(): apimachinery's grammar and value, its three error texts."""

from __future__ import annotations

from decimal import Decimal

import pytest

from policyd.cel.quantity import (
    ERR_FORMAT_WRONG,
    ERR_NUMERIC,
    ERR_SUFFIX,
    QuantityParseError,
    as_int64,
    canonical,
    parse,
)


@pytest.mark.parametrize(("text", "value"), [
    ("1", Decimal(1)),
    ("1Gi", Decimal(2**30)),
    ("1024Mi", Decimal(2**30)),
    ("100m", Decimal("0.1")),
    ("1.5", Decimal("1.5")),
    ("-2Ki", Decimal(-2048)),
    ("+3k", Decimal(3000)),
    ("1e3", Decimal(1000)),
    ("1E-3", Decimal("0.001")),
    ("1e30", Decimal("1e30")),  # not bounded by int64 in CEL
    ("0.1n", Decimal("1e-9")),  # below a nano: rounded up
    ("-0.1n", Decimal("-1e-9")),  # away from zero
    ("1.0000000001", Decimal("1.000000001")),
    ("m", Decimal(0)),  # apimachinery's fast path: no digits is zero
    (".", Decimal(0)),
    ("16Ei", Decimal(2**63 - 1)),  # binary suffixes capped at 2^63-1
    ("1E", Decimal(10**18)),  # E is exa, not an exponent
])
def test_values(text: str, value: Decimal) -> None:
    assert parse(text) == value


@pytest.mark.parametrize(("text", "error"), [
    ("", ERR_FORMAT_WRONG),
    ("1GB", ERR_FORMAT_WRONG),
    ("1.2.3", ERR_FORMAT_WRONG),
    (" 1", ERR_FORMAT_WRONG),
    ("1gi", ERR_FORMAT_WRONG),
    ("1ki", ERR_SUFFIX),
    ("1Kii", ERR_SUFFIX),
    ("1e", ERR_SUFFIX),
    ("1e99999999999", ERR_SUFFIX),
    ("e-10", ERR_NUMERIC),
    (".Ki", ERR_NUMERIC),
])
def test_errors(text: str, error: str) -> None:
    with pytest.raises(QuantityParseError) as err:
        parse(text)
    assert str(err.value) == error


def test_equal_values_have_one_spelling() -> None:
    assert canonical(parse("1Gi")) == canonical(parse("1073741824")) == \
        canonical(parse("1.073741824G"))
    assert canonical(parse("0")) == canonical(parse("-0")) == canonical(parse("0m")) == "0"
    assert canonical(parse("1k")) == canonical(parse("1000"))
    assert canonical(parse("1k")) != canonical(parse("1001"))


def test_as_int64() -> None:
    assert as_int64(parse("1k")) == 1000
    assert as_int64(parse("1.5")) is None
    assert as_int64(parse("1e19")) is None
    assert as_int64(parse("-8Ei")) == -(2**63 - 1)
