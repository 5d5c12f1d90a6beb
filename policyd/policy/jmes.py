"""JMESPath for policies: compiled once, with policyd's extra functions, and errors that
point into the expression.

Extra functions (documented in docs/policy-language.md):
- `quantity(s)`: a Kubernetes quantity (`"16Gi"`, `"500m"`) as a number, null when
  it does not parse, so `quantity(node.status.allocatable.memory) > quantity('8Gi')`
  works without parsing quantities by hand.
- `label(obj, key)` / `annotation(obj, key)`: `obj.metadata.labels[key]`, null when
  absent, for keys with dots and slashes that are awkward to quote.

`to_number` is JMESPath's, held to its specification: a string is a number only if it is
a JSON number (python-jmespath's also took "Infinity", "1_000", " 1", "١٢"), and one
beyond float64's range ("1e400") is not a number. `number()` reads rule values the same
way, so `numeric` rules and `to_number` agree on what a number is.

Expressions nest at most `MAX_NESTING` levels (brackets, parentheses, function calls,
`!`, `&`) and their parsed tree at most `MAX_TREE_DEPTH` levels (each `.`, `|`, `||`,
`&&`, comparison and projection adds one): the jmespath library parses and evaluates
recursively, so a few thousand levels would otherwise crash the parser or every
evaluation with a RecursionError. Both limits are checked before the library sees the
expression or evaluates it, and far exceed what a readable rule needs.

Missing fields evaluate to null. In JMESPath `null == null` is true, `null != 'x'` is
true, and ordering comparisons (<, <=, >, >=) with null or a non-number are null, which
is false: a node whose field is missing never passes `x > 3` and never fails `x != 'a'`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import jmespath
import jmespath.exceptions
import jmespath.functions
from jmespath.visitor import Options

from policyd.model.quantity import parse_quantity


class PolicyFunctions(jmespath.functions.Functions):  # type: ignore[misc]
    @jmespath.functions.signature({"types": ["string", "number", "null"]})  # type: ignore[untyped-decorator]
    def _func_quantity(self, value: Any) -> float | None:
        if value is None:
            return None
        try:
            return float(parse_quantity(value))
        except ValueError:
            return None

    @jmespath.functions.signature({"types": []})  # type: ignore[untyped-decorator]
    def _func_to_number(self, value: Any) -> int | float | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return value
        if isinstance(value, str):
            return json_number(value)
        return None

    @jmespath.functions.signature({"types": ["object", "null"]}, {"types": ["string"]})  # type: ignore[untyped-decorator]
    def _func_label(self, obj: Any, key: str) -> Any:
        return _meta(obj, "labels", key)

    @jmespath.functions.signature({"types": ["object", "null"]}, {"types": ["string"]})  # type: ignore[untyped-decorator]
    def _func_annotation(self, obj: Any, key: str) -> Any:
        return _meta(obj, "annotations", key)


def _meta(obj: Any, field: str, key: str) -> Any:
    if not isinstance(obj, dict):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    values = meta.get(field)
    return values.get(key) if isinstance(values, dict) else None


OPTIONS = Options(custom_functions=PolicyFunctions())
FUNCTIONS: dict[str, Any] = PolicyFunctions.FUNCTION_TABLE

MAX_NESTING = 64
MAX_TREE_DEPTH = 128
CARET_CONTEXT = 60  # characters shown either side of an error in a long expression
_OPENERS = "([{"
_CLOSERS = ")]}"
_QUOTES = "\"'"


@dataclass(frozen=True, slots=True)
class ExpressionError:
    """A JMESPath problem: message, 0-based offset in the expression, and the caret."""

    message: str
    offset: int
    expression: str

    def caret(self) -> tuple[str, str]:
        """The expression and a caret under the offset; a long expression is cut to
        `CARET_CONTEXT` characters either side of it, marked with `...`."""
        text, offset = self.expression, self.offset
        start, end = max(0, offset - CARET_CONTEXT), offset + CARET_CONTEXT
        head = "..." if start else ""
        tail = "..." if end < len(text) else ""
        return head + text[start:end] + tail, " " * (len(head) + offset - start) + "^"


class ExpressionTooDeep(ValueError):
    """An expression beyond `MAX_NESTING` / `MAX_TREE_DEPTH`; lint reports it first, so
    compiling one means validation was skipped."""


class Expression:
    """A compiled JMESPath expression evaluated with policyd's functions."""

    __slots__ = ("_parsed", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._parsed = _compile(source)

    def search(self, data: Any) -> Any:
        return self._parsed.search(data, options=OPTIONS)


@cache
def _compile(source: str) -> Any:
    parsed, error = _parse(source)
    if error is not None:
        raise ExpressionTooDeep(error.message)
    return parsed


def _parse(source: str) -> tuple[Any, ExpressionError | None]:
    """Parse `source` within the nesting limits: (parsed, None), or (None, the depth
    problem); the library's own ParseError propagates."""
    too_deep = nesting_error(source)
    if too_deep is not None:
        return None, too_deep
    try:
        parsed = jmespath.compile(source)
    except RecursionError:  # a construct the lexical count does not see; never crash
        return None, _too_deep(source, 0, MAX_NESTING)
    if tree_depth(parsed.parsed) > MAX_TREE_DEPTH:
        return None, _too_deep(source, 0, MAX_TREE_DEPTH)
    return parsed, None


def _too_deep(source: str, offset: int, limit: int) -> ExpressionError:
    what = ("brackets, parentheses, function calls, ! and &" if limit == MAX_NESTING
            else "each ., |, ||, &&, comparison, projection and call is a level")
    return ExpressionError(f"JMESPath expression nests deeper than {limit} levels "
                           f"({what}); split it into simpler rules", offset, source)


def nesting_error(source: str) -> ExpressionError | None:
    """The first place where `source` nests deeper than `MAX_NESTING`, found by a scan
    of the text (no recursion), or None.

    Counts open brackets, parentheses and braces (also inside a `literal` JSON value,
    which the library decodes recursively too) and runs of the prefix operators `!`
    and `&` in front of an operand; quoted identifiers and raw strings are skipped.
    """
    frames: list[int] = []  # for each open bracket: the prefix run in front of it
    level = 0  # open brackets + the prefix operators pending in front of them
    run = 0  # prefix operators in front of the current operand
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch in _QUOTES:  # "quoted identifier", 'raw string': nothing nests inside
            i += 1
            while i < n and source[i] != ch:
                i += 2 if source[i] == "\\" else 1
        elif ch in _OPENERS:
            frames.append(run)
            level += 1 + run
            run = 0
        elif ch in _CLOSERS:
            if frames:
                level -= 1 + frames.pop()
            run = 0
        elif ch in "!&":
            if source[i + 1:i + 2] == ("=" if ch == "!" else "&"):
                run = 0  # != and &&: binary operators
                i += 1
            else:
                run += 1  # not, expression reference: each nests its operand
        elif not ch.isspace() and ch != "`":
            run = 0
        if level + run > MAX_NESTING:
            return _too_deep(source, min(i, n - 1), MAX_NESTING)
        i += 1
    return None


def tree_depth(node: Any) -> int:
    """Depth of a parsed expression tree, measured without recursion."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(n, dict):
            stack.extend((c, depth + 1) for c in n.get("children", []) if isinstance(c, dict))
    return deepest


def check(source: str) -> list[ExpressionError]:
    """Every problem in `source`: too deep, a parse error, or unknown functions and
    wrong arity."""
    try:
        parsed, too_deep = _parse(source)
    except jmespath.exceptions.ParseError as exc:
        offset = exc.lex_position if isinstance(exc.lex_position, int) else 0
        offset = max(0, min(offset, len(source)))
        detail = getattr(exc, "message", None) or _parse_reason(exc)
        return [ExpressionError(f"invalid JMESPath: {detail}", offset, source)]
    except jmespath.exceptions.JMESPathError as exc:
        return [ExpressionError(f"invalid JMESPath: {exc}", 0, source)]
    if too_deep is not None:
        return [too_deep]
    errors: list[ExpressionError] = []
    for node in _walk(parsed.parsed):
        if node.get("type") != "function_expression":
            continue
        name = str(node.get("value"))
        entry = FUNCTIONS.get(name)
        offset = max(0, source.find(f"{name}("))
        if entry is None:
            known = ", ".join(sorted(FUNCTIONS))
            errors.append(ExpressionError(f"unknown JMESPath function {name}(); "
                                          f"known functions: {known}", offset, source))
            continue
        sig = entry["signature"]
        nargs = len(node.get("children", []))
        variadic = bool(sig) and sig[-1].get("variadic", False)
        if (nargs < len(sig)) if variadic else (nargs != len(sig)):
            want = f"at least {len(sig)}" if variadic else str(len(sig))
            errors.append(ExpressionError(
                f"JMESPath function {name}() takes {want} argument(s), got {nargs}",
                offset, source))
    return errors


def _parse_reason(exc: Any) -> str:
    token = exc.token_value
    if token is None:
        return "incomplete expression"
    return f"unexpected token {token!r}"


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            yield n
            stack.extend(c for c in n.get("children", []) if isinstance(c, dict))


def truthy(value: Any) -> bool:
    """JMESPath truthiness: false, null, "", [], {} are false; 0 is true."""
    if value is None or value is False:
        return False
    if isinstance(value, str | list | dict):
        return bool(value)
    return True


# RFC 8259's number: no sign but "-", no leading zeros, no bare "." or exponent, ASCII
# digits only, nothing around it.
JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?P<frac>\.[0-9]+)?(?P<exp>[eE][-+]?[0-9]+)?")


def json_number(text: str) -> int | float | None:
    """`text` as a JSON number (an int when written as one), or None when it is not one
    or lies beyond float64 ("1e400"): what JMESPath's to_number accepts."""
    m = JSON_NUMBER.fullmatch(text)
    if m is None:
        return None
    f = float(text)
    if not math.isfinite(f):
        return None
    # Finite, so at most ~310 digits before any exponent: int() can take it.
    return f if m.group("frac") or m.group("exp") else int(text)


def number(value: Any) -> float | None:
    """A rule value (label, annotation, JMESPath result) as a finite number: numbers and
    strings that are JSON numbers, else None (missing)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = json_number(value)
    if isinstance(value, int | float):
        try:
            f = float(value)
        except OverflowError:  # an integer beyond float64
            return None
        return f if math.isfinite(f) else None
    return None
