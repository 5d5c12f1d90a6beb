"""One lint run: load every path, collect every problem, decide the exit code.

Kept apart from the CLI so tests drive it directly; reporters format its `Report`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from policyd.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from policyd.lint.reporters import Report
from policyd.model.file_kinds import POLICY, file_kind
from policyd.policy.from_paths import load_policy_set
from policyd.policy.policy_schema import API_VERSION, KIND

if TYPE_CHECKING:
    from policyd.problems import Problem
    from policyd.sourcefile import SourceFile


@dataclass(frozen=True, slots=True)
class LintResult:
    report: Report
    bad_paths: list[str]  # missing or unreadable: usage errors

    @property
    def exit_code(self) -> int:
        if self.bad_paths:
            return EXIT_USAGE
        return EXIT_PROBLEMS if self.report.failed else EXIT_OK


def lint_paths(paths: Iterable[str | Path], *, strict: bool = False,
               skip_non_policies: bool = False,
               require_autoscaler_visible: bool = False) -> LintResult:
    result = load_policy_set(paths, compile=False)
    problems = result.problems
    if require_autoscaler_visible:
        # Only then: the rule classes bring numpy, which plain lint never loads.
        from policyd.policy.visibility import invisible_rules

        problems = [*problems, *(p for doc in result.documents
                                 for p in invisible_rules(doc))]
    if skip_non_policies:
        problems = _without_other_documents(problems, result.files)
    problems = sorted(problems, key=lambda p: p.sort_key())
    return LintResult(Report(problems, len(result.files), strict), result.bad_paths)


# What `--skip-non-policies` leaves out besides `not-a-policy` itself: an empty file, and
# the YAML problems that do not stop a document from being read (a docker-compose file's
# merge keys are not a policy's problem). Problems that stop a file from being read at
# all (syntax errors, limits, tags) are kept: the file may be a broken policy.
_SKIPPED_WITH_DOCUMENT = ("not-a-policy", "yaml-merge-key", "yaml-duplicate-key")


def _without_other_documents(problems: list[Problem], files: list[SourceFile]
                             ) -> list[Problem]:
    skipped = {(doc.file, doc.index) for f in files for doc in f.documents
               if not _policyd_document(doc.data)}
    return [p for p in problems
            if p.rule != "file-empty"
            and not (p.rule in _SKIPPED_WITH_DOCUMENT and (p.file, p.document) in skipped)]


def _policyd_document(data: object) -> bool:
    """Whether lint should look at a document when skipping other files' documents: a
    SchedulingPolicy, or anything claiming policyd's API group (so that a misspelt kind
    is still reported), but not the kinds other commands check (`file_kind`)."""
    if not isinstance(data, Mapping):
        return False
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if file_kind(data) not in (None, POLICY):
        return False
    group = API_VERSION.split("/")[0]
    return kind == KIND or (isinstance(api_version, str)
                            and api_version.split("/")[0] == group)
