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
from functools import lru_cache
from typing import Any

from policyd.framework.status import Status
from policyd.model.records import Node, Pod, Taint
from policyd.model.selectors import (
    MATCH_NOTHING,
    LabelSelector,
    Requirement,
    SelectorError,
    compile_label_selector,
)
from policyd.problems import Problem, field_problem

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


@lru_cache(maxsize=4096)
def qualified_name_problems(value: str) -> tuple[str, ...]:
    """Why `value` is not a valid label key (empty when it is). Memoized: every pod of
    a workload repeats the same few topology keys."""
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
    return tuple(problems)


# --- compiling constraints -----------------------------------------------------------

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def compile_constraint(
    raw: Mapping[str, Any], pod_labels: Mapping[str, str], path: str,
    problems: list[Problem],
) -> Constraint | None:
    """One raw constraint -> Constraint, appending (field path, message) for each problem.

    matchLabelKeys are merged into the selector with the pod's own values, as upstream
    does (an absent key adds nothing; a nil selector stays match-nothing)."""
    start = len(problems)
    max_skew: Any = raw.get("maxSkew")
    if not _is_int(max_skew) or max_skew <= 0:
        problems.append(field_problem(f"{path}.maxSkew",
                                      f"must be an integer greater than zero, got "
                         f"{max_skew!r}"))
    key: Any = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        problems.append(field_problem(f"{path}.topologyKey", "is required"))
    else:
        problems.extend(field_problem(f"{path}.topologyKey", f"invalid label key {key!r}: {msg}")
                        for msg in qualified_name_problems(key))
    action: Any = raw.get("whenUnsatisfiable")
    if action not in ACTIONS:
        problems.append(field_problem(f"{path}.whenUnsatisfiable",
                         f"must be one of DoNotSchedule, ScheduleAnyway, got {action!r}"))
    min_domains: Any = raw.get("minDomains")
    if min_domains is None:
        min_domains = 1
    elif not _is_int(min_domains) or min_domains <= 0:
        problems.append(field_problem(f"{path}.minDomains",
                         f"must be an integer greater than zero, got {min_domains!r}"))
    policies: dict[str, str] = {}
    for field_name, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
        value = raw.get(field_name)
        if value is None:
            value = default
        elif value not in (HONOR, IGNORE):
            problems.append(field_problem(f"{path}.{field_name}",
                                          f"must be Honor or Ignore, got {value!r}"))
        policies[field_name] = value
    selector = MATCH_NOTHING
    try:
        selector = compile_label_selector(raw.get("labelSelector"))
    except SelectorError as exc:
        sub = f".{exc.path}" if exc.path else ""
        problems.append(field_problem(f"{path}.labelSelector{sub}", exc.message))
    keys = raw.get("matchLabelKeys")
    if keys is None:
        keys = []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        problems.append(field_problem(f"{path}.matchLabelKeys", "must be a list of strings"))
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
    problems: list[Problem] = []
    hard: list[Constraint] = []
    soft: list[Constraint] = []
    for i, raw in enumerate(pod.topology_spread_constraints):
        c = compile_constraint(raw, pod.labels, f"spec.topologySpreadConstraints[{i}]",
                               problems)
        if c is not None:
            (hard if c.action == DO_NOT_SCHEDULE else soft).append(c)
    result: tuple[tuple[Constraint, ...], tuple[Constraint, ...]] | Status
    if problems:
        result = Status.unresolvable(*(f"invalid topology spread constraint: {p.path}: "
                                       f"{p.message}" for p in problems))
    else:
        result = (tuple(hard), tuple(soft))
    pod.cache[_CONSTRAINTS_CACHE] = result
    return result


# --- node inclusion policies ---------------------------------------------------------

def tolerates_taints(pod: Pod, taints: Sequence[Taint]) -> bool:
    """False when a NoSchedule/NoExecute taint is not tolerated by the pod
    (FindMatchingUntoleratedTaint with DoNotScheduleTaintsFilterFunc)."""
    for taint in taints:
        if taint.effect in _DO_NOT_SCHEDULE_EFFECTS and not any(
                t.tolerates(taint) for t in pod.tolerations):
            return False
    return True


def tolerates_node(pod: Pod, node: Node) -> bool:
    return tolerates_taints(pod, node.taints)


# --- the default selector (helper.DefaultSelector) -----------------------------------

def _controller_ref(pod: Pod) -> Mapping[str, Any] | None:
    meta = pod.raw.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


@dataclass(frozen=True, slots=True)
class _Workload:
    """What DefaultSelector reads from one raw workload object."""

    namespace: str
    name: str
    selector: Any  # the raw spec.selector object itself: proves a memo entry still fits
    labels: tuple[tuple[str, str], ...] | None  # Service / RC: map selector; None if nil
    requirements: tuple[Requirement, ...]  # ReplicaSet / StatefulSet: LabelSelector


_WORKLOADS: dict[int, _Workload] = {}
_WORKLOADS_LIMIT = 50_000


def _digest(obj: Any) -> _Workload | None:
    """The parsed form of a raw workload (None when malformed), memoized by identity.

    The memo keeps only the small selector object, not the workload, so deleted
    workloads are not held alive; an entry is used only while the object still has
    that very selector object, its name and namespace (a reused id() cannot pass).
    Raw objects are replaced, never edited in place, when the API reports a change."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return None
    name, ns = meta.get("name"), meta.get("namespace") or "default"
    if not isinstance(name, str) or not isinstance(ns, str):
        return None
    spec = obj.get("spec")
    sel = spec.get("selector") if isinstance(spec, dict) else None
    hit = _WORKLOADS.get(id(obj))
    if hit is not None and hit.selector is sel and hit.name == name and hit.namespace == ns:
        return hit
    labels: tuple[tuple[str, str], ...] | None = None
    reqs: tuple[Requirement, ...] = ()
    if isinstance(sel, dict):
        if all(isinstance(k, str) and isinstance(v, str) for k, v in sel.items()):
            labels = tuple(sel.items())
        if "matchLabels" in sel or "matchExpressions" in sel:
            try:
                reqs = compile_label_selector(sel).requirements
            except SelectorError:
                reqs = ()
    result = _Workload(ns, name, sel, labels, reqs)
    if len(_WORKLOADS) >= _WORKLOADS_LIMIT:
        _WORKLOADS.clear()
    _WORKLOADS[id(obj)] = result
    return result


def _find(objs: Sequence[Any], namespace: str, name: str) -> _Workload | None:
    for obj in objs:
        w = _digest(obj)
        if w is not None and w.name == name and w.namespace == namespace:
            return w
    return None


def default_selector(pod: Pod, workloads: Mapping[str, Sequence[Any]] | None) -> LabelSelector:
    """The selector of the Services selecting the pod, merged with its controlling
    ReplicationController's, ReplicaSet's or StatefulSet's (helper.DefaultSelector).

    Later label values override earlier ones, as labels.Merge does; a controller found
    by its ownerReference (same namespace, apiVersion v1 / apps/v1) adds its selector.
    Malformed objects are skipped, as upstream skips objects it cannot read."""
    if not workloads:
        return LabelSelector(())
    label_set: dict[str, str] = {}
    pod_labels = pod.labels
    for svc in workloads.get("Service", ()):
        w = _digest(svc)
        # A nil selector selects nothing (not everything); an empty one selects all.
        if w is None or w.labels is None or w.namespace != pod.namespace:
            continue
        if all(pod_labels.get(k) == v for k, v in w.labels):
            label_set.update(w.labels)
    extra: tuple[Requirement, ...] = ()
    ref = _controller_ref(pod)
    if ref is not None:
        kind, api_version, name = ref.get("kind"), ref.get("apiVersion"), ref.get("name")
        if isinstance(name, str) and isinstance(kind, str):
            if (api_version, kind) == ("v1", "ReplicationController"):
                rc = _find(workloads.get(kind, ()), pod.namespace, name)
                if rc is not None and rc.labels is not None:
                    label_set.update(rc.labels)
            elif (api_version, kind) in (("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")):
                controller = _find(workloads.get(kind, ()), pod.namespace, name)
                if controller is not None:
                    extra = controller.requirements
    reqs = tuple(Requirement(k, "In", frozenset((v,))) for k, v in label_set.items())
    return LabelSelector(reqs + extra)
