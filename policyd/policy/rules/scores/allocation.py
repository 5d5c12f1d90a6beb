"""`allocation` scores: LeastAllocated / MostAllocated over chosen resources, with the
arithmetic of NodeResourcesFit's scorers (policyd/plugins/noderesources/
resource_allocation.py), so a policy and the built-in plugin score a node alike.

cpu and memory use the "non-zero" requests on both sides, as upstream's scoring does;
every other resource the node's and the pod's actual requests, whatever its name. A
resource the node does not offer is left out of the weighted mean; none offered
scores 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.resources import CPU, MEMORY, pod_requests
from policyd.plugins.noderesources.resource_allocation import (
    DEFAULT_RESOURCES,
    KIND_CPU_MEM,
    KIND_EPHEMERAL,
    ResourceSpec,
    least_allocated_scorer,
    least_allocated_vector,
    most_allocated_scorer,
    most_allocated_vector,
    node_allocatable_allocated,
    table_scores,
)
from policyd.policy.rules.base import FloatArray, NodeValue, ScoreRule
from policyd.policy.rules.scores import schemas

if TYPE_CHECKING:
    from policyd.model.table import IntArray, NodeTable


class AllocationScore(ScoreRule):
    kind = schemas.ALLOCATION

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        alloc = spec["allocation"]
        self.most = alloc["strategy"] == "most"
        resources = alloc.get("resources")
        self.resources: tuple[ResourceSpec, ...] = tuple(
            ResourceSpec(r["name"], int(r.get("weight", 1))) for r in resources
        ) if resources else DEFAULT_RESOURCES
        self._names = tuple(r.name for r in self.resources)
        # What the scorers' node reader takes for cpu/memory (allocatable, non-zero
        # requested) and for ephemeral-storage (allocatable, requested, counted even when
        # the pod asks none): the latter is how a policy reads every other resource.
        self._kinds = tuple(KIND_CPU_MEM if name in (CPU, MEMORY) else KIND_EPHEMERAL
                            for name in self._names)
        if self.most:
            self._scorer = most_allocated_scorer(self.resources)
            self._vector = most_allocated_vector(self.resources)
        else:
            self._scorer = least_allocated_scorer(self.resources)
            self._vector = least_allocated_vector(self.resources)

    def _pod_request(self, pod: Pod) -> tuple[int, ...]:
        non_zero = pod_requests(pod, non_zero=True)
        actual = pod_requests(pod)
        return tuple((non_zero if kind == KIND_CPU_MEM else actual).get(name, 0)
                     for name, kind in zip(self._names, self._kinds, strict=True))

    def bind(self, pod: Pod) -> NodeValue:
        names, kinds, scorer = self._names, self._kinds, self._scorer
        request = self._pod_request(pod)

        def value(info: NodeInfo) -> float | None:
            allocatable, allocated = node_allocatable_allocated(
                info, names, kinds, request, False)
            requested = [a + r for a, r in zip(allocated, request, strict=True)]
            return float(scorer(requested, allocated, allocatable))
        return value

    def values(self, value: NodeValue, pod: Pod, table: NodeTable,
               idx: IntArray) -> FloatArray:
        request = self._pod_request(pod)
        scores = table_scores(table, idx, self._names, self._kinds, request, False,
                              self._vector)
        if scores is None:  # values too large for exact int64 arithmetic: per node
            return super().values(value, pod, table, idx)
        return scores.astype(np.float64)
