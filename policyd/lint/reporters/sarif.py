"""SARIF 2.1.0, the format code-scanning tools (GitHub code scanning) ingest."""

from __future__ import annotations

import json
from typing import Any

from policyd import __version__
from policyd.lint.reporters import Report

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render(report: Report) -> str:
    rules = sorted({p.rule for p in report.problems})
    results: list[dict[str, Any]] = []
    for p in report.problems:
        location: dict[str, Any] = {"artifactLocation": {"uri": p.file}}
        if p.line:
            location["region"] = {"startLine": p.line, "startColumn": max(1, p.column)}
        result: dict[str, Any] = {
            "ruleId": p.rule,
            "ruleIndex": rules.index(p.rule),
            "level": p.level,
            "message": {"text": p.message + (f" (at {p.path})" if p.path else "")},
            "locations": [{"physicalLocation": location}],
        }
        if p.path:
            result["properties"] = {"jsonPath": p.path}
        results.append(result)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": report.tool,
                "version": __version__,
                "informationUri": "https://policyd.io/docs/policy-language",
                "rules": [{"id": r, "name": r} for r in rules],
            }},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"
