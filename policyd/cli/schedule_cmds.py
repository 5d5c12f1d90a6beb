"""`policyd explain` and `policyd simulate`: the scheduler's decisions, offline.

Both run the same engine as the daemon on a snapshot file, so what they say is what the
scheduler would do.
"""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from policyd.errors import EXIT_OK, EXIT_PROBLEMS, InputFileError, PolicydError

if TYPE_CHECKING:  # the engine (and numpy) load only when a command here runs
    from policyd.engine.inputs import PodFile
    from policyd.framework.interfaces import Plugin
    from policyd.framework.runtime import Framework
    from policyd.model.cluster_files import Snapshot
    from policyd.model.records import Pod


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


class FieldValidation(StrEnum):
    """kubectl's --validate values, for unknown fields in the files read."""

    strict = "strict"
    warn = "warn"
    ignore = "ignore"


ClusterOpt = Annotated[Path, typer.Option("--cluster", help="Snapshot: `kubectl get "
                                          "nodes,pods -A -o yaml` output, or Nodes and Pods.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="PolicydConfiguration "
                                                "profile (default: kube-scheduler's default "
                                                "plugins plus the given policies).")]
PoliciesOpt = Annotated[list[Path] | None, typer.Option("--policies", help="Policy file or "
                                                        "directory (repeatable).")]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", help="Output format.")]
ValidateOpt = Annotated[FieldValidation, typer.Option(
    "--validate", help="Unknown fields in the snapshot and pod files (a typo such as "
    "nodeSelectr): strict = exit 2 naming the field, as the API server rejects them; "
    "warn = print each to stderr (and a JSON `warnings` array) and go on; ignore.")]
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
    from policyd.config.plugins import ProfileError, default_framework
    from policyd.config.profile_schema import DEFAULT_SCHEDULER_NAME

    if config is None:
        plugins = load_policy_plugins(policies)
        try:
            return {DEFAULT_SCHEDULER_NAME: default_framework(plugins, seed=seed)}
        except ProfileError as exc:  # lint rejects what could cause it; never a traceback
            raise InputFileError(f"invalid configuration ({len(exc.problems)} problem(s)):"
                                 "\n  " + "\n  ".join(f"<default profile>: {exc_line}"
                                                      for exc_line in exc.lines())) from None
    from policyd.config.validate import validate_config_file
    from policyd.problems import format_problem

    _, frameworks, problems = validate_config_file(config, extra_policies=policies, seed=seed)
    errors = [p for p in problems if p.is_error]
    if errors:
        shown = "\n  ".join(format_problem(p, with_level=False) for p in errors[:50])
        more = f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else ""
        raise InputFileError(f"invalid configuration ({len(errors)} problem(s); run "
                             f"`policyd check-config {config}`):\n  {shown}{more}")
    return frameworks


def _pick_pod(pod_arg: str, candidates: list[Pod], from_file: PodFile | None) -> Pod:
    """`--pod` is a file holding one Pod, or NAMESPACE/NAME (or NAME in default) of a pod
    in the snapshot or in the `--pods` files."""
    if from_file is not None:
        if len(from_file.pods) != 1:
            raise InputFileError(
                f"expected exactly one Pod, found {len(from_file.pods)}; to pick one, pass "
                "the file with --pods and the pod with --pod NAMESPACE/NAME", where=pod_arg)
        return from_file.pods[0]
    ns, _, name = pod_arg.rpartition("/")
    key = f"{ns or 'default'}/{name}"
    for p in candidates:
        if p.key == key:
            return p
    raise InputFileError(f"no such file, and no pod {key} in the snapshot or --pods files")


def _load_cluster(path: Path, validate: FieldValidation) -> Snapshot:
    """The snapshot, refused when it repeats a Node or a Pod (not a cluster then)."""
    from policyd.engine.inputs import PodFile, check_unique_nodes, check_unique_pods
    from policyd.model.cluster_files import load_snapshot

    snap = load_snapshot(path, field_validation=validate.value)
    check_unique_nodes(snap.nodes, str(path))
    check_unique_pods([PodFile(str(path), snap.pods)])
    return snap


def _load_pod_files(paths: list[Path], validate: FieldValidation
                    ) -> tuple[list[PodFile], list[str]]:
    """Each pod file's pods (kept apart to name the file of a duplicate) and warnings."""
    from policyd.engine.inputs import PodFile
    from policyd.model.cluster_files import load_snapshot

    files: list[PodFile] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for path in paths:
        # Loaded first: a missing file, a dangling link or a loop gets the loader's message.
        snap = load_snapshot(path, pods_only=True, field_validation=validate.value)
        if os.path.realpath(path) in seen:
            raise InputFileError("given twice with --pods (its pods would be placed twice)",
                                 where=str(path))
        seen.add(os.path.realpath(path))
        files.append(PodFile(str(path), snap.pods))
        warnings += snap.warnings
    return files, warnings


def _warn(warnings: list[str]) -> None:
    for w in warnings:
        print(f"policyd: warning: {w}", file=sys.stderr)


def _explain_profile(target: Pod, frameworks: dict[str, Framework], notes: list[str]
                     ) -> Framework:
    """The profile for `target`: the one its schedulerName names or, when none does and
    there is only one, that one with a note; with several, which one is ambiguous."""
    from policyd.engine.profiles import unserved_reason
    from policyd.engine.simulate import skip_reason

    fw = frameworks.get(target.scheduler_name)
    if fw is None:
        reason = unserved_reason(target, frameworks)
        distinct = list({id(f): f for f in frameworks.values()}.values())
        if len(distinct) > 1:
            raise InputFileError(f"pod {target.key}: {reason}; set its spec.schedulerName "
                                 "to the profile to explain it with")
        fw = distinct[0]
        notes.append(f"pod {target.key}: {reason}; explained with profile "
                     f"{fw.profile_name} anyway")
    why_not = skip_reason(target, {target.scheduler_name: fw})
    if why_not is not None:
        notes.append(f"pod {target.key} is {why_not}: kube-scheduler would not try it; "
                     "explained as if it were pending")
    elif target.scheduling_gates:
        notes.append(f"pod {target.key} is held by scheduling gates "
                     f"({', '.join(target.scheduling_gates)}): kube-scheduler will not try "
                     "it before they are removed; explained as if they were")
    return fw


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
    validate: ValidateOpt = FieldValidation.strict,
) -> None:
    """Explain where one pod would go and why: every plugin's verdict and score per node.

    The profile is the one whose schedulerName the pod names (without --config the
    default profile also takes default-scheduler pods); with a single profile that does
    not serve the pod, it is used anyway, with a note. A pod in the --pod/--pods files
    replaces the snapshot's copy. Exit 0 when the pod fits a node, 1 when it fits none,
    2 for bad input (including unknown fields, unless --validate says otherwise)."""
    from policyd.engine.cycle import schedule_one
    from policyd.engine.inputs import check_unique_pods, merge_pods
    from policyd.engine.profiles import serving_profiles
    from policyd.engine.report import explain_json, explain_text

    snap = _load_cluster(cluster, validate)
    pod_path = Path(pod)
    is_file = pod_path.is_file()
    # The --pod file is read like a --pods file (last, once even if also given there).
    paths = [p for p in pods or []
             if not (is_file and os.path.realpath(p) == os.path.realpath(pod_path))]
    files, warnings = _load_pod_files([*paths, pod_path] if is_file else paths, validate)
    from_file = files[-1] if is_file else None
    check_unique_pods(files)
    merged = merge_pods(snap.pods, files)
    target = _pick_pod(pod, merged.extra + merged.snapshot, from_file)
    frameworks = frameworks_for(config, policies or [], seed)
    attach_metrics_file(frameworks, metrics)
    served = serving_profiles(frameworks, default_profile=config is None)
    notes = list(merged.notes)
    fw = _explain_profile(target, served, notes)
    snap.pods = merged.snapshot + merged.extra
    state = snap.cluster()
    state.remove_pod(target.uid)
    result = schedule_one(fw, target, state, explain=True)
    warnings = snap.warnings + warnings
    _warn(warnings)
    if output is OutputFormat.json:
        out = explain_json(result)
        out.update(profile=fw.profile_name, notes=notes, warnings=warnings)
        typer.echo(json.dumps(out, indent=2))
    else:
        typer.echo(explain_text(result) + "".join(f"\nnote: {n}" for n in notes))
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
    validate: ValidateOpt = FieldValidation.strict,
) -> None:
    """Schedule every pending pod of the snapshot plus the --pods, in queue order, each
    placement counted before the next.

    A profile takes the pods whose schedulerName it has; without --config the default
    profile also takes default-scheduler pods (and pods with no schedulerName). Pods no
    cycle would run for (another scheduler's, being deleted, already bound) are listed as
    skipped, gated pods as held. A --pods pod replaces the snapshot's copy of it.

    Exit 0 when every pod tried was placed; 1 when some could not be, or a pending pod
    given with --pods was skipped or is held by scheduling gates; 2 for bad input
    (including unknown fields, unless --validate says otherwise, and a Node or Pod
    given twice)."""
    from policyd.engine.inputs import check_unique_pods, merge_pods
    from policyd.engine.profiles import serving_profiles
    from policyd.engine.report import simulate_json, simulate_text
    from policyd.engine.simulate import simulate as run

    snap = _load_cluster(cluster, validate)
    files, warnings = _load_pod_files(list(pods or []), validate)
    check_unique_pods(files)
    merged = merge_pods(snap.pods, files)
    frameworks = frameworks_for(config, policies or [], seed)
    attach_metrics_file(frameworks, metrics)
    served = serving_profiles(frameworks, default_profile=config is None)
    snap.pods = merged.snapshot + merged.extra
    state = snap.cluster()
    # The snapshot's pending pods, then every --pods pod (bound ones count on their node
    # like the snapshot's, and are listed as skipped).
    pending = [p for p in merged.snapshot if not p.node_name and not p.finished]
    pending += merged.extra

    def progress(done: int, total: int) -> None:
        if total >= 500 and (done % 500 == 0 or done == total) and sys.stderr.isatty():
            print(f"\rscheduled {done}/{total} pods", end="" if done < total else "\n",
                  file=sys.stderr)

    result = run(served, state, pending, progress=progress)
    warnings = snap.warnings + warnings
    _warn(warnings)
    if output is OutputFormat.json:
        typer.echo(json.dumps(simulate_json(result, notes=merged.notes, warnings=warnings),
                              indent=2))
    else:
        typer.echo(simulate_text(result, notes=merged.notes))
    requested = {p.uid for p in merged.extra}
    left_out = any(s.pod.uid in requested and not s.pod.node_name and not s.pod.finished
                   for s in result.skipped) or any(p.uid in requested for p in result.gated)
    failed = left_out or any(r.node is None for r in result.results)
    raise typer.Exit(EXIT_PROBLEMS if failed else EXIT_OK)


__all__ = ["PolicydError", "explain", "simulate"]
