"""InterPodAffinity: required pod (anti-)affinity as a filter, preferred as a score.

Reproduces kube-scheduler v1.36's plugin (pkg/scheduler/framework/plugins/
interpodaffinity): PreFilter counts, per (topologyKey, value) pair over every node of
the cluster, (1) existing pods whose required anti-affinity selects the incoming pod,
(2) existing pods matching all of the incoming pod's required affinity terms and (3)
existing pods matching each of its required anti-affinity terms; Filter only looks the
node's labels up in those counts. PreScore sums preferred term weights the same way
(plus existing pods' required affinity at `hardPodAffinityWeight`), Score reads the
sum for the node's topology, NormalizeScore min-max scales to 0..100.

Cost: a pod's terms are compiled once (`pod_affinity_terms`, memoized on the pod). A
per-cluster index aggregates the existing pods' terms per distinct term, and the counts
for a set of incoming terms are aggregated per node and kept between cycles; both are
brought up to date once per cycle by one generation check per node, recomputing only
the nodes that changed (upstream keeps an equivalent memo across cycles). So a cycle
costs that check, one match per distinct existing term, and the work on changed nodes;
a cluster where no pod has pod affinity skips after the check. The index is shared
by every InterPodAffinity instance on a cluster and is not thread-safe: cycles on one
ClusterState must not run concurrently (they cannot anyway: each assumes its pod).

Namespaces: `namespaceSelector` terms read `CycleState.cluster.namespace_labels`. With
no cluster, or no labels known, a non-empty selector selects no namespace (only the
listed `namespaces` count), the empty selector `{}` still selects all of them, and an
existing pod's selector sees the incoming pod's namespace as unlabelled.
"""

from __future__ import annotations

import bisect
import json
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from policyd.framework import MAX_NODE_SCORE, CycleState, PluginError, Status
from policyd.framework.events import NODE, POD, ActionType, ClusterEvent, ClusterEventWithHint
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import ABSENT, BoolArray, IntArray, NodeTable
from policyd.plugins import names
from policyd.plugins.helper.pod_event_hints import (
    affinity_after_node_change,
    affinity_after_pod_change,
)
from policyd.plugins.interpodaffinity.terms import (
    AffinityTerm,
    WeightedAffinityTerm,
    has_pod_affinity,
    pod_affinity_terms,
    resolve_namespaces,
    resolve_weighted_namespaces,
)
from policyd.problems import Problem, field_problem

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
# Incoming term sets whose totals are kept between cycles (least recently used dropped).
# Above the number of distinct term sets a workload cycles through: past it, every pod
# misses and walks every node (at 5000 nodes, bench Mixed's 20 + 50 + 50 + 20 group
# terms thrashed 64 at ~20 ms a pod). A set holds only its contributing nodes' shares.
_TERM_SET_LIMIT = 256
# The change log keeps at least this many entries (and twice the nodes); totals older
# than what it keeps are rebuilt from scratch.
_LOG_MIN = 4096

TopologyPair = tuple[str, str]
# What one node contributes to a set of totals: (bucket, (topologyKey, value), amount).
_Contribution = tuple[tuple[int, TopologyPair, int], ...]


# ---------------------------------------------------------------------------
# The index of existing pods' terms, kept per ClusterState across cycles.


# Keys of the existing pods' terms in the index: what a matching term adds per pod.
_REQUIRED = 0  # required affinity, scored at hardPodAffinityWeight
_PREFERRED = 1  # preferred (anti-)affinity, scored at its (signed) weight
_ScoreKey = tuple[int, int, AffinityTerm]  # (kind, signed weight, term)
# One node's share: ((term key, (topologyKey, value)), pods) for filter and for score.
_NodeShare = tuple[
    tuple[tuple[tuple[AffinityTerm, TopologyPair], int], ...],
    tuple[tuple[tuple[_ScoreKey, TopologyPair], int], ...],
]


def _node_share(info: NodeInfo) -> _NodeShare:
    """What the pods of a node contribute, per term of theirs, to the topology counts."""
    labels = info.node.labels
    anti: dict[tuple[AffinityTerm, TopologyPair], int] = {}
    score: dict[tuple[_ScoreKey, TopologyPair], int] = {}
    if not labels:
        return (), ()  # no topology value for any term: nothing counts here
    for p in info.pods.values():
        if not has_pod_affinity(p):
            continue
        terms = pod_affinity_terms(p)
        for t in terms.required_anti_affinity:
            value = labels.get(t.topology_key)
            if value is not None:
                k1 = (t, (t.topology_key, value))
                anti[k1] = anti.get(k1, 0) + 1
        for t in terms.required_affinity:
            value = labels.get(t.topology_key)
            if value is not None:
                k2 = ((_REQUIRED, 0, t), (t.topology_key, value))
                score[k2] = score.get(k2, 0) + 1
        for sign, weighted in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for w in weighted:
                value = labels.get(w.term.topology_key)
                if value is not None:
                    k2 = ((_PREFERRED, sign * w.weight, w.term), (w.term.topology_key, value))
                    score[k2] = score.get(k2, 0) + 1
    return tuple(anti.items()), tuple(score.items())


class _ExistingTermsIndex:
    """Every existing pod's (anti-)affinity terms with the topology pairs they count on.

    Upstream's snapshot lists the nodes with pods with affinity; this goes one step
    further and aggregates per distinct term, so a cycle matches the incoming pod once
    per distinct term instead of once per pod. It lives as long as its ClusterState and
    is brought up to date once per cycle: one generation check per node, and the share
    of each node that changed since is taken out and recomputed.
    """

    __slots__ = ("anti", "cluster_epoch", "epoch", "log", "log_start", "nodes", "score",
                 "structure_epoch", "term_sets")

    def __init__(self) -> None:
        # node name -> (NodeInfo, Node record, generation, share)
        self.nodes: dict[str, tuple[NodeInfo, Any, int, _NodeShare]] = {}
        self.anti: dict[AffinityTerm, dict[TopologyPair, int]] = {}
        self.score: dict[_ScoreKey, dict[TopologyPair, int]] = {}
        # Every node change bumps the epoch and is logged, so totals kept for incoming
        # term sets catch up by recomputing just the nodes changed since their epoch.
        self.epoch = 0
        self.log: list[tuple[int, str]] = []
        self.log_start = 0  # changes up to this epoch are no longer in the log
        self.term_sets: dict[Any, _TermSetTotals] = {}
        # Where in the ClusterState's change log this index was last brought up to date.
        self.cluster_epoch = -1
        self.structure_epoch = -1

    def refresh(self, all_nodes: Sequence[NodeInfo], cluster: ClusterState | None = None
                ) -> None:
        if cluster is not None:
            changed = (cluster.changes_since(self.cluster_epoch)
                       if cluster.structure_epoch == self.structure_epoch else None)
            self.cluster_epoch = cluster.epoch
            self.structure_epoch = cluster.structure_epoch
            if changed is not None:
                # Only the nodes the cluster says changed: no walk over every node.
                for name in changed:
                    info = cluster.get(name)
                    if info is not None:
                        self._refresh_node(info)
                return
        entries = self.nodes
        for info in all_nodes:
            self._refresh_node(info)
        if len(entries) > len(all_nodes):
            present = {info.node.name for info in all_nodes}
            for name in [n for n in entries if n not in present]:
                self._apply(entries.pop(name)[3], -1)
                self._changed(name)

    def _refresh_node(self, info: NodeInfo) -> None:
        entries = self.nodes
        node = info.node
        entry = entries.get(node.name)
        if (entry is not None and entry[0] is info and entry[1] is node
                and entry[2] == info.generation):
            return
        if entry is not None:
            self._apply(entry[3], -1)
        share = _node_share(info)
        entries[node.name] = (info, node, info.generation, share)
        self._apply(share, 1)
        self._changed(node.name)

    def _apply(self, share: _NodeShare, sign: int) -> None:
        anti_share, score_share = share
        for (term, pair), n in anti_share:
            _bump(self.anti, term, pair, sign * n)
        for (key, pair), n in score_share:
            _bump(self.score, key, pair, sign * n)

    def _changed(self, name: str) -> None:
        self.epoch += 1
        log = self.log
        log.append((self.epoch, name))
        if len(log) > max(_LOG_MIN, 2 * len(self.nodes)):
            half = len(log) // 2
            self.log_start = log[half - 1][0]
            del log[:half]

    def totals(self, key: Any, buckets: int,
               contribution: Callable[[NodeInfo], _Contribution]) -> _TermSetTotals:
        """The totals of `contribution` over all nodes, for the incoming terms `key`."""
        totals = self.term_sets.pop(key, None)
        if totals is None or totals.epoch < self.log_start:
            totals = _TermSetTotals(buckets)
            for name, (info, *_) in self.nodes.items():
                totals.set(name, contribution(info))
        elif totals.epoch < self.epoch:
            start = bisect.bisect_right(self.log, totals.epoch, key=lambda e: e[0])
            for name in {name for _, name in self.log[start:]}:
                current = self.nodes.get(name)
                totals.set(name, contribution(current[0]) if current is not None else ())
        totals.epoch = self.epoch
        if len(self.term_sets) >= _TERM_SET_LIMIT:
            del self.term_sets[next(iter(self.term_sets))]
        self.term_sets[key] = totals  # re-inserted last: most recently used
        return totals


class _TermSetTotals:
    """Per (topologyKey, value) sums of what the nodes contribute, in a few buckets.

    `refs` counts the contributing nodes per pair, so a pair whose amounts cancel out
    still exists while any node contributes it (upstream's Skip tells "some term
    matched" from "nothing matched", whatever the sum)."""

    __slots__ = ("epoch", "refs", "shares", "sums")

    def __init__(self, buckets: int) -> None:
        self.epoch = 0
        self.shares: dict[str, _Contribution] = {}
        self.sums: list[dict[TopologyPair, int]] = [{} for _ in range(buckets)]
        self.refs: list[dict[TopologyPair, int]] = [{} for _ in range(buckets)]

    def set(self, name: str, share: _Contribution) -> None:
        old = self.shares.pop(name, None)
        if old:
            self._apply(old, -1)
        if share:
            self.shares[name] = share
            self._apply(share, 1)

    def _apply(self, share: _Contribution, sign: int) -> None:
        for bucket, pair, amount in share:
            sums, refs = self.sums[bucket], self.refs[bucket]
            n = refs.get(pair, 0) + sign
            if n:
                refs[pair] = n
                sums[pair] = sums.get(pair, 0) + sign * amount
            else:
                del refs[pair]
                del sums[pair]


def _bump(totals: dict[Any, dict[TopologyPair, int]], key: Any, pair: TopologyPair,
          n: int) -> None:
    pairs = totals.get(key)
    if pairs is None:
        pairs = totals[key] = {}
    total = pairs.get(pair, 0) + n
    if total:
        pairs[pair] = total
    else:
        del pairs[pair]
        if not pairs:
            del totals[key]


# One index per ClusterState, dropped with it.
_indexes: weakref.WeakKeyDictionary[Any, _ExistingTermsIndex] = weakref.WeakKeyDictionary()
_INDEX_STATE_KEY = "InterPodAffinity/index"


def _existing_terms(state: CycleState, all_nodes: Sequence[NodeInfo]) -> _ExistingTermsIndex:
    """The index, refreshed once per cycle (PreFilter and PreScore share it)."""
    index: _ExistingTermsIndex | None = state.get(_INDEX_STATE_KEY)
    if index is not None:
        return index
    cluster = state.cluster
    if cluster is None:
        index = _ExistingTermsIndex()  # nothing to keep it alive with: one cycle only
    else:
        index = _indexes.get(cluster)
        if index is None:
            index = _indexes[cluster] = _ExistingTermsIndex()
    index.refresh(all_nodes, cluster)
    state.write(_INDEX_STATE_KEY, index)
    return index


# ---------------------------------------------------------------------------
# Filtering


class _PreFilterState:
    __slots__ = ("affinity_counts", "affinity_terms", "anti_affinity_counts",
                 "anti_affinity_terms", "existing_anti_affinity_counts",
                 "existing_anti_affinity_keys", "matches_itself")

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
        # Upstream looks every label of the node up in the counts; looking up the node's
        # value for each counted topology key (usually one or two) is the same question,
        # as every count here is positive.
        self.existing_anti_affinity_keys = tuple({k for k, _ in existing_anti_affinity_counts})
        # The incoming pod matches all its own required affinity terms: it may be the
        # first of a group that wants to be together (see _filter_node).
        self.matches_itself = matches_itself


_AFFINITY = 0
_ANTI_AFFINITY = 1


def _incoming_counter(
    affinity_terms: tuple[AffinityTerm, ...], anti_terms: tuple[AffinityTerm, ...]
) -> Callable[[NodeInfo], _Contribution]:
    """What a node's pods add to the incoming pod's affinity (bucket 0) and
    anti-affinity (bucket 1) counts.

    Affinity: a pod counts once per term, and only if it matches every term (upstream
    podMatchesAllAffinityTerms). Anti-affinity: each term counts its own matches. The
    incoming terms have their namespaceSelector resolved, so no namespace labels."""

    def count(info: NodeInfo) -> _Contribution:
        labels = info.node.labels
        aff_values = [labels.get(t.topology_key) for t in affinity_terms]
        anti_values = [labels.get(t.topology_key) for t in anti_terms]
        want_aff = any(v is not None for v in aff_values)
        want_anti = any(v is not None for v in anti_values)
        if not (want_aff or want_anti) or not info.pods:
            return ()
        aff_n = 0
        anti_n = [0] * len(anti_terms)
        for p in info.pods.values():
            if want_aff and all(t.matches(p, None) for t in affinity_terms):
                aff_n += 1
            if want_anti:
                for i, t in enumerate(anti_terms):
                    if t.matches(p, None):
                        anti_n[i] += 1
        out: list[tuple[int, TopologyPair, int]] = []
        if aff_n:
            out.extend((_AFFINITY, (t.topology_key, v), aff_n)
                       for t, v in zip(affinity_terms, aff_values, strict=True)
                       if v is not None)
        out.extend((_ANTI_AFFINITY, (t.topology_key, v), n)
                   for t, v, n in zip(anti_terms, anti_values, anti_n, strict=True)
                   if n and v is not None)
        return tuple(out)

    return count


def _existing_anti_affinity_counts(
    pod: Pod, namespace_labels: Mapping[str, str], index: _ExistingTermsIndex
) -> dict[TopologyPair, int]:
    """(1): for each existing pod's required anti-affinity term selecting `pod`, count the
    term's topology pair of the existing pod's node (getExistingAntiAffinityCounts)."""
    counts: dict[TopologyPair, int] = {}
    for term, pairs in index.anti.items():
        if term.matches(pod, namespace_labels):
            for pair, n in pairs.items():
                counts[pair] = counts.get(pair, 0) + n
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
    if s.existing_anti_affinity_keys:
        counts = s.existing_anti_affinity_counts
        for key in s.existing_anti_affinity_keys:
            value = labels.get(key)
            if value is not None and (key, value) in counts:
                return _EXISTING_REJECT
    return None


def _counted(vocab: Mapping[str, int], counts: Mapping[TopologyPair, int],
             key: str) -> BoolArray:
    """A table indexed by label code: True for the values of `key` counted (> 0) in
    `counts`. Its extra last slot (False) is what ABSENT (-1) indexes. One pass over the
    counts and one numpy store: this runs once per pod over every counted pair."""
    get = vocab.get
    codes = [code for (k, value), n in counts.items()
             if n > 0 and k == key and (code := get(value)) is not None]
    table = np.zeros(len(vocab) + 1, np.bool_)
    if codes:
        table[codes] = True
    return table


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
        return tuple((0, pair, amount) for pair, amount in sums.items())

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
        if (not terms.has_required and state.cluster is not None
                and state.cluster.pods_with_affinity == 0):
            return None, Status.skip()  # no terms anywhere: nothing to count
        all_nodes = state.all_nodes or nodes
        ns_labels = _namespace_labels(state)
        own_ns_labels = ns_labels.get(pod.namespace) if ns_labels else None

        index = _existing_terms(state, all_nodes)
        existing = _existing_anti_affinity_counts(pod, own_ns_labels or {}, index)
        if not existing and not terms.has_required:
            return None, Status.skip()

        affinity_terms = resolve_namespaces(terms.required_affinity, ns_labels)
        anti_terms = resolve_namespaces(terms.required_anti_affinity, ns_labels)
        affinity_counts: dict[TopologyPair, int] = {}
        anti_counts: dict[TopologyPair, int] = {}
        if affinity_terms or anti_terms:
            totals = index.totals(("filter", affinity_terms, anti_terms), 2,
                                  _incoming_counter(affinity_terms, anti_terms))
            # Copies: the kept totals must not see what this cycle does with its counts.
            affinity_counts = dict(totals.sums[_AFFINITY])
            anti_counts = dict(totals.sums[_ANTI_AFFINITY])
        matches_itself = bool(affinity_terms) and all(
            t.matches(pod, None) for t in affinity_terms)
        state.write(_PRE_FILTER_KEY, _PreFilterState(
            affinity_terms, anti_terms, affinity_counts, anti_counts, existing,
            matches_itself))
        return None, None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        return _filter_node(state.read(_PRE_FILTER_KEY), node.node.labels)

    def filter_mask(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> BoolArray | None:
        """`filter` over label columns: each check becomes "is the node's value for the
        term's topology key one of the counted values"."""
        s: _PreFilterState = state.read(_PRE_FILTER_KEY)
        passes = np.ones(idx.size, np.bool_)
        if s.affinity_terms:
            has_keys = np.ones(idx.size, np.bool_)
            pods_exist = np.ones(idx.size, np.bool_)
            for t in s.affinity_terms:
                codes, vocab = table.label_codes(t.topology_key)
                node_codes = codes[idx]
                has_keys &= node_codes != ABSENT
                pods_exist &= _counted(vocab, s.affinity_counts, t.topology_key)[node_codes]
            if not (not s.affinity_counts and s.matches_itself):
                has_keys &= pods_exist
            passes &= has_keys
        if s.anti_affinity_counts:
            for t in s.anti_affinity_terms:
                codes, vocab = table.label_codes(t.topology_key)
                passes &= ~_counted(vocab, s.anti_affinity_counts, t.topology_key)[codes[idx]]
        if s.existing_anti_affinity_keys:
            for key in s.existing_anti_affinity_keys:
                codes, vocab = table.label_codes(key)
                passes &= ~_counted(vocab, s.existing_anti_affinity_counts, key)[codes[idx]]
        return passes

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
        if (not has_constraints and state.cluster is not None
                and state.cluster.pods_with_affinity == 0):
            return Status.skip()  # no preferences here and no terms in the cluster
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

        if has_constraints:
            # The incoming pod's preferred terms against every pod of every node.
            affinity = resolve_weighted_namespaces(terms.preferred_affinity, ns_labels)
            anti = resolve_weighted_namespaces(terms.preferred_anti_affinity, ns_labels)
            totals = _existing_terms(state, all_nodes).totals(
                ("score", affinity, anti), 1, _preferred_scorer(affinity, anti))
            for (key, value), amount in totals.sums[0].items():
                add(key, value, amount)

        # Existing pods' terms that select the incoming pod: required affinity at
        # hardPodAffinityWeight, preferred at their weight (negative for anti-affinity).
        for (kind, weight, term), pairs in _existing_terms(state, all_nodes).score.items():
            if kind == _REQUIRED:
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

    def score_vector(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> IntArray | None:
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

    def normalize_vector(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray, scores: IntArray
    ) -> IntArray:
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

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # A peer bound or relabelled into a term, a blocker deleted or relabelled out
        # of one; a node that gains (or changes) a topology key.
        pod_actions = ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
        node_actions = ActionType.ADD | ActionType.UPDATE_NODE_LABEL
        return (ClusterEventWithHint(ClusterEvent(POD, pod_actions), affinity_after_pod_change),
                ClusterEventWithHint(ClusterEvent(NODE, node_actions),
                                     affinity_after_node_change))


def _namespace_labels(state: CycleState) -> Mapping[str, Mapping[str, str]] | None:
    cluster = state.cluster
    return cluster.namespace_labels if cluster is not None else None


def new(args: Mapping[str, Any] | None = None) -> InterPodAffinity:
    """InterPodAffinityArgs: hardPodAffinityWeight (0..100, default 1) and
    ignorePreferredTermsOfExistingPods (default false); unknown fields are errors."""
    args = args or {}
    problems: list[Problem] = []
    if not isinstance(args, Mapping):
        raise PluginError(names.INTER_POD_AFFINITY, [field_problem("", "args must be an object")])
    for key in args:
        if key not in ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"):
            problems.append(field_problem(str(key), "unknown field"))
    weight = args.get("hardPodAffinityWeight")
    if weight is None:
        weight = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    elif isinstance(weight, bool) or not isinstance(weight, int):
        problems.append(field_problem("hardPodAffinityWeight", f"Invalid value: "
                         f"{json.dumps(weight, default=str)}: must be an integer"))
    elif not MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
        problems.append(field_problem("hardPodAffinityWeight",
                         f"Invalid value: {weight}: not in valid range "
                         f"[{MIN_HARD_POD_AFFINITY_WEIGHT}-{MAX_HARD_POD_AFFINITY_WEIGHT}]"))
    ignore = args.get("ignorePreferredTermsOfExistingPods")
    if ignore is None:
        ignore = False
    elif not isinstance(ignore, bool):
        problems.append(field_problem("ignorePreferredTermsOfExistingPods",
                         f"Invalid value: {json.dumps(ignore, default=str)}: must be a boolean"))
    if problems:
        raise PluginError(names.INTER_POD_AFFINITY, problems)
    return InterPodAffinity(weight, ignore)
