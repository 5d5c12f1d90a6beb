"""PolicyTest files: small clusters and the verdicts policies must give on them.

A PolicyTest names policies (paths relative to the test file, or inline documents)
or a profile, nodes and pods (inline, or a snapshot file), and test cases.
Per-policy expectations (which nodes pass or fail with which reason, whether the
policy applies, the policy's scores) run the compiled plugin's own methods:
pre_filter -> filter per node, pre_score -> score -> normalize_score. Whole-scheduler
expectations (which node wins, whether the pod is unschedulable and with which
message) run the default profile plus the test's policies, or the test's
spec.profile, through the engine's `schedule_one`.

Bad input (unreadable, empty or too large files, schema errors, unknown node names,
policies or profiles with errors) is reported as problems with positions and makes
the run exit 2; it is never counted as a test failure, so a broken test file cannot
pass or fail silently, and a refused file is counted as refused, not as "no tests".

This module walks the paths and gathers the results; the document's schema is
`schema.py`, turning one document into a Suite `loading.py` (its profile
`profile_ref.py`, its snapshot file `cluster_ref.py`), running its cases
`running.py`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from policyd.policy.from_paths import collect_files
from policyd.policytest.loading import BadSuite, load_suite
from policyd.policytest.running import CaseResult, run_suite
from policyd.policytest.schema import KIND, ProfileSpec
from policyd.problems import ERROR, WARNING, Problem
from policyd.sourcefile import DEFAULT_LIMITS, Limits, SourceFile, load_file

# Test files hold clusters, often pasted from `kubectl get -o yaml` (managedFields,
# images and all: some 13 KiB and 700 YAML nodes a Node): 4 MiB is some 300 Nodes,
# where a policy's 128 KiB refused ten. Kubectl output has about 55 YAML nodes a KiB;
# 300,000 stops denser files early. Still bounded: ~200 MiB of RSS and ~15 s of CPU
# (the pure-Python event parser) for the largest file accepted.
TEST_LIMITS = replace(DEFAULT_LIMITS, max_bytes=4 * 1024 * 1024, max_nodes=300_000)

# What other policyd files are, and which command takes them: a test run given one
# says so rather than only "no tests found".
_OTHER_KINDS = {
    "SchedulingPolicy": "a policy: `policyd lint` checks it, a PolicyTest names it in "
                        "spec.policies",
    "SchedulingPolicyList": "a list of policies: `policyd lint` checks it",
    "PolicydConfiguration": "a profile: `policyd check-config` checks it, a PolicyTest "
                            "runs it with spec.profile",
    "List": "a Kubernetes List (a snapshot?): `policyd simulate --cluster` reads it, a "
            "PolicyTest with spec.cluster.file",
}


@dataclass(slots=True)
class RunResult:
    cases: list[CaseResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # bad input
    bad_paths: list[str] = field(default_factory=list)
    files: int = 0
    refused: int = 0  # files or PolicyTest documents refused as bad input: not run
    # The kinds of the documents read that were not PolicyTests (for "no tests found").
    other_kinds: Counter[str] = field(default_factory=Counter)

    @property
    def bad_input(self) -> bool:
        return bool(self.bad_paths) or any(p.level == ERROR for p in self.problems)

    @property
    def failed(self) -> int:
        return sum(1 for c in self.cases if not c.passed)


def run_tests(paths: Iterable[str | Path], limits: Limits = TEST_LIMITS,
              profile: ProfileSpec | None = None) -> RunResult:
    """Run every PolicyTest under `paths`; `profile` (`--config`, `--scheduler-name`)
    is the profile of those that name none."""
    paths = list(paths)
    files, bad = collect_files(paths)
    named = {Path(p).resolve() for p in paths if Path(p).is_file()}
    result = RunResult(bad_paths=bad)
    for path, display in files:
        source = load_file(path, display, limits)
        result.files += 1
        if source.unreadable:
            result.bad_paths.append(f"{display}: {source.problems[0].message}")
            result.refused += 1
            continue
        result.problems.extend(_sized(p, path, limits) for p in source.problems)
        if not source.documents and any(p.level == ERROR for p in source.problems):
            result.refused += 1
        tests = 0
        for doc in source.documents:
            kind = doc.data.get("kind") if isinstance(doc.data, Mapping) else None
            if kind != KIND:
                result.other_kinds[kind if isinstance(kind, str) else "not a kind"] += 1
                continue
            tests += 1
            try:
                suite = load_suite(doc, path.parent, result.problems, profile)
            except BadSuite:
                result.refused += 1
                continue
            result.cases.extend(run_suite(suite))
        if not tests and source.documents and path.resolve() in named:
            result.problems.append(_not_a_test(source))
    # A profile (or policy) that several suites share has its problems found once per
    # suite: each is said once.
    result.problems = list(dict.fromkeys(result.problems))
    return result


def _sized(p: Problem, path: Path, limits: Limits) -> Problem:
    """A too-large file's problem with its size and the cap of test files."""
    if p.rule != "file-too-large":
        return p
    try:
        size = f"{path.stat().st_size:,} bytes"
    except OSError:
        size = "larger"
    return replace(p, message=f"file refused, not run: {size}, over the "
                              f"{limits.max_bytes:,}-byte limit of PolicyTest files")


def _not_a_test(source: SourceFile) -> Problem:
    """A warning for a file named on the command line that holds no PolicyTest."""
    doc = source.documents[0]
    kind = doc.data.get("kind") if isinstance(doc.data, Mapping) else None
    what = _OTHER_KINDS.get(kind) if isinstance(kind, str) else None
    said = f"is {what}" if what else (f"holds kind {kind!r}" if isinstance(kind, str)
                                      else "has no kind")
    return doc.problem(("kind",) if isinstance(kind, str) else (), "not-a-test",
                       f"not a PolicyTest: this file {said}; `policyd test` runs "
                       f"documents of kind {KIND}", level=WARNING)
