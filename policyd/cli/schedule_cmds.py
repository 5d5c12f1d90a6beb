"""`policyd explain` and `policyd simulate`: the scheduler's decisions, offline or live.

Both run the same engine as the daemon, on a snapshot file (`--cluster FILE`) or, when no
file is given, on the live cluster kubectl's credentials reach (`--kubeconfig`,
`--context`, else $KUBECONFIG, in-cluster, ~/.kube/config): one read-only list of what a
snapshot holds, decoded by the snapshot loader, so what they say is what the scheduler
would do, about the cluster as it is. Live, the cluster's SchedulingPolicy objects run
too: always without --config, and with --config when the profile says
`clusterPolicies: true`, as the daemon does.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from policyd.cli.options import choice_enum, output_option, yaml_text
from policyd.errors import EXIT_OK, EXIT_PROBLEMS, InputFileError, PolicydError
from policyd.features import DEFAULTS, FeatureGates
from policyd.model.k8snames import printable

if TYPE_CHECKING:  # the engine (and numpy) load only when a command here runs
    from policyd.engine.cycle import ScheduleResult
    from policyd.engine.inputs import MergedPods, PodFile
    from policyd.engine.pod_group import GroupSummary
    from policyd.framework.interfaces import Plugin
    from policyd.framework.runtime import Framework
    from policyd.model.cluster import ClusterState
    from policyd.model.cluster_files import Snapshot
    from policyd.model.records import Pod
    from policyd.policy.compiler import CompiledPolicy
    from policyd.policy.metric_refs import MetricCheck
    from policyd.sourcefile import SourceDocument


def _json_document(document: dict[str, Any]) -> None:
    typer.echo(json.dumps(document, indent=2))


def _yaml_document(document: dict[str, Any]) -> None:
    typer.echo(yaml_text(document), nl=False)


# `-o/--output` of explain and simulate: each command prints its own text; the other
# formats print its JSON document, by these.
DOCUMENT_FORMATS: dict[str, Callable[[dict[str, Any]], None]] = {
    "json": _json_document, "yaml": _yaml_document}
# explain's and simulate's: their text, the document, and html, one self-contained page
# of the document (`html_page`).
SCHEDULE_FORMATS = ("text", *DOCUMENT_FORMATS, "html")
if TYPE_CHECKING:
    OutputFormat = str
else:
    OutputFormat = choice_enum("OutputFormat", SCHEDULE_FORMATS)
TEXT = OutputFormat("text")


class FieldValidation(StrEnum):
    """kubectl's --validate values, for unknown fields in the files read."""

    strict = "strict"
    warn = "warn"
    ignore = "ignore"


ClusterOpt = Annotated[Path | None, typer.Option(
    "--cluster", help="Snapshot: `kubectl get nodes,pods -A -o yaml` or `kubectl get "
    "nodes,all -A -o yaml` output (kinds the scheduler does not read are skipped with a "
    "note; --strict refuses them), or Nodes and Pods; a file or a pipe such as "
    "<(kubectl get ...). Without it, the live cluster is read (--kubeconfig, --context).")]
KubeconfigOpt = Annotated[str | None, typer.Option(
    "--kubeconfig", help="Read the live cluster through this kubeconfig (default as "
    "kubectl: $KUBECONFIG, in-cluster, then ~/.kube/config). Not with --cluster.")]
ContextOpt = Annotated[str | None, typer.Option(
    "--context", help="The kubeconfig context to use (default: its current context).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="PolicydConfiguration "
                                                "profile (default: kube-scheduler's default "
                                                "plugins plus the given policies).")]
PoliciesOpt = Annotated[list[Path] | None, typer.Option("--policies", help="Policy file or "
                                                        "directory (repeatable).")]
FormatOpt = Annotated[OutputFormat, output_option()]
ValidateOpt = Annotated[FieldValidation, typer.Option(
    "--validate", help="Unknown fields in the snapshot and pod files (a typo such as "
    "nodeSelectr): strict = exit 2 naming the field, as the API server rejects them; "
    "warn = print each to stderr (and a JSON `warnings` array) and go on; ignore.")]
StrictOpt = Annotated[bool, typer.Option(
    "--strict", help="Refuse (exit 2) a snapshot object of a kind the scheduler does not "
    "read (Deployment, Job, ResourceClaimTemplate...), instead of skipping it with one note.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed for breaking score ties.")]
ClusterPoliciesOpt = Annotated[bool, typer.Option(
    "--cluster-policies", help="With --config: run the live cluster's SchedulingPolicy "
    "objects as if the profile set clusterPolicies: true, as `policyd run "
    "--cluster-policies` does (the way with a KubeSchedulerConfiguration file). Without "
    "--config they always run. Not with --cluster FILE: a snapshot has none.")]
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


def gates_of(frameworks: Mapping[str, Framework]) -> FeatureGates:
    """The feature gates the profile's frameworks were built with: one set for the
    whole file (the profile's `featureGates`), as kube-scheduler's are per process."""
    return next(iter(frameworks.values())).features if frameworks else DEFAULTS


def frameworks_for(config: Path | None, policies: list[Path], seed: int | None,
                   cluster_objects: list[dict[str, Any]] | None = None,
                   warnings: list[str] | None = None, *,
                   cluster_policies_flag: bool = False) -> dict[str, Framework]:
    """The profile's frameworks after the full validation `policyd check-config` runs
    (any error: exit 2 with every problem at file:line:column), or the default profile
    plus `policies` when no profile is given.

    `cluster_objects` are the live cluster's SchedulingPolicy objects (None: not read,
    or no CRD). They join the file policies without a profile, and with one only when
    it says `clusterPolicies: true` or `cluster_policies_flag` (--cluster-policies) says
    it for the file, as the daemon runs them; an object with errors is left out with a
    line in `warnings`."""
    from policyd.config.plugins import ProfileError, default_framework
    from policyd.config.profile_schema import DEFAULT_SCHEDULER_NAME

    said = warnings if warnings is not None else []
    if config is None:
        plugins = load_policy_plugins(policies)
        if cluster_objects:
            plugins += _cluster_policies(cluster_objects, _policy_documents(policies), said)
        try:
            return {DEFAULT_SCHEDULER_NAME: default_framework(plugins, seed=seed)}
        except ProfileError as exc:  # lint rejects what could cause it; never a traceback
            raise InputFileError(f"invalid configuration ({len(exc.problems)} problem(s)):"
                                 "\n  " + "\n  ".join(f"<default profile>: {exc_line}"
                                                      for exc_line in exc.lines())) from None
    from policyd.config.loader import validate_config_file
    from policyd.problems import format_problem

    # The cluster's policies are offered to the validation, since the profile may name
    # them (as the daemon's); they run only when the profile enables them.
    offered: list[str] = []
    source = None if not cluster_objects else (
        lambda docs, metrics: {p.name: p for p in _cluster_policies(
            cluster_objects, list(docs), offered, metrics)})
    settings, frameworks, problems = validate_config_file(
        config, extra_policies=policies, seed=seed, cluster_policies=source,
        cluster_policies_opt_in=True, cluster_policies_flag=cluster_policies_flag)
    if source is not None and not settings.cluster_policies:
        said.append(f"{len(cluster_objects or ())} SchedulingPolicy object(s) in the "
                    f"cluster not run: {config} does not set clusterPolicies: true "
                    "(--cluster-policies runs them)")
    else:
        said += offered
    errors = [p for p in problems if p.is_error]
    if errors:
        shown = "\n  ".join(format_problem(p, with_level=False) for p in errors[:50])
        more = f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else ""
        raise InputFileError(f"invalid configuration ({len(errors)} problem(s); run "
                             f"`policyd check-config {config}`):\n  {shown}{more}")
    return frameworks


def _policy_documents(paths: list[Path]) -> list[SourceDocument]:
    """The policy documents of `paths` (already checked and compiled by the caller),
    for the checks of the cluster's objects against them."""
    if not paths:
        return []
    from policyd.policy.from_paths import load_policy_set

    return list(load_policy_set(paths, compile=False).documents)


def _cluster_policies(objects: list[dict[str, Any]], file_documents: list[SourceDocument],
                      warnings: list[str], metrics: MetricCheck | None = None
                      ) -> list[Plugin]:
    """The accepted SchedulingPolicy objects, compiled as the daemon compiles them
    (beside the profile's `metrics`, when there is a profile); each refused one is a
    warning naming it and its first error."""
    from policyd.policy.objects import OBJECT_PREFIX, check_objects, describe

    accepted: list[Plugin] = []
    for verdict in check_objects(objects, file_documents, metrics):
        if verdict.compiled is not None:
            accepted.append(verdict.compiled)
            continue
        first = describe(verdict.errors[0]) if verdict.errors else "not accepted"
        warnings.append(f"{OBJECT_PREFIX}{verdict.name} left out: {first} (the daemon may "
                        "still run an older accepted version of it; explain cannot see "
                        "which: kubectl get schedulingpolicies shows its status)")
    return accepted


# kubectl's TYPE/NAME prefixes that name a pod (`pod/web-0`).
POD_TYPES = ("pod", "pods", "po")


def pod_key(ref: str, namespace: str | None) -> str:
    """NAMESPACE/NAME of the pod `ref` names the ways kubectl does: NAME (in `namespace`,
    else default), pod/NAME (also pods/, po/), or NAMESPACE/NAME, which a different
    `namespace` contradicts (a usage error, exit 2)."""
    first, sep, rest = ref.partition("/")
    if sep and first.lower() in POD_TYPES:
        first, sep, rest = "", "", rest
    elif not sep:
        first, rest = "", first
    if not rest or "/" in rest or (sep and not first):
        raise PolicydError(f"{ref!r} is not a pod: expected NAME, pod/NAME or NAMESPACE/NAME")
    if first and namespace and namespace != first:
        raise PolicydError(f"pod {ref!r} is in namespace {first!r}, but -n says {namespace!r}")
    return f"{first or namespace or 'default'}/{rest}"


def _pick_pod(key: str, candidates: list[Pod], from_file: PodFile | None, where: str) -> Pod:
    """The pod `--pod FILE` holds (exactly one), or the candidate whose key is `key`."""
    if from_file is not None:
        if len(from_file.pods) != 1:
            raise InputFileError(
                f"expected exactly one Pod, found {len(from_file.pods)}; to pick one, pass "
                "the file with --pods and the pod with --pod NAMESPACE/NAME",
                where=from_file.path)
        return from_file.pods[0]
    for p in candidates:
        if p.key == key:
            return p
    raise InputFileError(f"no pod {key} in {where}{did_you_mean(key, candidates)}")


def did_you_mean(key: str, candidates: list[Pod]) -> str:
    """The hint after "no pod NAMESPACE/NAME": the pods of that name in other
    namespaces, else the closest names in its namespace, else the closest keys; and a
    namespace no pod is in, with the closest namespace that has pods. "" when nothing
    is close."""
    from policyd.model.spelling import closest

    namespace, _, name = key.partition("/")
    elsewhere = sorted(p.key for p in candidates if p.name == name)[:3]
    beside = [f"{namespace}/{n}" for n in closest(
        name, [p.name for p in candidates if p.namespace == namespace], n=3)]
    pods = elsewhere or beside or closest(key, [p.key for p in candidates], n=3)
    hint = f"; did you mean {' or '.join(pods)}?" if pods else ""
    missing = empty_namespace(namespace, candidates)
    return hint + (f" ({missing})" if missing else "")


def empty_namespace(namespace: str, pods: Sequence[Pod]) -> str:
    """"no pod is in namespace NS; did you mean namespace NEAR?" when none of `pods` is
    in `namespace` (the closest namespace that has pods, when one is close), else ""."""
    from policyd.model.spelling import closest

    namespaces = sorted({p.namespace for p in pods})
    if namespace in namespaces:
        return ""
    near = closest(namespace, namespaces)
    return (f"no pod is in namespace {namespace}"
            + (f"; did you mean namespace {near[0]}?" if near else ""))


@dataclass(slots=True)
class ClusterInput:
    """What explain and simulate run on: a snapshot, where it came from, and (live) the
    cluster's SchedulingPolicy objects."""

    snapshot: Snapshot
    where: str
    """The snapshot file, or the API server's address."""
    live: bool
    policies: list[dict[str, Any]] | None = None
    """Live only: the SchedulingPolicy objects; None when the CRD is not installed."""
    namespace: str | None = None
    """Live only: the kubeconfig context's namespace (kubectl's default for -n)."""
    notes: list[str] = field(default_factory=list)
    """Notes on the input besides the snapshot's own (pods that replace others)."""


def load_input(cluster: Path | None, kubeconfig: str | None, context: str | None,
               validate: FieldValidation, strict: bool = False) -> ClusterInput:
    """The snapshot file, or the live cluster when none is given: exactly one. A live
    read uses kubectl's credentials (--kubeconfig, else $KUBECONFIG, in-cluster,
    ~/.kube/config); none found is a usage error (exit 2)."""
    if cluster is not None:
        if kubeconfig is not None or context is not None:
            raise PolicydError("--cluster FILE reads a snapshot, --kubeconfig/--context the "
                               "live cluster: give one or the other, not both")
        return ClusterInput(_load_cluster(cluster, validate, strict), str(cluster),
                            live=False)
    from policyd.kube.client import ConnectionSettings, KubeClient, KubeConfigError
    from policyd.kube.cluster_read import context_namespace, read_cluster
    from policyd.model.cluster_files import snapshot_from_objects

    try:
        client = KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig, context=context))
    except KubeConfigError as exc:
        raise PolicydError(f"{exc} (or give a snapshot file with --cluster FILE)") from None
    try:
        read = read_cluster(client)
    finally:
        client.close()
    # The API server has validated these objects; a field our list does not know is a
    # newer server's, not a typo, so unknown fields are not checked here.
    snap = snapshot_from_objects(read.objects, read.host, field_validation="ignore")
    snap.warnings += read.warnings
    return ClusterInput(snap, read.host, live=True, policies=read.policies,
                        namespace=context_namespace(kubeconfig, context))


def add_pod_files(source: ClusterInput, paths: list[Path], validate: FieldValidation
                  ) -> MergedPods:
    """The pods of the --pods files added to the snapshot's: one that the snapshot
    also has replaces its copy (said in `source.notes`); their warnings join the
    snapshot's. Two pods of the files with one name or uid are bad input (exit 2)."""
    from policyd.engine.inputs import check_unique_pods, merge_pods

    files, warnings = load_pod_files(paths, validate)
    check_unique_pods(files)
    merged = merge_pods(source.snapshot.pods, files)
    source.snapshot.pods = merged.snapshot + merged.extra
    source.notes += merged.notes
    source.snapshot.warnings += warnings
    return merged


def require_paths(*paths: Path | None) -> None:
    """Every file or directory named on the command line exists (exit 2 naming the
    first that does not), said before a cluster is read: a live read or a large
    snapshot takes seconds, a typo in a path should not wait for it."""
    for path in paths:
        if path is not None and not path.exists():
            raise InputFileError("no such file or directory", where=str(path))


def check_cluster_policies_flag(flag: bool, cluster: Path | None) -> None:
    """--cluster-policies reads the live cluster's SchedulingPolicy objects: with a
    snapshot file it has nothing to run, a usage error (exit 2) rather than a flag that
    silently does nothing. Checked before the snapshot is read."""
    if flag and cluster is not None:
        raise PolicydError("--cluster-policies runs the live cluster's SchedulingPolicy "
                           "objects, and --cluster FILE reads a snapshot, which has none: "
                           "drop --cluster to read the cluster, or give the policies as "
                           "files with --policies")


def _load_cluster(path: Path, validate: FieldValidation, strict: bool) -> Snapshot:
    """The snapshot, refused when it repeats a Node or a Pod (not a cluster then)."""
    from policyd.engine.inputs import PodFile, check_unique_nodes, check_unique_pods
    from policyd.model.cluster_files import load_snapshot

    snap = load_snapshot(path, field_validation=validate.value, strict=strict)
    check_unique_nodes(snap.nodes, str(path))
    check_unique_pods([PodFile(str(path), snap.pods)])
    return snap


def load_pod_files(paths: list[Path], validate: FieldValidation
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
        print(f"policyd: warning: {printable(w)}", file=sys.stderr)


def _emit(document: dict[str, Any], output: OutputFormat, kind: str) -> None:
    """The JSON document, in the -o/--output asked for (json, yaml, or `kind`'s page)."""
    if output == "html":
        from policyd.cli.html_page import html_page

        sys.stdout.write(html_page(kind, document))
        return
    DOCUMENT_FORMATS[output](document)


def _explain_profile(target: Pod, frameworks: dict[str, Framework], notes: list[str]
                     ) -> Framework:
    """The profile for `target`: the one its schedulerName names or, when none does, the
    stand-in profile `simulate --all-schedulers` uses too (the default one, else the
    only one), with a note; with several and no default, which one is ambiguous."""
    from policyd.engine.profiles import stand_in_profile, unserved_reason
    from policyd.engine.simulate import skip_reason

    fw = frameworks.get(target.scheduler_name)
    if fw is None:
        reason = unserved_reason(target, frameworks)
        fw = stand_in_profile(frameworks)
        if fw is None:
            raise InputFileError(f"pod {target.key}: {reason}; set its spec.schedulerName "
                                 "to the profile to explain it with")
        notes.append(f"pod {target.key}: {reason}; explained with profile "
                     f"{fw.profile_name} anyway")
    why_not = skip_reason(target, {target.scheduler_name: fw})
    if why_not is not None:
        notes.append(f"pod {target.key} is {why_not}: kube-scheduler would not try it; "
                     "explained as if it were pending")
    return fw


def _held_note(target: Pod, fw: Framework, state: ClusterState) -> str | None:
    """The note for a pending pod kube-scheduler keeps out of its queue."""
    from policyd.engine.simulate import SCHEDULING_GATES, gate_of, skip_reason

    if skip_reason(target, {target.scheduler_name: fw}) is not None:
        return None  # its skip note says more
    gate = gate_of(target, fw, state)
    if gate is None:
        return None
    if gate.plugin == SCHEDULING_GATES:
        return (f"pod {target.key} is held by scheduling gates "
                f"({', '.join(target.scheduling_gates)}): kube-scheduler will not try it "
                "before they are removed; explained as if they were")
    return (f"pod {target.key} is held out of the queue by {gate.plugin} ({gate.reason}): "
            "kube-scheduler will not try it, and says nothing, until an event that plugin "
            "registered changes that; explained as if it had been let in")


def label_policies(fw: Framework) -> list[CompiledPolicy]:
    """The compiled policies of a profile that filter, score or are audited: those
    whose node label keys the label-case check compares with the nodes'."""
    from policyd.policy.compiler import CompiledPolicy

    found = [*fw.filter_plugins, *fw.audit_plugins, *(w.plugin for w in fw.score_plugins)]
    return list({id(p): p for p in found if isinstance(p, CompiledPolicy)}.values())


def _other_schedulers(served: dict[str, Framework], pending: list[Pod], all_schedulers: bool,
                      notes: list[str]) -> dict[str, Framework]:
    """The profiles simulate schedules with: `served`, and with --all-schedulers the
    stand-in profile for every other schedulerName of the pending pods (a note says
    how many pods of which name it took). Without it, a note points at the option
    when such pods are skipped."""
    from policyd.engine.profiles import (
        UnservedError,
        serving_every_scheduler,
        stand_in_profile,
    )

    waiting = [p for p in pending if not p.node_name and not p.finished]
    if not all_schedulers:
        others = sum(1 for p in waiting if p.scheduler_name not in served)
        stand_in = stand_in_profile(served)
        if others and stand_in is not None:
            notes.append(f"{others} pending pod(s) of other schedulers skipped; "
                         f"--all-schedulers schedules them with profile "
                         f"{stand_in.profile_name}")
        return served
    try:
        every, added = serving_every_scheduler(served, waiting)
    except UnservedError as exc:
        raise PolicydError(f"--all-schedulers: {exc}; name the profile that should take "
                           "them default-scheduler, or run without it") from None
    for name, count in added.items():
        notes.append(f'{count} pod(s) of schedulerName "{name}" scheduled with profile '
                     f"{every[name].profile_name} (--all-schedulers)")
    return every


PodArg = Annotated[str | None, typer.Argument(
    metavar="POD", show_default=False,
    help="The pod to explain: NAME (in -n, else the context's namespace live, else "
    "default), pod/NAME, or NAMESPACE/NAME.")]
NamespaceOpt = Annotated[str | None, typer.Option(
    "--namespace", "-n", help="Namespace of a POD given by NAME (as kubectl's -n).")]
# explain's text shows this many nodes unless --top says otherwise; JSON lists all.
DEFAULT_TOP = 20
TopOpt = Annotated[int, typer.Option(
    "--top", min=0, help="Text output: show the first N nodes (the chosen one, then by "
    "score, then the rejected ones grouped by reason); 0 shows all. JSON and YAML list "
    "every node.")]


def explain(
    pod_ref: PodArg = None,
    cluster: ClusterOpt = None,
    pod: Annotated[str | None, typer.Option("--pod", help="A Pod file, or NAMESPACE/NAME "
                                            "of a pod in the cluster or the --pods files "
                                            "(instead of POD).")] = None,
    pods: Annotated[list[Path] | None, typer.Option("--pods", help="Pod files to pick "
                                                     "--pod from (repeatable).")] = None,
    config: ConfigOpt = None,
    policies: PoliciesOpt = None,
    output: FormatOpt = TEXT,
    seed: SeedOpt = None,
    metrics: MetricsOpt = None,
    validate: ValidateOpt = FieldValidation.strict,
    strict: StrictOpt = False,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    top: TopOpt = DEFAULT_TOP,
    cluster_policies: ClusterPoliciesOpt = False,
) -> None:
    """Explain where one pod would go and why: every plugin's verdict and score per node.

    Reads the snapshot --cluster FILE or, without it, the live cluster (listed once,
    nothing written; its SchedulingPolicy objects run too, see --config). The profile
    is the one whose schedulerName the pod names (without --config the default profile
    also takes default-scheduler pods); a pod no profile serves is explained, with a
    note, by the profile serving default-scheduler or else the only one (the one
    simulate uses for such pods when asked to). A pod in the --pod/--pods
    files replaces the cluster's copy. Exit 0 when the pod fits a node, 1 when it fits
    none, 2 for bad input (including unknown fields, unless --validate says
    otherwise)."""
    from policyd.engine.inputs import check_unique_pods, merge_pods
    from policyd.engine.profiles import serving_profiles
    from policyd.engine.report import explain_text

    if (pod_ref is None) == (pod is None):
        raise PolicydError("name the pod to explain: POD or --pod (one of them)")
    check_cluster_policies_flag(cluster_policies, cluster)
    require_paths(config, metrics, *(policies or []), *(pods or []))
    source = load_input(cluster, kubeconfig, context, validate, strict)
    snap = source.snapshot
    pod_path = Path(pod) if pod is not None else None
    # Anything there but a directory is read as a file: a pipe (`<(kubectl get pod ...)`,
    # /dev/stdin) too, and a device is refused by the reader, not taken for a pod name.
    is_file = pod_path is not None and pod_path.exists() and not pod_path.is_dir()
    # The --pod file is read like a --pods file (last, once even if also given there).
    paths = [p for p in pods or []
             if not (pod_path and is_file and os.path.realpath(p) == os.path.realpath(pod_path))]
    files, warnings = load_pod_files([*paths, pod_path] if pod_path and is_file else paths,
                                      validate)
    from_file = files[-1] if is_file else None
    check_unique_pods(files)
    merged = merge_pods(snap.pods, files)
    key = "" if from_file else pod_key(pod_ref if pod_ref is not None else str(pod),
                                       namespace or source.namespace)
    where = f"the cluster at {source.where}" if source.live else "the snapshot"
    where += " or the --pods files" if paths else ""
    target = _pick_pod(key, merged.extra + merged.snapshot, from_file,
                       where if pod_ref is not None else f"{where} (and no such file)")
    frameworks = frameworks_for(config, policies or [], seed, source.policies, warnings,
                                cluster_policies_flag=cluster_policies)
    attach_metrics_file(frameworks, metrics)
    served = serving_profiles(frameworks, default_profile=config is None)
    snap.pods = merged.snapshot + merged.extra
    done = explain_pod(snap, target, served, snap.notes + list(merged.notes))
    warnings = snap.warnings + warnings
    _warn(warnings)
    if output == TEXT:
        typer.echo(printable(explain_text(done.result, top=top, hints=done.hints)
                             + (f"\n\n{done.group.describe()}" if done.group is not None
                                else "")
                             + "".join(f"\nnote: {n}" for n in done.notes)))
    else:
        _emit(done.document(warnings), output, "explain")
    raise typer.Exit(EXIT_OK if done.fits else EXIT_PROBLEMS)


@dataclass(slots=True)
class Explained:
    """One pod explained: its cycle with every verdict, its group's answer (a gang's
    member), the notes, and the label-case hints per node and plugin."""

    result: ScheduleResult
    group: GroupSummary | None
    profile: str
    notes: list[str]
    hints: dict[str, dict[str, list[str]]]

    @property
    def fits(self) -> bool:
        return self.result.node is not None and (self.group is None or self.group.placed)

    def document(self, warnings: list[str]) -> dict[str, Any]:
        """explain's JSON document."""
        from policyd.engine.report import explain_json, group_json

        out = explain_json(self.result, hints=self.hints)
        out.update(profile=self.profile, notes=self.notes, warnings=warnings)
        if self.group is not None:
            out["podGroup"] = group_json(self.group)
        return out


def explain_pod(snap: Snapshot, target: Pod, served: dict[str, Framework],
                notes: list[str]) -> Explained:
    """Explain `target` (one of `snap`'s pods) with the profile that serves it, on the
    cluster `snap` holds; `notes` are the input's, added to."""
    from policyd.engine.audit import label_case_mismatches
    from policyd.engine.cycle import schedule_one
    from policyd.engine.simulate import group_answer
    from policyd.model.pod_groups import group_key
    from policyd.policy.compiler import scope_notes

    fw = _explain_profile(target, served, notes)
    notes += scope_notes(label_policies(fw), target)
    state = snap.cluster(fw.features)
    # PreEnqueue and a gang's group cycle see the pod among the cluster's pods.
    if (held := _held_note(target, fw, state)) is not None:
        notes.append(held)
    # A gang's member is answered with its group, on a state of its own (a
    # scheduler-plugins group is simulated there, which changes it).
    group = group_answer(fw, snap.cluster(fw.features), target) \
        if group_key(target) is not None else None
    if state.node_of(target.uid) is not None:
        # A bound pod is explained as if it were pending: off its node first. A pending
        # one stays among the pending pods, as the daemon's cycle sees it (its group
        # counts it).
        state.remove_pod(target.uid)
    result = schedule_one(fw, target, state, explain=True)
    hints: dict[str, dict[str, list[str]]] = {}
    for m in label_case_mismatches(label_policies(fw), snap.nodes):
        hints.setdefault(m.node, {}).setdefault(m.plugin, []).append(m.describe())
    return Explained(result, group, fw.profile_name, notes, hints)


def simulate(
    cluster: ClusterOpt = None,
    pods: Annotated[list[Path] | None, typer.Option("--pods", help="Extra pods to schedule "
                                                     "(repeatable).")] = None,
    config: ConfigOpt = None,
    policies: PoliciesOpt = None,
    output: FormatOpt = TEXT,
    seed: SeedOpt = None,
    metrics: MetricsOpt = None,
    validate: ValidateOpt = FieldValidation.strict,
    strict: StrictOpt = False,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    all_schedulers: Annotated[bool, typer.Option(
        "--all-schedulers", help="Also schedule the pending pods no profile serves (other "
        "schedulers'), with the default profile (with --config: the one serving "
        "default-scheduler, else the only one), as explain explains such a pod.")] = False,
    cluster_policies: ClusterPoliciesOpt = False,
) -> None:
    """Schedule every pending pod of the cluster plus the --pods, in queue order, each
    placement counted before the next.

    Reads the snapshot --cluster FILE or, without it, the live cluster (listed once,
    nothing written; its SchedulingPolicy objects run too, see --config). A profile
    takes the pods whose schedulerName it has; without --config the default profile
    also takes default-scheduler pods (and pods with no schedulerName). Pods no cycle
    would run for (another scheduler's, being deleted, already bound) are listed as
    skipped, gated pods as held. Other schedulers' pods are scheduled too with
    --all-schedulers, by the profile explain would explain them with, and a note says
    how many. A --pods pod replaces the cluster's copy.

    Exit 0 when every pod tried was placed; 1 when some could not be, or a pending pod
    given with --pods was skipped or is held out of the queue (scheduling gates, a
    missing ResourceClaim); 2 for bad input (including unknown fields, unless
    --validate says otherwise, and a Node or Pod given twice)."""
    from policyd.engine.profiles import serving_profiles
    from policyd.engine.report import simulate_json, simulate_text
    from policyd.engine.simulate import simulate as run

    check_cluster_policies_flag(cluster_policies, cluster)
    require_paths(config, metrics, *(policies or []), *(pods or []))
    source = load_input(cluster, kubeconfig, context, validate, strict)
    snap = source.snapshot
    merged = add_pod_files(source, list(pods or []), validate)
    warnings: list[str] = []
    frameworks = frameworks_for(config, policies or [], seed, source.policies, warnings,
                                cluster_policies_flag=cluster_policies)
    attach_metrics_file(frameworks, metrics)
    served = serving_profiles(frameworks, default_profile=config is None)
    state = snap.cluster(gates_of(frameworks))
    # The cluster's pending pods, then every --pods pod (bound ones count on their node
    # like the cluster's, and are listed as skipped).
    pending = [p for p in merged.snapshot if not p.node_name and not p.finished]
    pending += merged.extra
    notes = snap.notes + source.notes
    served = _other_schedulers(served, pending, all_schedulers, notes)

    def progress(done: int, total: int) -> None:
        if total >= 500 and (done % 500 == 0 or done == total) and sys.stderr.isatty():
            print(f"\rscheduled {done}/{total} pods", end="" if done < total else "\n",
                  file=sys.stderr)

    result = run(served, state, pending, progress=progress)
    warnings = snap.warnings + warnings
    _warn(warnings)
    if output == TEXT:
        typer.echo(printable(simulate_text(result, notes=notes)))
    else:
        _emit(simulate_json(result, notes=notes, warnings=warnings), output, "simulate")
    requested = {p.uid for p in merged.extra}
    left_out = any(s.pod.uid in requested and not s.pod.node_name and not s.pod.finished
                   for s in result.skipped) or any(g.pod.uid in requested for g in result.gated)
    failed = left_out or any(r.node is None for r in result.results)
    raise typer.Exit(EXIT_PROBLEMS if failed else EXIT_OK)


__all__ = ["ClusterInput", "Explained", "PolicydError", "explain", "explain_pod",
           "frameworks_for", "load_input", "pod_key", "simulate"]
