"""Load one PolicyTest document into a Suite: its policies compiled, its nodes, pods
and storage objects decoded, every reference checked; any problem is bad input
(recorded, then `BadSuite`), never a test failure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from policyd.errors import PolicydError
from policyd.model.fieldcheck import unknown_field_paths
from policyd.model.node_metrics import StaticMetrics
from policyd.model.records import Node, Pod, node_from_dict, pod_from_dict
from policyd.model.spelling import show_value
from policyd.model.storage import STORAGE_KINDS, object_key
from policyd.nodemetrics.values import clean_value
from policyd.policy.compiler import AuditedPolicy, CompiledPolicy, compile_policy
from policyd.policy.from_paths import (
    PolicySet,
    check_documents,
    collect_files,
    is_policy_document,
    policy_documents,
)
from policyd.policytest.schema import CaseSpec, Shape, SuiteDocument, shape_problems
from policyd.problems import ERROR, Problem
from policyd.sourcefile import JsonPath, SourceDocument, SubDocument, load_file

DEFAULT_ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "pods": "110"}

_Record = TypeVar("_Record")  # Node or Pod


class BadSuite(Exception):
    """Stops loading one PolicyTest after its problems were recorded."""


@dataclass(slots=True)
class Suite:
    doc: SourceDocument
    name: str  # file::PolicyTest name
    policies: list[CompiledPolicy]
    # What per-policy expectations run, by pluginName: each policy's Enforce form.
    # They are about the rules themselves, so an Audit-mode policy is judged as it will
    # act once enforced; whole-scheduler expectations run `policies` in their modes.
    rule_forms: dict[str, CompiledPolicy]
    nodes: list[Node]
    pods: dict[str, Pod]  # name -> Pod (the pods under test and existing ones)
    bound: list[Pod]  # Pods with a nodeName: the cluster's existing pods
    storage: list[tuple[str, dict[str, Any]]]  # (kind, object) for cluster.storage
    tests: list[CaseSpec]


def load_suite(doc: SourceDocument, base_dir: Path, problems: list[Problem]) -> Suite:
    """The Suite of `doc` (policy paths relative to `base_dir`); raises BadSuite once
    its problems are in `problems`."""
    errs = shape_problems(doc, doc.data, "test", ())
    if errs:
        problems.extend(errs)
        raise BadSuite
    data = cast(SuiteDocument, doc.data)
    spec = data["spec"]
    name = f"{doc.file}::{data['metadata']['name']}"
    policies = _load_policies(doc, spec["policies"], base_dir, problems)
    nodes = []
    node_names: set[str] = set()
    for i, raw in enumerate(spec["nodes"]):
        node = _decode(doc, ("spec", "nodes", i), raw, "node", node_from_dict, problems)
        if node is not None:
            if node.name in node_names:
                problems.append(doc.problem(("spec", "nodes", i), "duplicate-name",
                                            f"node {node.name!r} is defined twice"))
            node_names.add(node.name)
            nodes.append(node)
    pods: dict[str, Pod] = {}
    bound = []
    for i, raw in enumerate(spec["pods"]):
        pod = _decode(doc, ("spec", "pods", i), raw, "pod", pod_from_dict, problems)
        if pod is None:
            continue
        if pod.name in pods:
            problems.append(doc.problem(("spec", "pods", i), "duplicate-name",
                                        f"pod {pod.name!r} is defined twice"))
        pods[pod.name] = pod
        if pod.node_name:
            if pod.node_name not in node_names:
                problems.append(doc.problem(("spec", "pods", i), "unknown-node",
                                            f"pod {pod.name!r} is bound to unknown node "
                                            f"{pod.node_name!r}"))
            bound.append(pod)
    storage = _load_storage(doc, spec.get("storage") or [], problems)
    rule_forms = {p.name: compile_policy(p.document, p.source, enforced=True)
                  if isinstance(p, AuditedPolicy) else p for p in policies}
    _use_metrics(doc, spec.get("metrics") or {},
                 [*policies, *(f for f in rule_forms.values() if f not in policies)],
                 node_names, problems)
    _check_cases(doc, spec["tests"], set(pods), node_names, {p.name for p in policies},
                 problems)
    if any(p.level == ERROR and p.file == doc.file and p.document == doc.index
           for p in problems):
        raise BadSuite
    return Suite(doc, name, policies, rule_forms, nodes, pods, bound, storage,
                 spec["tests"])


def _check_cases(doc: SourceDocument, cases: list[CaseSpec], pod_names: set[str],
                 node_names: set[str], plugin_names: set[str],
                 problems: list[Problem]) -> None:
    """Every pod, policy and node a test case names exists; there is a test case."""
    for i, case in enumerate(cases):
        path = ("spec", "tests", i)
        if case["pod"] not in pod_names:
            problems.append(doc.problem((*path, "pod"), "unknown-pod",
                                        f"no pod named {case['pod']!r} in spec.pods"))
        for pname, exp in (case.get("policies") or {}).items():
            if pname not in plugin_names:
                problems.append(doc.problem((*path, "policies", pname), "unknown-policy",
                                            f"no policy with pluginName {pname!r} in "
                                            f"spec.policies ({', '.join(sorted(plugin_names))})",
                                            key=True))
            named: tuple[tuple[str, list[str]], ...] = (
                ("pass", exp.get("pass") or []), ("fail", list(exp.get("fail") or {})),
                ("scores", list(exp.get("scores") or {})))
            for field_name, names in named:
                for n in names:
                    if n not in node_names:
                        problems.append(doc.problem((*path, "policies", pname, field_name),
                                                    "unknown-node", f"no node named {n!r}"))
        targets = case.get("scheduledTo")
        for n in [targets] if isinstance(targets, str) else targets or []:
            if n not in node_names:
                problems.append(doc.problem((*path, "scheduledTo"), "unknown-node",
                                            f"no node named {n!r}"))
    if not cases:
        problems.append(doc.problem(("spec", "tests"), "no-tests",
                                    "spec.tests is empty"))


def _load_storage(doc: SourceDocument, entries: list[dict[str, Any]],
                  problems: list[Problem]) -> list[tuple[str, dict[str, Any]]]:
    """spec.storage: full objects of the storage kinds, each once per name, with no
    field the API server would refuse."""
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(entries):
        path: JsonPath = ("spec", "storage", i)
        kind = raw.get("kind")
        if kind not in STORAGE_KINDS:
            problems.append(doc.problem((*path, "kind"), "invalid-object",
                                        f"kind {kind!r} is not a storage kind (one of "
                                        f"{', '.join(STORAGE_KINDS)})"))
            continue
        found = unknown_field_paths(kind, raw)
        if found:
            problems.extend(doc.problem((*path, *sub), "unknown-field", message, key=True)
                            for sub, message in found)
            continue
        meta = raw.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) \
                or not meta["name"]:
            problems.append(doc.problem((*path, "metadata"), "invalid-object",
                                        f"{kind} needs metadata.name"))
            continue
        key = (kind, object_key(kind, raw))
        if key in seen:
            problems.append(doc.problem(path, "duplicate-name",
                                        f"{kind} {key[1]!r} is defined twice"))
        seen.add(key)
        out.append((kind, dict(raw)))
    return out


def _use_metrics(doc: SourceDocument, metrics: Mapping[str, Mapping[str, Any]],
                 policies: list[CompiledPolicy], node_names: set[str],
                 problems: list[Problem]) -> None:
    """Give the policies' `metric` rules the suite's `spec.metrics` values."""
    values: dict[str, dict[str, float]] = {}
    for metric, nodes in metrics.items():
        values[metric] = {}
        for node, raw in nodes.items():
            path = ("spec", "metrics", metric, node)
            # The daemon's and --metrics' own rule for usable values (an integer too big
            # for a float is infinite, not a crash).
            value, reason = clean_value(raw, allow_negative=True)
            if node not in node_names:
                problems.append(doc.problem(path, "unknown-node", f"no node named {node!r}",
                                            key=True))
            elif value is None:
                problems.append(doc.problem(path, "number", f"{show_value(raw)} is not a "
                                            f"finite number ({reason})"))
            else:
                values[metric][node] = value
    reader = StaticMetrics(values)
    for p in policies:
        p.use_metrics(reader)


def _load_policies(doc: SourceDocument, entries: list[str | dict[str, Any]],
                   base_dir: Path, problems: list[Problem]) -> list[CompiledPolicy]:
    """Policies by path (relative to the test file) or inline; any error is bad input."""
    result = PolicySet()

    # A file named twice (or by its directory and by itself) is loaded once: loaded
    # twice, each of its policies would clash with itself as a duplicate.
    loaded: set[Path] = set()
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            target = base_dir / entry
            files, bad = collect_files([target])
            for b in bad:
                problems.append(doc.problem(("spec", "policies", i), "path",
                                            f"policy path {entry!r}: {b.split(': ', 1)[-1]}"))
            for path, display in files:
                if path.resolve() in loaded:
                    continue
                loaded.add(path.resolve())
                source = load_file(path, display)
                result.files.append(source)
                problems.extend(source.problems)
                for d in source.documents:
                    result.documents.extend(policy_documents(d, problems))
        else:
            # An inline document: positions are those of the test file, paths relative
            # to the entry, so problems point into the test file.
            inline = SubDocument(doc, ("spec", "policies", i), entry)
            if is_policy_document(inline, problems):
                result.documents.append(inline)
    check_documents(result)
    problems.extend(result.problems)
    return result.compiled


def _decode(doc: SourceDocument, path: JsonPath, raw: Any, what: Shape,
            from_dict: Callable[[Any], _Record], problems: list[Problem]
            ) -> _Record | None:
    """A node or pod (`what`) of spec.nodes / spec.pods, from a full object or the
    shorthand; None once its problems are recorded."""
    # Unknown fields are errors, as the API server's strict field validation makes them:
    # in a full object, and in the shorthand's taints and tolerations (free-form here).
    found: list[tuple[JsonPath, str]] = []
    if isinstance(raw, Mapping) and "metadata" in raw:
        found.extend(unknown_field_paths("Node" if what == "node" else "Pod", raw))
    else:
        items = "taints" if what == "node" else "tolerations"
        entries = raw.get(items) if isinstance(raw, Mapping) else None
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            for inner, said in unknown_field_paths(
                    "V1Taint" if what == "node" else "V1Toleration", entry):
                found.append(((items, i, *inner), said))
    if found:
        problems.extend(doc.problem((*path, *sub), "unknown-field", message, key=True)
                        for sub, message in found)
        return None
    if isinstance(raw, Mapping) and "metadata" in raw:
        obj = dict(raw)
    else:
        errs = shape_problems(doc, raw, what, path)
        if errs:
            problems.extend(errs)
            return None
        obj = _node_object(raw) if what == "node" else _pod_object(raw)
    try:
        return from_dict(obj)
    except PolicydError as exc:
        problems.append(doc.problem(path, "invalid-object", str(exc)))
        return None


def _node_object(s: Mapping[str, Any]) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": s["name"], **(s.get("labels") or {})}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": s["name"], "labels": labels,
                     "annotations": dict(s.get("annotations") or {})},
        "spec": {"taints": list(s.get("taints") or []),
                 "unschedulable": bool(s.get("unschedulable", False))},
        "status": {"allocatable": {**DEFAULT_ALLOCATABLE, **(s.get("allocatable") or {})}},
    }


def _pod_object(s: Mapping[str, Any]) -> dict[str, Any]:
    ns = s.get("namespace") or "default"
    container: dict[str, Any] = {"name": "app", "image": "app"}
    if s.get("requests"):
        container["resources"] = {"requests": dict(s["requests"])}
    spec: dict[str, Any] = {"containers": [container]}
    for key in ("nodeName", "priority", "nodeSelector", "tolerations"):
        if key in s:
            spec[key] = s[key]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": s["name"], "namespace": ns, "uid": f"{ns}/{s['name']}",
                     "labels": dict(s.get("labels") or {}),
                     "annotations": dict(s.get("annotations") or {})},
        "spec": spec,
        "status": {"phase": "Running" if s.get("nodeName") else "Pending"},
    }
