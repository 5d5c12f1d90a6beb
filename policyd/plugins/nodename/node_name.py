"""NodeName: a pod that names its node (`spec.nodeName`) fits only that node.

Pods with a node name are normally never scheduled (they are already bound), but
`explain` can be asked about one, and then this is the answer upstream would give.
kube-scheduler 1.36 has only the Filter here (a PreFilter narrowing the node list to
that one name existed in older releases and is gone), so policyd has only the Filter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import NODE_ADD, ClusterEventWithHint
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import BoolArray, IntArray, NodeTable
from policyd.plugins import names
from policyd.problems import field_problem

DEFAULT_WEIGHT: int | None = None

ERR_REASON = "node(s) didn't match the requested node name"

_REJECT = Status.unresolvable(ERR_REASON)


class NodeName:
    name = names.NODE_NAME
    # Its Filter reads the node alone, never the pods on it (framework/interfaces.py).
    filter_reads_node_pods = False

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        wanted = pod.node_name
        if wanted and wanted != node.node.name:
            return _REJECT
        return None

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                    idx: IntArray) -> BoolArray:
        wanted = pod.node_name
        if not wanted:
            return np.ones(idx.size, np.bool_)
        mask: BoolArray = idx == table.index.get(wanted, -1)
        return mask

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(NODE_ADD),)  # no hint: always worth a retry


def new(args: Mapping[str, Any] | None = None) -> NodeName:
    if args:
        raise PluginError(names.NODE_NAME, [field_problem("", "NodeName takes no arguments")])
    return NodeName()
