"""`policyd lint PATH...`: check policy files the way CI needs.

Every problem in one run; `-o/--output` (alias `-f/--format`) any lint reporter
(`policyd.lint.reporters`; github is chosen when GITHUB_ACTIONS is set and no format is
given); `--strict` fails on warnings;
`--skip-non-policies` ignores documents of other kinds (for repositories where policies
sit beside manifests). Exit 0
clean, 1 problems, 2 usage errors and paths that do not exist or cannot be read.
Heavy modules are imported inside the command so `policyd lint` stays fast.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from policyd.cli.options import FORMAT_HELP, PROBLEM_FORMATS, output_option, problem_format


def lint(
    paths: list[str] = typer.Argument(  # noqa: B008 - typer's declaration style
        ..., metavar="PATH...", help="Policy files or directories (searched for *.yaml, *.yml)."),
    output_format: Annotated[str | None, output_option(PROBLEM_FORMATS, FORMAT_HELP)] = None,
    strict: bool = typer.Option(False, "--strict", help="Warnings fail the run too."),
    skip_non_policies: bool = typer.Option(
        False, "--skip-non-policies",
        help="Skip documents of other kinds (manifests, CI files) instead of reporting "
             "not-a-policy; for pre-commit hooks over every YAML file."),
    require_autoscaler_visible: bool = typer.Option(
        False, "--require-autoscaler-visible",
        help="Each filter rule of an Enforce-mode policy that cluster-autoscaler and "
             "Karpenter cannot see (nothing kube-scheduler reads expresses it; see "
             "docs/autoscalers.md) is an error (autoscaler-invisible)."),
) -> None:
    """Check SchedulingPolicy files: YAML, schema, Kubernetes names, JMESPath, contradictions."""
    fmt = problem_format(output_format)
    from policyd.lint.reporters import get_reporter
    from policyd.lint.runner import lint_paths

    result = lint_paths(paths, strict=strict, skip_non_policies=skip_non_policies,
                        require_autoscaler_visible=require_autoscaler_visible)
    from policyd.model.k8snames import printable

    text = get_reporter(fmt)(result.report)
    # A value quoted from a policy reaches the terminal escaped (ESC, bidi overrides).
    sys.stdout.write(printable(text) if fmt == "text" else text)
    for bad in result.bad_paths:
        print(f"policyd lint: error: {bad}", file=sys.stderr)
    raise typer.Exit(result.exit_code)
