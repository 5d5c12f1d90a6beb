"""One lint run: load every path, collect every problem, decide the exit code.

Kept apart from the CLI so tests drive it directly; reporters format its `Report`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from policyd.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from policyd.lint.reporters import Report


@dataclass(frozen=True, slots=True)
class LintResult:
    report: Report
    bad_paths: list[str]  # missing or unreadable: usage errors

    @property
    def exit_code(self) -> int:
        if self.bad_paths:
            return EXIT_USAGE
        return EXIT_PROBLEMS if self.report.failed else EXIT_OK


def lint_paths(paths: Iterable[str | Path], *, strict: bool = False) -> LintResult:
    from policyd.policy.loader import load_policy_set

    result = load_policy_set(paths, compile=False)
    problems = sorted(result.problems, key=lambda p: p.sort_key())
    return LintResult(Report(problems, len(result.files), strict), result.bad_paths)
