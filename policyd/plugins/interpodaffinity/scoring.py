"""InterPodAffinity's PreScore, Score and NormalizeScore (upstream scoring.go):
PreScore sums preferred term weights per (topologyKey, value) pair (plus existing
pods' required affinity at `hardPodAffinityWeight`), Score reads the sum for the
node's topology, NormalizeScore min-max scales to 0..100; per node or over columns."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from policyd.framework import MAX_NODE_SCORE, CycleState, Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import IntArray, NodeTable
from policyd.plugins.interpodaffinity.index import (
    REQUIRED,
    Contribution,
    TopologyPair,
    existing_terms,
    namespace_labels,
)
from policyd.plugins.interpodaffinity.terms import (
    AffinityTerm,
    WeightedAffinityTerm,
    pod_affinity_terms,
    resolve_weighted_namespaces,
)

_PRE_SCORE_KEY = "InterPodAffinity/preScore"


class _PreScoreState:
    __slots__ = ("topology_score",)

    def __init__(self, topology_score: dict[str, dict[str, int]]) -> None:
        self.topology_score = topology_score


def _preferred_scorer(
    affinity: tuple[WeightedAffinityTerm, ...], anti: tuple[WeightedAffinityTerm, ...]
) -> Callable[[NodeInfo], Contribution]:
    """What a node's pods add to the score for the incoming pod's preferred terms.

    Pairs are kept even when their weights cancel out: upstream's Skip depends on
    whether any term matched at all, not on the sum."""

    def score(info: NodeInfo) -> Contribution:
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
        return tuple((0, pair, amount) for pair, amount in sums.items())

    return score


def pre_score(state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], *,
              hard_pod_affinity_weight: int,
              ignore_preferred_terms_of_existing_pods: bool) -> Status | None:
    """The plugin's PreScore with its args: the per-topology sums Score reads."""
    terms = pod_affinity_terms(pod)
    if terms.errors:
        return Status.error("failed to parse pod: " + "; ".join(terms.errors))
    has_constraints = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
    # Optionally ignore existing pods' preferences (and their required affinity
    # weight) when the incoming pod has no preferences of its own.
    if ignore_preferred_terms_of_existing_pods and not has_constraints:
        return Status.skip()
    if (not has_constraints and state.cluster is not None
            and state.cluster.pods_with_affinity == 0):
        return Status.skip()  # no preferences here and no terms in the cluster
    all_nodes = state.all_nodes or nodes
    ns_labels = namespace_labels(state)
    own_ns_labels: Mapping[str, str] = (ns_labels.get(pod.namespace) if ns_labels
                                        else None) or {}
    hard_weight = hard_pod_affinity_weight

    topology_score: dict[str, dict[str, int]] = {}

    def add(key: str, value: str, amount: int) -> None:
        by_value = topology_score.get(key)
        if by_value is None:
            by_value = topology_score[key] = {}
        by_value[value] = by_value.get(value, 0) + amount

    if has_constraints:
        # The incoming pod's preferred terms against every pod of every node.
        affinity = resolve_weighted_namespaces(terms.preferred_affinity, ns_labels)
        anti = resolve_weighted_namespaces(terms.preferred_anti_affinity, ns_labels)
        totals = existing_terms(state, all_nodes).totals(
            ("score", affinity, anti), 1, _preferred_scorer(affinity, anti))
        for (key, value), amount in totals.sums[0].items():
            add(key, value, amount)

    # Existing pods' terms that select the incoming pod: required affinity at
    # hardPodAffinityWeight, preferred at their weight (negative for anti-affinity).
    for (kind, weight, term), pairs in existing_terms(state, all_nodes).score.items():
        if kind == REQUIRED:
            if hard_weight <= 0:
                continue
            weight = hard_weight
        if term.matches(pod, own_ns_labels):
            for (key, value), n in pairs.items():
                add(key, value, weight * n)

    if not topology_score:
        return Status.skip()
    state.write(_PRE_SCORE_KEY, _PreScoreState(topology_score))
    return None


def score(state: CycleState, node: NodeInfo) -> int:
    """The plugin's Score: PreScore's sums for the node's topology values."""
    s: _PreScoreState = state.read(_PRE_SCORE_KEY)
    labels = node.node.labels
    total = 0
    for key, by_value in s.topology_score.items():
        value = labels.get(key)
        if value is not None:
            total += by_value.get(value, 0)
    return total


def normalize_score(state: CycleState, scores: list[int]) -> None:
    """The plugin's NormalizeScore: min-max scaling of `scores` in place to 0..100."""
    s: _PreScoreState = state.read(_PRE_SCORE_KEY)
    if not s.topology_score or not scores:
        return
    lo = min(scores)
    spread = max(scores) - lo
    for i, raw in enumerate(scores):
        # Same float arithmetic as upstream, truncated like Go's int64().
        scores[i] = (int(float(MAX_NODE_SCORE) * (float(raw - lo) / float(spread)))
                     if spread > 0 else 0)


def score_vector(state: CycleState, table: NodeTable, idx: IntArray) -> IntArray:
    """`score` for the nodes `idx` of `table` at once, over label columns."""
    s: _PreScoreState = state.read(_PRE_SCORE_KEY)
    total = np.zeros(idx.size, np.int64)
    for key, by_value in s.topology_score.items():
        codes, vocab = table.label_codes(key)
        # One slot per value plus a last one, 0, that ABSENT (-1) indexes.
        amounts = np.zeros(len(vocab) + 1, np.int64)
        for value, amount in by_value.items():
            code = vocab.get(value)
            if code is not None:
                amounts[code] = amount
        total += amounts[codes[idx]]
    return total


def normalize_vector(state: CycleState, scores: IntArray) -> IntArray:
    """`normalize_score` over a score vector (returned, not changed in place)."""
    s: _PreScoreState = state.read(_PRE_SCORE_KEY)
    if not s.topology_score or scores.size == 0:
        return scores
    lo = int(scores.min())
    spread = int(scores.max()) - lo
    if spread <= 0:
        return np.zeros_like(scores)
    # The same float64 operations in the same order as normalize_score.
    scaled = float(MAX_NODE_SCORE) * ((scores - lo).astype(np.float64) / float(spread))
    return scaled.astype(np.int64)
