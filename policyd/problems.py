"""A problem found in an input file, as a plain value.

Loaders, schema validation and semantic checks all yield `Problem`s; reporters only
format them. Tests compare (line, column, rule), not wording.
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
        """`file:line:col: level: message [rule] (at path)`: one line for logs and errors."""
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        at = f" (at {self.path})" if self.path else ""
        return f"{where}: {self.level}: {self.message} [{self.rule}]{at}"

    @property
    def is_error(self) -> bool:
        return self.level == ERROR

    def sort_key(self) -> tuple[str, int, int, int, str, str]:
        return (self.file, self.document, self.line, self.column, self.rule, self.message)


def count(problems: list[Problem]) -> tuple[int, int]:
    """(errors, warnings)."""
    errors = sum(1 for p in problems if p.level == ERROR)
    return errors, len(problems) - errors


