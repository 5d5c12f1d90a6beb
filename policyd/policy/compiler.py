"""Compile a validated SchedulingPolicy once into a scheduler plugin.

Everything that depends only on the policy is done here, once: JMESPath compiled,
selectors compiled into matchers, quantities parsed. Everything that depends only on
the pod is done once per cycle in PreFilter/PreScore ("binding" each rule to the pod:
which rules are active, the pod's requests, the annotation value to look for). The
per-node Filter/Score then only read node fields and compare.

A plugin only has the extension points its policy uses: a filter-only policy has no
Score methods, so profiles and the runner see exactly what it does.

Semantics of missing data (also in docs/policy-language.md):
- appliesTo: an absent section applies to every pod; a `condition` that raises applies
  to no pod.
- annotationToNodeLabel: inactive when the pod lacks the annotation (or has another
  value than `value`); a node without the label fails.
- nodeLabels: Kubernetes semantics: NotIn/DoesNotExist match a missing label; In,
  Exists, Gt, Lt do not; Gt/Lt never match a non-integer value.
- headroom: a resource the node does not list has allocatable 0.
- requireExtendedResource: a node that does not list the resource has 0 of it.
- jmespath filters: a missing field is null; a result that is not truthy, or an
  evaluation error, rejects the node.
- scores: a missing or non-numeric value (numeric, jmespath) scores 0 after
  normalization, whatever `reverse`/`prefer` say, and is left out of min/max.
- metric scores: a value missing from the cache or older than its provider's maxAge is
  missing; `missing: worst` scores 0, `neutral` 50, `skip` leaves the rule out of that
  node's weighted mean. Always left out of min/max.
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.framework.cycle_state import CycleState
from policyd.framework.events import ClusterEventWithHint
from policyd.framework.status import Code, Status
from policyd.model.cluster import NodeInfo
from policyd.model.quantity import resource_value
from policyd.model.records import Pod
from policyd.model.resources import pod_requests
from policyd.model.selectors import (
    LabelSelector,
    NodeSelectorTerm,
    compile_label_selector,
    compile_node_selector_term,
)
from policyd.nodemetrics.cache import EMPTY as EMPTY_METRICS
from policyd.nodemetrics.cache import MetricSnapshot, MetricsReader
from policyd.policy.jmes import Expression, number, truthy

if TYPE_CHECKING:
    from policyd.model.table import BoolArray, IntArray, NodeTable

FloatArray = np.ndarray[Any, np.dtype[np.float64]]

MAX_SCORE = 100
_serials = itertools.count(1)

NodeCheck = Callable[[NodeInfo], bool]
NodeValue = Callable[[NodeInfo], float | None]


# ---------------------------------------------------------------------------------
# appliesTo


class AppliesTo:
    """Which pods a policy applies to; every part ANDed, absent parts match all."""

    __slots__ = ("annotations", "condition", "exclude", "include", "labels")

    def __init__(self, spec: Mapping[str, Any] | None) -> None:
        spec = spec or {}
        ns = spec.get("namespaces") or {}
        self.include: frozenset[str] | None = frozenset(ns["include"]) \
            if ns.get("include") else None
        self.exclude: frozenset[str] = frozenset(ns.get("exclude") or ())
        self.labels: LabelSelector | None = compile_label_selector(spec["labelSelector"]) \
            if "labelSelector" in spec else None
        ann = spec.get("annotationSelector")
        self.annotations: LabelSelector | None = compile_label_selector({
            "matchLabels": ann.get("matchAnnotations") or {},
            "matchExpressions": ann.get("matchExpressions") or [],
        }) if ann is not None else None
        cond = spec.get("condition")
        self.condition: Expression | None = Expression(cond) if cond else None

    def matches(self, pod: Pod) -> bool:
        if self.include is not None and pod.namespace not in self.include:
            return False
        if pod.namespace in self.exclude:
            return False
        if self.labels is not None and not self.labels.matches(pod.labels):
            return False
        if self.annotations is not None and not self.annotations.matches(pod.annotations):
            return False
        if self.condition is not None:
            try:
                return truthy(self.condition.search(pod.raw))
            except Exception:  # a JMESPath runtime error: the policy does not apply
                return False
        return True


# ---------------------------------------------------------------------------------
# filter rules: compiled once, bound to each pod, checked per node


class FilterRule:
    """Base: `bind(pod)` returns the per-node check, or None when inactive for the pod."""

    unresolvable = True

    def __init__(self, rule_id: str, message: str) -> None:
        self.id = rule_id
        self.message = message

    def bind(self, policy: CompiledPolicy, pod: Pod) -> NodeCheck | None:
        raise NotImplementedError

    def mask(self, check: NodeCheck, policy: CompiledPolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        """The batch form of `check` over `table` rows `idx`; exactly its results.
        This default calls it per node; rules that read only columns override it."""
        infos = table.infos
        return np.fromiter((check(infos[i]) for i in idx.tolist()), np.bool_, idx.size)


def _label_group_mask(keys: tuple[str, ...], check: NodeCheck, table: NodeTable,
                      idx: IntArray) -> BoolArray:
    """Decide a label-only check once per distinct combination of the labels it reads."""
    group_id, members = table.label_groups(keys)
    infos = table.infos
    ok = np.fromiter((check(infos[i]) for i in members), np.bool_, len(members))
    return ok[group_id[idx]]


def _row(table: NodeTable, array: IntArray, name: str, idx: IntArray) -> IntArray:
    j = table.resource_column(name)
    if j is None:
        return np.zeros(idx.size, np.int64)
    return table.take(array[j], idx)


class AnnotationToNodeLabel(FilterRule):
    def __init__(self, rule_id: str, message: str, spec: Mapping[str, Any]) -> None:
        super().__init__(rule_id, message)
        self.annotation: str = spec["annotation"]
        self.value: str | None = spec.get("value")
        self.label: str = spec["label"]
        self.label_value: str | None = spec.get("labelValue")
        self.use_annotation_value = bool(spec.get("useAnnotationValue"))

    def bind(self, policy: CompiledPolicy, pod: Pod) -> NodeCheck | None:
        actual = pod.annotations.get(self.annotation)
        if actual is None or (self.value is not None and actual != self.value):
            return None
        expected = actual if self.use_annotation_value else self.label_value
        label = self.label
        return lambda info: info.node.labels.get(label) == expected

    def mask(self, check: NodeCheck, policy: CompiledPolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        return _label_group_mask((self.label,), check, table, idx)


class NodeLabels(FilterRule):
    def __init__(self, rule_id: str, message: str, spec: Mapping[str, Any]) -> None:
        super().__init__(rule_id, message)
        exprs = [{"key": k, "operator": "In", "values": [v]}
                 for k, v in (spec.get("matchLabels") or {}).items()]
        exprs.extend(spec.get("matchExpressions") or [])
        self.term: NodeSelectorTerm = compile_node_selector_term({"matchExpressions": exprs})

    def bind(self, policy: CompiledPolicy, pod: Pod) -> NodeCheck | None:
        reqs = self.term.label_requirements
        return lambda info: all(r.matches(info.node.labels) for r in reqs)

    def mask(self, check: NodeCheck, policy: CompiledPolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        keys = tuple(sorted({r.key for r in self.term.label_requirements}))
        return _label_group_mask(keys, check, table, idx)


class Headroom(FilterRule):
    unresolvable = False

    def __init__(self, rule_id: str, message: str, spec: Mapping[str, Any]) -> None:
        super().__init__(rule_id, message)
        self.resource: str = spec["resource"]
        self.quantity: int | None = (resource_value(self.resource, spec["quantity"])
                                     if "quantity" in spec else None)
        self.percent: float | None = (float(spec["percent"]) if "percent" in spec else None)

    def bind(self, policy: CompiledPolicy, pod: Pod) -> NodeCheck | None:
        r = self.resource
        if r == "pods":
            def used(info: NodeInfo) -> int:
                return len(info.pods) + 1
        else:
            own = pod_requests(pod).get(r, 0)

            def used(info: NodeInfo) -> int:
                return info.requested.get(r, 0) + own
        if self.quantity is not None:
            q = self.quantity
            return lambda info: info.node.allocatable.get(r, 0) - used(info) >= q
        pct = self.percent or 0.0

        def check(info: NodeInfo) -> bool:
            alloc = info.node.allocatable.get(r, 0)
            return (alloc - used(info)) * 100 >= alloc * pct
        return check

    def mask(self, check: NodeCheck, policy: CompiledPolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        r = self.resource
        alloc = _row(table, table.allocatable, r, idx)
        if r == "pods":
            used = table.take(table.pod_count, idx) + 1
        else:
            used = _row(table, table.requested, r, idx) + pod_requests(pod).get(r, 0)
        if self.quantity is not None:
            return np.asarray(alloc - used >= self.quantity, np.bool_)
        pct = self.percent or 0.0
        # Integral percentages stay in integer arithmetic, as the per-node check does.
        factor: float | int = int(pct) if pct.is_integer() else pct
        return np.asarray((alloc - used) * 100 >= alloc * factor, np.bool_)


class RequireExtendedResource(FilterRule):
    # Evicting pods never adds allocatable, so preemption cannot help: unresolvable.
    unresolvable = True

    def __init__(self, rule_id: str, message: str, spec: Mapping[str, Any]) -> None:
        super().__init__(rule_id, message)
        self.name: str = spec["name"]
        self.quantity = resource_value(self.name, spec.get("quantity", 1))

    def bind(self, policy: CompiledPolicy, pod: Pod) -> NodeCheck | None:
        name, q = self.name, self.quantity
        return lambda info: info.node.allocatable.get(name, 0) >= q

    def mask(self, check: NodeCheck, policy: CompiledPolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        return np.asarray(_row(table, table.allocatable, self.name, idx) >= self.quantity,
                          np.bool_)


class MaxPodsPerNode(FilterRule):
    unresolvable = False

    def __init__(self, rule_id: str, message: str, cap: int) -> None:
        super().__init__(rule_id, message)
        self.cap = cap

    def bind(self, policy: CompiledPolicy, pod: Pod) -> NodeCheck | None:
        cap, uid, applies = self.cap, pod.uid, policy.applies

        def check(info: NodeInfo) -> bool:
            n = 0
            for other in info.pods.values():
                if other.uid != uid and applies(other):
                    n += 1
                    if n >= cap:
                        return False
            return True
        return check


class JmesFilter(FilterRule):
    def __init__(self, rule_id: str, message: str, source: str) -> None:
        super().__init__(rule_id, message)
        self.expr = Expression(source)

    def bind(self, policy: CompiledPolicy, pod: Pod) -> NodeCheck | None:
        raw = pod.raw
        search = self.expr.search

        def check(info: NodeInfo) -> bool:
            # A fresh two-key dict per node (cheap next to the search itself) keeps the
            # check safe if nodes are ever filtered from several threads.
            try:
                return truthy(search({"pod": raw, "node": info.node.raw}))
            except Exception:  # a runtime error in the expression rejects the node
                return False
        return check


def _filter_rule(spec: Mapping[str, Any]) -> FilterRule:
    rid, msg = spec["id"], spec["message"]
    if "annotationToNodeLabel" in spec:
        return AnnotationToNodeLabel(rid, msg, spec["annotationToNodeLabel"])
    if "nodeLabels" in spec:
        return NodeLabels(rid, msg, spec["nodeLabels"])
    if "headroom" in spec:
        return Headroom(rid, msg, spec["headroom"])
    if "requireExtendedResource" in spec:
        return RequireExtendedResource(rid, msg, spec["requireExtendedResource"])
    if "maxPodsPerNode" in spec:
        return MaxPodsPerNode(rid, msg, int(spec["maxPodsPerNode"]))
    return JmesFilter(rid, msg, spec["jmespath"])


# ---------------------------------------------------------------------------------
# score rules


class ScoreRule:
    """Base: `bind(pod)` returns the node's raw value (None: missing)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.id: str = spec["id"]
        self.weight: int = int(spec["weight"])
        self.normalize: str = spec["normalize"]
        self.reverse = bool(spec.get("reverse", False))

    def bind(self, pod: Pod) -> NodeValue:
        raise NotImplementedError

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        """The batch form of `value` over rows `idx`, NaN where it is None. This default
        calls it per node; rules that read only columns override it."""
        infos = table.infos
        nan = math.nan
        return np.fromiter(
            (nan if (v := value(infos[i])) is None else v for i in idx.tolist()),
            np.float64, idx.size)


class LabelValueScore(ScoreRule):
    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        lv = spec["labelValue"]
        self.label: str = lv["label"]
        self.values_map: dict[str, float] = {str(k): float(v) for k, v in lv["values"].items()}
        self.default = float(lv.get("default", 0))

    def bind(self, pod: Pod) -> NodeValue:
        label, values, default = self.label, self.values_map, self.default

        def value(info: NodeInfo) -> float | None:
            v = info.node.labels.get(label)
            return default if v is None else values.get(v, default)
        return value

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        codes, vocab = table.label_codes(self.label)
        # Points per label code; the extra last slot (index -1, ABSENT) is the default.
        points = np.full(len(vocab) + 1, self.default, np.float64)
        for v, code in vocab.items():
            points[code] = self.values_map.get(v, self.default)
        return points[codes[idx]]


class NumericScore(ScoreRule):
    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        num = spec["numeric"]
        self.from_label = "label" in num
        self.key: str = num["label"] if self.from_label else num["annotation"]
        if num.get("prefer", "highest") == "lowest":
            self.reverse = True
        # (table, its version, the annotation's numbers on every node): annotations
        # change only with node records, which bump the table's version.
        self._column: tuple[weakref.ref[NodeTable], int, FloatArray] | None = None

    def _annotation_column(self, table: NodeTable) -> FloatArray:
        cached = self._column
        if cached is not None and cached[0]() is table and cached[1] == table.version:
            return cached[2]
        key, nan = self.key, math.nan
        column = np.fromiter(
            (nan if (v := number(info.node.annotations.get(key))) is None else v
             for info in table.infos), np.float64, len(table.infos))
        self._column = (weakref.ref(table), table.version, column)
        return column

    def bind(self, pod: Pod) -> NodeValue:
        key = self.key
        if self.from_label:
            return lambda info: number(info.node.labels.get(key))
        return lambda info: number(info.node.annotations.get(key))

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        if not self.from_label:
            return self._annotation_column(table)[idx]
        codes, vocab = table.label_codes(self.key)
        numbers = np.full(len(vocab) + 1, np.nan, np.float64)
        for v, code in vocab.items():
            n = number(v)
            if n is not None:
                numbers[code] = n
        return numbers[codes[idx]]


class _MetricValue:
    """A metric rule bound to one cycle: the snapshot and the time it is judged at, taken
    once in PreScore so that Score, NormalizeScore and the column path all read the same
    values whatever the providers publish meanwhile."""

    __slots__ = ("now", "snap")

    def __init__(self, snap: MetricSnapshot | None, now: float) -> None:
        self.snap = snap
        self.now = now

    def __call__(self, info: NodeInfo) -> float | None:
        snap = self.snap
        return None if snap is None else snap.get(info.node.name, self.now)


class MetricScore(ScoreRule):
    """A node metric from the cache providers fill in the background (never I/O here).

    `missing` says what a node without a fresh value scores: `worst` 0 (like every
    missing value), `neutral` 50, or `skip`: the rule does not count for that node (the
    policy's score is the weighted mean of the node's other rules)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        m = spec["metric"]
        self.metric: str = m["name"]
        self.reverse = m.get("prefer", "highest") == "lowest"
        self.missing: str = m.get("missing", "worst")
        self.source: MetricsReader = EMPTY_METRICS
        # (table, its version, snapshot generation, values, timestamps) per table:
        # node order changes only with the table's version, values with the generation.
        self._column: tuple[weakref.ref[NodeTable], int, int, FloatArray,
                            FloatArray] | None = None

    def bind(self, pod: Pod) -> NodeValue:
        source = self.source
        return _MetricValue(source.snapshot(self.metric), source.now())

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        if not isinstance(value, _MetricValue):
            return super().values(value, pod, table, idx)
        snap = value.snap
        if snap is None:
            return np.full(idx.size, np.nan, np.float64)
        cached = self._column
        if cached is None or cached[0]() is not table or cached[1] != table.version \
                or cached[2] != snap.generation:
            nan = (math.nan, math.nan)
            entries = [snap.values.get(info.node.name, nan) for info in table.infos]
            vals = np.fromiter((e[0] for e in entries), np.float64, len(entries))
            stamps = np.fromiter((e[1] for e in entries), np.float64, len(entries))
            cached = (weakref.ref(table), table.version, snap.generation, vals, stamps)
            self._column = cached
        vals, stamps = cached[3][idx], cached[4][idx]
        # The same test as MetricSnapshot.get: older than max_age is missing.
        stale = ~(value.now - stamps <= snap.max_age)
        return np.where(stale, np.nan, vals)


class AllocationScore(ScoreRule):
    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        alloc = spec["allocation"]
        self.most = alloc["strategy"] == "most"
        resources = alloc.get("resources") or [{"name": "cpu", "weight": 1},
                                               {"name": "memory", "weight": 1}]
        self.resources: tuple[tuple[str, int], ...] = tuple(
            (r["name"], int(r.get("weight", 1))) for r in resources)

    def bind(self, pod: Pod) -> NodeValue:
        return allocation_scorer(pod, self.resources, self.most)

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        non_zero = pod_requests(pod, non_zero=True)
        actual = pod_requests(pod)
        total = np.zeros(idx.size, np.int64)
        wsum = np.zeros(idx.size, np.int64)
        for name, w in self.resources:
            alloc = _row(table, table.allocatable, name, idx)
            if name in ("cpu", "memory"):
                row = table.take(table.non_zero_requested[0 if name == "cpu" else 1], idx)
                requested = row + non_zero.get(name, 0)
            else:
                requested = _row(table, table.requested, name, idx) + actual.get(name, 0)
            offered = alloc > 0
            safe = np.where(offered, alloc, 1)
            if self.most:
                s = np.minimum(requested, alloc) * MAX_SCORE // safe
            else:
                s = np.where(requested > alloc, 0, (alloc - requested) * MAX_SCORE // safe)
            total += np.where(offered, s * w, 0)
            wsum += np.where(offered, w, 0)
        out = np.where(wsum > 0, total // np.where(wsum > 0, wsum, 1), 0)
        return out.astype(np.float64)


def allocation_scorer(pod: Pod, resources: Sequence[tuple[str, int]],
                      most: bool) -> NodeValue:
    """NodeResourcesFit's Least/MostAllocated over chosen resources: cpu and memory use
    the "non-zero" requests on both sides, as upstream's scoring does; a resource the
    node does not offer is left out of the weighted mean."""
    non_zero = pod_requests(pod, non_zero=True)
    actual = pod_requests(pod)
    own = [(name, w, non_zero.get(name, 0) if name in ("cpu", "memory")
            else actual.get(name, 0), name in ("cpu", "memory"))
           for name, w in resources]

    def value(info: NodeInfo) -> float | None:
        total = 0
        wsum = 0
        for name, w, req, nz in own:
            alloc = info.node.allocatable.get(name, 0)
            if alloc == 0:
                continue
            requested = (info.non_zero_requested if nz else info.requested).get(name, 0) + req
            if most:
                s = min(requested, alloc) * MAX_SCORE // alloc
            else:
                s = 0 if requested > alloc else (alloc - requested) * MAX_SCORE // alloc
            total += s * w
            wsum += w
        return float(total // wsum) if wsum else 0.0
    return value


class JmesScore(ScoreRule):
    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        self.expr = Expression(spec["jmespath"])

    def bind(self, pod: Pod) -> NodeValue:
        raw = pod.raw
        search = self.expr.search

        def value(info: NodeInfo) -> float | None:
            try:
                return number(search({"pod": raw, "node": info.node.raw}))
            except Exception:  # a runtime error counts as a missing value
                return None
        return value


def _score_rule(spec: Mapping[str, Any]) -> ScoreRule:
    if "labelValue" in spec:
        return LabelValueScore(spec)
    if "numeric" in spec:
        return NumericScore(spec)
    if "allocation" in spec:
        return AllocationScore(spec)
    if "metric" in spec:
        return MetricScore(spec)
    return JmesScore(spec)


# ---------------------------------------------------------------------------------
# normalization and combination


def _pct(num: float, den: float) -> int:
    # A tiny epsilon so that exact ratios computed in floating point (x*100/x) floor
    # to the integer they are, not one below.
    return max(0, min(MAX_SCORE, math.floor(num * MAX_SCORE / den + 1e-9)))


def normalize(method: str, reverse: bool, raw: Sequence[float | None]) -> list[int]:
    """One rule's raw values over the nodes -> 0..100. Missing values score 0."""
    out = [0] * len(raw)
    if method == "none":
        for i, v in enumerate(raw):
            if v is not None:
                s = max(0, min(MAX_SCORE, math.floor(v + 1e-9)))
                out[i] = MAX_SCORE - s if reverse else s
        return out
    if method == "max":
        # DefaultNormalizeScore: value * 100 / highest; reversed, 100 minus that;
        # negative values count as 0; all zero: 0 (reversed: 100).
        present = [max(0.0, v) for v in raw if v is not None]
        hi = max(present, default=0.0)
        for i, v in enumerate(raw):
            if v is None:
                continue
            s = _pct(max(0.0, v), hi) if hi > 0 else 0
            out[i] = MAX_SCORE - s if reverse else s
        return out
    # minmax: lowest present value 0, highest 100; all equal: 100.
    present = [v for v in raw if v is not None]
    if not present:
        return out
    lo, hi = min(present), max(present)
    for i, v in enumerate(raw):
        if v is None:
            continue
        s = MAX_SCORE if hi == lo else _pct(v - lo, hi - lo)
        if hi != lo and reverse:
            s = MAX_SCORE - s
        out[i] = s
    return out


def normalize_array(method: str, reverse: bool, raw: FloatArray) -> IntArray:
    """`normalize` over a column (NaN = missing); the same integers, element by element:
    the float operations happen in the same order, so they round the same way."""
    present = ~np.isnan(raw)
    out = np.zeros(raw.size, np.int64)
    if not present.any():
        return out
    v = np.where(present, raw, 0.0)
    if method == "none":
        s = np.clip(np.floor(v + 1e-9), 0, MAX_SCORE).astype(np.int64)
        s = MAX_SCORE - s if reverse else s
    elif method == "max":
        v = np.maximum(v, 0.0)
        hi = float(v[present].max())
        if hi > 0:
            s = np.clip(np.floor(v * MAX_SCORE / hi + 1e-9), 0, MAX_SCORE).astype(np.int64)
        else:
            s = np.zeros(raw.size, np.int64)
        s = MAX_SCORE - s if reverse else s
    else:
        lo, hi = float(v[present].min()), float(v[present].max())
        if hi == lo:
            s = np.full(raw.size, MAX_SCORE, np.int64)
        else:
            s = np.clip(np.floor((v - lo) * MAX_SCORE / (hi - lo) + 1e-9), 0,
                        MAX_SCORE).astype(np.int64)
            s = MAX_SCORE - s if reverse else s
    out[present] = s[present]
    return out


NEUTRAL_SCORE = MAX_SCORE // 2


def combine(weights: Sequence[int], per_rule: Sequence[Sequence[int]], n: int,
            counted: Sequence[Sequence[bool] | None] | None = None) -> list[int]:
    """Weighted mean of the rules' 0..100 scores per node (integer division).

    `counted[k]` (None: every node) says on which nodes rule k counts at all: a
    `missing: skip` metric rule is left out of the mean of nodes without a value; a
    node on which no rule counts scores 0."""
    if counted is None or all(c is None for c in counted):
        wsum = sum(weights)
        out = [0] * n
        for w, scores in zip(weights, per_rule, strict=True):
            for i, s in enumerate(scores):
                out[i] += w * s
        return [t // wsum for t in out] if wsum else out
    totals = [0] * n
    wsums = [0] * n
    for w, scores, mask in zip(weights, per_rule, counted, strict=True):
        for i, s in enumerate(scores):
            if mask is None or mask[i]:
                totals[i] += w * s
                wsums[i] += w
    return [t // ws if ws else 0 for t, ws in zip(totals, wsums, strict=True)]


def apply_missing(rule: ScoreRule, raw: Sequence[float | None], scores: list[int]
                  ) -> list[bool] | None:
    """Adjust one rule's normalized scores for its `missing` setting; returns on which
    nodes it counts (None: all)."""
    if not isinstance(rule, MetricScore) or rule.missing == "worst":
        return None
    if rule.missing == "neutral":
        for i, v in enumerate(raw):
            if v is None:
                scores[i] = NEUTRAL_SCORE
        return None
    return [v is not None for v in raw]


# ---------------------------------------------------------------------------------
# the plugin


class CompiledPolicy:
    """A SchedulingPolicy as a plugin; `name` is its `spec.pluginName`.

    The subclasses below add Filter and/or Score extension points depending on what
    the policy has. `default_weight` is the plugin's score weight in the default
    profile (`spec.weight`, default 1).
    """

    def __init__(self, doc: Mapping[str, Any], source: str = "") -> None:
        spec = doc["spec"]
        self.name: str = spec["pluginName"]
        self.policy_name: str = doc["metadata"]["name"]
        self.source = source
        self.document: Mapping[str, Any] = doc
        self.default_weight: int = int(spec.get("weight", 1))
        self.applies_to = AppliesTo(spec.get("appliesTo"))
        self.filter_rules: tuple[FilterRule, ...] = tuple(
            _filter_rule(r) for r in spec.get("filters") or ())
        self.score_rules: tuple[ScoreRule, ...] = tuple(
            _score_rule(r) for r in spec.get("scores") or ())
        # A per-pod memo key unique to this compiled object, so a reloaded policy with
        # the same name never reads a stale answer from `pod.cache`.
        self._applies_key = f"policyd.policy/{self.name}#{next(_serials)}"
        self._filter_key = f"{self.name}/filter"
        self._score_key = f"{self.name}/score"
        self._weights = tuple(r.weight for r in self.score_rules)
        self._weight_sum = sum(self._weights) or 1
        # The cluster events that can undo this policy's rejections, derived from what
        # its filter rules read (imported here: that module reads this one's rule classes).
        from policyd.policy.requeue import policy_events
        self.events: tuple[ClusterEventWithHint, ...] = policy_events(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} ({self.source or self.policy_name})>"

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The node metrics this policy's `metric` rules read."""
        return tuple(r.metric for r in self.score_rules if isinstance(r, MetricScore))

    def use_metrics(self, reader: MetricsReader) -> None:
        """Read node metrics from `reader` (the daemon's cache, or a --metrics file);
        until called, every metric value is missing."""
        for r in self.score_rules:
            if isinstance(r, MetricScore):
                r.source = reader

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return self.events

    def applies(self, pod: Pod) -> bool:
        """Whether the policy applies to `pod` (memoized on the pod)."""
        cached = pod.cache.get(self._applies_key)
        if cached is None:
            cached = self.applies_to.matches(pod)
            pod.cache[self._applies_key] = cached
        return bool(cached)


class _Filters:
    """Mixin: PreFilter (applies-to and rule binding, once per pod) and Filter."""

    name: str
    filter_rules: tuple[FilterRule, ...]
    _filter_key: str
    applies: Callable[[Pod], bool]

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: Sequence[NodeInfo]) -> tuple[set[str] | None, Status | None]:
        if not self.applies(pod):
            return None, Status.skip()
        bound = []
        for rule in self.filter_rules:
            check = rule.bind(self, pod)  # type: ignore[arg-type]
            if check is not None:
                bound.append((check, rule))
        if not bound:
            return None, Status.skip()
        state.write(self._filter_key, tuple(bound))
        return None, None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        bound: tuple[tuple[NodeCheck, FilterRule], ...] = state.read(self._filter_key)
        reasons: list[str] | None = None
        unresolvable = False
        for check, rule in bound:
            if not check(node):
                if reasons is None:
                    reasons = []
                reasons.append(rule.message)
                unresolvable = unresolvable or rule.unresolvable
        if reasons is None:
            return None
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return Status(code, tuple(reasons), self.name)

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                    idx: IntArray) -> BoolArray:
        """Which of the nodes `idx` pass (the engine's vectorized path): exactly
        `filter(...) is None` per node. Each rule only looks at nodes still passing."""
        bound: tuple[tuple[NodeCheck, FilterRule], ...] = state.read(self._filter_key)
        mask = np.ones(idx.size, np.bool_)
        for check, rule in bound:
            alive = np.flatnonzero(mask)
            if alive.size == 0:
                break
            ok = rule.mask(check, self, pod, table,  # type: ignore[arg-type]
                           idx if alive.size == idx.size else idx[alive])
            mask[alive[~ok]] = False
        return mask


class _Scores:
    """Mixin: PreScore, Score (raw values kept per node) and NormalizeScore (per-rule
    normalization over the feasible nodes, then the weighted mean into 0..100)."""

    name: str
    score_rules: tuple[ScoreRule, ...]
    _score_key: str
    _weights: tuple[int, ...]
    _weight_sum: int
    applies: Callable[[Pod], bool]

    def pre_score(self, state: CycleState, pod: Pod,
                  nodes: Sequence[NodeInfo]) -> Status | None:
        if not self.applies(pod) or not self.score_rules:
            return Status.skip()
        bound = tuple(r.bind(pod) for r in self.score_rules)
        state.write(self._score_key, (bound, {}))
        return None

    def _raw(self, state: CycleState, node: NodeInfo) -> tuple[float | None, ...]:
        bound, raws = state.read(self._score_key)
        raw = raws.get(node.name)
        if raw is None:
            raw = tuple([value(node) for value in bound])
            raws[node.name] = raw
        return raw  # type: ignore[no-any-return]

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        """The combined score as if every rule's values were already 0..100 (exact for
        `normalize: none`); normalize_score then sets the real one from the raw values
        kept here, with each rule normalized over all feasible nodes. This integer is
        only what Score must return: explain shows the rules' own raw values
        (`score_breakdown`)."""
        total = 0
        for rule, v in zip(self.score_rules, self._raw(state, node), strict=True):
            if v is not None:
                s = max(0, min(MAX_SCORE, math.floor(v + 1e-9)))
                total += rule.weight * (MAX_SCORE - s if rule.reverse else s)
        return total // self._weight_sum

    def _rule_scores(self, state: CycleState, nodes: Sequence[NodeInfo]
                     ) -> tuple[list[tuple[float | None, ...]], list[list[int]],
                                list[list[bool] | None]]:
        """Per rule: the nodes' raw values, their 0..100 scores over `nodes`, and on
        which nodes the rule counts (None: all)."""
        raws = [self._raw(state, n) for n in nodes]
        columns: list[tuple[float | None, ...]] = (
            list(zip(*raws, strict=True)) if raws else [() for _ in self.score_rules])
        per_rule = [normalize(rule.normalize, rule.reverse, column)
                    for rule, column in zip(self.score_rules, columns, strict=True)]
        counted = [apply_missing(rule, column, normalized) for rule, column, normalized
                   in zip(self.score_rules, columns, per_rule, strict=True)]
        return columns, per_rule, counted

    def normalize_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo],
                        scores: list[int]) -> Status | None:
        _, per_rule, counted = self._rule_scores(state, nodes)
        scores[:] = combine(self._weights, per_rule, len(nodes), counted)
        return None

    def score_vector(self, state: CycleState, pod: Pod, table: NodeTable,
                     idx: IntArray) -> IntArray:
        """Final 0..100 scores of the nodes `idx` (the engine's vectorized path): each
        rule's raw column normalized, then combined; exactly what score followed by
        normalize_score gives."""
        bound, _ = state.read(self._score_key)
        total = np.zeros(idx.size, np.int64)
        wsum: IntArray | None = None  # per node, once a `missing: skip` rule is seen
        for rule, value in zip(self.score_rules, bound, strict=True):
            column = rule.values(value, pod, table, idx)
            normalized = normalize_array(rule.normalize, rule.reverse, column)
            missing = getattr(rule, "missing", "worst")
            if missing == "worst":
                total += rule.weight * normalized
            elif missing == "neutral":
                total += rule.weight * np.where(np.isnan(column), NEUTRAL_SCORE, normalized)
            else:
                present = ~np.isnan(column)
                if wsum is None:
                    wsum = np.full(idx.size, self._weight_sum, np.int64)
                total += rule.weight * np.where(present, normalized, 0)
                wsum -= np.where(present, 0, rule.weight)
        if wsum is None:
            return total // self._weight_sum
        return np.where(wsum > 0, total // np.maximum(wsum, 1), 0)

    def score_breakdown(self, state: CycleState, nodes: Sequence[NodeInfo]
                        ) -> dict[str, list[tuple[float | None, int]]]:
        """Per rule id: each node's raw value and 0..100 score over `nodes`, for
        explain (the framework keeps them beside Score's stand-in integer)."""
        columns, per_rule, _ = self._rule_scores(state, nodes)
        return {rule.id: list(zip(column, normalized, strict=True))
                for rule, column, normalized in zip(self.score_rules, columns, per_rule,
                                                    strict=True)}


class FilterPolicy(_Filters, CompiledPolicy):
    """A policy with filter rules only."""


class ScorePolicy(_Scores, CompiledPolicy):
    """A policy with score rules only."""


class FilterScorePolicy(_Filters, _Scores, CompiledPolicy):
    """A policy with filter and score rules."""


def compile_policy(doc: Mapping[str, Any], source: str = "") -> CompiledPolicy:
    """Compile a policy document that passed validation (schema and semantics)."""
    spec = doc["spec"]
    has_filters = bool(spec.get("filters"))
    has_scores = bool(spec.get("scores"))
    cls: type[CompiledPolicy]
    if has_filters and has_scores:
        cls = FilterScorePolicy
    elif has_filters:
        cls = FilterPolicy
    elif has_scores:
        cls = ScorePolicy
    else:
        cls = CompiledPolicy
    return cls(doc, source)
