"""From paths to compiled policies: find files, load YAML, validate, compile.

One pass collects every problem (syntax, schema, semantics, cross-file) before deciding
anything, so `policyd lint` reports all of them in one run; a policy with an error is
not compiled, a warning does not stop it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from policyd.model.file_kinds import POLICY, wrong_file
from policyd.model.spelling import show_value
from policyd.policy import policy_schema, semantics
from policyd.policy.files import PathProblem, find_yaml_files
from policyd.problems import ERROR, Problem
from policyd.sourcefile import SourceDocument, SourceFile, SubDocument, load_file

if TYPE_CHECKING:
    from policyd.policy.compiler import CompiledPolicy

# Kinds that may sit next to policies (in policies/tests/) and that lint leaves to
# their own command.
OTHER_KINDS = ("PolicyTest",)
# Lists whose items are loaded one by one: what `kubectl get schedulingpolicies -o yaml`
# prints (`kind: List`), and the typed list the API server returns.
LIST_KINDS = ("List", f"{policy_schema.KIND}List")
# The rule of everything that is there but cannot be read; exit 2 wherever it appears.
UNREADABLE_RULE = "file-unreadable"


@dataclass(slots=True)
class PolicySet:
    """Everything one load found."""

    files: list[SourceFile] = field(default_factory=list)
    documents: list[SourceDocument] = field(default_factory=list)  # SchedulingPolicies
    problems: list[Problem] = field(default_factory=list)
    compiled: list[CompiledPolicy] = field(default_factory=list)
    # Paths that do not exist or cannot be read: usage errors (exit 2), not findings.
    bad_paths: list[str] = field(default_factory=list)


def collect_files(paths: Iterable[str | Path]) -> tuple[list[tuple[Path, str]], list[str]]:
    """Files to load (path, display name) and `path: message` for every path that is
    missing or cannot be read (`policyd.policy.files.find_yaml_files`)."""
    found = find_yaml_files(paths)
    return found.files, [str(p) for p in found.problems]


def load_policy_set(paths: Iterable[str | Path], *, compile: bool = True) -> PolicySet:
    found = find_yaml_files(paths)
    result = PolicySet(bad_paths=[str(p) for p in found.problems])
    # What is there but cannot be read is a finding too, at its own path, so the
    # reporters (json, github, sarif) show it; a missing named path is only a usage
    # error.
    result.problems.extend(path_problem(p) for p in found.problems
                           if p.kind == "unreadable")
    for path, display in found.files:
        source = load_file(path, display)
        result.files.append(source)
        result.problems.extend(source.problems)
        if source.unreadable:
            result.bad_paths.append(f"{display}: {source.problems[0].message}")
        for doc in source.documents:
            result.documents.extend(policy_documents(doc, result.problems))
    check_documents(result, compile=compile)
    return result


def path_problem(p: PathProblem) -> Problem:
    """A walker's problem as a lint problem: rule `file-unreadable`, at the path."""
    return Problem(p.path, 0, 0, UNREADABLE_RULE, ERROR, p.message)


def policy_documents(doc: SourceDocument, problems: list[Problem]) -> list[SourceDocument]:
    """The SchedulingPolicies in one YAML document: itself, or each item of a list of
    them (at the item's lines); reports what is neither."""
    items = list_items(doc, problems)
    if items is None:
        return [doc] if is_policy_document(doc, problems) else []
    return [item for item in items if is_policy_document(item, problems)]


def list_items(doc: SourceDocument, problems: list[Problem]) -> list[SourceDocument] | None:
    """The items of a `kind: List` or SchedulingPolicyList document, each a document of
    its own; None when `doc` is not such a list."""
    data = doc.data
    if not isinstance(data, Mapping) or data.get("kind") not in LIST_KINDS:
        return None
    items = data.get("items")
    if items is None:
        return []  # kubectl prints `items: []` for no objects; YAML may say null
    if not isinstance(items, list):
        problems.append(doc.problem(("items",), "not-a-policy",
                                    f"items of a {data['kind']} must be a list of "
                                    f"{policy_schema.KIND} objects"))
        return []
    return [SubDocument(doc, ("items", i), item) for i, item in enumerate(items)]


def is_policy_document(doc: SourceDocument, problems: list[Problem]) -> bool:
    """Whether `doc` is a SchedulingPolicy; reports documents of unknown kinds."""
    data = doc.data
    if not isinstance(data, Mapping):
        problems.append(doc.problem((), "not-a-policy",
                                    "a policy document must be a mapping with apiVersion, "
                                    "kind, metadata and spec"))
        return False
    kind = data.get("kind")
    if kind in OTHER_KINDS:
        return False
    if kind != policy_schema.KIND:
        # A file of another policyd command says which; anything else, what lint takes.
        message = wrong_file(data, doc.file, POLICY) or (
            f"kind must be {policy_schema.KIND!r} (or {', '.join(OTHER_KINDS)}), not "
            f"{show_value(kind)}")
        problems.append(doc.problem(("kind",) if "kind" in data else (), "not-a-policy",
                                    message))
        return False
    return True


def check_documents(result: PolicySet, *, compile: bool = True) -> None:
    """Schema, semantic and cross-document checks of `result.documents`; compile the
    documents without errors."""
    key_uses: list[semantics.KeyUse] = []
    per_doc: list[list[Problem]] = []
    for doc in result.documents:
        problems = policy_schema.validate(doc)
        problems.extend(semantics.check_document(doc, key_uses))
        per_doc.append(problems)
    cross = semantics.check_cross(result.documents, key_uses)
    for doc, problems in zip(result.documents, per_doc, strict=True):
        result.problems.extend(problems)
        doc_cross = [p for p in cross if doc.owns(p)]
        if not compile or any(p.level == ERROR for p in (*problems, *doc_cross)):
            continue
        # Imported here: lint never compiles, and the compiler pulls in the framework.
        from policyd.policy.compiler import compile_policy

        try:
            result.compiled.append(compile_policy(doc.data, f"{doc.file}:{doc.line}"))
        except Exception as exc:  # validation should make this impossible; never crash
            result.problems.append(doc.problem((), "compile",
                                               f"cannot compile the policy: {exc}"))
    result.problems.extend(cross)


def load_policies(paths: Iterable[str | Path]) -> tuple[list[CompiledPolicy], list[Problem]]:
    result = load_policy_set(paths)
    problems = list(result.problems)
    problems.extend(Problem(b.split(":", 1)[0], 0, 0, "path", ERROR, b)
                    for b in result.bad_paths if not any(
                        p.rule == UNREADABLE_RULE and b.startswith(p.file)
                        for p in result.problems))
    return result.compiled, problems
