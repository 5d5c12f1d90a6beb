"""Integers as Go's strconv.ParseInt(text, 10, 64) reads them, for the places where
Kubernetes does (label selector Gt/Lt, quantity exponents): an optional sign and ASCII
digits within int64. Python's int() also takes " 5", "5_0" and "٥", which Kubernetes
rejects."""

from __future__ import annotations

_DIGITS = frozenset("0123456789")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Kubernetes' int32 fields (weights, priorities, counts): the API server and
# kube-scheduler's decoder refuse numbers beyond these.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# The same bounds as ranges, for `value in INT32` checks.
INT32 = range(INT32_MIN, INT32_MAX + 1)
INT64 = range(INT64_MIN, INT64_MAX + 1)


def parse_int64(text: str) -> int | None:
    """The int64 `text` spells, or None if Go's ParseInt would refuse it."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not all(c in _DIGITS for c in body):
        return None
    body = body.lstrip("0") or "0"
    if len(body) > 19:  # before int(): Python refuses to convert thousands of digits
        return None
    n = -int(body) if text[0] == "-" else int(body)
    return n if INT64_MIN <= n <= INT64_MAX else None
