"""InterPodAffinity: required pod (anti-)affinity as a filter, preferred as a score.

Reproduces kube-scheduler v1.36's plugin (pkg/scheduler/framework/plugins/
interpodaffinity): PreFilter counts, per (topologyKey, value) pair over every node of
the cluster, (1) existing pods whose required anti-affinity selects the incoming pod,
(2) existing pods matching all of the incoming pod's required affinity terms and (3)
existing pods matching each of its required anti-affinity terms; Filter only looks the
node's labels up in those counts. PreScore sums preferred term weights the same way
(plus existing pods' required affinity at `hardPodAffinityWeight`), Score reads the
sum for the node's topology, NormalizeScore min-max scales to 0..100.

Cost: a pod's terms are compiled once (`pod_affinity_terms`, memoized on the pod). The
pods with any pod affinity on a node, and what the pods of a node contribute to a given
set of incoming terms, are memoized on the node record and revalidated by
`NodeInfo.generation`, so a cycle costs one cheap check per node plus work on nodes
that changed since the last pod with the same terms (upstream's scheduling-cycle
memo does the same). A cluster where no pod has pod affinity skips after that check.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from policyd.framework import MAX_NODE_SCORE, CycleState, PluginError, Status
from policyd.model.cluster import NodeInfo
from policyd.model.records import Pod
from policyd.plugins import names
from policyd.plugins.pod_affinity_terms import (
    AffinityTerm,
    WeightedAffinityTerm,
    has_pod_affinity,
    pod_affinity_terms,
    resolve_namespaces,
    resolve_weighted_namespaces,
)

DEFAULT_WEIGHT: int | None = 2

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules")
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100

# Upstream codes: affinity cannot be fixed by preempting pods (UnschedulableAndUnresolvable),
# anti-affinity can (Unschedulable).
_AFFINITY_REJECT = Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
_ANTI_AFFINITY_REJECT = Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
_EXISTING_REJECT = Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)

_PRE_FILTER_KEY = "InterPodAffinity/preFilter"
_PRE_SCORE_KEY = "InterPodAffinity/preScore"
_NODE_PODS_KEY = "InterPodAffinity/podsWithAffinity"
_NODE_MEMO_KEY = "InterPodAffinity/memo"
# A node keeps the contributions for this many term sets at most; past it the memo is
# dropped (term sets come and go with workloads, and a stale entry is just recomputed).
_NODE_MEMO_LIMIT = 32

TopologyPair = tuple[str, str]
# What one node contributes: ((topologyKey, value), amount) entries.
_Contribution = tuple[tuple[TopologyPair, int], ...]


# ---------------------------------------------------------------------------
# Per-node indexes, memoized on the node record and checked against the NodeInfo.


def _pods_with_affinity(info: NodeInfo) -> tuple[tuple[Pod, ...], tuple[Pod, ...]]:
    """(pods with pod affinity or anti-affinity, pods with required anti-affinity).

    Upstream's NodeInfo keeps these lists (PodsWithAffinity,
    PodsWithRequiredAntiAffinity); ours does not, so they are rebuilt when the node's
    generation moves. The entry names its NodeInfo: the same Node record may sit in
    another ClusterState (a simulation) whose generations mean something else.
    """
    cache = info.node.cache
    entry = cache.get(_NODE_PODS_KEY)
    if entry is not None and entry[0] is info and entry[1] == info.generation:
        return entry[2], entry[3]
    with_affinity = tuple(p for p in info.pods.values() if has_pod_affinity(p))
    with_anti = tuple(
        p for p in with_affinity if pod_affinity_terms(p).required_anti_affinity)
    cache[_NODE_PODS_KEY] = (info, info.generation, with_affinity, with_anti)
    return with_affinity, with_anti


_term_set_ids: dict[tuple[Any, ...], int] = {}
_next_term_set_id = itertools.count(1)


def _term_set_id(key: tuple[Any, ...]) -> int:
    """A small int standing for a set of incoming terms, so per-node memo lookups hash an
    int instead of nested selectors. Ids are never reused, so clearing the table only
    orphans memo entries, it can never make one answer for other terms."""
    ident = _term_set_ids.get(key)
    if ident is None:
        if len(_term_set_ids) > 10_000:
            _term_set_ids.clear()
        ident = next(_next_term_set_id)
        _term_set_ids[key] = ident
    return ident


def _memoized(
    info: NodeInfo, term_set: int, compute: Callable[[NodeInfo], Any]
) -> Any:
    """`compute(info)` memoized on the node record for `term_set`, valid while the
    NodeInfo and its generation are the same."""
    cache = info.node.cache
    memo: dict[int, tuple[NodeInfo, int, Any]] | None = cache.get(_NODE_MEMO_KEY)
    if memo is None:
        memo = cache[_NODE_MEMO_KEY] = {}
    entry = memo.get(term_set)
    if entry is not None and entry[0] is info and entry[1] == info.generation:
        return entry[2]
    value = compute(info)
    if len(memo) >= _NODE_MEMO_LIMIT:
        memo.clear()
    memo[term_set] = (info, info.generation, value)
    return value


# ---------------------------------------------------------------------------
# Filtering


class _PreFilterState:
    __slots__ = ("affinity_counts", "affinity_terms", "anti_affinity_counts",
                 "anti_affinity_terms", "existing_anti_affinity_counts", "matches_itself")

    def __init__(
        self,
        affinity_terms: tuple[AffinityTerm, ...],
        anti_affinity_terms: tuple[AffinityTerm, ...],
        affinity_counts: dict[TopologyPair, int],
        anti_affinity_counts: dict[TopologyPair, int],
        existing_anti_affinity_counts: dict[TopologyPair, int],
        matches_itself: bool,
    ) -> None:
        self.affinity_terms = affinity_terms
        self.anti_affinity_terms = anti_affinity_terms
        self.affinity_counts = affinity_counts
        self.anti_affinity_counts = anti_affinity_counts
        self.existing_anti_affinity_counts = existing_anti_affinity_counts
        # The incoming pod matches all its own required affinity terms: it may be the
        # first of a group that wants to be together (see _filter_node).
        self.matches_itself = matches_itself


def _add(counts: dict[TopologyPair, int], contribution: _Contribution) -> None:
    for pair, n in contribution:
        counts[pair] = counts.get(pair, 0) + n


def _incoming_counter(
    affinity_terms: tuple[AffinityTerm, ...], anti_terms: tuple[AffinityTerm, ...]
) -> Callable[[NodeInfo], tuple[_Contribution, _Contribution]]:
    """What a node's pods add to the incoming pod's affinity and anti-affinity counts.

    Affinity: a pod counts once per term, and only if it matches every term (upstream
    podMatchesAllAffinityTerms). Anti-affinity: each term counts its own matches. The
    incoming terms have their namespaceSelector resolved, so no namespace labels."""

    def count(info: NodeInfo) -> tuple[_Contribution, _Contribution]:
        labels = info.node.labels
        aff_values = [labels.get(t.topology_key) for t in affinity_terms]
        anti_values = [labels.get(t.topology_key) for t in anti_terms]
        want_aff = any(v is not None for v in aff_values)
        want_anti = any(v is not None for v in anti_values)
        if not (want_aff or want_anti) or not info.pods:
            return (), ()
        aff_n = 0
        anti_n = [0] * len(anti_terms)
        for p in info.pods.values():
            if want_aff and all(t.matches(p, None) for t in affinity_terms):
                aff_n += 1
            if want_anti:
                for i, t in enumerate(anti_terms):
                    if t.matches(p, None):
                        anti_n[i] += 1
        aff: _Contribution = ()
        if aff_n:
            aff = tuple(((t.topology_key, v), aff_n)
                        for t, v in zip(affinity_terms, aff_values, strict=True)
                        if v is not None)
        anti = tuple(((t.topology_key, v), n)
                     for t, v, n in zip(anti_terms, anti_values, anti_n, strict=True)
                     if n and v is not None)
        return aff, anti

    return count


def _existing_anti_affinity_counts(
    pod: Pod, namespace_labels: Mapping[str, str], nodes: Sequence[NodeInfo]
) -> dict[TopologyPair, int]:
    """(1): for each existing pod's required anti-affinity term selecting `pod`, count the
    term's topology pair of the existing pod's node (getExistingAntiAffinityCounts)."""
    counts: dict[TopologyPair, int] = {}
    for info in nodes:
        anti_pods = _pods_with_affinity(info)[1]
        if not anti_pods:
            continue
        labels = info.node.labels
        for existing in anti_pods:
            for t in pod_affinity_terms(existing).required_anti_affinity:
                if t.matches(pod, namespace_labels):
                    value = labels.get(t.topology_key)
                    if value is not None:
                        pair = (t.topology_key, value)
                        counts[pair] = counts.get(pair, 0) + 1
    return counts


def _filter_node(s: _PreFilterState, labels: Mapping[str, str]) -> Status | None:
    if s.affinity_terms:
        pods_exist = True
        counts = s.affinity_counts
        for t in s.affinity_terms:
            value = labels.get(t.topology_key)
            if value is None:
                # Every topology key of the terms must be on the node.
                return _AFFINITY_REJECT
            if counts.get((t.topology_key, value), 0) <= 0:
                pods_exist = False
        # The "first pod of a group" rule: no pod anywhere matches the terms, but the pod
        # matches them itself, so it may start the group on any node with the keys.
        if not pods_exist and not (not counts and s.matches_itself):
            return _AFFINITY_REJECT
    if s.anti_affinity_counts:
        counts = s.anti_affinity_counts
        for t in s.anti_affinity_terms:
            value = labels.get(t.topology_key)
            if value is not None and counts.get((t.topology_key, value), 0) > 0:
                return _ANTI_AFFINITY_REJECT
    if s.existing_anti_affinity_counts:
        # Upstream walks the node's labels; walking the (few) counted pairs is the same
        # question, as every count here is positive.
        for (key, value) in s.existing_anti_affinity_counts:
            if labels.get(key) == value:
                return _EXISTING_REJECT
    return None


# ---------------------------------------------------------------------------
# Scoring


class _PreScoreState:
    __slots__ = ("topology_score",)

    def __init__(self, topology_score: dict[str, dict[str, int]]) -> None:
        self.topology_score = topology_score


def _preferred_scorer(
    affinity: tuple[WeightedAffinityTerm, ...], anti: tuple[WeightedAffinityTerm, ...]
) -> Callable[[NodeInfo], _Contribution]:
    """What a node's pods add to the score for the incoming pod's preferred terms.

    Pairs are kept even when their weights cancel out: upstream's Skip depends on
    whether any term matched at all, not on the sum."""

    def score(info: NodeInfo) -> _Contribution:
        labels = info.node.labels
        if not labels or not info.pods:
            return ()
        # (term, signed weight, the node's value for the term's topology key)
        weighted: list[tuple[AffinityTerm, int, str]] = []
        for terms, sign in ((affinity, 1), (anti, -1)):
            for w in terms:
                value = labels.get(w.term.topology_key)
                if value is not None:
                    weighted.append((w.term, sign * w.weight, value))
        if not weighted:
            return ()
        sums: dict[TopologyPair, int] = {}
        for p in info.pods.values():
            for term, weight, value in weighted:
                if term.matches(p, None):
                    pair = (term.topology_key, value)
                    sums[pair] = sums.get(pair, 0) + weight
        return tuple(sums.items())

    return score


class InterPodAffinity:
    name = names.INTER_POD_AFFINITY

    def __init__(self, hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
                 ignore_preferred_terms_of_existing_pods: bool = False) -> None:
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods

    # PreFilter / Filter

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        terms = pod_affinity_terms(pod)
        if terms.errors:
            return None, Status.unresolvable("parsing pod: " + "; ".join(terms.errors))
        all_nodes = state.all_nodes or nodes
        ns_labels = _namespace_labels(state)
        own_ns_labels = ns_labels.get(pod.namespace) if ns_labels else None

        existing = _existing_anti_affinity_counts(pod, own_ns_labels or {}, all_nodes)
        if not existing and not terms.has_required:
            return None, Status.skip()

        affinity_terms = resolve_namespaces(terms.required_affinity, ns_labels)
        anti_terms = resolve_namespaces(terms.required_anti_affinity, ns_labels)
        affinity_counts: dict[TopologyPair, int] = {}
        anti_counts: dict[TopologyPair, int] = {}
        if affinity_terms or anti_terms:
            term_set = _term_set_id(("filter", affinity_terms, anti_terms))
            counter = _incoming_counter(affinity_terms, anti_terms)
            for info in all_nodes:
                aff, anti = _memoized(info, term_set, counter)
                if aff:
                    _add(affinity_counts, aff)
                if anti:
                    _add(anti_counts, anti)
        matches_itself = bool(affinity_terms) and all(
            t.matches(pod, None) for t in affinity_terms)
        state.write(_PRE_FILTER_KEY, _PreFilterState(
            affinity_terms, anti_terms, affinity_counts, anti_counts, existing,
            matches_itself))
        return None, None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        return _filter_node(state.read(_PRE_FILTER_KEY), node.node.labels)

    def filter_all(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> list[Status | None]:
        s: _PreFilterState = state.read(_PRE_FILTER_KEY)
        return [_filter_node(s, n.node.labels) for n in nodes]

    # PreScore / Score / NormalizeScore

    def pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        terms = pod_affinity_terms(pod)
        if terms.errors:
            return Status.error("failed to parse pod: " + "; ".join(terms.errors))
        has_constraints = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        # Optionally ignore existing pods' preferences (and their required affinity
        # weight) when the incoming pod has no preferences of its own.
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status.skip()
        all_nodes = state.all_nodes or nodes
        ns_labels = _namespace_labels(state)
        own_ns_labels: Mapping[str, str] = (ns_labels.get(pod.namespace) if ns_labels
                                            else None) or {}
        hard_weight = self.hard_pod_affinity_weight

        topology_score: dict[str, dict[str, int]] = {}

        def add(key: str, value: str, amount: int) -> None:
            by_value = topology_score.get(key)
            if by_value is None:
                by_value = topology_score[key] = {}
            by_value[value] = by_value.get(value, 0) + amount

        preferred = None
        term_set = 0
        if has_constraints:
            affinity = resolve_weighted_namespaces(terms.preferred_affinity, ns_labels)
            anti = resolve_weighted_namespaces(terms.preferred_anti_affinity, ns_labels)
            term_set = _term_set_id(("score", affinity, anti))
            preferred = _preferred_scorer(affinity, anti)

        for info in all_nodes:
            labels = info.node.labels
            if not labels:
                continue  # upstream skips pods on nodes without labels altogether
            if preferred is not None:
                for (key, value), amount in _memoized(info, term_set, preferred):
                    add(key, value, amount)
            for existing in _pods_with_affinity(info)[0]:
                et = pod_affinity_terms(existing)
                if hard_weight > 0:
                    for t in et.required_affinity:
                        if t.matches(pod, own_ns_labels):
                            value = labels.get(t.topology_key)
                            if value is not None:
                                add(t.topology_key, value, hard_weight)
                for w in et.preferred_affinity:
                    if w.term.matches(pod, own_ns_labels):
                        value = labels.get(w.term.topology_key)
                        if value is not None:
                            add(w.term.topology_key, value, w.weight)
                for w in et.preferred_anti_affinity:
                    if w.term.matches(pod, own_ns_labels):
                        value = labels.get(w.term.topology_key)
                        if value is not None:
                            add(w.term.topology_key, value, -w.weight)

        if not topology_score:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, _PreScoreState(topology_score))
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        s: _PreScoreState = state.read(_PRE_SCORE_KEY)
        labels = node.node.labels
        total = 0
        for key, by_value in s.topology_score.items():
            value = labels.get(key)
            if value is not None:
                total += by_value.get(value, 0)
        return total

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> Status | None:
        s: _PreScoreState = state.read(_PRE_SCORE_KEY)
        if not s.topology_score or not scores:
            return None
        lo = min(scores)
        spread = max(scores) - lo
        for i, raw in enumerate(scores):
            # Same float arithmetic as upstream, truncated like Go's int64().
            scores[i] = (int(float(MAX_NODE_SCORE) * (float(raw - lo) / float(spread)))
                         if spread > 0 else 0)
        return None


def _namespace_labels(state: CycleState) -> Mapping[str, Mapping[str, str]] | None:
    cluster = state.cluster
    return cluster.namespace_labels if cluster is not None else None


def new(args: Mapping[str, Any] | None = None) -> InterPodAffinity:
    """InterPodAffinityArgs: hardPodAffinityWeight (0..100, default 1) and
    ignorePreferredTermsOfExistingPods (default false); unknown fields are errors."""
    args = args or {}
    problems: list[tuple[str, str]] = []
    if not isinstance(args, Mapping):
        raise PluginError(names.INTER_POD_AFFINITY, [("", "args must be an object")])
    for key in args:
        if key not in ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"):
            problems.append((str(key), "unknown field"))
    weight = args.get("hardPodAffinityWeight")
    if weight is None:
        weight = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    elif isinstance(weight, bool) or not isinstance(weight, int):
        problems.append(("hardPodAffinityWeight", f"Invalid value: {weight!r}: must be an integer"))
    elif not MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
        problems.append(("hardPodAffinityWeight",
                         f"Invalid value: {weight}: not in valid range "
                         f"[{MIN_HARD_POD_AFFINITY_WEIGHT}-{MAX_HARD_POD_AFFINITY_WEIGHT}]"))
    ignore = args.get("ignorePreferredTermsOfExistingPods")
    if ignore is None:
        ignore = False
    elif not isinstance(ignore, bool):
        problems.append(("ignorePreferredTermsOfExistingPods",
                         f"Invalid value: {ignore!r}: must be a boolean"))
    if problems:
        raise PluginError(names.INTER_POD_AFFINITY, problems)
    return InterPodAffinity(weight, ignore)
