"""PodTopologySpread's constraints: validated and compiled once per pod, plus the default
selector built from the workloads that select a pod.

The plugin module keeps the scheduling logic; this one turns raw
`topologySpreadConstraints` dicts (and the plugin's `defaultConstraints` args) into
`Constraint` records with compiled selectors, as upstream's
`filterTopologySpreadConstraints` and `helper.DefaultSelector` do. A pod's constraints
never change for a given Pod record (a label update decodes a new record), so the
compiled form, or the status explaining why they are invalid, lives in `pod.cache`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from policyd.framework.status import Status
from policyd.model.records import Node, Pod
from policyd.model.selectors import (
    MATCH_NOTHING,
    LabelSelector,
    NodeSelector,
    Requirement,
    SelectorError,
    compile_label_selector,
    compile_node_selector,
)

HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
ACTIONS = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

_CONSTRAINTS_CACHE = "PodTopologySpread/constraints"
_AFFINITY_CACHE = "PodTopologySpread/requiredNodeAffinity"
# Taint effects that keep a pod off a node (helper.DoNotScheduleTaintsFilterFunc).
_DO_NOT_SCHEDULE_EFFECTS = frozenset(("NoSchedule", "NoExecute"))


@dataclass(frozen=True, slots=True)
class Constraint:
    """One topology spread constraint with its selector compiled (topologySpreadConstraint).

    `count_key` identifies the selector as a string (its hash is cached by Python), so
    per-node match counts can be memoized across pods that share a selector.
    """

    max_skew: int
    topology_key: str
    action: str
    selector: LabelSelector
    min_domains: int
    honor_node_affinity: bool
    honor_node_taints: bool
    count_key: str

    @property
    def is_hostname(self) -> bool:
        return self.topology_key == HOSTNAME_KEY

    def with_selector(self, selector: LabelSelector) -> Constraint:
        return replace(self, selector=selector, count_key=selector_key(selector))


def selector_key(selector: LabelSelector) -> str:
    """A canonical string for a selector: equal strings select the same pods."""
    if selector.match_nothing:
        return "\x00nothing"
    parts = sorted(
        f"{r.key}\x1f{r.operator}\x1f{chr(0x1e).join(sorted(r.values))}"
        for r in selector.requirements
    )
    return "\x1d".join(parts)


# --- label names (apimachinery IsQualifiedName) --------------------------------------

_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def qualified_name_problems(value: str) -> list[str]:
    """Why `value` is not a valid label key (empty list when it is)."""
    problems: list[str] = []
    prefix, sep, name = value.rpartition("/")
    if sep and not prefix:
        problems.append("prefix part must be non-empty")
    elif sep:
        if len(prefix) > 253:
            problems.append("prefix part must be no more than 253 characters")
        if not _DNS1123_SUBDOMAIN_RE.match(prefix):
            problems.append("prefix part must be a lowercase RFC 1123 subdomain")
    if "/" in prefix:
        problems.append("a qualified name must have at most one '/'")
    if not name:
        problems.append("name part must be non-empty")
    else:
        if len(name) > 63:
            problems.append("name part must be no more than 63 characters")
        if not _NAME_RE.match(name):
            problems.append("name part must consist of alphanumeric characters, '-', '_' or "
                            "'.', and must start and end with an alphanumeric character")
    return problems


# --- compiling constraints -----------------------------------------------------------

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def compile_constraint(
    raw: Mapping[str, Any], pod_labels: Mapping[str, str], path: str,
    problems: list[tuple[str, str]],
) -> Constraint | None:
    """One raw constraint -> Constraint, appending (field path, message) for each problem.

    matchLabelKeys are merged into the selector with the pod's own values, as upstream
    does (an absent key adds nothing; a nil selector stays match-nothing)."""
    start = len(problems)
    max_skew: Any = raw.get("maxSkew")
    if not _is_int(max_skew) or max_skew <= 0:
        problems.append((f"{path}.maxSkew", f"must be an integer greater than zero, got "
                         f"{max_skew!r}"))
    key: Any = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        problems.append((f"{path}.topologyKey", "is required"))
    else:
        problems.extend((f"{path}.topologyKey", f"invalid label key {key!r}: {msg}")
                        for msg in qualified_name_problems(key))
    action: Any = raw.get("whenUnsatisfiable")
    if action not in ACTIONS:
        problems.append((f"{path}.whenUnsatisfiable",
                         f"must be one of DoNotSchedule, ScheduleAnyway, got {action!r}"))
    min_domains: Any = raw.get("minDomains")
    if min_domains is None:
        min_domains = 1
    elif not _is_int(min_domains) or min_domains <= 0:
        problems.append((f"{path}.minDomains",
                         f"must be an integer greater than zero, got {min_domains!r}"))
    policies: dict[str, str] = {}
    for field_name, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
        value = raw.get(field_name)
        if value is None:
            value = default
        elif value not in (HONOR, IGNORE):
            problems.append((f"{path}.{field_name}", f"must be Honor or Ignore, got {value!r}"))
        policies[field_name] = value
    selector = MATCH_NOTHING
    try:
        selector = compile_label_selector(raw.get("labelSelector"))
    except SelectorError as exc:
        sub = f".{exc.path}" if exc.path else ""
        problems.append((f"{path}.labelSelector{sub}", exc.message))
    keys = raw.get("matchLabelKeys")
    if keys is None:
        keys = []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        problems.append((f"{path}.matchLabelKeys", "must be a list of strings"))
        keys = []
    if len(problems) > start:
        return None
    if keys and not selector.match_nothing:
        extra = tuple(Requirement(k, "In", frozenset((pod_labels[k],)))
                      for k in keys if k in pod_labels)
        if extra:
            selector = LabelSelector(extra + selector.requirements)
    return Constraint(
        max_skew=max_skew,
        topology_key=key,
        action=action,
        selector=selector,
        min_domains=min_domains,
        honor_node_affinity=policies["nodeAffinityPolicy"] == HONOR,
        honor_node_taints=policies["nodeTaintsPolicy"] == HONOR,
        count_key=selector_key(selector),
    )


def pod_constraints(pod: Pod) -> tuple[tuple[Constraint, ...], tuple[Constraint, ...]] | Status:
    """The pod's own (DoNotSchedule, ScheduleAnyway) constraints, or an
    UnschedulableAndUnresolvable status listing every invalid field. Memoized."""
    cached = pod.cache.get(_CONSTRAINTS_CACHE)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    problems: list[tuple[str, str]] = []
    hard: list[Constraint] = []
    soft: list[Constraint] = []
    for i, raw in enumerate(pod.topology_spread_constraints):
        c = compile_constraint(raw, pod.labels, f"spec.topologySpreadConstraints[{i}]",
                               problems)
        if c is not None:
            (hard if c.action == DO_NOT_SCHEDULE else soft).append(c)
    result: tuple[tuple[Constraint, ...], tuple[Constraint, ...]] | Status
    if problems:
        result = Status.unresolvable(*(f"invalid topology spread constraint: {p}: {m}"
                                       for p, m in problems))
    else:
        result = (tuple(hard), tuple(soft))
    pod.cache[_CONSTRAINTS_CACHE] = result
    return result


# --- node inclusion policies ---------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """The pod's nodeSelector AND required node affinity (nodeaffinity.RequiredNodeAffinity).

    An affinity that does not compile matches no node: upstream ignores the parse error
    and the term cannot match, and the NodeAffinity filter rejects such a pod anyway."""

    node_selector: tuple[tuple[str, str], ...]
    affinity: NodeSelector | None
    invalid: bool = False

    def matches(self, node: Node) -> bool:
        if self.invalid:
            return False
        labels = node.labels
        for k, v in self.node_selector:
            if labels.get(k) != v:
                return False
        return self.affinity is None or self.affinity.matches(labels, node.name)


def required_node_affinity(pod: Pod) -> RequiredNodeAffinity:
    cached = pod.cache.get(_AFFINITY_CACHE)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    node_affinity = pod.affinity.get("nodeAffinity") if pod.affinity else None
    required = (node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
                if isinstance(node_affinity, Mapping) else None)
    compiled: NodeSelector | None = None
    invalid = False
    if required is not None:
        try:
            compiled = compile_node_selector(required)
        except SelectorError:
            invalid = True
    result = RequiredNodeAffinity(tuple(pod.node_selector.items()), compiled, invalid)
    pod.cache[_AFFINITY_CACHE] = result
    return result


def tolerates_node(pod: Pod, node: Node) -> bool:
    """False when the node has a NoSchedule/NoExecute taint the pod does not tolerate."""
    for taint in node.taints:
        if taint.effect in _DO_NOT_SCHEDULE_EFFECTS and not any(
                t.tolerates(taint) for t in pod.tolerations):
            return False
    return True


# --- the default selector (helper.DefaultSelector) -----------------------------------

def _controller_ref(pod: Pod) -> Mapping[str, Any] | None:
    meta = pod.raw.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def _namespace_and_name(obj: Any) -> tuple[str, str] | None:
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    name = meta.get("name")
    ns = meta.get("namespace") or "default"
    if not isinstance(name, str) or not isinstance(ns, str):
        return None
    return ns, name


def _spec_selector(obj: Mapping[str, Any]) -> Any:
    spec = obj.get("spec")
    return spec.get("selector") if isinstance(spec, Mapping) else None


def _find(objs: Sequence[Any], namespace: str, name: str) -> Mapping[str, Any] | None:
    for obj in objs:
        if _namespace_and_name(obj) == (namespace, name):
            return obj  # type: ignore[no-any-return]
    return None


def _is_string_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def default_selector(pod: Pod, workloads: Mapping[str, Sequence[Any]] | None) -> LabelSelector:
    """The selector of the Services selecting the pod, merged with its controlling
    ReplicationController's, ReplicaSet's or StatefulSet's (helper.DefaultSelector).

    Later label values override earlier ones, as labels.Merge does; a controller found
    by its ownerReference (same namespace, apiVersion v1 / apps/v1) adds its selector.
    Malformed objects are skipped, as upstream skips objects it cannot read."""
    if not workloads:
        return LabelSelector(())
    label_set: dict[str, str] = {}
    for svc in workloads.get("Service", ()):
        where = _namespace_and_name(svc)
        if where is None or where[0] != pod.namespace:
            continue
        sel = _spec_selector(svc)
        # A nil selector selects nothing (not everything); an empty one selects all.
        if sel is None or not _is_string_map(sel):
            continue
        if all(pod.labels.get(k) == v for k, v in sel.items()):
            label_set.update(sel)
    extra: tuple[Requirement, ...] = ()
    ref = _controller_ref(pod)
    if ref is not None:
        kind, api_version, name = ref.get("kind"), ref.get("apiVersion"), ref.get("name")
        if isinstance(name, str) and isinstance(kind, str):
            if (api_version, kind) == ("v1", "ReplicationController"):
                rc = _find(workloads.get(kind, ()), pod.namespace, name)
                rc_sel: Any = _spec_selector(rc) if rc is not None else None
                if _is_string_map(rc_sel):
                    label_set.update(rc_sel)
            elif (api_version, kind) in (("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")):
                obj = _find(workloads.get(kind, ()), pod.namespace, name)
                if obj is not None:
                    try:
                        extra = compile_label_selector(_spec_selector(obj)).requirements
                    except SelectorError:
                        extra = ()
    reqs = tuple(Requirement(k, "In", frozenset((v,))) for k, v in label_set.items())
    return LabelSelector(reqs + extra)
