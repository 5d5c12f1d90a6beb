"""`policyd test PATH...`: run PolicyTest files against the policies they name.

`-o/--output` (alias `-f/--format`) one of `policyd.policytest.render.FORMATS`; `--config`
(and `--scheduler-name`) the profile of PolicyTests that name none. Exit 0 when every test
passes, 1 when any fails or when no test is found (an empty run must not look green), 2 for
bad input (unreadable or invalid test files, policies with errors, unknown names).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from policyd.cli.options import checked_format, output_option
from policyd.policytest.render import FORMATS

if TYPE_CHECKING:  # the runner (numpy, the engine) only once the command runs
    from policyd.policytest.schema import ProfileSpec


def test(
    paths: list[str] = typer.Argument(  # noqa: B008 - typer's declaration style
        ..., metavar="PATH...", help="PolicyTest files or directories (*.yaml, *.yml)."),
    output_format: Annotated[str, output_option(FORMATS)] = "text",
    config: Path | None = typer.Option(  # noqa: B008 - typer's declaration style
        None, "--config", help="PolicydConfiguration whose profile runs the whole-scheduler "
        "cases of every PolicyTest without a spec.profile of its own (their policy files "
        "and inline policies join it). Default: kube-scheduler's default profile."),
    scheduler_name: str | None = typer.Option(
        None, "--scheduler-name", help="Which profile of --config (by schedulerName); "
        "needed when it has several."),
) -> None:
    """Run PolicyTest files: expected filter verdicts, scores and placements."""
    checked_format(output_format, FORMATS)
    from policyd.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
    from policyd.policytest.render import render
    from policyd.policytest.run_tests import run_tests
    from policyd.problems import format_problem

    if scheduler_name is not None and config is None:
        raise typer.BadParameter("needs --config", param_hint="--scheduler-name")
    from policyd.policytest.file_ref import unusable

    why = unusable(config) if config is not None else None
    if why is not None:
        raise typer.BadParameter(why, param_hint="--config")
    profile: ProfileSpec | None = None
    if config is not None:
        profile = {"file": str(config)}
        if scheduler_name is not None:
            profile["schedulerName"] = scheduler_name
    result = run_tests(paths, profile=profile)
    from policyd.model.k8snames import printable

    text = render(result, output_format)
    # Names and values from the test files reach the terminal escaped.
    sys.stdout.write(printable(text) if output_format == "text" else text)
    for p in result.problems:
        print(format_problem(p), file=sys.stderr)
    for bad in result.bad_paths:
        print(f"policyd test: error: {bad}", file=sys.stderr)
    if result.bad_input:
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_PROBLEMS if result.failed or not result.cases else EXIT_OK)
