"""NodeAffinity: `spec.nodeSelector` and required node affinity filter nodes; preferred
node affinity scores them; `addedAffinity` (NodeAffinityArgs) adds scheduler-enforced
terms on top of every pod's.

Semantics follow kube-scheduler 1.36 and component-helpers' `nodeaffinity` package:

- nodeSelector and required affinity are ANDed; the required terms are ORed; an empty
  term matches nothing; no terms at all match nothing.
- A pod's required term that does not parse (bad operator, bad label key or value, a
  Gt/Lt value that is not an integer) never matches, but the other terms still can
  (upstream's "lazy error" selector). The API server rejects such pods, so they only
  reach policyd through snapshot files; when *every* term is broken no node can ever
  match, and policyd says why in a PreFilter rejection instead of the generic
  "didn't match" per node (a deliberate deviation in wording only: upstream would
  report every node as not matching, also UnschedulableAndUnresolvable).
- Preferred terms with weight 0 or an empty preference are ignored. A broken preferred
  term makes upstream's PreScore fail with an Error; policyd rejects the pod in
  PreFilter with a clear UnschedulableAndUnresolvable status instead (its PreScore
  still returns the Error if it is reached without PreFilter).
- PreFilter narrows the candidate nodes when every required term pins node names with
  `matchFields: metadata.name In`, and rejects the pod when those pins exclude each
  other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from policyd.framework import MAX_NODE_SCORE, CycleState, PluginError, Status
from policyd.framework.events import (
    NODE,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from policyd.framework.interfaces import default_normalize_score, default_normalize_vector
from policyd.model import k8snames
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod
from policyd.model.selectors import (
    NodeSelectorTerm,
    Requirement,
    SelectorError,
    compile_node_selector_term,
)
from policyd.model.table import BoolArray, IntArray, NodeTable
from policyd.plugins import names
from policyd.problems import Problem, field_problem

DEFAULT_WEIGHT = 2

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
OBJECT_NAME_FIELD = "metadata.name"

_REJECT_POD = Status.unresolvable(ERR_REASON_POD)
_REJECT_ENFORCED = Status.unresolvable(ERR_REASON_ENFORCED)
_REJECT_CONFLICT = Status.unresolvable(ERR_REASON_CONFLICT)

_PRE_FILTER_KEY = "NodeAffinity/required"
_PRE_SCORE_KEY = "NodeAffinity/preferred"
_POD_CACHE_KEY = "NodeAffinity/pod"

_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_FIELD_OPERATORS = ("In", "NotIn")

# Go's strconv.ParseInt(s, 10, 64): optional sign and decimal digits only (Python's
# int() would also take spaces and underscores).
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1



# --- validation ---------------------------------------------------------------------

def _label_key_problem(key: str) -> str | None:
    errs = k8snames.qualified_name(key)
    return f"{key!r} is not a valid label key: {errs[0]}" if errs else None


def _label_value_problem(value: str) -> str | None:
    errs = k8snames.label_value(value)
    return f"{value!r} is not a valid label value: {errs[0]}" if errs else None


def parse_go_int64(text: str) -> int | None:
    """The integer strconv.ParseInt(text, 10, 64) accepts, or None."""
    if not _INT_RE.fullmatch(text):
        return None
    n = int(text)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


def _check_keys(obj: Mapping[str, Any], allowed: tuple[str, ...], path: str,
                problems: list[Problem]) -> None:
    for key in obj:
        if key not in allowed:
            problems.append(field_problem(f"{path}.{key}" if path else str(key), "unknown field"))


def _requirement_problems(expr: Any, path: str, fields: bool, strict: bool) -> list[Problem]:
    """Every reason the requirement does not parse (labels.NewRequirement's rules for
    matchExpressions, the field-selector rules for matchFields)."""
    if not isinstance(expr, Mapping):
        return [field_problem(path, "must be an object")]
    problems: list[Problem] = []
    if strict:
        _check_keys(expr, ("key", "operator", "values"), path, problems)
    key = expr.get("key")
    op = expr.get("operator")
    values = expr.get("values")
    if values is None:
        values = []
    if not isinstance(key, str) or not key:
        problems.append(field_problem(f"{path}.key", "is required"))
    elif fields:
        if key != OBJECT_NAME_FIELD:
            problems.append(field_problem(f"{path}.key",
                             f"{key!r} is not a supported field, only {OBJECT_NAME_FIELD}"))
    else:
        msg = _label_key_problem(key)
        if msg:
            problems.append(field_problem(f"{path}.key", msg))
    operators = _FIELD_OPERATORS if fields else _LABEL_OPERATORS
    if op not in operators:
        problems.append(field_problem(f"{path}.operator",
                         f"{op!r} is not a valid operator, expected one of "
                         + ", ".join(operators)))
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        problems.append(field_problem(f"{path}.values", "must be a list of strings"))
        return problems
    if fields:
        if op in _FIELD_OPERATORS and len(values) != 1:
            problems.append(field_problem(f"{path}.values",
                                          f"must have exactly one value for {key}"))
        return problems
    if op in ("In", "NotIn") and not values:
        problems.append(field_problem(f"{path}.values", f"must be non-empty for operator {op}"))
    elif op in ("Exists", "DoesNotExist") and values:
        problems.append(field_problem(f"{path}.values", f"must be empty for operator {op}"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            problems.append(field_problem(f"{path}.values",
                                          f"must have exactly one value for {op}"))
        for i, v in enumerate(values):
            if parse_go_int64(v) is None:
                problems.append(field_problem(f"{path}.values[{i}]",
                                 f"{v!r} is not an integer, as {op} requires"))
    for i, v in enumerate(values):
        msg = _label_value_problem(v)
        if msg:
            problems.append(field_problem(f"{path}.values[{i}]", msg))
    return problems


def _is_empty_term(term: Any) -> bool:
    return isinstance(term, Mapping) and not term.get("matchExpressions") \
        and not term.get("matchFields")


def compile_term(term: Any, path: str, strict: bool = False
                 ) -> tuple[NodeSelectorTerm | None, list[Problem]]:
    """One v1.NodeSelectorTerm -> (matcher, []) or (None, problems). An empty term
    gives (None, []): it matches nothing, as upstream drops it."""
    if not isinstance(term, Mapping):
        return None, [field_problem(path, "must be an object")]
    problems: list[Problem] = []
    if strict:
        _check_keys(term, ("matchExpressions", "matchFields"), path, problems)
    for field_name, is_field in (("matchExpressions", False), ("matchFields", True)):
        exprs = term.get(field_name)
        if exprs is None:
            continue
        if not isinstance(exprs, list):
            problems.append(field_problem(f"{path}.{field_name}", "must be a list"))
            continue
        for i, expr in enumerate(exprs):
            problems.extend(
                _requirement_problems(expr, f"{path}.{field_name}[{i}]", is_field, strict))
    if problems:
        return None, problems
    if _is_empty_term(term):
        return None, []
    try:
        return compile_node_selector_term(term, path), []
    except SelectorError as e:  # our checks are stricter; kept as a safety net
        return None, [field_problem(e.path, e.message)]


def compile_required(selector: Any, path: str, strict: bool = False
                     ) -> tuple[tuple[NodeSelectorTerm, ...], list[Problem]]:
    """v1.NodeSelector -> (the terms that parse, problems of those that do not)."""
    if not isinstance(selector, Mapping):
        return (), [field_problem(path, "must be an object")]
    problems: list[Problem] = []
    if strict:
        _check_keys(selector, ("nodeSelectorTerms",), path, problems)
    raw_terms = selector.get("nodeSelectorTerms")
    if raw_terms is None:
        raw_terms = []
    if not isinstance(raw_terms, list):
        return (), [*problems, field_problem(f"{path}.nodeSelectorTerms", "must be a list")]
    terms: list[NodeSelectorTerm] = []
    for i, raw in enumerate(raw_terms):
        term, term_problems = compile_term(raw, f"{path}.nodeSelectorTerms[{i}]", strict)
        problems.extend(term_problems)
        if term is not None:
            terms.append(term)
    return tuple(terms), problems


def compile_preferred(entries: Any, path: str, strict: bool = False
                      ) -> tuple[tuple[tuple[int, NodeSelectorTerm], ...], list[Problem]]:
    """[]v1.PreferredSchedulingTerm -> ((weight, term) pairs, problems). Weight 0 and
    empty preferences are skipped unexamined, as upstream does."""
    if not isinstance(entries, list):
        return (), [field_problem(path, "must be a list")]
    out: list[tuple[int, NodeSelectorTerm]] = []
    problems: list[Problem] = []
    for i, entry in enumerate(entries):
        epath = f"{path}[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(field_problem(epath, "must be an object"))
            continue
        if strict:
            _check_keys(entry, ("weight", "preference"), epath, problems)
        weight = entry.get("weight", 0)
        if weight is None:
            weight = 0
        if isinstance(weight, bool) or not isinstance(weight, int):
            problems.append(field_problem(f"{epath}.weight", "must be an integer"))
            continue
        if strict and weight < 0:
            problems.append(field_problem(f"{epath}.weight", f"must not be negative, got {weight}"))
            continue
        preference = entry.get("preference")
        if preference is None:
            preference = {}
        if weight == 0 or _is_empty_term(preference):
            continue
        term, term_problems = compile_term(preference, f"{epath}.preference", strict)
        problems.extend(term_problems)
        if term is not None:
            out.append((weight, term))
    return tuple(out), problems


# --- matching -----------------------------------------------------------------------

def _requirement_matches(r: Requirement, value: str | None) -> bool:
    op = r.operator
    if op == "In":
        return value is not None and value in r.values
    if op == "NotIn":
        return value is None or value not in r.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if value is None:
        return False
    n = parse_go_int64(value)  # a label value that is not an integer never matches
    if n is None:
        return False
    return n > r.number if op == "Gt" else n < r.number


def term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    get = labels.get
    for r in term.label_requirements:
        if not _requirement_matches(r, get(r.key)):
            return False
    return all(_requirement_matches(r, node_name) for r in term.field_requirements)


def terms_match(terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str],
                node_name: str) -> bool:
    return any(term_matches(t, labels, node_name) for t in terms)


def terms_keys(terms: Sequence[NodeSelectorTerm]) -> tuple[frozenset[str], bool]:
    """The label keys the terms read, and whether they read the node name."""
    keys = frozenset(r.key for t in terms for r in t.label_requirements)
    return keys, any(t.field_requirements for t in terms)


class _Projection:
    """What terms can see of a node: the values of the label keys they read. Nodes with
    the same projection get the same verdict, and nodes mostly share a few label
    combinations (zone, instance type, pool), so the batch paths decide once per
    combination instead of once per node. Not used when terms read the node name."""

    __slots__ = ("keys",)

    def __init__(self, keys: frozenset[str]) -> None:
        self.keys = tuple(sorted(keys))

    def __call__(self, labels: Mapping[str, str]) -> tuple[str | None, ...]:
        return tuple(map(labels.get, self.keys))


def _format_problem(kind: str, problems: Sequence[Problem]) -> str:
    path, message = problems[0].path, problems[0].message
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"pod has an invalid {kind} node affinity: {path}: {message}{more}"


@dataclass(frozen=True, slots=True)
class PodNodeAffinity:
    """A pod's node selector and node affinity, compiled once (memoized on the pod)."""

    selector: tuple[tuple[str, str], ...]  # spec.nodeSelector as (key, value) pairs
    selector_set: bool  # spec.nodeSelector present (even empty), as upstream's nil test
    required: tuple[NodeSelectorTerm, ...] | None  # None: no required affinity
    required_error: str | None  # set when no required term parses and some do not
    node_names: frozenset[str] | None  # PreFilter's node-name restriction, if any
    names_conflict: bool  # every term pins names, and the pins exclude each other
    preferred: tuple[tuple[int, NodeSelectorTerm], ...] | None  # None: none given
    preferred_error: str | None
    # What the required part (nodeSelector + terms) and the preferred terms read.
    required_keys: frozenset[str] = frozenset()
    required_uses_name: bool = False
    preferred_keys: frozenset[str] = frozenset()
    preferred_uses_name: bool = False

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        get = labels.get
        for key, value in self.selector:
            if get(key) != value:
                return False
        if self.required is not None:
            return terms_match(self.required, labels, node_name)
        return True

    def score(self, labels: Mapping[str, str], node_name: str) -> int:
        if not self.preferred:
            return 0
        return sum(w for w, t in self.preferred if term_matches(t, labels, node_name))


def _node_name_pins(required: Mapping[str, Any]) -> tuple[frozenset[str] | None, bool]:
    """Upstream's PreFilter narrowing, read from the raw terms: each term's
    `metadata.name In` values are intersected; terms are unioned; any term without such
    a pin leaves every node possible."""
    raw_terms = required.get("nodeSelectorTerms")
    if not isinstance(raw_terms, list) or not raw_terms:
        return None, False
    union: set[str] = set()
    for term in raw_terms:
        pinned: set[str] | None = None
        fields = term.get("matchFields") if isinstance(term, Mapping) else None
        for r in fields if isinstance(fields, list) else ():
            if (isinstance(r, Mapping) and r.get("key") == OBJECT_NAME_FIELD
                    and r.get("operator") == "In"):
                values = r.get("values")
                names_ = {v for v in values if isinstance(v, str)} \
                    if isinstance(values, list) else set()
                pinned = names_ if pinned is None else pinned & names_
        if pinned is None:
            return None, False
        union |= pinned
    if not union:
        return None, True
    return frozenset(union), False


# What every pod without nodeSelector and node affinity compiles to (most pods): shared,
# so such a pod costs two lookups instead of a compilation.
_UNCONSTRAINED = PodNodeAffinity(
    selector=(), selector_set=False, required=None, required_error=None, node_names=None,
    names_conflict=False, preferred=None, preferred_error=None)


def pod_node_affinity(pod: Pod) -> PodNodeAffinity:
    """The pod's compiled node affinity, memoized: spec.affinity is immutable."""
    cached = pod.cache.get(_POD_CACHE_KEY)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    spec = pod.raw.get("spec") if isinstance(pod.raw, Mapping) else None
    selector_set = isinstance(spec, Mapping) and spec.get("nodeSelector") is not None
    base = "spec.affinity.nodeAffinity"
    node_affinity = pod.affinity.get("nodeAffinity")
    if node_affinity is None and not selector_set and not pod.node_selector:
        pod.cache[_POD_CACHE_KEY] = _UNCONSTRAINED
        return _UNCONSTRAINED
    required: tuple[NodeSelectorTerm, ...] | None = None
    required_error: str | None = None
    node_names: frozenset[str] | None = None
    conflict = False
    preferred: tuple[tuple[int, NodeSelectorTerm], ...] | None = None
    preferred_error: str | None = None
    if node_affinity is not None and not isinstance(node_affinity, Mapping):
        required, required_error = (), _format_problem(
            "required", [field_problem(base, "must be an object")])
    elif node_affinity is not None:
        raw_required = node_affinity.get(REQUIRED)
        if raw_required is not None:
            required, problems = compile_required(raw_required, f"{base}.{REQUIRED}")
            if not required and problems:
                required_error = _format_problem("required", problems)
            if isinstance(raw_required, Mapping):
                node_names, conflict = _node_name_pins(raw_required)
        raw_preferred = node_affinity.get(PREFERRED)
        if raw_preferred is not None:
            preferred, problems = compile_preferred(raw_preferred, f"{base}.{PREFERRED}")
            if problems:
                preferred_error = _format_problem("preferred", problems)
    req_keys, req_name = terms_keys(required or ())
    pref_keys, pref_name = terms_keys([t for _, t in preferred or ()])
    compiled = PodNodeAffinity(
        selector=tuple(pod.node_selector.items()),
        selector_set=selector_set,
        required=required,
        required_error=required_error,
        node_names=node_names,
        names_conflict=conflict,
        preferred=preferred,
        preferred_error=preferred_error,
        required_keys=req_keys | frozenset(pod.node_selector),
        required_uses_name=req_name,
        preferred_keys=pref_keys,
        preferred_uses_name=pref_name,
    )
    pod.cache[_POD_CACHE_KEY] = compiled
    return compiled


# --- the plugin ---------------------------------------------------------------------

class NodeAffinity:
    name = names.NODE_AFFINITY
    # Its Filter reads the node alone, never the pods on it (framework/interfaces.py).
    filter_reads_node_pods = False
    # No PreFilterExtensions upstream: its PreFilter state reads no other pod
    # (preemption's dry runs rely on that; framework/interfaces.py).
    pre_filter_reads_other_pods = False

    def __init__(self, added_required: tuple[NodeSelectorTerm, ...] | None = None,
                 added_preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()) -> None:
        # Scheduler-enforced terms from NodeAffinityArgs.addedAffinity.
        self.added_required = added_required
        self.added_preferred = added_preferred
        self._added_required_reads = terms_keys(added_required or ())
        self._added_preferred_reads = terms_keys([t for _, t in added_preferred])

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        c = pod_node_affinity(pod)
        # Broken affinity is reported first, whatever else applies: see module docstring.
        if c.required_error is not None:
            return None, Status.unresolvable(c.required_error)
        if c.preferred_error is not None:
            return None, Status.unresolvable(c.preferred_error)
        if c.required is None and self.added_required is None and not c.selector_set:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, c)
        if c.names_conflict:
            return None, _REJECT_CONFLICT
        if c.node_names is not None:
            return set(c.node_names), None
        return None, None

    def _required(self, state: CycleState, pod: Pod) -> PodNodeAffinity:
        c: PodNodeAffinity | None = state.get(_PRE_FILTER_KEY)
        # Without PreFilter (disabled in the profile) compute it here, as upstream does.
        return c if c is not None else pod_node_affinity(pod)

    def _verdict(self, c: PodNodeAffinity, labels: Mapping[str, str],
                 node_name: str) -> Status | None:
        added = self.added_required
        if added is not None and not terms_match(added, labels, node_name):
            return _REJECT_ENFORCED
        if not c.matches(labels, node_name):
            return _REJECT_POD
        return None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        n = node.node
        return self._verdict(self._required(state, pod), n.labels, n.name)

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                    idx: IntArray) -> BoolArray | None:
        c = self._required(state, pod)
        keys, uses_name = self._added_required_reads
        if uses_name or c.required_uses_name:
            return None  # terms read the node name: no two nodes share a verdict
        group_id, members = table.label_groups(tuple(sorted(c.required_keys | keys)))
        infos = table.infos
        ok = np.fromiter(
            (self._verdict(c, infos[i].node.labels, infos[i].name) is None for i in members),
            np.bool_, len(members))
        return ok[group_id[idx]]

    def pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        c = pod_node_affinity(pod)
        if c.preferred_error is not None:
            return Status.error(c.preferred_error)
        if c.preferred is None and not self.added_preferred:
            return Status.skip()
        keys, uses_name = self._added_preferred_reads
        project = None if uses_name or c.preferred_uses_name else \
            _Projection(c.preferred_keys | keys)
        state.write(_PRE_SCORE_KEY, (c, project, {}))
        return None

    def _score(self, c: PodNodeAffinity, labels: Mapping[str, str], node_name: str) -> int:
        total = 0
        for weight, term in self.added_preferred:
            if term_matches(term, labels, node_name):
                total += weight
        return total + c.score(labels, node_name)

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        n = node.node
        pre = state.get(_PRE_SCORE_KEY)
        if pre is None:  # PreScore did not run: compute it here, as upstream falls back
            return self._score(pod_node_affinity(pod), n.labels, n.name)
        c, project, memo = pre
        if project is None:
            return self._score(c, n.labels, n.name)
        key = project(n.labels)
        score = memo.get(key)
        if score is None:
            score = memo[key] = self._score(c, n.labels, n.name)
        return score  # type: ignore[no-any-return]

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    def score_vector(self, state: CycleState, pod: Pod, table: NodeTable,
                     idx: IntArray) -> IntArray | None:
        pre = state.get(_PRE_SCORE_KEY)
        if pre is None or pre[1] is None:
            return None  # no PreScore, or terms read the node name
        c, project, _ = pre
        group_id, members = table.label_groups(project.keys)
        infos = table.infos
        scores = np.fromiter(
            (self._score(c, infos[i].node.labels, infos[i].name) for i in members),
            np.int64, len(members))
        return scores[group_id[idx]]

    def normalize_vector(self, state: CycleState, pod: Pod, table: NodeTable,
                         idx: IntArray, scores: IntArray) -> IntArray:
        return default_normalize_vector(MAX_NODE_SCORE, False, scores)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(
            ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
            self._after_node_change),)

    def _after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the node matches the pod's required affinity now and did not
        before (or is new); a node the scheduler-enforced affinity excludes never helps."""
        if not isinstance(new, Node):
            return QUEUE_SKIP
        added = self.added_required
        if added is not None and not terms_match(added, new.labels, new.name):
            return QUEUE_SKIP
        c = pod_node_affinity(pod)
        if c.required_error is not None:
            return QUEUE  # upstream: a matching error counts as Queue
        if not c.matches(new.labels, new.name):
            return QUEUE_SKIP
        if isinstance(old, Node) and c.matches(old.labels, old.name):
            return QUEUE_SKIP
        return QUEUE


def new(args: Mapping[str, Any] | None = None) -> NodeAffinity:
    """Build the plugin from NodeAffinityArgs (`addedAffinity`), reporting every
    problem with its path, as upstream's ValidateNodeAffinityArgs does."""
    if not args:
        return NodeAffinity()
    problems: list[Problem] = []
    if not isinstance(args, Mapping):
        raise PluginError(names.NODE_AFFINITY, [field_problem("", "args must be an object")])
    _check_keys(args, ("addedAffinity", "apiVersion", "kind"), "", problems)
    kind = args.get("kind")
    if kind is not None and kind != "NodeAffinityArgs":
        got = json.dumps(kind, default=str)
        problems.append(field_problem("kind", f"expected NodeAffinityArgs, got {got}"))
    added = args.get("addedAffinity")
    added_required: tuple[NodeSelectorTerm, ...] | None = None
    added_preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    if added is not None:
        if not isinstance(added, Mapping):
            problems.append(field_problem("addedAffinity", "must be an object"))
        else:
            _check_keys(added, (REQUIRED, PREFERRED), "addedAffinity", problems)
            raw_required = added.get(REQUIRED)
            if raw_required is not None:
                terms, p = compile_required(raw_required, f"addedAffinity.{REQUIRED}",
                                            strict=True)
                problems.extend(p)
                added_required = terms
            raw_preferred = added.get(PREFERRED)
            if raw_preferred is not None:
                prefs, p = compile_preferred(raw_preferred, f"addedAffinity.{PREFERRED}",
                                             strict=True)
                problems.extend(p)
                added_preferred = prefs
    if problems:
        raise PluginError(names.NODE_AFFINITY, problems)
    return NodeAffinity(added_required, added_preferred)
