"""InterPodAffinity's PreFilter and Filter (upstream filtering.go): PreFilter counts,
per (topologyKey, value) pair over every node of the cluster, (1) existing pods whose
required anti-affinity selects the incoming pod, (2) existing pods matching all of the
incoming pod's required affinity terms and (3) existing pods matching each of its
required anti-affinity terms; Filter only looks the node's labels up in those counts,
one node at a time or over the label columns of many."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from policyd.framework import CycleState, Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import ABSENT, BoolArray, IntArray, NodeTable
from policyd.plugins.interpodaffinity.index import (
    Contribution,
    ExistingTermsIndex,
    TopologyPair,
    existing_terms,
    namespace_labels,
)
from policyd.plugins.interpodaffinity.terms import (
    AffinityTerm,
    pod_affinity_terms,
    resolve_namespaces,
)

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules")
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

# Upstream codes: affinity cannot be fixed by preempting pods (UnschedulableAndUnresolvable),
# anti-affinity can (Unschedulable).
_AFFINITY_REJECT = Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
_ANTI_AFFINITY_REJECT = Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
_EXISTING_REJECT = Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)

PRE_FILTER_KEY = "InterPodAffinity/preFilter"


class PreFilterState:
    __slots__ = ("affinity_counts", "affinity_terms", "anti_affinity_counts",
                 "anti_affinity_terms", "existing_anti_affinity_counts",
                 "existing_anti_affinity_keys", "matches_itself", "namespace_labels", "pod",
                 "selects_pod")

    def __init__(
        self,
        affinity_terms: tuple[AffinityTerm, ...],
        anti_affinity_terms: tuple[AffinityTerm, ...],
        affinity_counts: dict[TopologyPair, int],
        anti_affinity_counts: dict[TopologyPair, int],
        existing_anti_affinity_counts: dict[TopologyPair, int],
        matches_itself: bool,
        pod: Pod,
        namespace_labels: Mapping[str, str],
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
        # first of a group that wants to be together (see filter_node).
        self.matches_itself = matches_itself
        # The incoming pod and its namespace's labels, which an added or removed pod's
        # own anti-affinity terms are matched against (AddPod/RemovePod).
        self.pod = pod
        self.namespace_labels = namespace_labels
        # Existing pods' anti-affinity term -> whether it selects the incoming pod: the
        # same answer for every dry run, so shared by the clones.
        self.selects_pod: dict[AffinityTerm, bool] = {}

    def clone(self) -> PreFilterState:
        """Upstream's preFilterState.Clone: the three counts copied, the rest shared."""
        out = PreFilterState(
            self.affinity_terms, self.anti_affinity_terms, dict(self.affinity_counts),
            dict(self.anti_affinity_counts), dict(self.existing_anti_affinity_counts),
            self.matches_itself, self.pod, self.namespace_labels)
        out.selects_pod = self.selects_pod
        return out

    def update_with_pod(self, other: Pod, node_labels: Mapping[str, str], sign: int
                        ) -> None:
        """updateWithPod: `other` counted (sign 1) or no longer counted (-1) on a node
        with `node_labels`, in each of the three counts; a pair whose count comes
        to 0 is dropped, as upstream deletes it (Filter tells "no pair" apart)."""
        existing = self.existing_anti_affinity_counts
        memo = self.selects_pod
        pairs_changed = False
        for t in pod_affinity_terms(other).required_anti_affinity:
            selects = memo.get(t)
            if selects is None:
                selects = memo[t] = t.matches(self.pod, self.namespace_labels)
            if selects:
                pairs_changed |= _update(existing, node_labels, t.topology_key, sign)
        if pairs_changed:  # a pair came or went: the keys Filter looks up may have too
            self.existing_anti_affinity_keys = tuple({k: None for k, _ in existing})
        # podMatchesAllAffinityTerms: false without terms. The incoming pod's terms
        # have their namespaceSelector resolved: no namespace labels needed.
        if self.affinity_terms and all(t.matches(other, None) for t in self.affinity_terms):
            for t in self.affinity_terms:
                _update(self.affinity_counts, node_labels, t.topology_key, sign)
        for t in self.anti_affinity_terms:
            if t.matches(other, None):
                _update(self.anti_affinity_counts, node_labels, t.topology_key, sign)


def _update(counts: dict[TopologyPair, int], node_labels: Mapping[str, str], key: str,
            sign: int) -> bool:
    """topologyToMatchedTermCount.update: only on a node with the topology key. Whether
    a pair was added or dropped."""
    value = node_labels.get(key)
    if value is None:
        return False
    pair = (key, value)
    before = counts.get(pair, 0)
    n = before + sign
    if n:
        counts[pair] = n
        return before == 0
    counts.pop(pair, None)
    return True


def update_with_pod(state: CycleState, other: Pod, node: NodeInfo, sign: int
                    ) -> Status | None:
    """The plugin's AddPod (sign 1) and RemovePod (-1) on the cycle's state."""
    s: PreFilterState | None = state.get(PRE_FILTER_KEY)
    if s is None:
        return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
    s.update_with_pod(other, node.node.labels, sign)
    return None


_AFFINITY = 0
_ANTI_AFFINITY = 1


def _incoming_counter(
    affinity_terms: tuple[AffinityTerm, ...], anti_terms: tuple[AffinityTerm, ...]
) -> Callable[[NodeInfo], Contribution]:
    """What a node's pods add to the incoming pod's affinity (bucket 0) and
    anti-affinity (bucket 1) counts.

    Affinity: a pod counts once per term, and only if it matches every term (upstream
    podMatchesAllAffinityTerms). Anti-affinity: each term counts its own matches. The
    incoming terms have their namespaceSelector resolved, so no namespace labels."""

    def count(info: NodeInfo) -> Contribution:
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
    pod: Pod, namespace_labels: Mapping[str, str], index: ExistingTermsIndex
) -> dict[TopologyPair, int]:
    """(1): for each existing pod's required anti-affinity term selecting `pod`, count the
    term's topology pair of the existing pod's node (getExistingAntiAffinityCounts)."""
    counts: dict[TopologyPair, int] = {}
    for term, pairs in index.anti.items():
        if term.matches(pod, namespace_labels):
            for pair, n in pairs.items():
                counts[pair] = counts.get(pair, 0) + n
    return counts


def filter_node(s: PreFilterState, labels: Mapping[str, str]) -> Status | None:
    """The plugin's Filter for a node with `labels`, from PreFilter's state `s`
    (read by the plugin itself: this runs once per node, one call deep)."""
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


def pre_filter(state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
               ) -> tuple[set[str] | None, Status | None]:
    """The plugin's PreFilter: the counts Filter reads, written to `state`."""
    terms = pod_affinity_terms(pod)
    if terms.errors:
        return None, Status.unresolvable("parsing pod: " + "; ".join(terms.errors))
    if (not terms.has_required and state.cluster is not None
            and state.cluster.pods_with_affinity == 0):
        return None, Status.skip()  # no terms anywhere: nothing to count
    all_nodes = state.all_nodes or nodes
    ns_labels = namespace_labels(state)
    own_ns_labels = ns_labels.get(pod.namespace) if ns_labels else None

    index = existing_terms(state, all_nodes)
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
    state.write(PRE_FILTER_KEY, PreFilterState(
        affinity_terms, anti_terms, affinity_counts, anti_counts, existing,
        matches_itself, pod, own_ns_labels or {}))
    return None, None


def filter_mask(state: CycleState, table: NodeTable, idx: IntArray) -> BoolArray:
    """`filter_node` over label columns: each check becomes "is the node's value for
    the term's topology key one of the counted values"."""
    s: PreFilterState = state.read(PRE_FILTER_KEY)
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
