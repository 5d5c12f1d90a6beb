"""Machine-readable lint output: one JSON object with the problems and a summary."""

from __future__ import annotations

import json
from typing import Any

from policyd.lint.reporters import Report


def render(report: Report) -> str:
    return json.dumps(document(report), indent=2) + "\n"


def document(report: Report) -> dict[str, Any]:
    """The JSON object `render` prints (check-config adds its `effective` to it)."""
    return {
        "problems": [
            {"file": p.file, "line": p.line, "column": p.column, "path": p.path,
             "rule": p.rule, "level": p.level, "message": p.message,
             **({"detail": list(p.detail)} if p.detail else {})}
            for p in report.problems
        ],
        "summary": {"files": report.files, "errors": report.errors,
                    "warnings": report.warnings, "strict": report.strict,
                    "failed": report.failed},
    }
