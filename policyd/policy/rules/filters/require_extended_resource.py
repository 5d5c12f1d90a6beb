"""`requireExtendedResource`: the node must offer an extended resource.

A node that does not list the resource has 0 of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from policyd.framework.events import ClusterEventWithHint
from policyd.model.quantity import resource_value
from policyd.model.records import Pod
from policyd.model.resources import pod_requests
from policyd.policy.requeue import NODE_ALLOCATABLE, node_hint
from policyd.policy.rules.base import (
    WHEN_REQUESTED,
    FilterRule,
    NodeCheck,
    Projection,
    RulePolicy,
    resource_row,
)
from policyd.policy.rules.filters import schemas

if TYPE_CHECKING:
    from policyd.model.table import BoolArray, IntArray, NodeTable


class RequireExtendedResource(FilterRule):
    kind = schemas.REQUIRE_EXTENDED_RESOURCE
    autoscaler_visible = WHEN_REQUESTED

    # Evicting pods never adds allocatable, so preemption cannot help: unresolvable.
    unresolvable = True

    def __init__(self, rule_id: str, message: str, spec: Mapping[str, Any]) -> None:
        super().__init__(rule_id, message)
        self.name: str = spec["name"]
        self.quantity = resource_value(self.name, spec.get("quantity", 1))

    def bind(self, policy: RulePolicy, pod: Pod) -> NodeCheck | None:
        name, q = self.name, self.quantity
        return lambda info: info.node.allocatable.get(name, 0) >= q

    def project(self, pod: Pod) -> Projection:
        """A request would take the resource where the rule only asks that the node
        offer it, so it is no projection; but a pod that requests at least the
        quantity itself already tells kube-scheduler (free >= request >= quantity)."""
        if pod_requests(pod).get(self.name, 0) >= self.quantity:
            return Projection()
        return Projection(invisible=f"a {self.kind.name} rule asks that nodes offer "
                          f"{self.name}, which no kube-scheduler constraint says unless "
                          "the pod requests it")

    def mask(self, check: NodeCheck, policy: RulePolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        return np.asarray(
            resource_row(table, table.allocatable, self.name, idx) >= self.quantity, np.bool_)

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(NODE_ALLOCATABLE, node_hint(policy, self)),)
