"""A problem found in an input file, as a plain value, and its one-line form.

Loaders, schema validation, semantic checks and profile validation all yield
`Problem`s; reporters only format them. Tests compare (line, column, rule), not wording.
A leaf module: every layer reports problems, so this imports nothing from policyd.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Level = Literal["error", "warning"]
ERROR: Level = "error"
WARNING: Level = "warning"


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding. `line`/`column` are 1-based (0 when the file has no position, e.g.
    a file that cannot be read); `path` is the JSON path inside the document
    (`spec.filters[0].id`), "" for the document or file itself."""

    file: str
    line: int
    column: int
    rule: str
    level: Level
    message: str
    path: str = ""
    # Extra lines shown under the message by text-like reporters (a JMESPath caret).
    detail: tuple[str, ...] = field(default=(), compare=False)
    document: int = 0  # index of the YAML document in the file, 0-based

    def __str__(self) -> str:
        return format_problem(self)

    @property
    def is_error(self) -> bool:
        return self.level == ERROR

    def sort_key(self) -> tuple[str, int, int, int, str, str]:
        return (self.file, self.document, self.line, self.column, self.rule, self.message)


def field_problem(path: str, message: str, rule: str = "plugin-args") -> Problem:
    """A problem at a field path of a value that has no file yet (a plugin's args, a
    pod's spread constraint): whoever read the value from a file places it there."""
    return Problem(file="", line=0, column=0, rule=rule, level=ERROR, message=message,
                   path=path)


def format_problem(p: Problem, *, with_level: bool = True) -> str:
    """`file:line:col: level: message [rule] (at path)`, the one line every command
    prints for a problem (`file: ...` when it has no position). Without the level where
    the surrounding text already says these are errors (an invalid profile)."""
    where = f"{p.file}:{p.line}:{p.column}" if p.line else p.file
    level = f"{p.level}: " if with_level else ""
    at = f" (at {p.path})" if p.path else ""
    return f"{where}: {level}{p.message} [{p.rule}]{at}"


