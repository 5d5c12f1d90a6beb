"""Kubernetes' CEL function libraries for quantities, semantic versions and regular
expressions, declared for cel-expr-python: the names, overloads, types and error texts
of k8s.io/apiserver/pkg/cel/library (quantity.go, semverlib.go at SemverVersion 1,
regex.go). `find` and `findAll` run Python's `re`, which agrees with Go's RE2 on the
patterns selectors use (RE2 has no backreferences or lookaround; Python accepts them).

cel-cpp binds one implementation per function name and argument kinds, and both
Quantity and Semver are messages to it, so `isGreaterThan`, `isLessThan` and
`compareTo` (declared for both types, as upstream) share one implementation that looks
at which type it was given; the type checker has already kept the two apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any

from cel_expr_python import cel

from policyd.cel import quantity as quantity_text
from policyd.cel import semver as semver_text
from policyd.cel import values

QUANTITY = cel.Type(values.QUANTITY_TYPE)
SEMVER = cel.Type(values.SEMVER_TYPE)
_B, _I, _S, _D = cel.Type.BOOL, cel.Type.INT, cel.Type.STRING, cel.Type.DOUBLE


class LibraryError(ValueError):
    """A library function's failure; str() is upstream's text (cel-cpp adds nothing)."""


def _quantity(text: str) -> Any:
    try:
        return values.quantity_from_text(text)
    except quantity_text.QuantityParseError as e:
        raise LibraryError(str(e)) from None


def _is_quantity(text: str) -> bool:
    try:
        quantity_text.parse(text)
    except quantity_text.QuantityParseError:
        return False
    return True


def _semver(text: str, normalize: bool = False) -> Any:
    try:
        if normalize:
            return values.semver_message(semver_text.parse_normalized(text))
        return values.semver_from_text(text)
    except semver_text.SemverParseError as e:
        raise LibraryError(str(e)) from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _semver(text, normalize)
    except LibraryError:
        return False
    return True


def _compare(a: Any, b: Any) -> int:
    if values.is_quantity(a) and values.is_quantity(b):
        qa, qb = values.quantity_value(a), values.quantity_value(b)
        return (qa > qb) - (qa < qb)
    if values.is_semver(a) and values.is_semver(b):
        return semver_text.compare(values.semver_value(a), values.semver_value(b))
    raise LibraryError("no such overload")


def _add(a: Any, b: Any) -> Any:
    return values.quantity_message(values.quantity_value(a) + _operand(b))


def _sub(a: Any, b: Any) -> Any:
    return values.quantity_message(values.quantity_value(a) - _operand(b))


def _operand(b: Any) -> Decimal:
    return values.quantity_value(b) if values.is_quantity(b) else Decimal(int(b))


def _as_integer(q: Any) -> int:
    whole = quantity_text.as_int64(values.quantity_value(q))
    if whole is None:
        raise LibraryError("cannot convert value to integer")
    return whole


def _sign(q: Any) -> int:
    v = values.quantity_value(q)
    return (v > 0) - (v < 0)


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        # Go's regexp error text differs from Python's; the prefix is upstream's.
        raise LibraryError(f"Illegal regex: {e}") from None


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _fn(name: str, *overloads: cel.Overload) -> cel.FunctionDecl:
    return cel.FunctionDecl(name, list(overloads))


def _member(overload_id: str, ret: cel.Type, params: list[cel.Type],
            impl: Callable[..., Any] | None = None) -> cel.Overload:
    if impl is None:  # declared for the checker; the named overload's impl runs it
        return cel.Overload(overload_id, ret, params, is_member=True)
    return cel.Overload(overload_id, ret, params, is_member=True, impl=impl)


def kubernetes_functions() -> list[cel.FunctionDecl]:
    """quantity() and semver() with their methods, as Kubernetes' base environment
    declares them (overload ids are upstream's)."""
    cmp_gt: Callable[[Any, Any], bool] = lambda a, b: _compare(a, b) == 1  # noqa: E731
    cmp_lt: Callable[[Any, Any], bool] = lambda a, b: _compare(a, b) == -1  # noqa: E731
    q, s = QUANTITY, SEMVER
    return [
        _fn("quantity", cel.Overload("string_to_quantity", q, [_S], impl=_quantity)),
        _fn("isQuantity", cel.Overload("is_quantity_string", _B, [_S], impl=_is_quantity)),
        _fn("sign", cel.Overload("quantity_sign", _I, [q], impl=_sign)),
        _fn("isGreaterThan", _member("quantity_is_greater_than", _B, [q, q], cmp_gt),
            _member("semver_is_greater_than", _B, [s, s])),
        _fn("isLessThan", _member("quantity_is_less_than", _B, [q, q], cmp_lt),
            _member("semver_is_less_than", _B, [s, s])),
        _fn("compareTo", _member("quantity_compare_to", _I, [q, q], _compare),
            _member("semver_compare_to", _I, [s, s])),
        _fn("asApproximateFloat", _member(
            "quantity_get_float", _D, [q], lambda x: float(values.quantity_value(x)))),
        _fn("asInteger", _member("quantity_get_int", _I, [q], _as_integer)),
        _fn("isInteger", _member(
            "quantity_is_integer", _B, [q],
            lambda x: quantity_text.as_int64(values.quantity_value(x)) is not None)),
        _fn("add", _member("quantity_add", q, [q, q], _add),
            _member("quantity_add_int", q, [q, _I], _add)),
        _fn("sub", _member("quantity_sub", q, [q, q], _sub),
            _member("quantity_sub_int", q, [q, _I], _sub)),
        _fn("find", _member("string_find_string", _S, [_S, _S], _find)),
        _fn("findAll", _member("string_find_all_string", cel.Type.List(_S), [_S, _S], _find_all),
            _member("string_find_all_string_int", cel.Type.List(_S), [_S, _S, _I], _find_all)),
        _fn("semver", cel.Overload("string_to_semver", s, [_S], impl=_semver),
            cel.Overload("string_bool_to_semver", s, [_S, _B], impl=_semver)),
        _fn("isSemver", cel.Overload("is_semver_string", _B, [_S], impl=_is_semver),
            cel.Overload("is_semver_string_bool", _B, [_S, _B], impl=_is_semver)),
        _fn("major", _member("semver_major", _I, [s],
                             lambda v: values.semver_value(v).major)),
        _fn("minor", _member("semver_minor", _I, [s],
                             lambda v: values.semver_value(v).minor)),
        _fn("patch", _member("semver_patch", _I, [s],
                             lambda v: values.semver_value(v).patch)),
    ]
