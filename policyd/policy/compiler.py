"""Compile a validated SchedulingPolicy once into a scheduler plugin.

Everything that depends only on the policy is done here, once: each rule compiled by
its kind's module (policyd/policy/rules/: JMESPath compiled, selectors compiled into
matchers, quantities parsed). Everything that depends only on the pod is done once per
cycle in PreFilter/PreScore ("binding" each rule to the pod: which rules are active,
the pod's requests, the annotation value to look for). The per-node Filter/Score then
only read node fields and compare.

A plugin only has the extension points its policy uses: a filter-only policy has no
Score methods, so profiles and the runner see exactly what it does. A policy in Audit
mode has none of them: it compiles to an `AuditedPolicy`, which the Framework audits.

What each rule kind does with missing data is in its module's docstring (and in
docs/policy-language.md); `rules/normalization.py` says how missing score values
normalize and combine.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.clock import REAL_CLOCK
from policyd.framework.cycle_state import CycleState
from policyd.framework.events import ClusterEventWithHint
from policyd.framework.interfaces import AuditedRule
from policyd.framework.status import Code, Status
from policyd.model.node_info import NodeInfo
from policyd.model.node_metrics import MetricsReader
from policyd.model.records import Pod
from policyd.policy.policy_schema import AUDIT, ENFORCE
from policyd.policy.requeue import policy_events
from policyd.policy.rules.applies_to import AppliesTo
from policyd.policy.rules.base import FilterRule, NodeCheck, ScoreRule
from policyd.policy.rules.kinds import filter_rule as _filter_rule
from policyd.policy.rules.kinds import score_rule as _score_rule
from policyd.policy.rules.normalization import (
    MAX_SCORE,
    NEUTRAL_SCORE,
    apply_missing,
    combine,
    normalize,
    normalize_array,
    usable,
    usable_array,
)
from policyd.policy.rules.scores.metric import MetricScore
from policyd.policy.scopes import PolicyException, Scopes

if TYPE_CHECKING:
    from policyd.framework.runtime import Framework
    from policyd.model.cluster import ClusterState
    from policyd.model.table import BoolArray, IntArray, NodeTable

_serials = itertools.count(1)


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
        # Audit: evaluated and reported, never rejecting nor scoring (spec.mode), per
        # namespace where spec.scopedModes says so (`mode_for`).
        self.mode: str = spec.get("mode", ENFORCE)
        self.scopes = Scopes(spec)
        # compile_policy(enforced=True): every pod in Enforce mode (policyd test).
        self.forced_enforce = False
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
        # its filter rules read.
        self.events: tuple[ClusterEventWithHint, ...] = policy_events(self)
        # A rule reading the cluster at PreFilter (sameTopology: where its group's
        # pods are) makes preemption's dry runs rerun PreFilter (framework/interfaces.py).
        if any(r.reads_cluster for r in self.filter_rules):
            self.pre_filter_reads_other_pods = True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} ({self.source or self.policy_name})>"

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The node metrics this policy's `metric` rules read."""
        return tuple(r.metric for r in self.score_rules if isinstance(r, MetricScore))

    @property
    def node_label_keys(self) -> tuple[str, ...]:
        """Every node label key the policy's rules read by name, each once."""
        keys = [k for r in self.filter_rules for k in r.node_label_keys()]
        keys += [k for r in self.score_rules for k in r.node_label_keys()]
        return tuple(dict.fromkeys(keys))

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

    # The wall clock exceptions expire by, asked at each decision so an exception
    # lapses without a reload (tests set their own, e.g. a ManualClock's `wall`).
    now: Callable[[], float] = staticmethod(REAL_CLOCK.wall)

    def mode_for(self, pod: Pod) -> str:
        """The policy's mode for `pod`: its namespace's scoped mode, else spec.mode."""
        if self.forced_enforce:
            return ENFORCE
        return self.scopes.mode_for(pod, self.mode)

    def exemption(self, pod: Pod, rule_id: str) -> PolicyException | None:
        """The unexpired exception that exempts `pod` from the filter rule, if any."""
        if not self.scopes.exceptions:
            return None
        return self.scopes.exemption(pod, rule_id, self.now())

    def expired_exemption(self, pod: Pod, rule_id: str) -> PolicyException | None:
        """An exception that matched `pod` and the rule but has expired."""
        if not self.scopes.exceptions:
            return None
        return self.scopes.expired_for(pod, rule_id, self.now())


class _Filters:
    """Mixin: PreFilter (applies-to and rule binding, once per pod) and Filter."""

    name: str
    filter_rules: tuple[FilterRule, ...]
    _filter_key: str
    applies: Callable[[Pod], bool]
    # PreFilter binds the rules to the incoming pod alone; what a rule reads of other
    # pods (maxPodsPerNode, headroom) it reads from the NodeInfo Filter is given, so
    # preemption's dry runs need no PreFilterExtensions for it (framework/interfaces.py).
    pre_filter_reads_other_pods = False

    def group_topology_keys(self, pod: Pod) -> tuple[str, ...]:
        """The topology keys the policy's sameTopology rules hold `pod`'s group to."""
        if not self.applies(pod):
            return ()
        return tuple(k for r in self.filter_rules if (k := r.group_topology_key()))

    def pre_filter(self, state: CycleState, pod: Pod,
                   nodes: Sequence[NodeInfo]) -> tuple[set[str] | None, Status | None]:
        bound = _bind_filters(self, pod, state.cluster,  # type: ignore[arg-type]
                              enforced=True)
        if not bound:
            return None, Status.skip()
        state.write(self._filter_key, bound)
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
    mode_for: Callable[[Pod], str]

    def pre_score(self, state: CycleState, pod: Pod,
                  nodes: Sequence[NodeInfo]) -> Status | None:
        # A pod the policy audits (its namespace's scoped mode) is not scored by it.
        if not self.applies(pod) or not self.score_rules or self.mode_for(pod) != ENFORCE:
            return Status.skip()
        bound = tuple(r.bind(pod) for r in self.score_rules)
        state.write(self._score_key, (bound, {}))
        return None

    def _raw(self, state: CycleState, node: NodeInfo) -> tuple[float | None, ...]:
        bound, raws = state.read(self._score_key)
        raw = raws.get(node.name)
        if raw is None:
            # Out of range is missing (`usable`), as in `score_vector`.
            raw = tuple([usable(value(node)) for value in bound])
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
            column = usable_array(rule.values(value, pod, table, idx))
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


BoundFilters = tuple[tuple[NodeCheck, FilterRule], ...]


def _bind_filters(policy: CompiledPolicy, pod: Pod, cluster: ClusterState | None, *,
                  enforced: bool) -> BoundFilters:
    """The policy's filter rules active for `pod`, each with its per-node check; none
    when the policy does not apply to it, or is not in the mode asked for (`enforced`:
    Enforce, else Audit) for the pod's namespace. A rule an unexpired exception exempts
    the pod from is not active."""
    if not policy.applies(pod) or (policy.mode_for(pod) == ENFORCE) != enforced:
        return ()
    bound = []
    for rule in policy.filter_rules:
        if policy.exemption(pod, rule.id) is not None:
            continue
        check = rule.bind_in(policy, pod, cluster)
        if check is not None:
            bound.append((check, rule))
    return tuple(bound)


class _Audits:
    """Mixin: the `AuditPlugin` form of a policy's filter rules, for the pods in Audit
    mode (`mode_for`): the Framework audits them and never lets them reject or score.
    Its `audited_points` are those its Enforce form has, so a profile that names the
    policy stays valid whichever mode it is in."""

    name: str
    filter_rules: tuple[FilterRule, ...]
    score_rules: tuple[ScoreRule, ...]

    def _init_audits(self) -> None:
        self.audited_points: frozenset[str] = (
            (_FILTER_POINTS if self.filter_rules else frozenset())
            | (_SCORE_POINTS if self.score_rules else frozenset()))
        self._audit_key = f"{self.name}/audit"

    def audit_bind(self, state: CycleState, pod: Pod) -> Sequence[AuditedRule]:
        bound = _bind_filters(self, pod, state.cluster,  # type: ignore[arg-type]
                              enforced=False)
        state.write(self._audit_key, bound)
        return [AuditedRule(rule.id, rule.message) for _, rule in bound]

    def audit_filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> list[bool]:
        bound: BoundFilters = state.read(self._audit_key)
        return [check(node) for check, _ in bound]

    def audit_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                   idx: IntArray) -> list[BoolArray]:
        """Each rule over all of `idx` (not only the nodes earlier rules passed, as
        `filter_mask` does): each rule's count is its own."""
        bound: BoundFilters = state.read(self._audit_key)
        return [rule.mask(check, self, pod, table, idx)  # type: ignore[arg-type]
                for check, rule in bound]


class AuditedPolicy(_Audits, CompiledPolicy):
    """A policy in Audit mode for every pod (spec.mode: Audit, no scoped Enforce): an
    `AuditPlugin`, not a Filter or a Score plugin."""

    def __init__(self, doc: Mapping[str, Any], source: str = "") -> None:
        super().__init__(doc, source)
        self._init_audits()


# The extension points of the Enforce form of a policy with filter rules, with score
# rules (what `_Filters` and `_Scores` implement; tests hold the two in step).
_FILTER_POINTS = frozenset({"preFilter", "filter"})
_SCORE_POINTS = frozenset({"preScore", "score"})


class FilterPolicy(_Filters, CompiledPolicy):
    """A policy with filter rules only."""


class ScorePolicy(_Scores, CompiledPolicy):
    """A policy with score rules only."""


class FilterScorePolicy(_Filters, _Scores, CompiledPolicy):
    """A policy with filter and score rules."""


class _Scoped(_Audits, CompiledPolicy):
    """A policy Enforce in some namespaces and Audit in others (spec.scopedModes): its
    Enforce form's extension points for the pods in Enforce mode, audited for the
    others (the Framework keeps it in both its filters and its audits)."""

    def __init__(self, doc: Mapping[str, Any], source: str = "") -> None:
        super().__init__(doc, source)
        self._init_audits()


class ScopedFilterPolicy(_Filters, _Scoped):
    pass


class ScopedScorePolicy(_Scores, _Scoped):
    pass


class ScopedFilterScorePolicy(_Filters, _Scores, _Scoped):
    pass


class ScopedPolicy(_Scoped):
    """Scoped modes on a policy without rules."""


def compile_policy(doc: Mapping[str, Any], source: str = "", *,
                   enforced: bool = False) -> CompiledPolicy:
    """Compile a policy document that passed validation (schema and semantics).
    `enforced`: the Enforce form whatever spec.mode says (what its rules would do,
    for `policyd test`'s per-policy expectations)."""
    spec = doc["spec"]
    modes = {spec.get("mode", ENFORCE), *(m["mode"] for m in spec.get("scopedModes") or ())}
    if ENFORCE not in modes and not enforced:
        return AuditedPolicy(doc, source)
    has_filters = bool(spec.get("filters"))
    has_scores = bool(spec.get("scores"))
    scoped = AUDIT in modes and not enforced
    cls: type[CompiledPolicy]
    if has_filters and has_scores:
        cls = ScopedFilterScorePolicy if scoped else FilterScorePolicy
    elif has_filters:
        cls = ScopedFilterPolicy if scoped else FilterPolicy
    elif has_scores:
        cls = ScopedScorePolicy if scoped else ScorePolicy
    else:
        cls = ScopedPolicy if scoped else CompiledPolicy
    policy = cls(doc, source)
    policy.forced_enforce = enforced
    return policy


def profile_policies(fw: Framework) -> tuple[CompiledPolicy, ...]:
    """The compiled policies a profile filters with, in the profile's order: what the
    daemon asks about every node for the profile's pods (audit, the admission
    projection and the reports ask the same)."""
    # Audit-mode policies are kept apart from the filters (they reject nothing while
    # scheduling) but are judged like the others, each finding with its mode.
    # A policy Enforce in some namespaces and Audit in others is in both lists: once.
    found = {id(p): p for p in (*fw.filter_plugins, *fw.audit_plugins)
             if isinstance(p, CompiledPolicy)}
    return tuple(found.values())


def exemptions(policies: Sequence[CompiledPolicy], pod: Pod
               ) -> list[tuple[CompiledPolicy, str, PolicyException]]:
    """(policy, rule id, exception) for each filter rule of `policies` that applies to
    `pod` and an unexpired exception exempts it from (explain, the daemon's event)."""
    return [(p, rule.id, e) for p in policies
            if p.scopes.exceptions and p.applies(pod)
            for rule in p.filter_rules
            if (e := p.exemption(pod, rule.id)) is not None]


def scope_notes(policies: Sequence[CompiledPolicy], pod: Pod) -> list[str]:
    """For people (explain): each policy's scoped mode for `pod`, and each exception
    that exempts it from a rule, or did until it expired."""
    out: list[str] = []
    for p in policies:
        if not p.applies(pod):
            continue
        if p.scopes.modes:
            out.append(f"policy {p.policy_name} is in {p.mode_for(pod)} mode in namespace "
                       f"{pod.namespace} (spec.scopedModes; spec.mode is {p.mode})")
        if not p.scopes.exceptions:
            continue
        for rule in p.filter_rules:
            if (e := p.exemption(pod, rule.id)) is not None:
                out.append(f"rule {rule.id} of policy {p.policy_name}: exempted by "
                           f"{e.describe()}")
            elif (e := p.expired_exemption(pod, rule.id)) is not None:
                out.append(f"rule {rule.id} of policy {p.policy_name}: exception {e.name} "
                           f"expired at {e.expires}; rule applies ({e.reason})")
    return out
