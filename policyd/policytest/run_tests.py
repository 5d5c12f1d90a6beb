"""PolicyTest files: small clusters and the verdicts policies must give on them.

A PolicyTest names policies (paths relative to the test file, or inline documents),
nodes, pods, and test cases. Per-policy expectations (which nodes pass or fail with
which reason, whether the policy applies, the policy's scores) run the compiled
plugin's own methods: pre_filter -> filter per node, pre_score -> score ->
normalize_score. Whole-scheduler expectations (which node wins, whether the pod is
unschedulable and with which message) run the default profile plus the test's
policies through the engine's `schedule_one`.

Bad input (unreadable files, schema errors, unknown node names, policies with errors)
is reported as problems with positions and makes the run exit 2; it is never counted
as a test failure, so a broken test file cannot pass or fail silently.

This module walks the paths and gathers the results; the document's schema is
`schema.py`, turning one document into a Suite `loading.py`, running its cases
`running.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from policyd.policy.from_paths import collect_files
from policyd.policytest.loading import BadSuite, load_suite
from policyd.policytest.running import CaseResult, run_suite
from policyd.policytest.schema import KIND
from policyd.problems import ERROR, Problem
from policyd.sourcefile import load_file


@dataclass(slots=True)
class RunResult:
    cases: list[CaseResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # bad input
    bad_paths: list[str] = field(default_factory=list)
    files: int = 0

    @property
    def bad_input(self) -> bool:
        return bool(self.bad_paths) or any(p.level == ERROR for p in self.problems)

    @property
    def failed(self) -> int:
        return sum(1 for c in self.cases if not c.passed)


def run_tests(paths: Iterable[str | Path]) -> RunResult:
    files, bad = collect_files(paths)
    result = RunResult(bad_paths=bad)
    for path, display in files:
        source = load_file(path, display)
        result.files += 1
        if source.unreadable:
            result.bad_paths.append(f"{display}: {source.problems[0].message}")
            continue
        result.problems.extend(source.problems)
        for doc in source.documents:
            if not isinstance(doc.data, Mapping) or doc.data.get("kind") != KIND:
                continue
            try:
                suite = load_suite(doc, path.parent, result.problems)
            except BadSuite:
                continue
            result.cases.extend(run_suite(suite))
    return result
