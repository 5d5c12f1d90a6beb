"""cel-cpp's error texts put into the words cel-go (kube-scheduler's CEL) uses.

Users compare policyd's messages with kube-scheduler's, so a failure must read the
same: the library reports `Key not found in map : "model"` where cel-go says
`no such key: model`. Every text this module rewrites is listed below beside the
upstream text; anything else passes through with only the status code the Python
binding adds ("NOT_FOUND: ", " [INVALID_ARGUMENT]") removed.
"""

from __future__ import annotations

import re

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


def compile_issues(text: str) -> str:
    """The checker's issues as cel-go's `Issues.String()`: one "ERROR: <input>:L:C: ..."
    block per problem, each with the source line and a caret under the column."""
    return strip_status(text)


def first_position(text: str) -> tuple[int, int] | None:
    """(line, column), 1-based, of the first issue; None when the text names none."""
    match = _POSITION.search(text)
    if match is None:
        return None
    # cel's column in "<input>:L:C" is 1-based already.
    return int(match.group(1)), int(match.group(2))
