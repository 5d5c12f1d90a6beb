"""Output format choices, made from the registries of what renders them: the problem
formats of lint and check-config (the lint reporters), and `choice_enum` for the
commands whose formats are a typer choice (audit, explain, simulate)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

import typer

from policyd.lint.reporters import REPORTERS

PROBLEM_FORMATS = tuple(REPORTERS)


def one_of(names: Sequence[str]) -> str:
    """`a, b or c`: a choice in help text."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


FORMAT_HELP = f"{one_of(PROBLEM_FORMATS)} (default: text; github on GitHub Actions)."


def choice_enum(name: str, names: Iterable[str]) -> Any:
    """A StrEnum with one member per name, each its own value: typer offers an Enum's
    values as the choice (`<text|json>` in --help, the usual error for anything else),
    so the choice is made from the registry instead of a class that lists it again.
    Callers declare it as `str` to the type checker (members are strs)."""
    return StrEnum(name, {n: n for n in names})


def problem_format(requested: str | None) -> str:
    """The output format to use: the one asked for, else github on GitHub Actions (so
    problems become annotations on the pull request), else text."""
    fmt = requested or ("github" if os.environ.get("GITHUB_ACTIONS") else "text")
    if fmt not in REPORTERS:
        raise typer.BadParameter(f"{fmt!r} is not one of {', '.join(REPORTERS)}",
                                 param_hint="--format")
    return fmt
