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
    # cel-go: list.Get's "index out of range in list size".
    (re.compile(r"^[Ii]ndex out of bounds.*$"), "index out of range"),
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
    fixed = [_first_name(b if i == 0 else "ERROR: " + b, expression, objects or {})
             for i, b in enumerate(blocks)]
    return "\n".join(fixed)


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
