"""`policyd check-config PROFILE`: validate a PolicydConfiguration without a cluster.

Runs exactly the validation `policyd run` runs before its first request (the strict
schema, plugin names and extension points, pluginConfig, ranges, and lint of every
policy the profile loads) and reports every problem in the formats of `policyd lint`.
Exit 0 valid (warnings allowed unless --strict), 1 problems, 2 unreadable file or usage
error. Imports nothing from the Kubernetes client, so it answers in a fraction of a
second.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from policyd.cli.options import FORMAT_HELP, problem_format
from policyd.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE


def check_config(
    profile: Path = typer.Argument(  # noqa: B008 - typer's declaration style
        # readable=False: an unreadable profile gets the one-line file error (exit 2)
        # that lint and test print, not click's usage box.
        ..., metavar="PROFILE", help="A PolicydConfiguration file.", readable=False),
    output_format: str = typer.Option(
        None, "--format", "-f", show_default=False,
        help=FORMAT_HELP),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail the run too."),
) -> None:
    """Validate a profile and the policies it loads, as `policyd run` would, offline."""
    fmt = problem_format(output_format)
    from policyd.config.loader import validate_config_file
    from policyd.config.validate import is_unreadable
    from policyd.lint.reporters import Report, get_reporter

    if profile.is_dir():
        print(f"policyd check-config: error: {profile}: is a directory; expected a "
              "PolicydConfiguration file", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    config, _, problems = validate_config_file(profile)
    files = 1 + len(config.policy_files)
    report = Report(problems, files, strict, tool="policyd check-config")
    sys.stdout.write(get_reporter(fmt)(report))
    unreadable = [p for p in problems if is_unreadable([p])]
    for p in unreadable:  # the profile or a policy it loads: exit 2, as in lint
        print(f"policyd check-config: error: {p.file}: {p.message}", file=sys.stderr)
    if unreadable:
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_PROBLEMS if report.failed else EXIT_OK)
