"""`policyd check-config PROFILE`: validate a PolicydConfiguration without a cluster.

Runs exactly the validation `policyd run` runs before its first request (the strict
schema, plugin names and extension points, pluginConfig, ranges, and lint of every
policy the profile loads) and reports every problem in the formats of `policyd lint`.
`-o json` adds the effective configuration to lint's JSON document (`effective`: the
profiles after expansion, `policyd.config.effective`; null when there are errors), and
`-o yaml` prints that same document as YAML, as kubectl's `--dry-run -o yaml` shows
what would be applied.
Exit 0 valid (warnings allowed unless --strict), 1 problems, 2 unreadable file or usage
error. Imports nothing from the Kubernetes client, so it answers in a fraction of a
second.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from policyd.cli.options import (
    PROBLEM_FORMATS,
    FeatureGatesOpt,
    feature_gate_settings,
    one_of,
    output_option,
    problem_format,
)
from policyd.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE

# The lint reporters, and yaml: the json document (with `effective`) as YAML.
DOCUMENT_EXTRA = ("yaml",)
CHECK_CONFIG_FORMATS = (*PROBLEM_FORMATS, *DOCUMENT_EXTRA)
HELP = (f"Output format: {one_of(CHECK_CONFIG_FORMATS)} (default: text; github on GitHub "
        "Actions). json and yaml include the effective configuration: every profile's "
        "plugins per extension point after expansion, with weights and args.")


def check_config(
    profile: Path = typer.Argument(  # noqa: B008 - typer's declaration style
        # readable=False: an unreadable profile gets the one-line file error (exit 2)
        # that lint and test print, not click's usage box.
        ..., metavar="PROFILE", help="A PolicydConfiguration file, or kube-scheduler's "
        "KubeSchedulerConfiguration v1 file.", readable=False),
    output_format: Annotated[str | None, output_option(CHECK_CONFIG_FORMATS, HELP)] = None,
    strict: bool = typer.Option(False, "--strict", help="Warnings fail the run too."),
    policies: Annotated[list[Path] | None, typer.Option(
        "--policies", help="Extra policy file or directory (repeatable), as `policyd run "
                           "--policies` loads it.")] = None,
    cluster_policies: Annotated[bool, typer.Option(
        "--cluster-policies", help="Validate as `policyd run --cluster-policies` would: "
        "clusterPolicies: true over the file (shown in the effective configuration). "
        "No cluster is read: a plugin only a SchedulingPolicy object provides is still "
        "reported unknown.")] = False,
    feature_gates: FeatureGatesOpt = None,
) -> None:
    """Validate a profile and the policies it loads, as `policyd run` would, offline
    (with the same --feature-gates over the profile's featureGates)."""
    fmt = problem_format(output_format, DOCUMENT_EXTRA)
    gates = feature_gate_settings(feature_gates)
    from policyd.config.effective import effective_configuration
    from policyd.config.loader import build_frameworks, validated_config_file
    from policyd.config.validate import is_unreadable
    from policyd.lint.reporters import Report, get_reporter

    if profile.is_dir():
        print(f"policyd check-config: error: {profile}: is a directory; expected a "
              "PolicydConfiguration file", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    checked = validated_config_file(profile, extra_policies=tuple(policies or ()),
                                    cluster_policies_flag=cluster_policies,
                                    gate_overrides=gates)
    if checked.valid:  # as `policyd run` goes on to do: a profile that cannot be built fails
        build_frameworks(checked)
    problems = checked.problems
    files = 1 + len(checked.config.policy_files)
    report = Report(problems, files, strict, tool="policyd check-config")
    if fmt in ("json", *DOCUMENT_EXTRA):
        sys.stdout.write(_document(report, effective_configuration(checked)
                                   if checked.valid else None, fmt))
    else:
        sys.stdout.write(get_reporter(fmt)(report))
    unreadable = [p for p in problems if is_unreadable([p])]
    for p in unreadable:  # the profile or a policy it loads: exit 2, as in lint
        print(f"policyd check-config: error: {p.file}: {p.message}", file=sys.stderr)
    if unreadable:
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_PROBLEMS if report.failed else EXIT_OK)


def _document(report: Any, effective: dict[str, Any] | None, fmt: str) -> str:
    """lint's JSON document plus `effective`, as JSON or YAML."""
    from policyd.cli.options import yaml_text
    from policyd.lint.reporters.jsonout import document

    doc = {**document(report), "effective": effective}
    return json.dumps(doc, indent=2) + "\n" if fmt == "json" else yaml_text(doc)
