"""`policyd explain` and `policyd simulate`: the scheduler's decisions, offline.

Both run the same engine as the daemon on a snapshot file, so what they say is what the
scheduler would do.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from policyd.errors import EXIT_OK, EXIT_PROBLEMS, InputFileError, PolicydError

if TYPE_CHECKING:  # the engine (and numpy) load only when a command here runs
    from policyd.framework.interfaces import Plugin
    from policyd.framework.runtime import Framework
    from policyd.model.records import Pod


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


ClusterOpt = Annotated[Path, typer.Option("--cluster", help="Snapshot: `kubectl get "
                                          "nodes,pods -A -o yaml` output, or Nodes and Pods.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="PolicydConfiguration "
                                                "profile (default: kube-scheduler's default "
                                                "plugins plus the given policies).")]
PoliciesOpt = Annotated[list[Path] | None, typer.Option("--policies", help="Policy file or "
                                                        "directory (repeatable).")]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", help="Output format.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed for breaking score ties.")]
MetricsOpt = Annotated[Path | None, typer.Option(
    "--metrics", help="Node metric values for `metric` score rules, YAML or JSON: "
    "metric -> node -> value (without it every metric value is missing).")]


def attach_metrics_file(frameworks: dict[str, Framework], path: Path | None) -> None:
    """Give the policies' `metric` rules fixed values from `path`, as the daemon's cache
    would at one moment, so a decision can be reproduced offline."""
    if path is None:
        return
    from policyd.nodemetrics import MetricsFileError, attach_metrics, load_metrics_file

    try:
        reader = load_metrics_file(path)
    except MetricsFileError as exc:
        raise InputFileError(str(exc)) from None
    attach_metrics(frameworks.values(), reader)


def load_policy_plugins(paths: list[Path]) -> list[Plugin]:
    """Compile policies; any lint error makes the input invalid (exit 2)."""
    if not paths:
        return []
    from policyd.policy import load_policies

    compiled, problems = load_policies(paths)
    errors = [p for p in problems if p.level == "error"]
    if errors:
        # The first line names the file (and place) of the first problem; the rest follow.
        more = f" (and {len(errors) - 1} more problem(s) in policies)" if len(errors) > 1 else ""
        shown = "".join(f"\n  {p}" for p in errors[1:20])
        raise InputFileError(f"{errors[0]}{more}; run `policyd lint`{shown}")
    return list(compiled)


def frameworks_for(config: Path | None, policies: list[Path], seed: int | None
                   ) -> dict[str, Framework]:
    """The profile's frameworks after the full validation `policyd check-config` runs
    (any error: exit 2 with every problem at file:line:column), or the default profile
    plus `policies` when no profile is given."""
    from policyd.config.loader import DEFAULT_SCHEDULER_NAME, ConfigError
    from policyd.config.plugins import ProfileError, default_framework

    if config is None:
        plugins = load_policy_plugins(policies)
        try:
            return {DEFAULT_SCHEDULER_NAME: default_framework(plugins, seed=seed)}
        except ProfileError as exc:
            raise ConfigError(Path("<default profile>"), exc.problems) from None
    from policyd.config.validate import validate_config_file

    _, frameworks, problems = validate_config_file(config, extra_policies=policies, seed=seed)
    errors = [p for p in problems if p.is_error]
    if errors:
        shown = "\n  ".join(
            (f"{p.file}:{p.line}:{p.column}: " if p.line else f"{p.file}: ")
            + f"{p.message} [{p.rule}]" + (f" (at {p.path})" if p.path else "")
            for p in errors[:50])
        more = f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else ""
        raise InputFileError(f"invalid configuration ({len(errors)} problem(s); run "
                             f"`policyd check-config {config}`):\n  {shown}{more}")
    return frameworks


def _pick_pod(pod_arg: str, candidates: list[Pod], from_file: list[Pod]) -> Pod:
    """`--pod` is a file holding one Pod, or NAMESPACE/NAME (or NAME in default) of a pod
    in the snapshot or in the `--pods` files."""
    if from_file:
        if len(from_file) != 1:
            raise InputFileError(
                f"expected exactly one Pod, found {len(from_file)}; to pick one, pass the "
                "file with --pods and the pod with --pod NAMESPACE/NAME", where=pod_arg)
        return from_file[0]
    ns, _, name = pod_arg.rpartition("/")
    key = f"{ns or 'default'}/{name}"
    for p in candidates:
        if p.key == key:
            return p
    raise InputFileError(f"no such file, and no pod {key} in the snapshot or --pods files")


def explain(
    cluster: ClusterOpt,
    pod: Annotated[str, typer.Option("--pod", help="A Pod file, or NAMESPACE/NAME of a "
                                     "pod in the snapshot or the --pods files.")],
    pods: Annotated[list[Path] | None, typer.Option("--pods", help="Pod files to pick "
                                                     "--pod from (repeatable).")] = None,
    config: ConfigOpt = None,
    policies: PoliciesOpt = None,
    output: FormatOpt = OutputFormat.text,
    seed: SeedOpt = None,
    metrics: MetricsOpt = None,
) -> None:
    """Explain where one pod would go and why: every plugin's verdict and score per node.

    Exit 0 when the pod fits a node, 1 when it fits none, 2 for bad input."""
    from policyd.engine.report import explain_json, explain_text
    from policyd.engine.scheduler import schedule_one
    from policyd.model.snapshot import load_snapshot

    snap = load_snapshot(cluster)
    pod_path = Path(pod)
    from_file = load_snapshot(pod_path, pods_only=True).pods if pod_path.is_file() else []
    listed = load_snapshot(*pods, pods_only=True).pods if pods else []
    target = _pick_pod(pod, snap.pods + listed, from_file)
    frameworks = frameworks_for(config, policies or [], seed)
    attach_metrics_file(frameworks, metrics)
    state = snap.cluster()
    state.remove_pod(target.uid)
    fw = frameworks.get(target.scheduler_name) or next(iter(frameworks.values()))
    result = schedule_one(fw, target, state, explain=True)
    if output is OutputFormat.json:
        typer.echo(json.dumps(explain_json(result), indent=2))
    else:
        typer.echo(explain_text(result))
    raise typer.Exit(EXIT_OK if result.node is not None else EXIT_PROBLEMS)


def simulate(
    cluster: ClusterOpt,
    pods: Annotated[list[Path] | None, typer.Option("--pods", help="Extra pods to schedule "
                                                     "(repeatable).")] = None,
    config: ConfigOpt = None,
    policies: PoliciesOpt = None,
    output: FormatOpt = OutputFormat.text,
    seed: SeedOpt = None,
    metrics: MetricsOpt = None,
) -> None:
    """Schedule every pending pod of the snapshot (for this scheduler's profiles) plus the
    given pods, in queue order, each placement counted before the next.

    Exit 0 when every pod was placed, 1 when some could not be, 2 for bad input."""
    from policyd.engine.report import simulate_json, simulate_text
    from policyd.engine.simulate import simulate as run
    from policyd.model.snapshot import load_snapshot

    snap = load_snapshot(cluster)
    extra = load_snapshot(*(pods or []), pods_only=True).pods if pods else []
    frameworks = frameworks_for(config, policies or [], seed)
    attach_metrics_file(frameworks, metrics)
    state = snap.cluster()
    pending = state.pending_pods() + extra

    def progress(done: int, total: int) -> None:
        if total >= 500 and (done % 500 == 0 or done == total) and sys.stderr.isatty():
            print(f"\rscheduled {done}/{total} pods", end="" if done < total else "\n",
                  file=sys.stderr)

    result = run(frameworks, state, pending, progress=progress)
    if output is OutputFormat.json:
        typer.echo(json.dumps(simulate_json(result), indent=2))
    else:
        typer.echo(simulate_text(result))
    failed = any(r.node is None for r in result.results)
    raise typer.Exit(EXIT_PROBLEMS if failed else EXIT_OK)


__all__ = ["PolicydError", "explain", "simulate"]
