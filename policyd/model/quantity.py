"""Kubernetes resource quantities, read with Kubernetes' own grammar and limits.

One parser for every quantity policyd reads (node allocatable, pod requests, policy
`quantity` fields, the JMESPath `quantity()` function). It follows
k8s.io/apimachinery's `resource.ParseQuantity` step by step, so it accepts exactly what
the API server accepts and gives the same value: an optional sign, ASCII digits with an
optional ".", then a suffix (`n u m "" k M G T P E`, `Ki Mi Gi Ti Pi Ei`, or `e`/`E`
and a signed integer). That admits oddities Kubernetes admits (`"."`, `"+"`, `"m"` and
`"1."` are quantities) and rejects what Python's number parsers would take (`1_000`,
`" 1"`, `"١٢"`, `"Infinity"`, `1K`). Values are rounded up to whole billionths and
binary-suffixed ones capped at 2^63-1, as upstream.

policyd is stricter than the parser in two places, both where Kubernetes would go on
with a value nobody meant: a quantity whose magnitude exceeds 2^63-1 (`Quantity.Value()`
is an int64: the scheduler would count a wrapped number) and an exponent outside int32
(upstream silently wraps it: `1e4294967296` is 1). Both are rejected with the reason.

tests/unit/model/test_quantity_table.py holds this module to a table generated from the
real apimachinery (tools/quantitytable).
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_UP, Context, Decimal, localcontext
from functools import lru_cache
from typing import Any

from policyd.model.int64 import INT32, parse_int64
from policyd.model.spelling import show_value

# A Quantity's value must fit an int64 (resource.Quantity's MaxInt64 bound): larger ones
# cannot be counted by the scheduler, upstream or here.
MAX_QUANTITY = Decimal(2**63 - 1)
NANO = 10**9

_DIGITS = frozenset("0123456789")
# Characters apimachinery's scanner takes as the start of a suffix.
_SUFFIX_START = frozenset("eEinumkKMGTP")
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
               "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# apimachinery keeps a decimal quantity in an int64 (its fast path) when it has at most
# this many digits and a scale of at least nano; otherwise it uses an arbitrary-precision
# decimal, whose parser needs at least one digit.
_MAX_INT64_FACTORS = 18
_EXAMPLES = "e.g. 500m, 2, 1.5Gi, 1e3"
_TOO_LARGE = ("larger than 2^63-1 (9223372036854775807), the most a Kubernetes quantity "
              "can count")
_SUFFIXES = "n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as e3"


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity; the message names it and says why."""

    def __init__(self, value: Any, reason: str) -> None:
        super().__init__(f"invalid quantity {show_value(value)}: {reason}")


def parse_quantity(value: object) -> Decimal:
    """The exact value of a quantity (`"100m"`, `"1Gi"`, `2`, `"1e3"`), as Kubernetes
    parses it; raises QuantityError (a ValueError) naming the value and the reason."""
    return Decimal(_nanos(value)).scaleb(-9, _EXACT)


def nano_value(value: object) -> int:
    """The quantity in billionths (a Quantity's finest scale): exact, so that requests
    can be added up before rounding once, as upstream adds Quantities."""
    return _nanos(value)


def milli_value(value: object) -> int:
    """The quantity in thousandths, rounded up (Quantity.MilliValue): used for cpu."""
    return -(-_nanos(value) // 10**6)


def int_value(value: object) -> int:
    """The quantity rounded up to an integer (Quantity.Value): memory, storage, counts."""
    return -(-_nanos(value) // NANO)


def from_nano(name: str, nanos: int) -> int:
    """`resource_value` of a quantity given in billionths: millicores for cpu, rounded up."""
    unit = NANO // 1000 if name == "cpu" else NANO
    return -(-nanos // unit)


def resource_value(name: str, value: object) -> int:
    """The integer the scheduler keeps for resource `name`: millicores for cpu."""
    return milli_value(value) if name == "cpu" else int_value(value)


# Exact decimal arithmetic whatever the operands' size: coefficients are bounded by the
# input's length (set per call), exponents by int32 plus that length.
_EXACT = Context(prec=60, Emax=10**12, Emin=-(10**12))


def _nanos(value: object) -> int:
    # Real clusters repeat a few spellings ("100m", "128Mi") across 100,000 pods.
    return _cached_nanos(value) if isinstance(value, str) else _parse_nanos(value)


def _parse_nanos(value: object) -> int:
    text = _text(value)
    negative, number, digits, fraction, suffix = _split(value, text)
    if suffix and not _is_letter(suffix[0]):  # "--1", "+-1": a second sign
        raise _unexpected(value, text, len(text) - len(suffix))
    base, exponent = _suffix(value, suffix)
    # The value is ±(digits.fraction) x base^exponent. apimachinery parses the number
    # with an arbitrary-precision decimal when it does not fit its int64 fast path, and
    # that parser needs a digit: "e-10" and ".e-10" are errors, "e3" and "." are 0.
    if base == 10:
        big_path = (max(len(digits), 1) + len(fraction) > _MAX_INT64_FACTORS
                    or exponent - len(fraction) < -9)
    else:  # its own estimate of the digits x 2^exponent needs (".Pi" has too many)
        big_path = bool(fraction) or 15 - max(len(digits), 1) - exponent * 3 // 10 - 1 < 0
    if big_path and not any(c in _DIGITS for c in number):
        raise QuantityError(value, "no digits before the suffix")
    coefficient = (digits + fraction).lstrip("0")
    if not coefficient:
        return 0
    sign = "-" if negative else ""
    scale = exponent if base == 10 else 0
    ctx = _EXACT.copy()
    ctx.prec = len(coefficient) + 40  # room for x2^60 and the nano digits, exactly
    with localcontext(ctx):
        amount = Decimal(f"{sign}{coefficient}E{scale - len(fraction)}")
        if base == 2:
            # Binary suffixes are capped at 2^63-1 upstream (and the cap is exact).
            if amount.adjusted() > 40:
                amount = MAX_QUANTITY.copy_sign(amount)
            else:
                amount = min(amount * 2**exponent, MAX_QUANTITY).max(-MAX_QUANTITY)
        elif amount.copy_abs() > MAX_QUANTITY:
            raise QuantityError(value, _TOO_LARGE)
        if amount.adjusted() < -9:
            # Below a billionth: upstream rounds any non-zero value up to one.
            return -1 if negative else 1
        # Rounded away from zero to a billionth (inf.RoundUp); never past 2^63-1, which
        # is whole.
        return int(amount.scaleb(9).to_integral_value(ROUND_UP))


_cached_nanos = lru_cache(maxsize=4096)(_parse_nanos)


def _text(value: object) -> str:
    """The quantity's text as Kubernetes would read it from JSON: strings as they are,
    numbers as their JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QuantityError(value, 'expected a string ("500m", "1Gi") or a number')
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(value, "not a finite number")
        return repr(value)
    if abs(value) > 2**63 - 1:  # before str(): a 5000-digit int has no decimal text
        raise QuantityError(value, _TOO_LARGE)
    return str(value)


def _split(value: object, text: str) -> tuple[bool, str, str, str, str]:
    """(negative, number as written, integer digits without leading zeros, fraction
    digits, suffix): apimachinery's parseQuantityString."""
    if not text:
        raise QuantityError(value, f"empty ({_EXAMPLES})")
    pos, end = 0, len(text)
    negative = text[0] == "-"
    if text[0] in "+-":
        pos = 1
    start = pos
    while pos < end and text[pos] == "0":
        pos += 1
    digits_start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    digits = text[digits_start:pos]
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        fraction_start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[fraction_start:pos]
    number = text[start:pos] if pos > start else ""
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_START:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        if suffix_start < end and _is_letter(text[suffix_start]) and _is_letter(text[pos]):
            raise _unknown_suffix(value, text[suffix_start:])  # "1KB", "1gi", "Infinity"
        raise _unexpected(value, text, pos)
    return negative, number, digits, fraction, text[suffix_start:]


def _is_letter(c: str) -> bool:
    return c.isascii() and c.isalpha()


def _unexpected(value: object, text: str, pos: int) -> QuantityError:
    return QuantityError(value, f"unexpected {json.dumps(text[pos], ensure_ascii=False)} at "
                                f"character {pos + 1}; a quantity is an optional sign, ASCII "
                                f"digits with an optional '.', and a suffix ({_EXAMPLES})")


def _unknown_suffix(value: object, suffix: str) -> QuantityError:
    return QuantityError(value, f"unknown suffix {json.dumps(suffix, ensure_ascii=False)} "
                                f"(Kubernetes accepts {_SUFFIXES}; suffixes are "
                                "case-sensitive)")


def _suffix(value: object, suffix: str) -> tuple[int, int]:
    """(base, exponent) of a suffix: apimachinery's suffixer.interpret."""
    if suffix in _DECIMAL_SI:
        return 10, _DECIMAL_SI[suffix]
    if suffix in _BINARY_SI:
        return 2, _BINARY_SI[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = parse_int64(suffix[1:])
        if exponent is None:
            raise QuantityError(value, f"unknown suffix {json.dumps(suffix)} (an exponent "
                                       "is e or E and a signed integer, e.g. e3, e-3)")
        if exponent not in INT32:
            raise QuantityError(value, f"exponent {exponent} is out of range (Kubernetes "
                                       "keeps exponents in an int32 and would wrap it)")
        return 10, exponent
    raise _unknown_suffix(value, suffix)


# apimachinery's Format names (resource.Format), by the base and spelling of a suffix.
GO_DECIMAL_SI = "DecimalSI"
GO_BINARY_SI = "BinarySI"
GO_DECIMAL_EXPONENT = "DecimalExponent"
_NANO_SCALE = -9


def go_amount(value: object) -> tuple[int, int, str, str] | None:
    """How apimachinery's ParseQuantity holds `value` on its int64 fast path: (value,
    scale, format, the cached string it keeps for canonical spellings or ""), so a
    message that prints a Quantity struct with Go's %v (scheduler-plugins' "resource
    gap") can be written as upstream writes it. None when apimachinery would take its
    arbitrary-precision path (whose %v prints a pointer) or `value` is no quantity."""
    try:
        text = _text(value)
        if text == "0":
            return 0, 0, GO_DECIMAL_SI, text
        negative, _, digits, fraction, suffix = _split(value, text)
        base, exponent = _suffix(value, suffix)
    except QuantityError:
        return None
    num = digits or "0"
    if base == 2:
        fmt = GO_BINARY_SI
        if exponent < 0 or fraction:
            return None
        mantissa, scale = 1 << exponent, 0
        precision = 15 - len(num) - exponent * 3 // 10 - 1
    else:
        fmt = GO_DECIMAL_SI if suffix in _DECIMAL_SI else GO_DECIMAL_EXPONENT
        mantissa, scale = 1, exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(fraction))
    if precision < 0:
        return None
    scale -= len(fraction)
    if scale < _NANO_SCALE:
        return None
    shifted = num + fraction
    amount = int(shifted) * mantissa
    if amount > 2**63 - 1:
        return None
    amount = -amount if negative else amount
    if base == 2:
        canonical = exponent % 10 == 0 and int(shifted) & 0x07 != 0
    else:
        canonical = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
    return amount, scale, fmt, text if canonical else ""
