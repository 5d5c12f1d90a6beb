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
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.errors import PolicydError
from policyd.framework.cycle_state import CycleState
from policyd.model.cluster import ClusterState
from policyd.model.fieldcheck import unknown_field_paths
from policyd.model.node_metrics import StaticMetrics
from policyd.model.records import node_from_dict, pod_from_dict
from policyd.model.spelling import show_value
from policyd.model.storage import STORAGE_KINDS, object_key
from policyd.nodemetrics.values import clean_value
from policyd.policy import policy_schema as policy_schema
from policyd.policy.compiler import AuditedPolicy, compile_policy
from policyd.policy.from_paths import (
    PolicySet,
    check_documents,
    collect_files,
    is_policy_document,
    policy_documents,
)
from policyd.problems import ERROR, Problem
from policyd.sourcefile import JsonPath, SourceDocument, SubDocument, load_file
from policyd.sourcefile.schema_problems import schema_problems

KIND = "PolicyTest"

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_QTY_MAP = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
_REASONS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}


def _obj(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


SCHEMA: dict[str, Any] = _obj({
    "apiVersion": {"const": policy_schema.API_VERSION},
    "kind": {"const": KIND},
    "metadata": _obj({"name": {"type": "string", "minLength": 1}}, ["name"]),
    "spec": _obj({
        "policies": {"type": "array", "minItems": 1, "items": {"oneOf": [
            {"type": "string"},
            {"type": "object", "required": ["kind"]},
        ]}},
        "nodes": {"type": "array", "items": {"type": "object"}},
        "pods": {"type": "array", "items": {"type": "object"}},
        # PersistentVolumes, claims, StorageClasses and CSI objects, as full objects:
        # what the volume plugins read.
        "storage": {"type": "array", "items": {"type": "object",
                                               "required": ["kind", "metadata"]}},
        # Node metric values for `metric` score rules: metric -> node -> number, as the
        # daemon's cache would hold them (they never age here).
        "metrics": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": {"type": "number"}}},
        "tests": {"type": "array", "items": _obj({
            "name": {"type": "string", "minLength": 1},
            "pod": {"type": "string", "minLength": 1},
            "policies": {"type": "object", "additionalProperties": _obj({
                "applies": {"type": "boolean"},
                "pass": {"type": "array", "items": {"type": "string"}},
                "fail": {"type": "object", "additionalProperties": _REASONS},
                "scores": {"type": "object", "additionalProperties": {"type": "integer"}},
            })},
            "scheduledTo": {"oneOf": [{"type": "string"},
                                      {"type": "array", "items": {"type": "string"}}]},
            "unschedulable": {"type": ["boolean", "string"]},
        }, ["name", "pod"])},
    }, ["policies", "nodes", "pods", "tests"]),
}, ["apiVersion", "kind", "metadata", "spec"])

NODE_SHORTHAND = _obj({
    "name": {"type": "string", "minLength": 1},
    "labels": _STR_MAP,
    "annotations": _STR_MAP,
    "allocatable": _QTY_MAP,
    "taints": {"type": "array", "items": {"type": "object"}},
    "unschedulable": {"type": "boolean"},
}, ["name"])

POD_SHORTHAND = _obj({
    "name": {"type": "string", "minLength": 1},
    "namespace": {"type": "string"},
    "labels": _STR_MAP,
    "annotations": _STR_MAP,
    "requests": _QTY_MAP,
    "nodeName": {"type": "string"},
    "priority": {"type": "integer"},
    "nodeSelector": _STR_MAP,
    "tolerations": {"type": "array", "items": {"type": "object"}},
}, ["name"])

DEFAULT_ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "pods": "110"}


@cache
def _validator(which: str) -> Any:

    return Draft202012Validator({"test": SCHEMA, "node": NODE_SHORTHAND,
                                 "pod": POD_SHORTHAND}[which])


# ---------------------------------------------------------------------------------
# results


@dataclass(slots=True)
class CaseResult:
    suite: str  # file::PolicyTest name
    name: str
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    file: str = ""
    line: int = 0

    @property
    def passed(self) -> bool:
        return not self.failures


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


# ---------------------------------------------------------------------------------
# loading


class _Bad(Exception):
    """Stops loading one PolicyTest after its problems were recorded."""


@dataclass(slots=True)
class _Suite:
    doc: SourceDocument
    name: str
    policies: list[Any]  # CompiledPolicy
    # What per-policy expectations run, by pluginName: each policy's Enforce form.
    # They are about the rules themselves, so an Audit-mode policy is judged as it will
    # act once enforced; whole-scheduler expectations run `policies` in their modes.
    rule_forms: dict[str, Any]
    nodes: list[Any]  # Node
    pods: dict[str, Any]  # name -> Pod (the pods under test and existing ones)
    bound: list[Any]  # Pods with a nodeName: the cluster's existing pods
    storage: list[tuple[str, dict[str, Any]]]  # (kind, object) for cluster.storage


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
                suite = _load_suite(doc, path.parent, result.problems)
            except _Bad:
                continue
            result.cases.extend(_run_suite(suite))
    return result


def _schema_problems(doc: SourceDocument, data: Any, which: str, base: JsonPath
                     ) -> list[Problem]:
    return schema_problems(doc, _validator(which).iter_errors(data), base=base,
                           jsonschema_wording=True)


def _load_suite(doc: SourceDocument, base_dir: Path, problems: list[Problem]) -> _Suite:
    errs = _schema_problems(doc, doc.data, "test", ())
    if errs:
        problems.extend(errs)
        raise _Bad
    data = doc.data
    spec = data["spec"]
    name = f"{doc.file}::{data['metadata']['name']}"
    policies = _load_policies(doc, spec["policies"], base_dir, problems)
    nodes = []
    node_names: set[str] = set()
    for i, raw in enumerate(spec["nodes"]):
        node = _decode(doc, ("spec", "nodes", i), raw, "node", problems)
        if node is not None:
            if node.name in node_names:
                problems.append(doc.problem(("spec", "nodes", i), "duplicate-name",
                                            f"node {node.name!r} is defined twice"))
            node_names.add(node.name)
            nodes.append(node)
    pods: dict[str, Any] = {}
    bound = []
    for i, raw in enumerate(spec["pods"]):
        pod = _decode(doc, ("spec", "pods", i), raw, "pod", problems)
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
    plugin_names = {p.name for p in policies}
    for i, case in enumerate(spec["tests"]):
        path = ("spec", "tests", i)
        if case["pod"] not in pods:
            problems.append(doc.problem((*path, "pod"), "unknown-pod",
                                        f"no pod named {case['pod']!r} in spec.pods"))
        for pname, exp in (case.get("policies") or {}).items():
            if pname not in plugin_names:
                problems.append(doc.problem((*path, "policies", pname), "unknown-policy",
                                            f"no policy with pluginName {pname!r} in "
                                            f"spec.policies ({', '.join(sorted(plugin_names))})",
                                            key=True))
            for field_name in ("pass", "fail", "scores"):
                for n in exp.get(field_name) or []:
                    if n not in node_names:
                        problems.append(doc.problem((*path, "policies", pname, field_name),
                                                    "unknown-node", f"no node named {n!r}"))
        targets = case.get("scheduledTo")
        for n in [targets] if isinstance(targets, str) else targets or []:
            if n not in node_names:
                problems.append(doc.problem((*path, "scheduledTo"), "unknown-node",
                                            f"no node named {n!r}"))
    if not spec["tests"]:
        problems.append(doc.problem(("spec", "tests"), "no-tests",
                                    "spec.tests is empty"))
    if any(p.level == ERROR and p.file == doc.file and p.document == doc.index
           for p in problems):
        raise _Bad
    return _Suite(doc, name, policies, rule_forms, nodes, pods, bound, storage)


def _load_storage(doc: SourceDocument, entries: list[Any], problems: list[Problem]
                  ) -> list[tuple[str, dict[str, Any]]]:
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
                 policies: list[Any], node_names: set[str], problems: list[Problem]) -> None:
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
        use = getattr(p, "use_metrics", None)
        if use is not None:
            use(reader)


def _load_policies(doc: SourceDocument, entries: list[Any], base_dir: Path,
                   problems: list[Problem]) -> list[Any]:
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


def _decode(doc: SourceDocument, path: JsonPath, raw: Any, what: str,
            problems: list[Problem]) -> Any:

    # Unknown fields are errors, as the API server's strict field validation makes them:
    # in a full object, and in the shorthand's taints and tolerations (free-form here).
    if isinstance(raw, Mapping) and "metadata" in raw:
        found = unknown_field_paths("Node" if what == "node" else "Pod", raw)
    else:
        items = "taints" if what == "node" else "tolerations"
        entries = raw.get(items) if isinstance(raw, Mapping) else None
        found = [((items, i, *sub), message)
                 for i, entry in enumerate(entries if isinstance(entries, list) else [])
                 for sub, message in unknown_field_paths(
                     "V1Taint" if what == "node" else "V1Toleration", entry)]
    if found:
        problems.extend(doc.problem((*path, *sub), "unknown-field", message, key=True)
                        for sub, message in found)
        return None
    if isinstance(raw, Mapping) and "metadata" in raw:
        obj = dict(raw)
    else:
        errs = _schema_problems(doc, raw, what, path)
        if errs:
            problems.extend(errs)
            return None
        obj = _node_object(raw) if what == "node" else _pod_object(raw)
    try:
        return node_from_dict(obj) if what == "node" else pod_from_dict(obj)
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


# ---------------------------------------------------------------------------------
# running


def _run_suite(suite: _Suite) -> list[CaseResult]:
    out = []
    for i, case in enumerate(suite.doc.data["spec"]["tests"]):
        line = suite.doc.position(("spec", "tests", i))[0]
        result = CaseResult(suite.name, case["name"], file=suite.doc.file, line=line)
        start = time.perf_counter()
        try:
            _run_case(suite, case, result)
        except Exception as exc:  # a crash in a plugin is a failure, with its cause
            result.failures.append(f"internal error: {type(exc).__name__}: {exc}")
        result.seconds = time.perf_counter() - start
        out.append(result)
    return out


def _cluster(suite: _Suite, pod: Any) -> Any:
    cluster = ClusterState(suite.nodes, [p for p in suite.bound if p.uid != pod.uid])
    for kind, obj in suite.storage:
        cluster.storage.upsert(kind, obj)
    return cluster


def _run_case(suite: _Suite, case: Mapping[str, Any], result: CaseResult) -> None:

    pod = suite.pods[case["pod"]]
    for pname, exp in (case.get("policies") or {}).items():
        policy = suite.rule_forms[pname]
        cluster = _cluster(suite, pod)
        infos = cluster.node_infos()
        state = CycleState(infos, cluster)
        _check_policy(policy, pod, infos, state, exp, result.failures)
    if "scheduledTo" in case or "unschedulable" in case:
        _check_schedule(suite, pod, case, result.failures)


def _check_policy(policy: Any, pod: Any, infos: list[Any], state: Any,
                  exp: Mapping[str, Any], failures: list[str]) -> None:
    name = policy.name
    applies = policy.applies(pod)
    if "applies" in exp and exp["applies"] != applies:
        failures.append(f"{name}: expected the policy {'' if exp['applies'] else 'not '}"
                        f"to apply to the pod, but it {'does' if applies else 'does not'}")
        return
    verdicts: dict[str, tuple[str, ...] | None] = {}
    passing = list(infos)
    if hasattr(policy, "pre_filter"):
        _, status = policy.pre_filter(state, pod, infos)
        if status is None:
            for info in infos:
                st = policy.filter(state, pod, info)
                verdicts[info.name] = None if st is None or st.is_success else st.reasons
            passing = [i for i in infos if verdicts[i.name] is None]
    for n in exp.get("pass") or []:
        if verdicts.get(n) is not None:
            failures.append(f"{name}: expected node {n} to pass, but it failed: "
                            f"{'; '.join(verdicts[n] or ())}")
    for n, want in (exp.get("fail") or {}).items():
        wanted = (want,) if isinstance(want, str) else tuple(want)
        got = verdicts.get(n)
        if got is None:
            failures.append(f"{name}: expected node {n} to fail with {'; '.join(wanted)!r}, "
                            "but it passed")
        elif got != wanted:
            failures.append(f"{name}: node {n} failed with {'; '.join(got)!r}, expected "
                            f"{'; '.join(wanted)!r}")
    if "scores" in exp:
        if not hasattr(policy, "pre_score"):
            failures.append(f"{name}: expected scores, but the policy has no score rules")
            return
        status = policy.pre_score(state, pod, passing)
        if status is not None:
            failures.append(f"{name}: expected scores, but PreScore returned {status.code}")
            return
        scores = [policy.score(state, pod, n) for n in passing]
        policy.normalize_score(state, pod, passing, scores)
        got_scores = {n.name: s for n, s in zip(passing, scores, strict=True)}
        for n, want_score in exp["scores"].items():
            if n not in got_scores:
                failures.append(f"{name}: expected node {n} to score {want_score}, but it "
                                "did not pass the policy's filters")
            elif got_scores[n] != want_score:
                failures.append(f"{name}: node {n} scored {got_scores[n]}, expected "
                                f"{want_score} (all: {got_scores})")


def _check_schedule(suite: _Suite, pod: Any, case: Mapping[str, Any],
                    failures: list[str]) -> None:
    node, message = schedule(suite.policies, pod, _cluster(suite, pod))
    if "scheduledTo" in case:
        want = case["scheduledTo"]
        wanted = [want] if isinstance(want, str) else list(want)
        if node not in wanted:
            got = f"was scheduled to {node}" if node else f"was unschedulable: {message}"
            failures.append(f"expected the pod on {' or '.join(wanted)}, but it {got}")
    if "unschedulable" in case:
        want_u = case["unschedulable"]
        if want_u is False:
            if node is None:
                failures.append(f"expected the pod to be schedulable, but: {message}")
        elif node is not None:
            failures.append(f"expected the pod to be unschedulable, but it was scheduled "
                            f"to {node}")
        elif isinstance(want_u, str) and want_u != message:
            failures.append(f"unschedulable with {message!r}, expected {want_u!r}")


def schedule(policies: Sequence[Any], pod: Any, cluster: Any) -> tuple[str | None, str]:
    """(chosen node or None, FitError message) with the default profile plus `policies`."""

    fw = default_framework(list(policies), seed=0)
    result = schedule_one(fw, pod, cluster)
    if result.error is not None:
        return None, f"scheduling error: {result.message}"
    return result.node, result.message
