"""`headroom`: free capacity the node must keep after placing the pod.

A resource the node does not list has allocatable 0. Evicting pods frees room, so a
rejection is resolvable by preemption. Exact at any int64 amount (see `Headroom`).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.framework.events import ClusterEventWithHint
from policyd.model.int64 import INT64_MAX
from policyd.model.node_info import NodeInfo
from policyd.model.quantity import resource_value
from policyd.model.records import Pod
from policyd.model.resources import pod_requests
from policyd.policy.requeue import NODE_ALLOCATABLE, POD_FREED, freed_hint, node_hint
from policyd.policy.rules.base import FilterRule, NodeCheck, RulePolicy, resource_row
from policyd.policy.rules.filters import schemas

if TYPE_CHECKING:
    from policyd.model.table import BoolArray, IntArray, NodeTable


class Headroom(FilterRule):
    """`percent` is the decimal written (12.5 is 25/2, 33.3 is 333/10), compared in
    integers: (allocatable - used) * 100 * den >= allocatable * num, exact per node and,
    while every amount keeps that within int64, over the columns too; beyond, `mask`
    asks the per-node check (a node with 9e18 of a resource is judged, not wrapped)."""

    kind = schemas.HEADROOM
    unresolvable = False

    def __init__(self, rule_id: str, message: str, spec: Mapping[str, Any]) -> None:
        super().__init__(rule_id, message)
        self.resource: str = spec["resource"]
        self.quantity: int | None = (resource_value(self.resource, spec["quantity"])
                                     if "quantity" in spec else None)
        # As the reference evaluator reads it: the shortest decimal of the number.
        self.percent: Fraction | None = (Fraction(str(spec["percent"]))
                                         if "percent" in spec else None)
        # The largest amount with which the columns' int64 arithmetic is exact: used is
        # at most twice it, times 100 * den (percent) or alone (quantity).
        den = self.percent.denominator if self.percent is not None else 1
        self._limit = INT64_MAX // (200 * den) if self.percent is not None \
            else INT64_MAX // 4
        # The pod count does not depend on the pod; any other resource adds its request.
        self.reads_pod = self.resource != "pods"

    def bind(self, policy: RulePolicy, pod: Pod) -> NodeCheck | None:
        r = self.resource
        if r == "pods":
            def used(info: NodeInfo) -> int:
                return len(info.pods) + 1
        else:
            own = pod_requests(pod).get(r, 0)

            def used(info: NodeInfo) -> int:
                return info.requested.get(r, 0) + own
        if self.quantity is not None:
            q = self.quantity
            return lambda info: info.node.allocatable.get(r, 0) - used(info) >= q
        pct = self.percent or Fraction(0)
        num, scale = pct.numerator, 100 * pct.denominator

        def check(info: NodeInfo) -> bool:
            alloc = info.node.allocatable.get(r, 0)
            return (alloc - used(info)) * scale >= alloc * num
        return check

    def mask(self, check: NodeCheck, policy: RulePolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        r = self.resource
        alloc = resource_row(table, table.allocatable, r, idx)
        own = 1 if r == "pods" else pod_requests(pod).get(r, 0)
        used = (table.take(table.pod_count, idx) if r == "pods"
                else resource_row(table, table.requested, r, idx))
        if not idx.size:
            return np.zeros(0, np.bool_)
        if own > self._limit or max(int(np.abs(alloc).max()),
                                    int(used.max())) > self._limit:
            # Beyond the limit int64 products would wrap: per node, exactly.
            return super().mask(check, policy, pod, table, idx)
        used = used + own
        if self.quantity is not None:
            return np.asarray(alloc - used >= self.quantity, np.bool_)
        pct = self.percent or Fraction(0)
        return np.asarray((alloc - used) * (100 * pct.denominator) >= alloc * pct.numerator,
                          np.bool_)

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(NODE_ALLOCATABLE, node_hint(policy, self)),
                ClusterEventWithHint(POD_FREED, freed_hint(self.resource)))
