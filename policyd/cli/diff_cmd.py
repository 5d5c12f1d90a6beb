"""`policyd diff`: what a policy or profile change does to a cluster, before it merges.

Two versions of the scheduler's configuration, each a set of paths (policy files or
directories, and at most one PolicydConfiguration profile, told apart by their kind):
`OLD NEW`, or with `--base REF` the paths as they are in the working tree against the
same paths at a git commit (read with git, no checkout). Each version is loaded as
explain, simulate and audit load theirs (`frameworks_for`), and the cluster is the
snapshot `--cluster FILE` or the live one, read once for both. The comparison is
`policyd.engine.diff`; the output `policyd.cli.diff_report`.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from policyd.cli.audit_cmd import FailOn
from policyd.cli.diff_report import DIFF_FORMATS
from policyd.cli.options import choice_enum, output_option
from policyd.cli.schedule_cmds import (
    ClusterInput,
    ClusterOpt,
    ContextOpt,
    FieldValidation,
    KubeconfigOpt,
    MetricsOpt,
    SeedOpt,
    StrictOpt,
    ValidateOpt,
)
from policyd.errors import EXIT_OK, EXIT_PROBLEMS, PolicydError
from policyd.model.k8snames import printable

if TYPE_CHECKING:  # the engine loads only when the command runs
    from policyd.engine.diff import Version
    from policyd.framework.runtime import Framework

if TYPE_CHECKING:
    DiffFormat = str
else:
    DiffFormat = choice_enum("DiffFormat", DIFF_FORMATS)
TEXT = DiffFormat("text")

PathsArg = Annotated[list[Path] | None, typer.Argument(
    metavar="OLD NEW | PATH...", show_default=False,
    help="Without --base: the old and the new version, each a policy file or directory "
    "or a profile. With --base: the paths of the new version in the working tree (policy "
    "files or directories, at most one profile), compared with the same paths at REF.")]


@dataclass(slots=True)
class LoadedVersion:
    label: str
    frameworks: dict[str, Framework]  # as loaded, by schedulerName
    profile: dict[str, Any] | None  # the profile document (None: the default profile)


def diff(
    paths: PathsArg = None,
    base: Annotated[str | None, typer.Option(
        "--base", metavar="REF", help="Compare the PATHs in the working tree with the "
        "same paths at this git commit, branch or tag (read with git, nothing checked "
        "out); a path the commit does not have is empty there (new in this change).")
    ] = None,
    cluster: ClusterOpt = None,
    pods: Annotated[list[Path] | None, typer.Option(
        "--pods", help="Pod files added to the cluster (repeatable), as simulate's: "
        "pending pods to compare (say, what a release will submit), bound ones "
        "(spec.nodeName) judged on their node; one the cluster also has replaces its "
        "copy.")] = None,
    output: Annotated[DiffFormat, output_option()] = TEXT,
    fail_on: Annotated[FailOn, typer.Option(
        "--fail-on", help="New violations of bound pods that fail the run: any, or only "
        "those of Enforce-mode policies and built-in filters (the others are still "
        "reported).")] = FailOn.any,
    rescore_bound: Annotated[int, typer.Option(
        "--rescore-bound", min=0, metavar="N", help="Also reschedule a sample of N bound "
        "pods under both versions (each taken off its node first) and report the "
        "placements that would move.")] = 0,
    all_schedulers: Annotated[bool, typer.Option(
        "--all-schedulers", help="With a profile: also judge bound pods no profile "
        "serves against every policy of every profile, as audit --all-schedulers.")
    ] = False,
    seed: SeedOpt = None,
    metrics: MetricsOpt = None,
    validate: ValidateOpt = FieldValidation.strict,
    strict: StrictOpt = False,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Show the impact of a policy or profile change on a cluster: which bound pods would
    now violate a filter of the new version (and on which node) and which violations it
    fixes, which pending pods would start or stop fitting, and which placements a
    reschedule would move, with the scores' shift. Summary counts first, then details.

    Each version is policy files or directories and at most one profile
    (PolicydConfiguration), told apart by kind: `OLD NEW`, or with --base REF the
    paths in the working tree against the same paths at the git commit REF. A profile
    runs its own policies; policies alone run in kube-scheduler's default profile.

    Every pending pod is scheduled alone under each version on the cluster as it is (a
    pod group's pending pods together, as their group: placed whole or held);
    where both place it, the nodes tied at the best total are compared, not the random
    draw among them: the same ones are the same placement, overlapping ones a tie,
    disjoint ones a move. Every bound pod is judged on its own node with itself taken off
    it, as audit does, by the policies that differ between the versions (and, when the
    profiles differ otherwise, by both versions' built-in filters): only verdicts that
    change are reported.

    Reads the snapshot --cluster FILE or, without it, the live cluster (listed once,
    nothing written; its SchedulingPolicy objects run in both versions), plus the
    --pods files' pods.

    Exit 0 when no bound pod becomes a violation, 1 when one does (see --fail-on), 2
    for bad input (a missing path, a revision git does not know, an invalid policy or
    profile, an unreadable cluster)."""
    from policyd.cli.schedule_cmds import add_pod_files, gates_of, load_input, require_paths
    from policyd.engine.diff import diff as run

    given = list(paths or [])
    warnings: list[str] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="policyd-diff-base-") as tmp:
        # The versions first: a missing path or an unknown revision is said before a
        # large cluster is read.
        (old_paths, old_label), (new_paths, new_label) = _versions(
            given, base, Path(tmp), notes)
        require_paths(metrics, *(pods or []))
        source = load_input(cluster, kubeconfig, context, validate, strict)
        add_pod_files(source, list(pods or []), validate)
        snap = source.snapshot
        old = _load(old_label, old_paths, source, seed, warnings, metrics)
        new = _load(new_label, new_paths, source, seed, warnings, metrics)
    old_gates, new_gates = gates_of(old.frameworks), gates_of(new.frameworks)
    old_state = snap.cluster(old_gates)
    # One state for both when the gates agree (how pods count is the same): the
    # comparison only asks questions of it and puts every pod back.
    new_state = (old_state if old_gates.values == new_gates.values
                 else snap.cluster(new_gates))

    def progress(what: str, done: int, total: int) -> None:
        if total >= 500 and (done % 500 == 0 or done == total) and sys.stderr.isatty():
            print(f"\rcompared {done}/{total} {what} pods", end="" if done < total else "\n",
                  file=sys.stderr)

    builtins_changed = _builtins_changed(old.profile, new.profile)
    # A scheduler-plugins pod group is simulated on a state of its own (read again).
    result = run(_version(old, old_state, all_schedulers, lambda: snap.cluster(old_gates)),
                 _version(new, new_state, all_schedulers, lambda: snap.cluster(new_gates)),
                 snap.pods,
                 builtins_changed=builtins_changed, rescore_bound=rescore_bound, seed=seed,
                 progress=progress)
    from policyd.cli.diff_report import DiffReport

    warnings = snap.warnings + warnings
    for w in warnings:
        print(f"policyd: warning: {printable(w)}", file=sys.stderr)
    for n in snap.notes + source.notes:
        print(f"policyd: note: {printable(n)}", file=sys.stderr)
    if builtins_changed:
        notes.append("the profiles differ in more than their policies: bound pods were "
                     "also judged by both versions' built-in filters")
    text = DIFF_FORMATS[output](DiffReport(result, old_label, new_label, notes, warnings))
    # Names and values read from the cluster reach the terminal escaped.
    sys.stdout.write(printable(text) if output == TEXT else text)
    from policyd.policy.policy_schema import ENFORCE

    # A built-in filter's rejection counts as Enforce: it rejects nodes while scheduling.
    failing = [v for v in result.new_violations
               if fail_on is FailOn.any or v.mode == ENFORCE]
    raise typer.Exit(EXIT_PROBLEMS if failing else EXIT_OK)


def _versions(given: list[Path], base: str | None, tmp: Path, notes: list[str]
              ) -> tuple[tuple[list[Path], str], tuple[list[Path], str]]:
    """(paths, label) of the old and the new version: OLD NEW, or the PATHs at --base
    (written under `tmp`) against the working tree."""
    from policyd.cli.schedule_cmds import require_paths

    if base is None:
        if len(given) != 2:
            raise PolicydError("give the two versions to compare, OLD NEW (a policy file "
                               "or directory, or a profile, each), or PATH... with "
                               "--base REF")
        require_paths(*given)
        return ([given[0]], str(given[0])), ([given[1]], str(given[1]))
    if not given:
        raise PolicydError("--base REF compares PATHs of the working tree with the same "
                           "paths at REF: name at least one PATH")
    require_paths(*given)
    return _base_paths(base, given, tmp, notes), (given, "working tree")


def _base_paths(ref: str, given: list[Path], into: Path, notes: list[str]
                ) -> tuple[list[Path], str]:
    """The paths' files at `ref`, written under `into`, and the version's label; with a
    profile among them, the policies it names at `ref` too."""
    from policyd.cli.git_base import BaseTree, repository_root, resolve_commit

    root = repository_root(given[0])
    tree = BaseTree(root, resolve_commit(root, ref), into)
    out: list[Path] = []
    for path in given:
        rel = tree.relative(path)
        written = tree.write(rel)
        if written is None:
            notes.append(f"{path} is not in {ref}: the base version has nothing there")
            continue
        out.append(written)
        profile = _profile_document(written)
        for entry in (profile or {}).get("policies") or []:
            if not isinstance(entry, str) or Path(entry).is_absolute():
                continue  # the validation reports a bad entry; an absolute one is read as is
            named = Path(rel).parent / entry
            if tree.write(tree.relative(root / named)) is None:
                notes.append(f"{named.as_posix()}, which the profile {rel} names, is not "
                             f"in {ref}")
    return out, f"{ref} ({tree.commit[:12]})"


def _profile_document(path: Path) -> dict[str, Any] | None:
    """The document of `path` when it is a profile, else None (a policy file or a
    directory of them)."""
    from policyd.model.datafile import read_documents
    from policyd.model.file_kinds import PROFILE, file_kind

    if path.is_dir():
        return None
    documents = read_documents(path)
    first = documents[0] if documents else None
    if file_kind(first) is PROFILE and isinstance(first, dict):
        return first
    return None


def _load(label: str, paths: list[Path], source: ClusterInput, seed: int | None,
          warnings: list[str], metrics: Path | None) -> LoadedVersion:
    from policyd.cli.schedule_cmds import attach_metrics_file, frameworks_for

    profiles = [(p, doc) for p in paths if (doc := _profile_document(p)) is not None]
    if len(profiles) > 1:
        raise PolicydError(f"{label}: {profiles[0][0]} and {profiles[1][0]} are both "
                           "profiles; a version has at most one")
    config = profiles[0][0] if profiles else None
    policies = [p for p in paths if p != config]
    frameworks = frameworks_for(config, policies, seed, source.policies, warnings)
    attach_metrics_file(frameworks, metrics)
    return LoadedVersion(label, frameworks, profiles[0][1] if profiles else None)


def _builtins_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether the profiles may differ in more than their policies: any difference in
    the documents but their `policies` lists (a changed weight or plugin list counts:
    the built-in filters are then compared too, which costs more, never less)."""
    if old is None and new is None:
        return False

    def rest(doc: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return None if doc is None else {k: v for k, v in doc.items() if k != "policies"}
    return rest(old) != rest(new)


def _version(loaded: LoadedVersion, state: Any, all_schedulers: bool,
             scratch: Callable[[], Any]) -> Version:
    from policyd.cli.audit_cmd import policy_chooser
    from policyd.cli.schedule_cmds import label_policies
    from policyd.engine.diff import Version
    from policyd.engine.profiles import serving_profiles

    by_profile = loaded.profile is not None
    policies = {p.policy_name: p for fw in loaded.frameworks.values()
                for p in label_policies(fw)}
    return Version(
        frameworks=serving_profiles(loaded.frameworks, default_profile=not by_profile),
        cluster=state, policies=list(policies.values()),
        choose=policy_chooser(loaded.frameworks, by_profile=by_profile,
                              all_schedulers=all_schedulers),
        scratch=scratch)
