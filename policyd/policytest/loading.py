"""Load one PolicyTest document into a Suite: its policies compiled (or its profile's
frameworks, `profile_ref`), its nodes, pods, storage and DRA objects decoded (inline, and
from its cluster file, `cluster_ref`), every reference checked; any problem is bad
input (recorded, then `BadSuite`), never a test failure. A refused node, pod or policy
is reported once: what names it does not become "no node named ..." too."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from policyd.config.plugins import default_framework
from policyd.errors import InvalidObjectError, PolicydError
from policyd.model.cluster_files import Snapshot
from policyd.model.dra_objects import DRA_KINDS, dra_key
from policyd.model.fieldcheck import unknown_field_paths
from policyd.model.node_metrics import StaticMetrics
from policyd.model.objectmeta import check_metadata
from policyd.model.pod_groups import WORKLOAD_API, GroupKey, pod_group_from_dict
from policyd.model.records import Pod, node_from_dict, pod_from_dict
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
from policyd.policy.metric_refs import MetricCheck
from policyd.policytest.cluster_ref import load_cluster
from policyd.policytest.field_paths import entry_path, object_path
from policyd.policytest.profile_ref import SEED, InlinePolicies, Profile, load_profile
from policyd.policytest.schema import CaseSpec, ProfileSpec, Shape, SuiteDocument, shape_problems
from policyd.problems import ERROR, Problem
from policyd.sourcefile import JsonPath, SourceDocument, SubDocument, load_file

if TYPE_CHECKING:
    from policyd.framework.runtime import Framework

DEFAULT_ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "pods": "110"}

_Record = TypeVar("_Record")  # Node or Pod


class BadSuite(Exception):
    """Stops loading one PolicyTest after its problems were recorded."""


@dataclass(slots=True)
class Suite:
    doc: SourceDocument
    name: str  # file::PolicyTest name
    # What per-policy expectations run, by pluginName: each policy's Enforce form.
    # They are about the rules themselves, so an Audit-mode policy is judged as it will
    # act once enforced; whole-scheduler expectations run the policies in their modes.
    rule_forms: dict[str, CompiledPolicy]
    # Every node, bound pod (the cluster's load), namespace, workload, storage and DRA
    # object: spec.cluster.file's and the inline ones together.
    cluster: Snapshot
    pods: dict[str, Pod]  # by name, and by namespace/name (pods under test, bound ones)
    tests: list[CaseSpec]
    # A fresh framework for one whole-scheduler case: the default profile plus the
    # test's policies, or spec.profile's.
    framework: Callable[[], Framework]


def load_suite(doc: SourceDocument, base_dir: Path, problems: list[Problem],
               default_profile: ProfileSpec | None = None) -> Suite:
    """The Suite of `doc` (policy, profile and cluster paths relative to `base_dir`);
    raises BadSuite once its problems are in `problems`. `default_profile` (`policyd
    test --config`, its path relative to the working directory) runs when the document
    names no spec.profile of its own."""
    start = len(problems)
    errs = shape_problems(doc, doc.data, "test", ())
    if errs:
        problems.extend(errs)
        raise BadSuite
    data = cast(SuiteDocument, doc.data)
    spec = data["spec"]
    name = f"{doc.file}::{data['metadata']['name']}"
    # Names a refused node, pod or policy had: no false "no node named" after it.
    refused = _Refused()
    ref = spec.get("profile")
    option = ref is None and default_profile is not None
    if option:
        ref = default_profile
    profile: Profile | None = None
    if ref is None:
        policies = _load_policies(doc, spec.get("policies") or [], base_dir, problems,
                                  refused)
    else:
        entries = spec.get("policies") or []
        files = _policy_files(doc, entries, base_dir, problems)
        inline = _inline_policies(doc, entries, problems, refused)
        profile = load_profile(doc, ref, Path() if option else base_dir, files, problems,
                               option=option, inline=inline)
        policies = profile.policies if profile is not None else []
        if profile is None:
            refused.any_policy = True
    cluster = Snapshot()
    if "cluster" in spec:
        loaded = load_cluster(doc, spec["cluster"]["file"], base_dir, problems)
        refused.cluster = loaded is None
        cluster = loaded or cluster
    node_names = {n.name for n in cluster.nodes}
    for i, raw in enumerate(spec.get("nodes") or []):
        node = _decode(doc, ("spec", "nodes", i), raw, "node", node_from_dict, problems)
        if node is None:
            refused.nodes.add(_name_of(raw))
            continue
        if node.name in node_names:
            problems.append(doc.problem(("spec", "nodes", i), "duplicate-name",
                                        f"node {node.name!r} is defined twice"))
        node_names.add(node.name)
        cluster.nodes.append(node)
    known_nodes = node_names | refused.nodes
    pods = _load_pods(doc, spec.get("pods") or [], cluster, known_nodes, refused, problems)
    _load_pod_groups(doc, spec.get("podGroups") or [], cluster, problems)
    _load_storage(doc, spec.get("storage") or [], cluster.storage, problems)
    _load_devices(doc, spec.get("devices") or [], cluster.dra, problems)
    rule_forms = {p.name: compile_policy(p.document, p.source, enforced=True)
                  if isinstance(p, AuditedPolicy) else p for p in policies}
    _use_metrics(doc, spec.get("metrics") or {},
                 [*policies, *(f for f in rule_forms.values() if f not in policies)],
                 node_names, known_nodes, problems)
    if not refused.cluster:
        _check_names(doc, spec["tests"], pods, known_nodes, refused.pods, problems,
                     "spec.pods or the cluster file" if "cluster" in spec else "spec.pods",
                     cluster.pod_groups)
    if not refused.any_policy:
        _check_policies(doc, spec["tests"], set(rule_forms) | refused.policies, problems)
    if not spec["tests"]:
        problems.append(doc.problem(("spec", "tests"), "no-tests", "spec.tests is empty"))
    # Any error found while loading it (in the test file, or in a policy, profile or
    # cluster file it names) stops the suite: its cases would run without what was
    # refused and fail for that instead.
    if any(p.level == ERROR for p in problems[start:]) or (ref is not None
                                                            and profile is None):
        raise BadSuite
    framework: Callable[[], Framework] = profile.framework if profile is not None \
        else partial(default_framework, policies, seed=SEED)
    return Suite(doc, name, rule_forms, cluster, pods, spec["tests"], framework)


@dataclass(slots=True)
class _Refused:
    """What was refused, by the name it would have had."""

    nodes: set[str] = field(default_factory=set)
    pods: set[str] = field(default_factory=set)
    policies: set[str] = field(default_factory=set)  # pluginNames
    any_policy: bool = False  # a profile refused: its pluginNames are unknown
    cluster: bool = False  # the cluster file refused: its nodes and pods are unknown


def _name_of(raw: Any) -> str:
    """The name a refused node or pod entry meant (shorthand or full object), as the
    test cases would write it (`true` for an unquoted `name: true`)."""
    if not isinstance(raw, Mapping):
        return ""
    meta = raw.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else raw.get("name")
    return name if isinstance(name, str) else json.dumps(name)


def _load_pods(doc: SourceDocument, entries: list[dict[str, Any]], cluster: Snapshot,
               known_nodes: set[str], refused: _Refused, problems: list[Problem]
               ) -> dict[str, Pod]:
    """spec.pods and the cluster file's pods, by name and namespace/name; bound ones
    join `cluster` as its load, the cluster file's pending ones are pods to test."""
    pods: dict[str, Pod] = {}
    file_pods, cluster.pods = cluster.pods, []
    for i, raw in enumerate(entries):
        pod = _decode(doc, ("spec", "pods", i), raw, "pod", pod_from_dict, problems)
        if pod is None:
            refused.pods.add(_name_of(raw))
            continue
        if pod.name in pods:
            problems.append(doc.problem(("spec", "pods", i), "duplicate-name",
                                        f"pod {pod.name!r} is defined twice"))
        pods[pod.name] = pods[f"{pod.namespace}/{pod.name}"] = pod
        if pod.node_name:
            if pod.node_name not in known_nodes:
                problems.append(doc.problem(("spec", "pods", i), "unknown-node",
                                            f"pod {pod.name!r} is bound to unknown node "
                                            f"{pod.node_name!r}"))
            cluster.pods.append(pod)
    # The cluster file's pods by namespace/name, and by name alone when only one has it.
    inline = set(pods)
    count = Counter(p.name for p in file_pods)
    for pod in file_pods:
        full = f"{pod.namespace}/{pod.name}"
        if full in inline:
            problems.append(doc.problem(("spec", "cluster", "file"), "duplicate-name",
                                        f"pod {full!r} is in spec.pods and in the cluster "
                                        "file"))
        pods.setdefault(full, pod)
        if count[pod.name] == 1:
            pods.setdefault(pod.name, pod)
        if pod.node_name:
            cluster.pods.append(pod)
    return pods


def _load_pod_groups(doc: SourceDocument, entries: list[dict[str, Any]],
                     cluster: Snapshot, problems: list[Problem]) -> None:
    """spec.podGroups into `cluster.pod_groups` (beside the cluster file's)."""
    for i, raw in enumerate(entries):
        at: JsonPath = ("spec", "podGroups", i)
        if raw.get("kind") != "PodGroup":
            problems.append(doc.problem((*at, "kind"), "not-a-pod-group",
                                        f"expected kind PodGroup, got {raw.get('kind')!r}"))
            continue
        try:
            group = pod_group_from_dict(raw)
        except InvalidObjectError as exc:
            problems.append(_refused_field(doc, at, exc))
            continue
        if group.key in cluster.pod_groups:
            problems.append(doc.problem(at, "duplicate-name",
                                        f"PodGroup {group.key} is defined twice"))
        cluster.pod_groups[group.key] = group


# The expectations of a pod case and of a pod group case: a case states one kind.
_POD_EXPECTATIONS = ("policies", "scheduledTo", "unschedulable")
_GROUP_EXPECTATIONS = ("placed", "nodes", "fits")


def _check_names(doc: SourceDocument, cases: list[CaseSpec], pods: Mapping[str, Pod],
                 node_names: set[str], refused_pods: set[str], problems: list[Problem],
                 pod_sources: str, groups: Mapping[GroupKey, Any]) -> None:
    """Every pod, pod group and node a test case names exists (or was refused, and
    said so); `pod_sources` says where pods come from."""
    for i, case in enumerate(cases):
        path = ("spec", "tests", i)
        if "podGroup" in case:
            for key in _POD_EXPECTATIONS:
                if key in case:
                    states = ", ".join(_GROUP_EXPECTATIONS)
                    problems.append(doc.problem((*path, key), "wrong-expectation",
                                                f"a podGroup case states {states}, "
                                                f"not {key}"))
            if group_case_key(case["podGroup"]) not in groups:
                problems.append(doc.problem((*path, "podGroup"), "unknown-pod-group",
                                            f"no scheduling.k8s.io PodGroup named "
                                            f"{case['podGroup']!r} in spec.podGroups or "
                                            "the cluster file"))
            for n in case.get("nodes") or []:
                if n not in node_names:
                    problems.append(doc.problem((*path, "nodes"), "unknown-node",
                                                f"no node named {n!r}"))
            continue
        for key in _GROUP_EXPECTATIONS:
            if key in case:
                problems.append(doc.problem((*path, key), "wrong-expectation",
                                            f"{key} is a podGroup case's expectation"))
        if case["pod"] not in pods and case["pod"] not in refused_pods:
            problems.append(doc.problem((*path, "pod"), "unknown-pod",
                                        _unknown_pod(case["pod"], pods, pod_sources)))
        for pname, exp in (case.get("policies") or {}).items():
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


def _check_policies(doc: SourceDocument, cases: list[CaseSpec], plugin_names: set[str],
                    problems: list[Problem]) -> None:
    """Every policy a test case names is one of the suite's (or was refused)."""
    for i, case in enumerate(cases):
        for pname in case.get("policies") or {}:
            if pname not in plugin_names:
                problems.append(doc.problem(("spec", "tests", i, "policies", pname),
                                            "unknown-policy",
                                            f"no policy with pluginName {pname!r} in "
                                            f"spec.policies ({', '.join(sorted(plugin_names))})",
                                            key=True))


def _unknown_pod(name: str, pods: Mapping[str, Pod], sources: str) -> str:
    """Why a test's pod name finds no pod, and the names that would."""
    base = name.rpartition("/")[2]
    same = sorted(k for k, p in pods.items() if "/" in k and p.name == base and k != name)
    if len(same) > 1 and base == name:
        return (f"pod name {name!r} is in several namespaces: write namespace/name "
                f"({', '.join(same)})")
    hint = f"; did you mean {same[0]!r}?" if same else ""
    return f"no pod named {name!r} in {sources}{hint}"


def _load_storage(doc: SourceDocument, entries: list[dict[str, Any]],
                  into: dict[str, dict[str, dict[str, Any]]], problems: list[Problem]
                  ) -> None:
    """spec.storage into `into` (kind -> object_key -> object, the cluster file's
    already there): full objects of the storage kinds."""
    _load_objects(doc, "storage", entries, into, problems, kinds=STORAGE_KINDS,
                  kind_noun="a storage kind", key_of=object_key)


def _load_devices(doc: SourceDocument, entries: list[dict[str, Any]],
                  into: dict[str, dict[str, dict[str, Any]]], problems: list[Problem]
                  ) -> None:
    """spec.devices into `into` (kind -> dra_key -> object, the cluster file's already
    there): DeviceClasses, ResourceSlices and ResourceClaims, what DynamicResources
    reads."""
    _load_objects(doc, "devices", entries, into, problems, kinds=DRA_KINDS,
                  kind_noun="a DRA kind", key_of=dra_key)


def _load_objects(doc: SourceDocument, section: str, entries: list[dict[str, Any]],
                  into: dict[str, dict[str, dict[str, Any]]], problems: list[Problem], *,
                  kinds: Sequence[str], kind_noun: str,
                  key_of: Callable[[str, dict[str, Any]], str]) -> None:
    """Full objects of `kinds` from spec.<section>, each once per name, with no field
    or metadata the API server would refuse."""
    for i, raw in enumerate(entries):
        path: JsonPath = ("spec", section, i)
        kind = raw.get("kind")
        if not isinstance(kind, str) or kind not in kinds:
            problems.append(doc.problem((*path, "kind"), "invalid-object",
                                        f"kind {kind!r} is not {kind_noun} (one of "
                                        f"{', '.join(kinds)})"))
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
        try:
            check_metadata(kind, raw)  # as a snapshot's objects get it
        except InvalidObjectError as exc:
            problems.append(_refused_field(doc, (*path, *object_path(exc.field)), exc))
            continue
        key = key_of(kind, raw)
        objects = into.setdefault(kind, {})
        if key in objects:
            problems.append(doc.problem(path, "duplicate-name",
                                        f"{kind} {key!r} is defined twice"))
        objects[key] = dict(raw)


def _use_metrics(doc: SourceDocument, metrics: Mapping[str, Mapping[str, Any]],
                 policies: list[CompiledPolicy], node_names: set[str],
                 known_nodes: set[str], problems: list[Problem]) -> None:
    """Give the policies' `metric` rules the suite's `spec.metrics` values (of the
    nodes in `node_names`; `known_nodes` adds the refused ones, reported already)."""
    values: dict[str, dict[str, float]] = {}
    for metric, nodes in metrics.items():
        values[metric] = {}
        for node, raw in nodes.items():
            path = ("spec", "metrics", metric, node)
            # The daemon's and --metrics' own rule for usable values (an integer too big
            # for a float is infinite, not a crash).
            value, reason = clean_value(raw, allow_negative=True)
            if node not in known_nodes:
                problems.append(doc.problem(path, "unknown-node", f"no node named {node!r}",
                                            key=True))
            elif node not in node_names:
                continue
            elif value is None:
                problems.append(doc.problem(path, "number", f"{show_value(raw)} is not a "
                                            f"finite number ({reason})"))
            else:
                values[metric][node] = value
    reader = StaticMetrics(values)
    for p in policies:
        p.use_metrics(reader)


def _policy_files(doc: SourceDocument, entries: list[str | dict[str, Any]],
                  base_dir: Path, problems: list[Problem]) -> list[Path]:
    """The files spec.policies' paths name, each once (a profile loads them)."""
    loaded: set[Path] = set()
    return [path for i, entry in enumerate(entries) if isinstance(entry, str)
            for path, _ in _entry_files(doc, i, entry, base_dir, loaded, problems)]


def _inline_policies(doc: SourceDocument, entries: list[str | dict[str, Any]],
                     problems: list[Problem], refused: _Refused) -> InlinePolicies:
    """spec.policies' inline documents, checked and compiled, as a profile is offered
    them (`validate`'s `cluster_policies`: they join it as plugins enabled by default,
    as the daemon's SchedulingPolicy objects do)."""
    subs = [SubDocument(doc, ("spec", "policies", i), entry)
            for i, entry in enumerate(entries) if not isinstance(entry, str)]
    docs: list[SourceDocument] = [d for d in subs if is_policy_document(d, problems)]
    checked = PolicySet(documents=docs)
    check_documents(checked)
    problems.extend(checked.problems)
    by_name = {_plugin_name(d): d for d in docs}
    refused.policies.update(n for n in by_name if n)

    def offer(file_docs: Sequence[SourceDocument], metrics: MetricCheck
              ) -> dict[str, CompiledPolicy]:
        files = {_plugin_name(d): d.file for d in file_docs}
        out: dict[str, CompiledPolicy] = {}
        for p in checked.compiled:
            at = by_name[p.name]
            if p.name in files:
                problems.append(at.problem(("spec", "pluginName"), "duplicate-name",
                                           f"pluginName {p.name!r} is also in "
                                           f"{files[p.name]}, which the profile loads"))
                continue
            problems.extend(at.problem(path, "unknown-metric", message)
                            for path, message in metrics.unknown(at.data))
            out[p.name] = p
        return out

    return offer


def _plugin_name(d: SourceDocument) -> str:
    spec = d.data.get("spec") if isinstance(d.data, Mapping) else None
    name = spec.get("pluginName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) else ""


def _entry_files(doc: SourceDocument, i: int, entry: str, base_dir: Path,
                 loaded: set[Path], problems: list[Problem]) -> list[tuple[Path, str]]:
    """The files (path, display) of spec.policies[i], a path relative to the test file,
    less those in `loaded`: a file named twice (or by its directory and by itself) is
    loaded once, or each of its policies would clash with itself as a duplicate."""
    files, bad = collect_files([base_dir / entry])
    for b in bad:
        problems.append(doc.problem(("spec", "policies", i), "path",
                                    f"policy path {entry!r}: {b.split(': ', 1)[-1]}"))
    out = [(path, display) for path, display in files if path.resolve() not in loaded]
    loaded.update(path.resolve() for path, _ in out)
    return out


def _load_policies(doc: SourceDocument, entries: list[str | dict[str, Any]],
                   base_dir: Path, problems: list[Problem], refused: _Refused
                   ) -> list[CompiledPolicy]:
    """Policies by path (relative to the test file) or inline; any error is bad input,
    and what the refused ones were called goes to `refused`."""
    result = PolicySet()
    loaded: set[Path] = set()
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            for path, display in _entry_files(doc, i, entry, base_dir, loaded, problems):
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
    refused.policies.update(n for n in map(_plugin_name, result.documents) if n)
    # A policy file that did not even parse: which pluginNames it had is unknown.
    refused.any_policy = any(not f.documents for f in result.files)
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
    shorthand = not (isinstance(raw, Mapping) and "metadata" in raw)
    if not shorthand:
        obj = dict(raw)
    else:
        errs = shape_problems(doc, raw, what, path)
        if errs:
            problems.extend(errs)
            return None
        obj = _node_object(raw) if what == "node" else _pod_object(raw)
    try:
        # The API server's metadata checks, as a snapshot's objects get them: a test
        # must not pass on a node or pod no cluster could hold.
        check_metadata("Node" if what == "node" else "Pod", obj)
        return from_dict(obj)
    except InvalidObjectError as exc:
        # At what was written (the shorthand's field, or the full object's).
        problems.append(_refused_field(
            doc, (*path, *entry_path(exc.field, what, shorthand)), exc))
        return None
    except PolicydError as exc:
        problems.append(doc.problem(path, "invalid-object", str(exc)))
        return None


def _refused_field(doc: SourceDocument, at: JsonPath, exc: InvalidObjectError) -> Problem:
    """The problem of an object refused for its field at `at`: at the map key when the
    key is what is wrong (a label key), else at the value."""
    return doc.problem(at, "invalid-object", str(exc), key=f"{exc.field}: key" in str(exc))


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
    if "podGroup" in s:
        spec["schedulingGroup"] = {"podGroupName": s["podGroup"]}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": s["name"], "namespace": ns, "uid": f"{ns}/{s['name']}",
                     "labels": dict(s.get("labels") or {}),
                     "annotations": dict(s.get("annotations") or {})},
        "spec": spec,
        "status": {"phase": "Running" if s.get("nodeName") else "Pending"},
    }


def group_case_key(ref: str) -> GroupKey:
    """The scheduling.k8s.io PodGroup a case's `podGroup: [namespace/]name` names."""
    namespace, _, name = ref.rpartition("/")
    return GroupKey(WORKLOAD_API, namespace or "default", name)
