"""SchedulingPolicy objects read from the API server, checked and compiled exactly as
policy files are.

A SchedulingPolicy applied with kubectl is the same document as one mounted from a
ConfigMap, so the same checks run (`from_paths.check_documents`: schema, semantics,
the cross-document checks, the compiler). What differs is where a problem is said to
be: an object has no file, so each is named `schedulingpolicy/NAME`, and a problem's
place is its JSON path (`spec.filters[0].jmespath`), which is what `kubectl edit`
shows. Fields the API server sets (uid, resourceVersion, generation, managedFields,
status, ...) are not the author's and are left out before checking.

Objects are checked together with the file policies the daemon also runs, so that a
name or pluginName used by both is an error reported on the object (the files were
there first, and their own check passed without it), never a silent override.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from policyd.policy.from_paths import PolicySet, check_documents
from policyd.policy.metric_refs import UNKNOWN_METRIC, MetricCheck
from policyd.problems import ERROR, Problem
from policyd.sourcefile import SourceDocument

if TYPE_CHECKING:
    from policyd.policy.compiler import CompiledPolicy

# How an object is named where a file would be: `kubectl get schedulingpolicy/NAME`.
OBJECT_PREFIX = "schedulingpolicy/"
# The metadata an author writes; everything else in metadata is the API server's.
AUTHOR_METADATA = ("name", "labels", "annotations")


def object_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def object_generation(obj: Mapping[str, Any]) -> int | None:
    meta = obj.get("metadata")
    gen = meta.get("generation") if isinstance(meta, Mapping) else None
    return gen if isinstance(gen, int) and not isinstance(gen, bool) else None


def authored(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as its author wrote it: apiVersion, kind, the authored metadata and
    spec (status and server-set metadata dropped)."""
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind", "spec") if k in obj}
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        out["metadata"] = {k: meta[k] for k in AUTHOR_METADATA if k in meta}
    elif "metadata" in obj:
        out["metadata"] = meta
    return out


def object_document(obj: Mapping[str, Any]) -> SourceDocument:
    """A document for the checks; it has no lines, so problems point at JSON paths."""
    return SourceDocument(f"{OBJECT_PREFIX}{object_name(obj)}", 0, authored(obj), 0)


@dataclass(slots=True)
class ObjectVerdict:
    """What checking one object found: the compiled policy when it has no error."""

    name: str
    generation: int | None
    compiled: CompiledPolicy | None
    problems: list[Problem] = field(default_factory=list)  # errors and warnings

    @property
    def accepted(self) -> bool:
        return self.compiled is not None

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.level == ERROR]


def check_objects(objects: Sequence[Mapping[str, Any]],
                  file_documents: Sequence[SourceDocument] = (),
                  metrics: MetricCheck | None = None) -> list[ObjectVerdict]:
    """Check and compile each object, in the order given, after the file policies
    `file_documents` (already checked on their own: their problems are not repeated
    here). With `metrics` (a profile's), each `metric` rule must name one of its
    metrics, as a file's must. One verdict per object."""
    docs = [object_document(o) for o in objects]
    checked = PolicySet(documents=[*file_documents, *docs])
    check_documents(checked)
    verdicts = []
    for obj, doc in zip(objects, docs, strict=True):
        mine = [p for p in checked.problems if p.file == doc.file]
        if metrics is not None:
            mine += [doc.problem(where, UNKNOWN_METRIC, message)
                     for where, message in metrics.unknown(doc.data)]
        compiled = None
        if not any(p.level == ERROR for p in mine):
            compiled = next((c for c in checked.compiled
                             if c.source.startswith(f"{doc.file}:")), None)
        verdicts.append(ObjectVerdict(object_name(obj), object_generation(obj), compiled,
                                      mine))
    return verdicts


def describe(problem: Problem) -> str:
    """One problem as a status message or log line names it: `spec.filters[0].id:
    message` (no file position: an object has none)."""
    where = f"{problem.path}: " if problem.path else ""
    return f"{where}{problem.message}"
