"""NodeUnschedulable: cordoned nodes (`spec.unschedulable`) take no new pods.

A pod that tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint (as
DaemonSet pods do) passes anyway, exactly as upstream treats the flag as that taint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import (
    NODE,
    POD,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
    is_self,
)
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod, Taint
from policyd.model.table import BoolArray, IntArray, NodeTable
from policyd.plugins import names
from policyd.problems import field_problem

DEFAULT_WEIGHT: int | None = None

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")

_REJECT = Status.unresolvable(ERR_REASON_UNSCHEDULABLE)
_CACHE_KEY = "NodeUnschedulable/tolerates"


def tolerates_unschedulable(pod: Pod) -> bool:
    """Whether the pod tolerates the cordon taint; memoized on the pod, as tolerations
    are immutable once the pod exists."""
    cached = pod.cache.get(_CACHE_KEY)
    if cached is None:
        cached = any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations)
        pod.cache[_CACHE_KEY] = cached
    return bool(cached)


class NodeUnschedulable:
    name = names.NODE_UNSCHEDULABLE
    # Its Filter reads the node alone, never the pods on it (framework/interfaces.py).
    filter_reads_node_pods = False

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if node.node.unschedulable and not tolerates_unschedulable(pod):
            return _REJECT
        return None

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                    idx: IntArray) -> BoolArray:
        if tolerates_unschedulable(pod):
            return np.ones(idx.size, np.bool_)
        return ~table.unschedulable[idx]

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # A node added schedulable or uncordoned; the pod gained the cordon toleration.
        return (
            ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 _after_node_change),
            ClusterEventWithHint(ClusterEvent(POD, ActionType.UPDATE_POD_TOLERATION),
                                 _after_toleration_change),
        )


def _after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if isinstance(new, Node) and not new.unschedulable and (
            old is None or (isinstance(old, Node) and old.unschedulable)):
        return QUEUE
    return QUEUE_SKIP


def _after_toleration_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if isinstance(new, Pod) and is_self(pod, new) and any(
            t.tolerates(UNSCHEDULABLE_TAINT) for t in new.tolerations):
        return QUEUE
    return QUEUE_SKIP


def new(args: Mapping[str, Any] | None = None) -> NodeUnschedulable:
    if args:
        raise PluginError(names.NODE_UNSCHEDULABLE,
                          [field_problem("", "NodeUnschedulable takes no arguments")])
    return NodeUnschedulable()
