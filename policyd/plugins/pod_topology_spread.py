"""PodTopologySpread: kube-scheduler's topology spread plugin (v1.36 semantics).

DoNotSchedule constraints filter: PreFilter counts the pods matching each constraint
per topology domain over all nodes, once per pod; Filter then only compares a node's
domain count with the global minimum. ScheduleAnyway constraints (or, for pods without
constraints, the default constraints with a selector built from the pod's Services and
controller) score: fewer matching pods in a node's domains is better.

Counting is the cost: every pod on every node is tested against each selector. The
count per node is memoized in `node.cache` under the node's generation, so pods of one
workload (same selector) only recount nodes whose pods changed since.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policyd.framework import MAX_NODE_SCORE
from policyd.framework.cycle_state import CycleState
from policyd.framework.status import PluginError, Status
from policyd.model.cluster import NodeInfo
from policyd.model.records import Pod
from policyd.plugins import names
from policyd.plugins.topology_spread_constraints import (
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
    required_node_affinity,
    tolerates_node,
)

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


def count_matching(info: NodeInfo, selector_key: str, c: Constraint, namespace: str) -> int:
    """Pods on the node in `namespace`, not terminating, matching c's selector
    (countPodsMatchSelector; an empty selector counts nothing).

    `selector_key` is the namespace plus c.count_key; the result is memoized on the
    node record and reused while the NodeInfo's generation is unchanged."""
    if c.selector.is_empty:
        return 0
    node_cache = info.node.cache
    counts: dict[str, tuple[NodeInfo, int, int]] | None = node_cache.get(_COUNTS_CACHE)
    if counts is None:
        counts = node_cache[_COUNTS_CACHE] = {}
    hit = counts.get(selector_key)
    generation = info.generation
    # The NodeInfo itself (not its id, which may be reused) tells whether the entry was
    # made for this node's pods: a Node record can outlive its NodeInfo.
    if hit is not None and hit[0] is info and hit[1] == generation:
        return hit[2]
    matches = c.selector.matches
    n = 0
    for p in info.pods.values():
        if not p.deleting and p.namespace == namespace and matches(p.labels):
            n += 1
    if len(counts) >= _COUNTS_CACHE_LIMIT:
        counts.clear()
    counts[selector_key] = (info, generation, n)
    return n


@dataclass(slots=True)
class _PreFilterState:
    # One entry per DoNotSchedule constraint: (topology key, domain value -> matching
    # pods, the highest count a domain may hold for the pod to still fit there).
    checks: list[tuple[str, dict[str, int], int]]


@dataclass(slots=True)
class _PreScoreState:
    constraints: tuple[Constraint, ...]
    count_keys: tuple[str, ...]
    ignored: set[str]  # candidate nodes lacking a topology key: scored 0
    domain_counts: list[dict[str, int]]  # per constraint (empty for hostname ones)
    weights: list[float]  # topologyNormalizingWeight per constraint
    namespace: str


def topology_normalizing_weight(size: int) -> float:
    """log(size + 2): keeps counts of many-domain topologies from drowning small ones."""
    return math.log(size + 2)


class PodTopologySpread:
    name = NAME

    def __init__(self, default_constraints: tuple[Constraint, ...], system_defaulted: bool
                 ) -> None:
        self.default_constraints = default_constraints
        self.system_defaulted = system_defaulted
        self._default_hard = tuple(c for c in default_constraints if c.action == DO_NOT_SCHEDULE)
        self._default_soft = tuple(c for c in default_constraints if c.action == SCHEDULE_ANYWAY)

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
        ns = pod.namespace
        keys = tuple(c.topology_key for c in constraints)
        count_keys = tuple(f"{ns}\x00{c.count_key}" for c in constraints)
        domains: list[dict[str, int]] = [{} for _ in constraints]
        affinity = (required_node_affinity(pod)
                    if any(c.honor_node_affinity for c in constraints) else None)
        indexed = tuple(enumerate(constraints))
        for info in state.all_nodes or nodes:
            node = info.node
            labels = node.labels
            # A node lacking any constraint's key counts for none of them.
            if any(k not in labels for k in keys):
                continue
            affinity_ok: bool | None = None
            taints_ok: bool | None = None
            for i, c in indexed:
                if c.honor_node_affinity and affinity is not None:
                    if affinity_ok is None:
                        affinity_ok = affinity.matches(node)
                    if not affinity_ok:
                        continue
                if c.honor_node_taints:
                    if taints_ok is None:
                        taints_ok = tolerates_node(pod, node)
                    if not taints_ok:
                        continue
                value = labels[c.topology_key]
                d = domains[i]
                d[value] = d.get(value, 0) + count_matching(info, count_keys[i], c, ns)
        checks: list[tuple[str, dict[str, int], int]] = []
        for c, d in zip(constraints, domains, strict=True):
            # Fewer eligible domains than minDomains: the global minimum is taken as 0.
            global_min = 0 if len(d) < c.min_domains else min(d.values())
            self_match = 1 if c.selector.matches(pod.labels) else 0
            checks.append((c.topology_key, d, c.max_skew + global_min - self_match))
        state.write(PRE_FILTER_KEY, _PreFilterState(checks))
        return None, None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        s: _PreFilterState = state.read(PRE_FILTER_KEY)
        labels = node.node.labels
        for key, domains, limit in s.checks:
            value = labels.get(key)
            if value is None:
                return _NODE_LABEL_NOT_MATCH
            # skew = matching in the domain + self - global minimum, must be <= maxSkew
            if domains.get(value, 0) > limit:
                return _CONSTRAINTS_NOT_MATCH
        return None

    def filter_all(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> list[Status | None]:
        s: _PreFilterState = state.read(PRE_FILTER_KEY)
        checks = s.checks
        if not checks:
            return [None] * len(nodes)
        out: list[Status | None] = []
        append = out.append
        for info in nodes:
            labels = info.node.labels
            result: Status | None = None
            for key, domains, limit in checks:
                value = labels.get(key)
                if value is None:
                    result = _NODE_LABEL_NOT_MATCH
                    break
                if domains.get(value, 0) > limit:
                    result = _CONSTRAINTS_NOT_MATCH
                    break
            append(result)
        return out

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
        ns = pod.namespace
        # Only the system defaults tolerate nodes missing a key (e.g. no zone label):
        # such nodes still get hostname spreading.
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        keys = tuple(c.topology_key for c in constraints)
        indexed = tuple(enumerate(constraints))
        ignored: set[str] = set()
        domain_counts: list[dict[str, int]] = [{} for _ in constraints]
        for info in nodes:
            labels = info.node.labels
            if require_all and any(k not in labels for k in keys):
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
        count_keys = tuple(f"{ns}\x00{c.count_key}" for c in constraints)
        if any(domain_counts):
            affinity = (required_node_affinity(pod)
                        if any(c.honor_node_affinity for c in constraints) else None)
            for info in all_nodes:
                node = info.node
                labels = node.labels
                if require_all and any(k not in labels for k in keys):
                    continue
                affinity_ok: bool | None = None
                taints_ok: bool | None = None
                for i, c in indexed:
                    d = domain_counts[i]
                    value = labels.get(c.topology_key, "")
                    # Only domains holding a candidate node matter.
                    if value not in d:
                        continue
                    if c.honor_node_affinity and affinity is not None:
                        if affinity_ok is None:
                            affinity_ok = affinity.matches(node)
                        if not affinity_ok:
                            continue
                    if c.honor_node_taints:
                        if taints_ok is None:
                            taints_ok = tolerates_node(pod, node)
                        if not taints_ok:
                            continue
                    d[value] += count_matching(info, count_keys[i], c, ns)
        state.write(PRE_SCORE_KEY, _PreScoreState(
            constraints, count_keys, ignored, domain_counts, weights, ns))
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        s: _PreScoreState = state.read(PRE_SCORE_KEY)
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

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> Status | None:
        s: _PreScoreState | None = state.get(PRE_SCORE_KEY)
        if s is None:
            return Status.error(f"reading {PRE_SCORE_KEY!r} from cycle state: not found")
        ignored = s.ignored
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


# --- args (PodTopologySpreadArgs) --------------------------------------------------------

def _validate_default_constraint(raw: Any, path: str, problems: list[tuple[str, str]]) -> None:
    """ValidatePodTopologySpreadArgs' per-constraint checks, with upstream's wording."""
    if not isinstance(raw, Mapping):
        problems.append((path, "must be an object"))
        return
    max_skew = raw.get("maxSkew")
    if isinstance(max_skew, bool) or not isinstance(max_skew, int):
        problems.append((f"{path}.maxSkew", f"Invalid value: {max_skew!r}: must be an integer"))
    elif max_skew <= 0:
        problems.append((f"{path}.maxSkew",
                         f"Invalid value: {max_skew}: not in valid range (0, inf)"))
    key = raw.get("topologyKey")
    if key is None or key == "":
        problems.append((f"{path}.topologyKey", "Required value: can not be empty"))
    elif not isinstance(key, str):
        problems.append((f"{path}.topologyKey", f"Invalid value: {key!r}: must be a string"))
    else:
        problems.extend((f"{path}.topologyKey", f'Invalid value: "{key}": {msg}')
                        for msg in qualified_name_problems(key))
    action = raw.get("whenUnsatisfiable")
    if action is None or action == "":
        problems.append((f"{path}.whenUnsatisfiable", "Required value: can not be empty"))
    elif action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        problems.append((f"{path}.whenUnsatisfiable",
                         f'Unsupported value: "{action}": supported values: '
                         f'"{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'))
    if raw.get("labelSelector") is not None:
        problems.append((f"{path}.labelSelector", "Forbidden: constraint must not define a "
                         "selector, as they deduced for each pod"))


def new(args: Mapping[str, Any] | None = None) -> PodTopologySpread:
    """Build the plugin from PodTopologySpreadArgs, validated as upstream does:
    defaultingType System (the default) or List; System forbids defaultConstraints;
    each default constraint needs maxSkew > 0, a valid topologyKey, a
    whenUnsatisfiable, no labelSelector, and no repeated {topologyKey, action}."""
    args = {} if args is None else args
    problems: list[tuple[str, str]] = []
    if not isinstance(args, Mapping):
        raise PluginError(NAME, [("", "must be an object")])
    problems.extend((str(k), f'unknown field "{k}"') for k in args if k not in _ARGS_FIELDS)
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
    raw_defaults = args.get("defaultConstraints")
    if raw_defaults is None:
        raw_defaults = []
    if not isinstance(raw_defaults, list):
        problems.append(("defaultConstraints", "must be a list"))
        raw_defaults = []
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        problems.append(("defaultingType", f'Unsupported value: "{defaulting}": supported '
                         f'values: "{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"'))
    elif defaulting == SYSTEM_DEFAULTING and raw_defaults:
        problems.append(("defaultingType", f'Invalid value: "{SYSTEM_DEFAULTING}": when '
                         ".defaultConstraints are not empty"))
    seen: set[tuple[Any, Any]] = set()
    for i, raw in enumerate(raw_defaults):
        path = f"defaultConstraints[{i}]"
        _validate_default_constraint(raw, path, problems)
        if isinstance(raw, Mapping):
            pair = (raw.get("topologyKey"), raw.get("whenUnsatisfiable"))
            if all(isinstance(x, str) for x in pair):
                if pair in seen:
                    problems.append((path, f"Duplicate value: \"{{{pair[0]}, {pair[1]}}}\""))
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
