"""Kubernetes quantities as CEL's `quantity()` library sees them.

apimachinery's `resource.ParseQuantity` grammar and value (an optional sign, digits with
an optional ".", a suffix `n u m k M G T P E`, `Ki ... Ei` or `e`/`E` and a signed
integer; values rounded up to whole billionths, binary-suffixed ones capped at
2^63-1), kept as an exact `Decimal`. Its three error texts are upstream's, because a
CEL expression that calls `quantity("1GB")` fails with that text in kube-scheduler.

policyd.model.quantity is the project's quantity parser, but this package sits on the
lowest layer and imports nothing of policyd; it also differs on purpose: CEL
quantities are not bounded by int64 (`quantity("1e30")` compares fine upstream), and
its errors are apimachinery's short sentences, not policyd's explanations.
"""

from __future__ import annotations

from decimal import ROUND_UP, Context, Decimal, localcontext
from functools import lru_cache

# apimachinery's error values (resource/quantity.go), word for word.
ERR_FORMAT_WRONG = ("quantities must match the regular expression "
                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

MAX_INT64 = 2**63 - 1
_DIGITS = frozenset("0123456789")
_SUFFIX_START = frozenset("eEinumkKMGTP")
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
               "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_NANO = Decimal("1e-9")
# Exponents are int32 upstream; coefficients are bounded by the text's length.
_EXACT = Context(prec=400, Emax=10**10, Emin=-(10**10))


class QuantityParseError(ValueError):
    """Not a quantity; str() is apimachinery's text."""


@lru_cache(maxsize=4096)
def parse(text: str) -> Decimal:
    """The exact value of a quantity string, or QuantityParseError with upstream's text."""
    if not text:
        raise QuantityParseError(ERR_FORMAT_WRONG)
    negative, number, suffix = _split(text)
    base, exponent = _suffix(suffix)
    if not any(c in _DIGITS for c in number):
        # "m", "." and "+" are 0 on apimachinery's int64 fast path; forms that take its
        # arbitrary-precision parser (a binary fraction, a scale below nano) need a digit.
        if ("." in number) if base == 2 else exponent < -9:
            raise QuantityParseError(ERR_NUMERIC)
        return Decimal(0)
    with localcontext(_EXACT):
        amount = Decimal(number).copy_negate() if negative else Decimal(number)
        if base == 2:
            amount = amount * (2**exponent)
            if amount.copy_abs() > MAX_INT64:
                amount = Decimal(MAX_INT64).copy_sign(amount)
        else:
            amount = amount.scaleb(exponent)
        if amount.is_zero():
            return Decimal(0)
        exponent_of_last_digit = amount.as_tuple().exponent
        if isinstance(exponent_of_last_digit, int) and exponent_of_last_digit < -9:
            # Quantities keep at most nano precision, rounding away from zero.
            return amount.quantize(_NANO, rounding=ROUND_UP)
        return amount


def _split(text: str) -> tuple[bool, str, str]:
    """(negative, the number's digits and ".", the suffix): apimachinery's
    parseQuantityString; anything after the suffix is the format error."""
    pos, end = 0, len(text)
    negative = text[0] == "-"
    if text[0] in "+-":
        pos = 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end and text[pos] == ".":
        pos += 1
        while pos < end and text[pos] in _DIGITS:
            pos += 1
    number = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_START:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityParseError(ERR_FORMAT_WRONG)
    return negative, number, text[suffix_start:]


def _suffix(suffix: str) -> tuple[int, int]:
    if suffix in _DECIMAL_SI:
        return 10, _DECIMAL_SI[suffix]
    if suffix in _BINARY_SI:
        return 2, _BINARY_SI[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and all(c in _DIGITS for c in body):
            exponent = int(digits)
            if -(2**31) <= exponent < 2**31:
                return 10, exponent
    raise QuantityParseError(ERR_SUFFIX)


def as_int64(value: Decimal) -> int | None:
    """Quantity.AsInt64: the value when it is whole and fits an int64, else None."""
    if value != value.to_integral_value() or abs(value) > MAX_INT64:
        return None
    return int(value)


def canonical(value: Decimal) -> str:
    """One spelling per value, so that two equal quantities compare equal field by
    field (CEL's equality of the message that carries them)."""
    return "0" if value.is_zero() else str(value.normalize(_EXACT))
