"""`policyd test PATH...`: run PolicyTest files against the policies they name.

`--format` one of `policyd.policytest.render.FORMATS`. Exit 0 when every test passes,
1 when any fails or when no test is found (an empty run must not look green), 2 for
bad input (unreadable or invalid test files, policies with errors, unknown names).
"""

from __future__ import annotations

import sys

import typer

from policyd.cli.options import one_of
from policyd.policytest.render import FORMATS


def test(
    paths: list[str] = typer.Argument(  # noqa: B008 - typer's declaration style
        ..., metavar="PATH...", help="PolicyTest files or directories (*.yaml, *.yml)."),
    output_format: str = typer.Option("text", "--format", "-f",
                                      help=f"{one_of(FORMATS)}."),
) -> None:
    """Run PolicyTest files: expected filter verdicts, scores and placements."""
    if output_format not in FORMATS:
        raise typer.BadParameter(f"{output_format!r} is not one of {', '.join(FORMATS)}",
                                 param_hint="--format")
    from policyd.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
    from policyd.policytest.render import render
    from policyd.policytest.run_tests import run_tests
    from policyd.problems import format_problem

    result = run_tests(paths)
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
