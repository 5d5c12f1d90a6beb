"""Options shared by the commands that report problems (lint, check-config)."""

from __future__ import annotations

import os

import typer

PROBLEM_FORMATS = ("text", "json", "github", "sarif")

FORMAT_HELP = "text, json, github or sarif (default: text; github on GitHub Actions)."


def problem_format(requested: str | None) -> str:
    """The output format to use: the one asked for, else github on GitHub Actions (so
    problems become annotations on the pull request), else text."""
    fmt = requested or ("github" if os.environ.get("GITHUB_ACTIONS") else "text")
    if fmt not in PROBLEM_FORMATS:
        raise typer.BadParameter(f"{fmt!r} is not one of {', '.join(PROBLEM_FORMATS)}",
                                 param_hint="--format")
    return fmt
