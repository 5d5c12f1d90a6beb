"""Human-readable lint output: `file:line:col: level: message [rule]` plus the JSON path
and any detail lines (a JMESPath expression with a caret under the error)."""

from __future__ import annotations

from policyd.lint.reporters import Report
from policyd.problems import format_problem


def render(report: Report) -> str:
    lines: list[str] = []
    for p in report.problems:
        lines.append(format_problem(p))
        lines.extend(f"    {d}" for d in p.detail)
    files = f"{report.files} file{'s' if report.files != 1 else ''}"
    if report.problems:
        lines.append(f"{report.errors} error(s), {report.warnings} warning(s) in {files}"
                     + (" (--strict: warnings fail)" if report.strict and report.warnings
                        else ""))
    else:
        lines.append(f"{files} checked, no problems")
    return "\n".join(lines) + "\n"
