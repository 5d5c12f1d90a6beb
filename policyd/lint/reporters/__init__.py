"""Reporters turn a lint run's problems into text; each is a module found by name.

A reporter module defines `render(report: Report) -> str`. New formats are new
modules listed in `REPORTERS`; the linter itself never formats anything.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from policyd.problems import Problem

REPORTERS = {
    "text": "policyd.lint.reporters.text",
    "json": "policyd.lint.reporters.jsonout",
    "github": "policyd.lint.reporters.github",
    "sarif": "policyd.lint.reporters.sarif",
}


@dataclass(frozen=True, slots=True)
class Report:
    problems: list[Problem]
    files: int  # files checked
    strict: bool = False  # warnings fail the run
    # The command that ran, for formats that name their tool (github titles, SARIF).
    tool: str = "policyd lint"

    @property
    def errors(self) -> int:
        return sum(1 for p in self.problems if p.level == "error")

    @property
    def warnings(self) -> int:
        return len(self.problems) - self.errors

    @property
    def failed(self) -> bool:
        return self.errors > 0 or (self.strict and self.warnings > 0)


def get_reporter(name: str) -> Callable[[Report], str]:
    """The `render` function of reporter `name`; KeyError for unknown names."""
    module = importlib.import_module(REPORTERS[name])
    render: Callable[[Report], str] = module.render
    return render
