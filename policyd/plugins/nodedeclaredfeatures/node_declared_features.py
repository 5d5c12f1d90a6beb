"""NodeDeclaredFeatures: a pod that needs a node-declared feature fits only the nodes
whose `status.declaredFeatures` include it (kube-scheduler v1.36, feature gate
NodeDeclaredFeatures, beta and on by default: in its default profile, last).

PreFilter infers the pod's needs (`features.required_features`) and skips the plugin
for a pod that needs none, which is nearly every pod. Filter rejects a node lacking one
of them as UnschedulableAndUnresolvable (preemption cannot add a feature to a node),
with upstream's reason, which names no feature. Names a node declares that the
registry does not know are ignored, as upstream's TryMap ignores them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from policyd.features import DEFAULTS, FeatureGates
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
from policyd.model.records import Node, Pod
from policyd.model.table import BoolArray, IntArray, NodeTable
from policyd.plugins import names
from policyd.plugins.nodedeclaredfeatures.features import required_features
from policyd.problems import field_problem

DEFAULT_WEIGHT: int | None = None

ERR_REASON = "node(s) didn't match Pod's required features"

_REJECT = Status.unresolvable(ERR_REASON)
_PRE_FILTER_KEY = "NodeDeclaredFeatures/required"


def _has_all(required: frozenset[str], declared: Sequence[str]) -> bool:
    return required.issubset(declared)


class NodeDeclaredFeatures:
    name = names.NODE_DECLARED_FEATURES
    # Its Filter reads the node alone, never the pods on it (framework/interfaces.py).
    filter_reads_node_pods = False
    # No PreFilterExtensions upstream: its PreFilter state reads no other pod
    # (preemption's dry runs rely on that; framework/interfaces.py).
    pre_filter_reads_other_pods = False

    def __init__(self, enabled: bool = True) -> None:
        # With the gate off upstream still builds the plugin (a profile may enable it)
        # but it does nothing: PreFilter skips every pod, no events are registered.
        self.enabled = enabled

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        if not self.enabled:
            return None, Status.skip()
        required = required_features(pod)
        if not required:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, required)
        return None, None

    def _required(self, state: CycleState, pod: Pod) -> frozenset[str]:
        # Upstream errors when PreFilter did not run; recomputing (memoized) is harmless.
        required = state.get(_PRE_FILTER_KEY)
        return required if required is not None else required_features(pod)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not self.enabled:
            return None
        required = self._required(state, pod)
        return None if _has_all(required, node.node.declared_features) else _REJECT

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                    idx: IntArray) -> BoolArray:
        if not self.enabled:
            return np.ones(len(idx), np.bool_)
        # Nodes share few distinct feature lists: decide once per list.
        required = self._required(state, pod)
        verdicts = np.fromiter((_has_all(required, f) for f in table.feature_sets),
                               np.bool_, len(table.feature_sets))
        mask: BoolArray = verdicts[table.feature_set_id[idx]]
        return mask

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        if not self.enabled:
            return ()
        return (
            ClusterEventWithHint(
                ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_DECLARED_FEATURE),
                _after_node_change),
            ClusterEventWithHint(ClusterEvent(POD, ActionType.UPDATE), _after_pod_update),
        )


def _after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A node added, or one whose declared features changed (whatever the change)."""
    if isinstance(old, Node) and isinstance(new, Node) \
            and old.declared_features == new.declared_features:
        return QUEUE_SKIP
    return QUEUE


def _after_pod_update(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """The pending pod itself, with needs other than before (the fields read are
    immutable, so in practice never)."""
    if not (isinstance(new, Pod) and is_self(pod, new)):
        return QUEUE_SKIP
    if isinstance(old, Pod) and required_features(old) == required_features(new):
        return QUEUE_SKIP
    return QUEUE


def new(args: Mapping[str, Any] | None = None,
        features: FeatureGates = DEFAULTS) -> NodeDeclaredFeatures:
    if args:
        raise PluginError(names.NODE_DECLARED_FEATURES,
                          [field_problem("", "NodeDeclaredFeatures takes no arguments")])
    return NodeDeclaredFeatures(features.enabled("NodeDeclaredFeatures"))
