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

from policyd.lint.problem import ERROR, Problem
from policyd.policy import schema, semantics
from policyd.sourcefile import SourceDocument, SourceFile, load_file

if TYPE_CHECKING:
    from policyd.policy.compiler import CompiledPolicy

YAML_SUFFIXES = (".yaml", ".yml")
# Kinds that may sit next to policies (in policies/tests/) and that lint leaves to
# their own command.
OTHER_KINDS = ("PolicyTest",)


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
    """Files to load (path, display name) and messages for paths that do not exist.

    Directories are searched recursively for *.yaml and *.yml, skipping hidden
    directories; files named explicitly are taken whatever their suffix.
    """
    out: list[tuple[Path, str]] = []
    bad: list[str] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(
                f for f in p.rglob("*")
                if f.suffix in YAML_SUFFIXES and f.is_file()
                and not any(part.startswith(".") for part in f.relative_to(p).parts[:-1])
            )
            if not found:
                bad.append(f"{raw}: no *.yaml or *.yml files found")
            for f in found:
                key = f.resolve()
                if key not in seen:
                    seen.add(key)
                    out.append((f, str(f)))
        elif p.exists():
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                out.append((p, str(raw)))
        else:
            bad.append(f"{raw}: no such file or directory")
    return out, bad


def load_policy_set(paths: Iterable[str | Path], *, compile: bool = True) -> PolicySet:
    files, bad = collect_files(paths)
    result = PolicySet(bad_paths=bad)
    for path, display in files:
        source = load_file(path, display)
        result.files.append(source)
        result.problems.extend(source.problems)
        if source.unreadable:
            result.bad_paths.append(f"{display}: {source.problems[0].message}")
        for doc in source.documents:
            if is_policy_document(doc, result.problems):
                result.documents.append(doc)
    check_documents(result, compile=compile)
    return result


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
    if kind != schema.KIND:
        problems.append(doc.problem(("kind",) if "kind" in data else (), "not-a-policy",
                                    f"kind must be {schema.KIND!r} (or {', '.join(OTHER_KINDS)}"
                                    f"), not {kind!r}"))
        return False
    return True


def check_documents(result: PolicySet, *, compile: bool = True) -> None:
    """Schema, semantic and cross-document checks of `result.documents`; compile the
    documents without errors."""
    key_uses: list[semantics.KeyUse] = []
    per_doc: list[list[Problem]] = []
    for doc in result.documents:
        problems = schema.validate(doc)
        problems.extend(semantics.check_document(doc, key_uses))
        per_doc.append(problems)
    cross = semantics.check_cross(result.documents, key_uses)
    for doc, problems in zip(result.documents, per_doc, strict=True):
        result.problems.extend(problems)
        doc_cross = [p for p in cross if p.file == doc.file and p.document == doc.index]
        if not compile or any(p.level == ERROR for p in (*problems, *doc_cross)):
            continue
        # Imported here: lint never compiles, and the compiler pulls in the framework.
        from policyd.policy.compiler import compile_policy

        try:
            result.compiled.append(compile_policy(doc.data, f"{doc.file}:{doc.line}"))
        except Exception as exc:  # validation should make this impossible; never crash
            result.problems.append(doc.problem((), "compile",
                                               f"cannot compile the policy: {exc!r}"))
    result.problems.extend(cross)


def load_policies(paths: Iterable[str | Path]) -> tuple[list[CompiledPolicy], list[Problem]]:
    result = load_policy_set(paths)
    problems = list(result.problems)
    problems.extend(Problem(b.split(":", 1)[0], 0, 0, "path", ERROR, b)
                    for b in result.bad_paths if not any(
                        p.rule == "file-unreadable" and b.startswith(p.file)
                        for p in result.problems))
    return result.compiled, problems
