"""NodeResourcesBalancedAllocation: prefer nodes whose resources stay evenly used.

Mirrors kube-scheduler v1.36 `noderesources/balanced_allocation.go`:

* Fractions are requested / allocatable per configured resource (default cpu and memory,
  weight 1), capped at 1, using the *actual* requests of the node's pods and of the pod
  (not the 100m / 200Mi "non-zero" defaults). A resource the node does not have, or an
  extended resource the pod does not request, is left out.
* balance(x) = int((1 - std(fractions)) * 100), std being |f1 - f2| / 2 for two resources
  and the population standard deviation for more.
* Since v1.36 (kubernetes PR 135573) the score is the *change* in balance the pod brings:
  50 + (50 + balance(with pod) - balance(without pod)) / 2, so no change scores 75,
  balanced -> unbalanced 50 and unbalanced -> balanced 100. Before 1.36 it was
  balance(with pod) alone.
* PreScore returns Skip for a pod that requests none of the resources (a best-effort pod),
  so such pods do not all pile onto the most balanced node (kubernetes issue 129138).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.dra.selectors import KUBERNETES_CEL, SelectorCache
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework import CycleState, PluginError, Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.row_memo import RowMemo
from policyd.plugins import names
from policyd.plugins.helper.extended_resources import GATE as EXTENDED_RESOURCE_GATE
from policyd.plugins.helper.extended_resources import DraCapacity
from policyd.plugins.helper.plugin_args import Problems, check_envelope
from policyd.plugins.noderesources.resource_allocation import (
    DEFAULT_RESOURCES,
    IntArray,
    ResourceSpec,
    balanced_allocation_score,
    balanced_allocation_vector,
    cycle_dra_capacity,
    node_allocatable_allocated,
    parse_resource_specs,
    pod_request_list,
    resource_kind,
    table_scores,
)
from policyd.problems import field_problem

if TYPE_CHECKING:
    from policyd.model.table import NodeTable

DEFAULT_WEIGHT = 1

ARGS_KIND = "NodeResourcesBalancedAllocationArgs"

# What DRA-served extended resources count per node this cycle (DraCapacity).
_DRA_KEY = "NodeResourcesBalancedAllocation/dra_capacity"
_PRE_SCORE_KEY = "NodeResourcesBalancedAllocation/request"


class NodeResourcesBalancedAllocation:
    name = names.NODE_RESOURCES_BALANCED_ALLOCATION

    def __init__(self, resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES, *,
                 features: FeatureGates = DEFAULTS) -> None:
        self.resources = tuple(resources)
        self.features = features  # how a pod carrying resize status counts
        self._names = tuple(r.name for r in self.resources)
        self._kinds = tuple(resource_kind(r.name) for r in self.resources)
        # DRAExtendedResource: a scored extended resource a DeviceClass serves counts
        # the class's devices on a node whose allocatable lacks it.
        self.extended_enabled = features.enabled(EXTENDED_RESOURCE_GATE)
        self._selectors = SelectorCache(KUBERNETES_CEL)
        # Consecutive pods mostly share their requests, and only the rows of the nodes
        # that changed in between differ: see policyd.model.row_memo.
        self._memo: RowMemo[tuple[int, ...]] = RowMemo(
            self._score_rows, compute_row=lambda t, k, i: self._score_node(t.infos[i], k))

    def pre_score(self, state: CycleState, pod: Pod,
                  nodes: Sequence[NodeInfo]) -> Status | None:
        request = pod_request_list(pod, self.resources, True, use_status=True,
                                   features=self.features)
        if not any(request):
            return Status.skip()
        state.write(_PRE_SCORE_KEY, request)
        self._dra_capacity(state)
        return None

    def _dra_capacity(self, state: CycleState) -> DraCapacity | None:
        return cycle_dra_capacity(state, _DRA_KEY, self.extended_enabled, self._names,
                                  self._selectors)

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        request = state.get(_PRE_SCORE_KEY)
        if request is None:
            # PreScore disabled in the profile: upstream computes it here, and scores a
            # best-effort pod 0 instead of skipping.
            request = pod_request_list(pod, self.resources, True, use_status=True,
                                   features=self.features)
            if not any(request):
                return 0
        return self._score_node(node, request, self._dra_capacity(state))

    def _score_node(self, node: NodeInfo, request: Sequence[int],
                    dra: DraCapacity | None = None) -> int:
        allocatable, allocated = node_allocatable_allocated(
            node, self._names, self._kinds, request, True, dra)
        requested = [allocated[i] + request[i] for i in range(len(allocated))]
        return balanced_allocation_score(requested, allocated, allocatable)

    def score_vector(self, state: CycleState, pod: Pod, table: NodeTable,
                     idx: IntArray) -> IntArray | None:
        """`score` for the NodeTable rows `idx` at once (None: use the per-node path)."""
        request = state.get(_PRE_SCORE_KEY)
        if request is None:
            request = pod_request_list(pod, self.resources, True, use_status=True,
                                   features=self.features)
            if not any(request):
                return np.zeros(idx.size, np.int64)
        dra = self._dra_capacity(state)
        if dra is not None and dra.counts_for(self._names, request):
            return None  # devices counted per node (`score`)
        key = tuple(request)
        scores = self._memo.get(table, key, idx)
        # None: some node's values are too large for exact vector math; the rows asked
        # for may still be fine.
        return scores if scores is not None else self._score_rows(table, key, idx)

    def _score_rows(self, table: NodeTable, request: tuple[int, ...],
                    rows: IntArray) -> IntArray | None:
        """The scores of the rows `rows` for a pod requesting `request`."""
        return table_scores(table, rows, self._names, self._kinds, request, True,
                            balanced_allocation_vector)


def new(args: Mapping[str, Any] | None = None, *, features: FeatureGates = DEFAULTS
        ) -> NodeResourcesBalancedAllocation:
    """Build the plugin from NodeResourcesBalancedAllocationArgs (v1 defaults, then
    ValidateNodeResourcesBalancedAllocationArgs: no duplicate names, every weight 1)."""
    problems: Problems = []
    args = dict(args or {})
    check_envelope(args, ("apiVersion", "kind", "resources"), ARGS_KIND, problems)
    resources = parse_resource_specs(args.get("resources"), "resources", problems)
    seen: set[str] = set()
    for i, spec in enumerate(resources):
        if spec.name and spec.name in seen:
            problems.append(field_problem(f"resources[{i}].name",
                                          f'Duplicate value: "{spec.name}"'))
        seen.add(spec.name)
        if spec.weight != 1:
            problems.append(field_problem(f"resources[{i}].weight",
                             f"Invalid value: {spec.weight}: must be 1"))
    if problems:
        raise PluginError(names.NODE_RESOURCES_BALANCED_ALLOCATION, problems)
    return NodeResourcesBalancedAllocation(resources, features=features)
