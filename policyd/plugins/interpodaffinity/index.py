"""InterPodAffinity's index of the existing pods' (anti-)affinity terms, kept per
ClusterState across cycles and brought up to date once per cycle; PreFilter and
PreScore both read it (see the package's `plugin.py` for what it costs)."""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from policyd.framework import CycleState
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.plugins.interpodaffinity.terms import (
    AffinityTerm,
    has_pod_affinity,
    pod_affinity_terms,
)

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
Contribution = tuple[tuple[int, TopologyPair, int], ...]


# Keys of the existing pods' terms in the index: what a matching term adds per pod.
REQUIRED = 0  # required affinity, scored at hardPodAffinityWeight
PREFERRED = 1  # preferred (anti-)affinity, scored at its (signed) weight
ScoreKey = tuple[int, int, AffinityTerm]  # (kind, signed weight, term)
# One node's share: ((term key, (topologyKey, value)), pods) for filter and for score.
_NodeShare = tuple[
    tuple[tuple[tuple[AffinityTerm, TopologyPair], int], ...],
    tuple[tuple[tuple[ScoreKey, TopologyPair], int], ...],
]


def _node_share(info: NodeInfo) -> _NodeShare:
    """What the pods of a node contribute, per term of theirs, to the topology counts."""
    labels = info.node.labels
    anti: dict[tuple[AffinityTerm, TopologyPair], int] = {}
    score: dict[tuple[ScoreKey, TopologyPair], int] = {}
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
                k2 = ((REQUIRED, 0, t), (t.topology_key, value))
                score[k2] = score.get(k2, 0) + 1
        for sign, weighted in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for w in weighted:
                value = labels.get(w.term.topology_key)
                if value is not None:
                    k2 = ((PREFERRED, sign * w.weight, w.term), (w.term.topology_key, value))
                    score[k2] = score.get(k2, 0) + 1
    return tuple(anti.items()), tuple(score.items())


class ExistingTermsIndex:
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
        self.score: dict[ScoreKey, dict[TopologyPair, int]] = {}
        # Every node change bumps the epoch and is logged, so totals kept for incoming
        # term sets catch up by recomputing just the nodes changed since their epoch.
        self.epoch = 0
        self.log: list[tuple[int, str]] = []
        self.log_start = 0  # changes up to this epoch are no longer in the log
        self.term_sets: dict[Any, TermSetTotals] = {}
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
               contribution: Callable[[NodeInfo], Contribution]) -> TermSetTotals:
        """The totals of `contribution` over all nodes, for the incoming terms `key`."""
        totals = self.term_sets.pop(key, None)
        if totals is None or totals.epoch < self.log_start:
            totals = TermSetTotals(buckets)
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


class TermSetTotals:
    """Per (topologyKey, value) sums of what the nodes contribute, in a few buckets.

    `refs` counts the contributing nodes per pair, so a pair whose amounts cancel out
    still exists while any node contributes it (upstream's Skip tells "some term
    matched" from "nothing matched", whatever the sum)."""

    __slots__ = ("epoch", "refs", "shares", "sums")

    def __init__(self, buckets: int) -> None:
        self.epoch = 0
        self.shares: dict[str, Contribution] = {}
        self.sums: list[dict[TopologyPair, int]] = [{} for _ in range(buckets)]
        self.refs: list[dict[TopologyPair, int]] = [{} for _ in range(buckets)]

    def set(self, name: str, share: Contribution) -> None:
        old = self.shares.pop(name, None)
        if old:
            self._apply(old, -1)
        if share:
            self.shares[name] = share
            self._apply(share, 1)

    def _apply(self, share: Contribution, sign: int) -> None:
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
_indexes: weakref.WeakKeyDictionary[Any, ExistingTermsIndex] = weakref.WeakKeyDictionary()
_INDEX_STATE_KEY = "InterPodAffinity/index"


def existing_terms(state: CycleState, all_nodes: Sequence[NodeInfo]) -> ExistingTermsIndex:
    """The index, refreshed once per cycle (PreFilter and PreScore share it)."""
    index: ExistingTermsIndex | None = state.get(_INDEX_STATE_KEY)
    if index is not None:
        return index
    cluster = state.cluster
    if cluster is None:
        index = ExistingTermsIndex()  # nothing to keep it alive with: one cycle only
    else:
        index = _indexes.get(cluster)
        if index is None:
            index = _indexes[cluster] = ExistingTermsIndex()
    index.refresh(all_nodes, cluster)
    state.write(_INDEX_STATE_KEY, index)
    return index


def namespace_labels(state: CycleState) -> Mapping[str, Mapping[str, str]] | None:
    cluster = state.cluster
    return cluster.namespace_labels if cluster is not None else None
