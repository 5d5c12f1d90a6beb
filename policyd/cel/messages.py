"""cel-cpp's error texts put into the words cel-go (kube-scheduler's CEL) uses.

Users compare policyd's messages with kube-scheduler's, so a failure must read the
same: the library reports `Key not found in map : "model"` where cel-go says
`no such key: model`. Every text this module rewrites is listed below beside the
upstream text; anything else passes through with only the status code the Python
binding adds ("NOT_FOUND: ", " [INVALID_ARGUMENT]") removed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# "INVALID_ARGUMENT: " before, " [INVALID_ARGUMENT]" after: absl status codes.
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r" \[[A-Z_]+\]$")
_POSITION = re.compile(r"ERROR: <input>:(\d+):(\d+): ")

_RUNTIME: list[tuple[re.Pattern[str], str]] = [
    # cel-go: types.ValOrErr(..., "no such key: %v", key) (%v: a string unquoted).
    (re.compile(r'^Key not found in map : "(.*)"$', re.S), r"no such key: \1"),
    (re.compile(r"^Key not found in map : (.*)$", re.S), r"no such key: \1"),
    # cel-go: types.MaybeNoSuchOverloadErr -> "no such overload".
    (re.compile(r"^No matching overloads found : .*$", re.S), "no such overload"),
    # cel-go: errDivideByZero, errModulusByZero.
    (re.compile(r"^divide by zero$"), "division by zero"),
    (re.compile(r"^modulus by zero$"), "modulus by zero"),
    # cel-go's list index error.
    (re.compile(r"^Index error: index=(-?\d+) size=\d+$"), r"index out of bounds: \1"),
    # cel-go's string conversions and range errors.
    (re.compile(r"^cannot convert string to (int|uint|double)$"),
     r"type conversion error from 'string' to '\1'"),
    (re.compile(r"^(int64|double) out of uint64 range$"), "unsigned integer overflow"),
    (re.compile(r"^(uint64|double) out of int64 range$"), "integer overflow"),
    # RE2's parse errors in Go regexp's words, for the two a typo most often makes.
    (re.compile(r"^invalid regular expression: missing ([\])]): (.*)$", re.S),
     r"error parsing regexp: missing closing \1: `\2`"),
]


def strip_status(text: str) -> str:
    text = text.strip()
    text = _STATUS_SUFFIX.sub("", text)
    return _STATUS_PREFIX.sub("", text, count=1)


def runtime(text: str) -> str:
    """An evaluation error in cel-go's words."""
    text = strip_status(text)
    for pattern, replacement in _RUNTIME:
        if pattern.match(text):
            return pattern.sub(replacement, text)
    return text


def compile_issues(text: str, expression: str,
                   objects: Mapping[str, frozenset[str]] | None = None) -> str:
    """The checker's issues as cel-go's `Issues.String()`: one "ERROR: <input>:L:C: ..."
    block per problem, each with the source line and a caret under the column.

    One difference is rewritten. For `gpu.model` with no `gpu` declared, cel-cpp
    reports the whole qualified name at its last dot, cel-go the first name where it
    starts ("undeclared reference to 'gpu'" at 1:1). And a variable declared as
    qualified names (`objects`: `device` -> its fields, for `device.driver`, ...) is an
    object to cel-go, which reports an unknown field `device.model` as
    "undefined field 'model'" at the dot."""
    blocks = strip_status(text).split("\nERROR: ")
    fixed = [_member_call(_first_name(b if i == 0 else "ERROR: " + b, expression,
                                      objects or {}), expression)
             for i, b in enumerate(blocks)]
    return "\n".join(fixed).replace("cannot be the range of a comprehension",
                                    "cannot be range of a comprehension")


_NO_OVERLOAD = re.compile(r"^(ERROR: <input>:(\d+):(\d+): found no matching overload for "
                          r"'[^']*' applied to ')\((.*)\)('.*)$", re.S)


def _member_call(block: str, expression: str) -> str:
    """cel-go writes a method call's argument types as `target.(args)`, cel-cpp as
    `(target, args)`. A method call is one whose name follows a dot: the reported
    column is the "(" after the name."""
    match = _NO_OVERLOAD.match(block)
    if match is None:
        return block
    line, column = int(match.group(2)), int(match.group(3))
    lines = expression.split("\n")
    if not 1 <= line <= len(lines):
        return block
    source = lines[line - 1]
    if source[column - 1:column] != "(":  # an operator, not a call
        return block
    before = source[:column - 1].rstrip()
    name = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", before)
    if name is None or not before[:name.start()].rstrip().endswith("."):
        return block
    types = _split_types(match.group(4))
    if not types:
        return block
    return f"{match.group(1)}{types[0]}.({', '.join(types[1:])}){match.group(5)}"


def _split_types(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "(<":
            depth += 1
        elif c in ")>":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    return [*parts, last] if last else parts


_UNDECLARED = re.compile(r"^ERROR: <input>:(\d+):(\d+): undeclared reference to "
                         r"'([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)' "
                         r"\(in container '(.*?)'\)")


def _first_name(block: str, expression: str, objects: Mapping[str, frozenset[str]]) -> str:
    match = _UNDECLARED.match(block)
    if match is None:
        return block
    line, column, name = int(match.group(1)), int(match.group(2)), match.group(3)
    lines = expression.split("\n")
    if not 1 <= line <= len(lines):
        return block
    source = lines[line - 1]
    parts = name.split(".")
    # The reported column is the last dot's; the name, written without spaces,
    # starts that many characters before it.
    start = column - (len(name) - len(parts[-1]) - 1)
    if start < 1 or source[start - 1:start - 1 + len(name)] != name:
        return block
    if parts[0] in objects:
        if parts[1] in objects[parts[0]]:
            return block
        where, message = start + len(parts[0]), f"undefined field '{parts[1]}'"
    else:
        where = start
        message = f"undeclared reference to '{parts[0]}' (in container '{match.group(4)}')"
    return (f"ERROR: <input>:{line}:{where}: {message}\n | {source}\n"
            f" | {'.' * (where - 1)}^")


def first_position(text: str) -> tuple[int, int] | None:
    """(line, column), 1-based, of the first issue; None when the text names none."""
    match = _POSITION.search(text)
    if match is None:
        return None
    # cel's column in "<input>:L:C" is 1-based already.
    return int(match.group(1)), int(match.group(2))
