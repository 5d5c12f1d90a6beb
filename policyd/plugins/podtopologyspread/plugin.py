"""PodTopologySpread: kube-scheduler's topology spread plugin (v1.36 semantics).

DoNotSchedule constraints filter: PreFilter counts the pods matching each constraint
per topology domain over all nodes, once per pod; Filter then only compares a node's
domain count with the global minimum. ScheduleAnyway constraints (or, for pods without
constraints, the default constraints with a selector built from the pod's Services and
controller) score: fewer matching pods in a node's domains is better.

Counting is the cost: every pod on every node is tested against each selector. The
count per node is memoized in `node.cache` under the node's generation, so pods of one
workload (same selector) only recount nodes whose pods changed since. When the cycle
runs on the engine's NodeTable, counting, Filter and Score are numpy expressions over
columns (topology_spread_vector); the per-node methods stay the reference and give
the same results.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from policyd.framework import MAX_NODE_SCORE
from policyd.framework.cycle_state import CycleState
from policyd.framework.events import NODE, POD, ActionType, ClusterEvent, ClusterEventWithHint
from policyd.framework.status import PluginError, Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import ABSENT, BoolArray, IntArray, NodeTable
from policyd.plugins import names
from policyd.plugins.helper.plugin_args import fits_int
from policyd.plugins.helper.pod_event_hints import spread_after_node_change, spread_after_pod_change
from policyd.plugins.nodeaffinity.node_affinity import pod_node_affinity
from policyd.plugins.podtopologyspread.constraints import (
    DO_NOT_SCHEDULE,
    HOSTNAME_KEY,
    LIST_DEFAULTING,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULTING,
    ZONE_KEY,
    Constraint,
    compile_constraint,
    default_selector,
    pod_constraints,
    qualified_name_problems,
    tolerates_node,
)
from policyd.plugins.podtopologyspread.domain_counts import (
    VectorCache,
    domain_codes,
    domain_sums,
    eligibility,
    keys_present,
)
from policyd.problems import Problem, field_problem

NAME = names.POD_TOPOLOGY_SPREAD
DEFAULT_WEIGHT = 2

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

# Shared, immutable results: Filter returns them without allocating.
_CONSTRAINTS_NOT_MATCH = Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
_NODE_LABEL_NOT_MATCH = Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
_SKIP = Status.skip()

PRE_FILTER_KEY = f"{NAME}/preFilter"
PRE_SCORE_KEY = f"{NAME}/preScore"
_COUNTS_CACHE = f"{NAME}/counts"
_COUNTS_CACHE_LIMIT = 64  # distinct (namespace, selector) pairs remembered per node

# Upstream's systemDefaultConstraints, in its order (hostname first).
SYSTEM_DEFAULT_CONSTRAINTS: tuple[dict[str, Any], ...] = (
    {"topologyKey": HOSTNAME_KEY, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": ZONE_KEY, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

_ARGS_FIELDS = frozenset(("defaultConstraints", "defaultingType", "apiVersion", "kind"))


def count_matching(info: NodeInfo, count_key: str, c: Constraint, namespace: str) -> int:
    """Pods on the node in `namespace`, not terminating, matching c's selector
    (countPodsMatchSelector; an empty selector counts nothing).

    `count_key` is the namespace plus c.count_key; the result is memoized on the node
    record and reused while the NodeInfo's generation is unchanged."""
    # v1.36 short-circuits on labels.Selector.Empty(), which is true for `labelSelector:
    # {}` (match everything), so such a constraint counts no existing pod. Reproduced on
    # purpose; fixed upstream after 1.36 (kubernetes/kubernetes#141339, PR #141340).
    if c.selector.is_empty:
        return 0
    node_cache = info.node.cache
    counts: dict[str, tuple[NodeInfo, int, int]] | None = node_cache.get(_COUNTS_CACHE)
    if counts is None:
        counts = node_cache[_COUNTS_CACHE] = {}
    hit = counts.get(count_key)
    # The NodeInfo itself (not its id, which may be reused) tells whether the entry was
    # made for this node's pods: a Node record can outlive its NodeInfo.
    if hit is not None and hit[0] is info and hit[1] == info.generation:
        return hit[2]
    return _recount(info, c, namespace, counts, count_key)


def _recount(info: NodeInfo, c: Constraint, namespace: str,
             counts: dict[str, tuple[NodeInfo, int, int]], count_key: str) -> int:
    matches = c.selector.matches
    n = 0
    for p in info.pods.values():
        if not p.deleting and p.namespace == namespace and matches(p.labels):
            n += 1
    if len(counts) >= _COUNTS_CACHE_LIMIT:
        counts.clear()
    counts[count_key] = (info, info.generation, n)
    return n


def _accumulate(pod: Pod, constraints: tuple[Constraint, ...], count_keys: tuple[str, ...],
                nodes: Sequence[NodeInfo], require_all: bool, domains: list[dict[str, int]],
                known_domains_only: bool) -> None:
    """Add each node's matching pods to its domain of every constraint, in one pass.

    Nodes lacking a constraint's key are skipped when `require_all`; a constraint skips
    nodes its inclusion policies exclude. With `known_domains_only` (PreScore) only
    domains already in `domains` are counted, and a missing key reads as ""."""
    keys = tuple(c.topology_key for c in constraints)
    affinity = pod_node_affinity(pod)
    # nodeSelector and required node affinity (upstream's GetRequiredNodeAffinity).
    affinity_trivial = not affinity.selector and affinity.required is None
    needs_affinity = tuple(c.honor_node_affinity and not affinity_trivial for c in constraints)
    needs_taints = tuple(c.honor_node_taints for c in constraints)
    policy_free = not any(needs_affinity) and not any(needs_taints)
    all_indices = tuple(range(len(constraints)))
    empty = tuple(c.selector.is_empty for c in constraints)
    ns = pod.namespace
    eligible = all_indices
    for info in nodes:
        node = info.node
        labels = node.labels
        # A node lacking any constraint's key counts for none of them.
        if require_all and not all(map(labels.__contains__, keys)):
            continue
        if not policy_free:
            affinity_ok = affinity_trivial or affinity.matches(labels, node.name)
            taints_ok = not node.taints or tolerates_node(pod, node)
            eligible = tuple(i for i in all_indices
                             if (affinity_ok or not needs_affinity[i])
                             and (taints_ok or not needs_taints[i]))
        counts: dict[str, tuple[NodeInfo, int, int]] | None = node.cache.get(_COUNTS_CACHE)
        if counts is None:
            counts = node.cache[_COUNTS_CACHE] = {}
        generation = info.generation
        for i in eligible:
            d = domains[i]
            value = labels.get(keys[i], "")
            if known_domains_only:
                if value not in d:
                    continue
            elif value not in d:
                d[value] = 0
            if empty[i]:
                continue
            count_key = count_keys[i]
            hit = counts.get(count_key)
            if hit is not None and hit[0] is info and hit[1] == generation:
                d[value] += hit[2]
            else:
                d[value] += _recount(info, constraints[i], ns, counts, count_key)


@dataclass(slots=True)
class _VectorCheck:
    key: str
    sums: IntArray  # matching pods per label code, plus a trailing 0 for absent labels
    limit: int
    vocab: dict[str, int]
    present: BoolArray  # codes holding an eligible node


_MAX_INT32 = 2**31 - 1


class _CriticalPaths:
    """upstream's criticalPaths: the two topology values with the fewest matching pods.
    Exact when built from PreFilter's counts; after AddPod/RemovePod it is upstream's
    approximation (its CAVEAT: two paths suffice for pods removed from one node),
    reproduced as is, since Filter's global minimum is read from it."""

    __slots__ = ("nums", "values")

    def __init__(self, values: list[str], nums: list[int]) -> None:
        self.values = values
        self.nums = nums

    @classmethod
    def of(cls, domains: Mapping[str, int]) -> _CriticalPaths:
        paths = cls(["", ""], [_MAX_INT32, _MAX_INT32])
        for value, num in domains.items():
            paths.update(value, num)
        return paths

    def clone(self) -> _CriticalPaths:
        return _CriticalPaths(list(self.values), list(self.nums))

    def update(self, value: str, num: int) -> None:
        values, nums = self.values, self.nums
        i = 0 if value == values[0] else 1 if value == values[1] else -1
        if i >= 0:
            nums[i] = num
            if nums[0] > nums[1]:
                values.reverse()
                nums.reverse()
        elif num < nums[0]:
            values[1], nums[1] = values[0], nums[0]
            values[0], nums[0] = value, num
        elif num < nums[1]:
            values[1], nums[1] = value, num


@dataclass(slots=True)
class _PreFilterState:
    # Per DoNotSchedule constraint: (topology key, domain value -> matching pods, the
    # highest count a domain may hold for the pod to still fit there). Built from
    # `vector` on first use when PreFilter ran on the NodeTable.
    checks: list[tuple[str, dict[str, int], int]] | None
    vector: list[_VectorCheck] | None = None
    table: NodeTable | None = None
    # For AddPod/RemovePod: the incoming pod and its DoNotSchedule constraints (aligned
    # with `checks`), and their critical paths, built on the first update.
    pod: Pod | None = None
    constraints: tuple[Constraint, ...] = ()
    paths: list[_CriticalPaths] | None = None

    def python_checks(self) -> list[tuple[str, dict[str, int], int]]:
        if self.checks is None:
            self.checks = [
                (v.key, {value: int(v.sums[code]) for value, code in v.vocab.items()
                         if v.present[code]}, v.limit)
                for v in self.vector or ()]
        return self.checks

    def clone(self) -> _PreFilterState:
        """Upstream's preFilterState.Clone: the counts and paths copied."""
        checks = (None if self.checks is None
                  else [(key, dict(domains), limit) for key, domains, limit in self.checks])
        paths = None if self.paths is None else [p.clone() for p in self.paths]
        return _PreFilterState(checks, self.vector, self.table, self.pod, self.constraints,
                               paths)

    def update_with_pod(self, other: Pod, info: NodeInfo, sign: int) -> None:
        """updateWithPod: `other` counted (1) or no longer counted (-1) on `info`'s
        node. As upstream, and unlike PreFilter's count, a terminating pod counts here
        and an empty selector (`{}`) matches: kube-scheduler v1.36 does exactly that."""
        pod = self.pod
        node = info.node
        labels = node.labels
        if (pod is None or other.namespace != pod.namespace
                or not all(c.topology_key in labels for c in self.constraints)):
            return
        checks = self.python_checks()
        if self.paths is None:
            self.paths = [_CriticalPaths.of(domains) for _, domains, _ in checks]
        affinity = pod_node_affinity(pod)
        affinity_ok: bool | None = None
        for i, c in enumerate(self.constraints):
            if not c.selector.matches(other.labels):
                continue
            if c.honor_node_affinity and (affinity.selector or affinity.required is not None):
                if affinity_ok is None:
                    affinity_ok = affinity.matches(labels, node.name)
                if not affinity_ok:
                    continue
            if c.honor_node_taints and node.taints and not tolerates_node(pod, node):
                continue
            key, domains, _ = checks[i]
            value = labels[c.topology_key]
            n = domains[value] = domains.get(value, 0) + sign
            paths = self.paths[i]
            paths.update(value, n)
            # minMatchNum: 0 while fewer eligible domains than minDomains.
            global_min = 0 if len(domains) < c.min_domains else paths.nums[0]
            self_match = 1 if c.selector.matches(pod.labels) else 0
            checks[i] = (key, domains, c.max_skew + global_min - self_match)


@dataclass(slots=True)
class _PreScoreState:
    constraints: tuple[Constraint, ...]
    count_keys: tuple[str, ...]
    ignored: set[str]  # candidate nodes lacking a topology key: scored 0
    domain_counts: list[dict[str, int]]  # per constraint (empty for hostname ones)
    weights: list[float]  # topologyNormalizingWeight per constraint
    namespace: str


@dataclass(slots=True)
class _ScoreCycle:
    """PreScore's inputs; the per-node state is built on first use when the cycle runs
    on the NodeTable (Score then goes through `score_vector`)."""

    pod: Pod
    constraints: tuple[Constraint, ...]
    count_keys: tuple[str, ...]
    require_all: bool
    nodes: Sequence[NodeInfo]
    all_nodes: Sequence[NodeInfo]
    table: NodeTable | None
    state: _PreScoreState | None = None
    vector_ignored: BoolArray | None = None

    def python(self) -> _PreScoreState:
        if self.state is None:
            self.state = _python_pre_score(self)
        return self.state


def _python_pre_score(cyc: _ScoreCycle) -> _PreScoreState:
    constraints, nodes = cyc.constraints, cyc.nodes
    keys = tuple(c.topology_key for c in constraints)
    indexed = tuple(enumerate(constraints))
    ignored: set[str] = set()
    domain_counts: list[dict[str, int]] = [{} for _ in constraints]
    for info in nodes:
        labels = info.node.labels
        if cyc.require_all and not all(map(labels.__contains__, keys)):
            ignored.add(info.node.name)
            continue
        for i, c in indexed:
            # Hostname counts are taken per node in Score.
            if not c.is_hostname:
                domain_counts[i].setdefault(labels.get(c.topology_key, ""), 0)
    candidates = len(nodes) - len(ignored)
    weights = [topology_normalizing_weight(candidates if c.is_hostname
                                           else len(domain_counts[i]))
               for i, c in indexed]
    if any(domain_counts):
        _accumulate(cyc.pod, constraints, cyc.count_keys, cyc.all_nodes, cyc.require_all,
                    domain_counts, known_domains_only=True)
    return _PreScoreState(constraints, cyc.count_keys, ignored, domain_counts, weights,
                          cyc.pod.namespace)


def _update_with_pod(state: CycleState, other: Pod, node: NodeInfo, sign: int
                     ) -> Status | None:
    s: _PreFilterState | None = state.get(PRE_FILTER_KEY)
    if s is None:
        return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
    s.update_with_pod(other, node, sign)
    return None


def topology_normalizing_weight(size: int) -> float:
    """log(size + 2): keeps counts of many-domain topologies from drowning small ones."""
    return math.log(size + 2)


def _table_of(state: CycleState) -> NodeTable | None:
    """The NodeTable when this cycle runs on it (the engine's fast path)."""
    table = state.table
    # Its rows must be exactly the nodes this cycle counts over.
    if table is not None and table.infos is state.all_nodes:
        return table
    return None


class PodTopologySpread:
    name = NAME

    def __init__(self, default_constraints: tuple[Constraint, ...], system_defaulted: bool
                 ) -> None:
        self.default_constraints = default_constraints
        self.system_defaulted = system_defaulted
        self._default_hard = tuple(c for c in default_constraints if c.action == DO_NOT_SCHEDULE)
        self._default_soft = tuple(c for c in default_constraints if c.action == SCHEDULE_ANYWAY)
        self._vector = VectorCache()

    def _constraints(self, state: CycleState, pod: Pod, hard: bool
                     ) -> tuple[Constraint, ...] | Status:
        own = pod_constraints(pod)
        if isinstance(own, Status):
            return own
        if pod.topology_spread_constraints:
            return own[0] if hard else own[1]
        defaults = self._default_hard if hard else self._default_soft
        if not defaults:
            return ()
        workloads = state.cluster.workloads if state.cluster is not None else None
        selector = default_selector(pod, workloads)
        if selector.is_empty:
            return ()
        return tuple(c.with_selector(selector) for c in defaults)

    def _counts(self, table: NodeTable, count_key: str, c: Constraint, namespace: str
                ) -> IntArray:
        """Matching pods per table row (zeros for an empty selector)."""
        if c.selector.is_empty:
            return np.zeros(len(table.infos), np.int64)
        return self._vector.counts(table, count_key, c, namespace, count_matching)

    # --- PreFilter / Filter ----------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        constraints = self._constraints(state, pod, hard=True)
        if isinstance(constraints, Status):
            return None, constraints
        if not constraints:
            # Also invalidates a stale state from an earlier cycle of the same CycleState.
            state.write(PRE_FILTER_KEY, _PreFilterState([]))
            return None, _SKIP
        count_keys = tuple(f"{pod.namespace}\x00{c.count_key}" for c in constraints)
        table = _table_of(state)
        if table is not None:
            state.write(PRE_FILTER_KEY, self._pre_filter_vector(
                state, pod, table, constraints, count_keys))
            return None, None
        domains: list[dict[str, int]] = [{} for _ in constraints]
        _accumulate(pod, constraints, count_keys, state.all_nodes or nodes, True, domains,
                    known_domains_only=False)
        checks: list[tuple[str, dict[str, int], int]] = []
        for c, d in zip(constraints, domains, strict=True):
            # Fewer eligible domains than minDomains: the global minimum is taken as 0.
            global_min = 0 if len(d) < c.min_domains else min(d.values())
            self_match = 1 if c.selector.matches(pod.labels) else 0
            checks.append((c.topology_key, d, c.max_skew + global_min - self_match))
        state.write(PRE_FILTER_KEY, _PreFilterState(checks, pod=pod, constraints=constraints))
        return None, None

    def _pre_filter_vector(self, state: CycleState, pod: Pod, table: NodeTable,
                           constraints: tuple[Constraint, ...], count_keys: tuple[str, ...]
                           ) -> _PreFilterState:
        masks = eligibility(self._vector, table, pod, constraints, require_all=True)
        checks = []
        for c, count_key, mask in zip(constraints, count_keys, masks, strict=True):
            codes, vocab = table.label_codes(c.topology_key)
            counts = self._counts(table, count_key, c, pod.namespace)
            # Eligible rows have every key, so their codes are never ABSENT.
            sums, present = domain_sums(codes, mask, counts, len(vocab))
            domains = int(present.sum())
            global_min = 0 if domains < c.min_domains else int(sums[present].min())
            self_match = 1 if c.selector.matches(pod.labels) else 0
            checks.append(_VectorCheck(c.topology_key, np.append(sums, 0),
                                       c.max_skew + global_min - self_match, vocab, present))
        return _PreFilterState(None, checks, table, pod, constraints)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        s: _PreFilterState = state.read(PRE_FILTER_KEY)
        labels = node.node.labels
        for key, domains, limit in s.python_checks():
            value = labels.get(key)
            if value is None:
                return _NODE_LABEL_NOT_MATCH
            # skew = matching in the domain + self - global minimum, must be <= maxSkew
            if domains.get(value, 0) > limit:
                return _CONSTRAINTS_NOT_MATCH
        return None

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
                    ) -> BoolArray | None:
        s: _PreFilterState | None = state.get(PRE_FILTER_KEY)
        if s is None or s.vector is None or s.table is not table:
            return None
        passes = np.ones(idx.size, np.bool_)
        for check in s.vector:
            codes = table.label_codes(check.key)[0][idx]
            # ABSENT (-1) indexes the trailing 0; the key test rejects those rows anyway.
            passes &= (codes != ABSENT) & (check.sums[codes] <= check.limit)
        return passes

    # --- PreFilterExtensions (upstream filtering.go AddPod/RemovePod) ------------------

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node: NodeInfo
                ) -> Status | None:
        return _update_with_pod(state, pod_to_add, node, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node: NodeInfo
                   ) -> Status | None:
        return _update_with_pod(state, pod_to_remove, node, -1)

    # --- PreScore / Score / NormalizeScore ---------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        all_nodes = state.all_nodes or nodes
        if not all_nodes:
            return _SKIP
        constraints = self._constraints(state, pod, hard=False)
        if isinstance(constraints, Status):
            return constraints
        if not constraints:
            return _SKIP
        # Only the system defaults tolerate nodes missing a key (e.g. no zone label):
        # such nodes still get hostname spreading.
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        count_keys = tuple(f"{pod.namespace}\x00{c.count_key}" for c in constraints)
        table = _table_of(state)
        cyc = _ScoreCycle(pod, constraints, count_keys, require_all, nodes, all_nodes, table)
        if table is None:
            cyc.python()
        state.write(PRE_SCORE_KEY, cyc)
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        cyc: _ScoreCycle = state.read(PRE_SCORE_KEY)
        s = cyc.python()
        if node.node.name in s.ignored:
            return 0
        labels = node.node.labels
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.is_hostname:
                count = count_matching(node, s.count_keys[i], c, s.namespace)
            else:
                count = s.domain_counts[i].get(value, 0)
            # maxSkew - 1 waters differences down: a larger maxSkew tolerates more skew.
            total += count * s.weights[i] + (c.max_skew - 1)
        # Go's math.Round: halves away from zero (the total is never negative).
        return math.floor(total + 0.5)

    def score_vector(self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
                     ) -> IntArray | None:
        cyc: _ScoreCycle | None = state.get(PRE_SCORE_KEY)
        if cyc is None or cyc.table is not table:
            return None
        constraints = cyc.constraints
        if cyc.require_all:
            ignored = ~keys_present(table, [c.topology_key for c in constraints])[idx]
        else:
            ignored = np.zeros(idx.size, np.bool_)
        candidates = idx[~ignored]
        masks = eligibility(self._vector, table, pod, constraints, cyc.require_all)
        # Same float operations in the same order as `score`, so totals are identical.
        total = np.zeros(idx.size, np.float64)
        for c, count_key, mask in zip(constraints, cyc.count_keys, masks, strict=True):
            counts = self._counts(table, count_key, c, pod.namespace)
            if c.is_hostname:
                weight = topology_normalizing_weight(int(candidates.size))
                count = counts[idx]
            else:
                codes, vocab = domain_codes(table, c.topology_key)
                size = len(vocab) + 1
                candidate_domains = np.zeros(size, np.bool_)
                candidate_domains[codes[candidates]] = True
                weight = topology_normalizing_weight(int(candidate_domains.sum()))
                sums, _ = domain_sums(codes, mask, counts, size)
                count = sums[codes[idx]]
            has_key = table.label_codes(c.topology_key)[0][idx] != ABSENT
            total += np.where(has_key, count * weight + (c.max_skew - 1), 0.0)
        scores = np.floor(total + 0.5).astype(np.int64)
        scores[ignored] = 0
        cyc.vector_ignored = ignored
        return scores

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> Status | None:
        cyc: _ScoreCycle | None = state.get(PRE_SCORE_KEY)
        if cyc is None:
            return Status.error(f"reading {PRE_SCORE_KEY!r} from cycle state: not found")
        ignored = cyc.python().ignored
        lowest: int | None = None
        highest = 0
        for node, score in zip(nodes, scores, strict=True):
            if node.node.name in ignored:
                continue
            if lowest is None or score < lowest:
                lowest = score
            if score > highest:
                highest = score
        low = lowest or 0
        for i, node in enumerate(nodes):
            if node.node.name in ignored:
                scores[i] = 0
            elif highest == 0:
                scores[i] = MAX_NODE_SCORE
            else:
                # Reversed min-max: the node with the fewest matching pods gets 100.
                scores[i] = MAX_NODE_SCORE * (highest + low - scores[i]) // highest
        return None

    def normalize_vector(self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray,
                         scores: IntArray) -> IntArray:
        cyc: _ScoreCycle = state.read(PRE_SCORE_KEY)
        ignored = cyc.vector_ignored
        if ignored is None or ignored.size != scores.size:
            raise RuntimeError("normalize_vector called without score_vector")
        valid = scores[~ignored]
        low = int(valid.min()) if valid.size else 0
        high = int(valid.max()) if valid.size else 0
        if high <= 0:
            out = np.full(scores.size, MAX_NODE_SCORE, np.int64)
        else:
            out = MAX_NODE_SCORE * (high + low - scores) // high
        out[ignored] = 0
        return out

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        pod_actions = (ActionType.ADD | ActionType.UPDATE_POD_LABEL
                       | ActionType.UPDATE_POD_TOLERATION | ActionType.DELETE)
        node_actions = (ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
                        | ActionType.UPDATE_NODE_TAINT)
        return (ClusterEventWithHint(ClusterEvent(POD, pod_actions), spread_after_pod_change),
                ClusterEventWithHint(ClusterEvent(NODE, node_actions), spread_after_node_change))


# --- args (PodTopologySpreadArgs) --------------------------------------------------------

def _validate_default_constraint(raw: Any, path: str, problems: list[Problem]) -> None:
    """ValidatePodTopologySpreadArgs' per-constraint checks, with upstream's wording."""
    if not isinstance(raw, Mapping):
        problems.append(field_problem(path, "must be an object"))
        return
    max_skew = raw.get("maxSkew")
    if isinstance(max_skew, bool) or not isinstance(max_skew, int):
        problems.append(field_problem(f"{path}.maxSkew", f"Invalid value: "
                         f"{json.dumps(max_skew, default=str)}: must be an integer"))
    elif max_skew <= 0:
        problems.append(field_problem(f"{path}.maxSkew",
                         f"Invalid value: {max_skew}: not in valid range (0, inf)"))
    else:  # maxSkew and minDomains are int32 fields upstream
        fits_int(max_skew, f"{path}.maxSkew", 32, problems)
    min_domains = raw.get("minDomains")
    if isinstance(min_domains, int) and not isinstance(min_domains, bool):
        fits_int(min_domains, f"{path}.minDomains", 32, problems)
    key = raw.get("topologyKey")
    if key is None or key == "":
        problems.append(field_problem(f"{path}.topologyKey", "Required value: can not be empty"))
    elif not isinstance(key, str):
        problems.append(field_problem(f"{path}.topologyKey", f"Invalid value: "
                         f"{json.dumps(key, default=str)}: must be a string"))
    else:
        problems.extend(field_problem(f"{path}.topologyKey", f'Invalid value: "{key}": {msg}')
                        for msg in qualified_name_problems(key))
    action = raw.get("whenUnsatisfiable")
    if action is None or action == "":
        problems.append(field_problem(f"{path}.whenUnsatisfiable",
                                      "Required value: can not be empty"))
    elif action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        problems.append(field_problem(f"{path}.whenUnsatisfiable",
                         f'Unsupported value: {json.dumps(action, default=str)}: supported values: '
                         f'"{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'))
    if raw.get("labelSelector") is not None:
        problems.append(field_problem(f"{path}.labelSelector",
                                      "Forbidden: constraint must not define a "
                         "selector, as they deduced for each pod"))


def new(args: Mapping[str, Any] | None = None) -> PodTopologySpread:
    """Build the plugin from PodTopologySpreadArgs, validated as upstream does:
    defaultingType System (the default) or List; System forbids defaultConstraints;
    each default constraint needs maxSkew > 0, a valid topologyKey, a
    whenUnsatisfiable, no labelSelector, and no repeated {topologyKey, action}."""
    args = {} if args is None else args
    problems: list[Problem] = []
    if not isinstance(args, Mapping):
        raise PluginError(NAME, [field_problem("", "must be an object")])
    problems.extend(field_problem(str(k),
                                  f'unknown field "{k}"') for k in args if k not in _ARGS_FIELDS)
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
    raw_defaults = args.get("defaultConstraints")
    if raw_defaults is None:
        raw_defaults = []
    if not isinstance(raw_defaults, list):
        problems.append(field_problem("defaultConstraints", "must be a list"))
        raw_defaults = []
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        problems.append(field_problem("defaultingType", f"Unsupported value: "
                         f"{json.dumps(defaulting, default=str)}: supported "
                         f'values: "{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"'))
    elif defaulting == SYSTEM_DEFAULTING and raw_defaults:
        problems.append(field_problem("defaultingType",
                                      f'Invalid value: "{SYSTEM_DEFAULTING}": when '
                         ".defaultConstraints are not empty"))
    seen: set[tuple[Any, Any]] = set()
    for i, raw in enumerate(raw_defaults):
        path = f"defaultConstraints[{i}]"
        _validate_default_constraint(raw, path, problems)
        if isinstance(raw, Mapping):
            pair = (raw.get("topologyKey"), raw.get("whenUnsatisfiable"))
            if all(isinstance(x, str) for x in pair):
                if pair in seen:
                    problems.append(field_problem(path,
                                                  f"Duplicate value: \"{{{pair[0]}, {pair[1]}}}\""))
                seen.add(pair)
    compiled: list[Constraint] = []
    if not problems:
        sources = SYSTEM_DEFAULT_CONSTRAINTS if defaulting == SYSTEM_DEFAULTING else raw_defaults
        for i, raw in enumerate(sources):
            # Optional fields upstream does not validate (minDomains, policies) still
            # have to be well-formed for us to use them.
            c = compile_constraint(raw, {}, f"defaultConstraints[{i}]", problems)
            if c is not None:
                compiled.append(c)
    if problems:
        raise PluginError(NAME, problems)
    return PodTopologySpread(tuple(compiled), defaulting == SYSTEM_DEFAULTING)
