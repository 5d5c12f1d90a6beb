"""The one output-format option every command with formats declares (kubectl's
`-o/--output`, with `-f/--format` kept as aliases), and its choices, made from the
registries of what renders them: the problem formats of lint and check-config (the
lint reporters), and `choice_enum` for the commands whose formats are a typer choice
(audit, explain, simulate). Also kube-scheduler's `--feature-gates`, which `run` and
`check-config` take alike."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Annotated, Any

import typer

from policyd.errors import PolicydError
from policyd.lint.reporters import REPORTERS

PROBLEM_FORMATS = tuple(REPORTERS)

# The names of the output-format option, the same on every command: `-o/--output` as
# kubectl spells it, then `--format/-f`, which lint, test and check-config used first and
# CI configurations still pass. One click option with four names, so both spellings
# are documented in --help and validated alike.
OUTPUT_FLAGS = ("--output", "-o", "--format", "-f")
# How errors about the option name it.
OUTPUT_HINT = "--output"


def one_of(names: Sequence[str]) -> str:
    """`a, b or c`: a choice in help text."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def format_help(names: Sequence[str], default: str = "text") -> str:
    """The help of a format option whose choices are `names` (not a typer choice)."""
    return f"Output format: {one_of(names)} (default: {default})."


FORMAT_HELP = (f"Output format: {one_of(PROBLEM_FORMATS)} (default: text; github on "
               "GitHub Actions).")


def output_option(names: Sequence[str] | None = None, help: str | None = None) -> Any:
    """The `-o/--output` (alias `-f/--format`) option, for `Annotated[...]`: a typer
    choice when `names` is None (the parameter is then typed with a `choice_enum`), else
    a plain string whose help lists `names` and which the command checks
    (`checked_format`, `problem_format`)."""
    text = help or ("Output format." if names is None else format_help(names))
    return typer.Option(*OUTPUT_FLAGS, show_default=names is None, help=text)


def yaml_text(document: Any) -> str:
    """A command's JSON document as YAML (`-o yaml`, for kubectl users): the same keys
    and values as `-o json`, block style."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def choice_enum(name: str, names: Iterable[str]) -> Any:
    """A StrEnum with one member per name, each its own value: typer offers an Enum's
    values as the choice (`<text|json>` in --help, the usual error for anything else),
    so the choice is made from the registry instead of a class that lists it again.
    Callers declare it as `str` to the type checker (members are strs)."""
    return StrEnum(name, {n: n for n in names})


def checked_format(requested: str, names: Sequence[str]) -> str:
    """`requested` when it is one of `names`, else a usage error (exit 2) naming them."""
    if requested not in names:
        raise typer.BadParameter(f"{requested!r} is not one of {', '.join(names)}",
                                 param_hint=OUTPUT_HINT)
    return requested


def problem_format(requested: str | None, extra: Sequence[str] = ()) -> str:
    """The output format to use: the one asked for, else github on GitHub Actions (so
    problems become annotations on the pull request), else text. `extra` are formats
    a command offers beside the lint reporters (check-config's yaml)."""
    fmt = requested or ("github" if os.environ.get("GITHUB_ACTIONS") else "text")
    return checked_format(fmt, (*REPORTERS, *extra))


FeatureGatesOpt = Annotated[list[str] | None, typer.Option(
    "--feature-gates", metavar="NAME=BOOL,...",
    help="kube-scheduler v1.36 feature gates, as its own flag takes them (e.g. "
         "SchedulerPopFromBackoffQ=false; repeatable); each overrides the profile's "
         "featureGates. Unknown or locked gates, and gates policyd runs only at "
         "their default, are refused (exit 2).")]


def feature_gate_settings(flags: Sequence[str] | None) -> tuple[tuple[str, bool], ...]:
    """--feature-gates (each use joined, as component-base joins them) as settings, or
    a usage error (exit 2) in component-base's words. Dependencies are checked with
    the profile's gates, by validation."""
    from policyd.features import FeatureGateError, check_settings, parse_flag

    text = ",".join(flags or [])
    try:
        return tuple(check_settings(parse_flag(text)).items())
    except FeatureGateError as exc:
        raise PolicydError(f"invalid argument {text!r} for \"--feature-gates\" flag: "
                           f"{exc}") from None
