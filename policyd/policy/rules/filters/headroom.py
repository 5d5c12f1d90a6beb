"""`headroom`: free capacity the node must keep after placing the pod.

A resource the node does not list has allocatable 0. Evicting pods frees room, so a
rejection is resolvable by preemption.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.framework.events import ClusterEventWithHint
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
    kind = schemas.HEADROOM
    unresolvable = False

    def __init__(self, rule_id: str, message: str, spec: Mapping[str, Any]) -> None:
        super().__init__(rule_id, message)
        self.resource: str = spec["resource"]
        self.quantity: int | None = (resource_value(self.resource, spec["quantity"])
                                     if "quantity" in spec else None)
        self.percent: float | None = (float(spec["percent"]) if "percent" in spec else None)
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
        pct = self.percent or 0.0

        def check(info: NodeInfo) -> bool:
            alloc = info.node.allocatable.get(r, 0)
            return (alloc - used(info)) * 100 >= alloc * pct
        return check

    def mask(self, check: NodeCheck, policy: RulePolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        r = self.resource
        alloc = resource_row(table, table.allocatable, r, idx)
        if r == "pods":
            used = table.take(table.pod_count, idx) + 1
        else:
            used = resource_row(table, table.requested, r, idx) + pod_requests(pod).get(r, 0)
        if self.quantity is not None:
            return np.asarray(alloc - used >= self.quantity, np.bool_)
        pct = self.percent or 0.0
        # Integral percentages stay in integer arithmetic, as the per-node check does.
        factor: float | int = int(pct) if pct.is_integer() else pct
        return np.asarray((alloc - used) * 100 >= alloc * factor, np.bool_)

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(NODE_ALLOCATABLE, node_hint(policy, self)),
                ClusterEventWithHint(POD_FREED, freed_hint(self.resource)))
