"""InterPodAffinity: required pod (anti-)affinity as a filter, preferred as a score.

This module is the plugin itself (its args, its extension points, its events); the
work is split as upstream splits it: `filtering.py` (PreFilter, Filter), `scoring.py`
(PreScore, Score, NormalizeScore), and `index.py`, the existing pods' terms both read.

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

import json
from collections.abc import Mapping, Sequence
from typing import Any

from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import NODE, POD, ActionType, ClusterEvent, ClusterEventWithHint
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import BoolArray, IntArray, NodeTable
from policyd.plugins import names
from policyd.plugins.helper.pod_event_hints import (
    affinity_after_node_change,
    affinity_after_pod_change,
)
from policyd.plugins.interpodaffinity import filtering, scoring
from policyd.plugins.interpodaffinity.filtering import PRE_FILTER_KEY, filter_node
from policyd.problems import Problem, field_problem

DEFAULT_WEIGHT: int | None = 2

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100


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
        return filtering.pre_filter(state, pod, nodes)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        # Once per node (the FitError's reasons too): the state is read here, so the
        # check is one call deep, as it was before the split.
        return filter_node(state.read(PRE_FILTER_KEY), node.node.labels)

    def filter_mask(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> BoolArray | None:
        return filtering.filter_mask(state, table, idx)

    # PreFilterExtensions (upstream filtering.go AddPod/RemovePod)

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node: NodeInfo
                ) -> Status | None:
        return filtering.update_with_pod(state, pod_to_add, node, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node: NodeInfo
                   ) -> Status | None:
        return filtering.update_with_pod(state, pod_to_remove, node, -1)

    # PreScore / Score / NormalizeScore

    def pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        return scoring.pre_score(
            state, pod, nodes, hard_pod_affinity_weight=self.hard_pod_affinity_weight,
            ignore_preferred_terms_of_existing_pods=(
                self.ignore_preferred_terms_of_existing_pods))

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return scoring.score(state, node)

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> Status | None:
        scoring.normalize_score(state, scores)
        return None

    def score_vector(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray
    ) -> IntArray | None:
        return scoring.score_vector(state, table, idx)

    def normalize_vector(
        self, state: CycleState, pod: Pod, table: NodeTable, idx: IntArray, scores: IntArray
    ) -> IntArray:
        return scoring.normalize_vector(state, scores)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # A peer bound or relabelled into a term, a blocker deleted or relabelled out
        # of one; a node that gains (or changes) a topology key.
        pod_actions = ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
        node_actions = ActionType.ADD | ActionType.UPDATE_NODE_LABEL
        return (ClusterEventWithHint(ClusterEvent(POD, pod_actions), affinity_after_pod_change),
                ClusterEventWithHint(ClusterEvent(NODE, node_actions),
                                     affinity_after_node_change))


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
