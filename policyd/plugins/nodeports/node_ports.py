"""NodePorts: a pod's host ports must be free on the node.

The pod's host ports are its containers' and its sidecars' (restartable init
containers), as upstream's `GetHostPorts` collects them. A wanted port conflicts with a
used one of the same protocol and port number when either binds the wildcard
0.0.0.0 or both bind the same IP (`HostPortInfo.CheckConflict`; like upstream, "::" is
not treated as a wildcard). The rejection is Unschedulable: preempting the pod holding
the port can free it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from policyd.framework import CycleState, PluginError, Status
from policyd.framework.events import (
    NODE_ADD,
    POD,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from policyd.model.node_info import NodeInfo, pod_host_ports
from policyd.model.records import HostPort, Pod
from policyd.model.table import BoolArray, IntArray, NodeTable
from policyd.plugins import names
from policyd.problems import field_problem

DEFAULT_WEIGHT: int | None = None

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"

WILDCARD_IP = "0.0.0.0"

_REJECT = Status.unschedulable(ERR_REASON)
_PRE_FILTER_KEY = "NodePorts/wanted"
_POD_CACHE_KEY = "NodePorts/wanted"

# One wanted port, prepared for the per-node check: (protocol, port) for the wildcard
# scan, or the two exact keys (wildcard and own IP) to look up.
_Wanted = tuple[bool, str, int, HostPort, HostPort]


def wanted_ports(pod: Pod) -> tuple[_Wanted, ...]:
    """The pod's host ports prepared for conflict checks; memoized on the pod."""
    cached = pod.cache.get(_POD_CACHE_KEY)
    if cached is None:
        cached = tuple(
            (p.host_ip == WILDCARD_IP, p.protocol, p.port,
             HostPort(WILDCARD_IP, p.protocol, p.port), p)
            for p in dict.fromkeys(pod_host_ports(pod))  # duplicates add nothing
        )
        pod.cache[_POD_CACHE_KEY] = cached
    return cached


def fits(wanted: Sequence[_Wanted], used: Mapping[HostPort, int]) -> bool:
    if not used:
        return True
    for wildcard, protocol, port, wild_key, own_key in wanted:
        if wildcard:
            for u in used:
                if u.port == port and u.protocol == protocol:
                    return False
        elif wild_key in used or own_key in used:
            return False
    return True


class NodePorts:
    name = names.NODE_PORTS
    # No PreFilterExtensions upstream: its PreFilter state reads no other pod
    # (preemption's dry runs rely on that; framework/interfaces.py).
    pre_filter_reads_other_pods = False

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[set[str] | None, Status | None]:
        wanted = wanted_ports(pod)
        if not wanted:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, wanted)
        return None, None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        used = node.used_ports
        if not used:
            return None
        # Upstream errors when PreFilter did not run; recomputing (memoized) is harmless.
        wanted = state.get(_PRE_FILTER_KEY)
        if wanted is None:
            wanted = wanted_ports(pod)
        return None if fits(wanted, used) else _REJECT

    def filter_mask(self, state: CycleState, pod: Pod, table: NodeTable,
                    idx: IntArray) -> BoolArray:
        # `fits` answers at once for the many nodes with no host port in use.
        wanted = state.get(_PRE_FILTER_KEY)
        if wanted is None:
            wanted = wanted_ports(pod)
        infos = table.infos
        return np.fromiter((fits(wanted, infos[i].used_ports) for i in idx.tolist()),
                           np.bool_, idx.size)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # Host ports are immutable: only a bound pod going away, or a new node, frees one.
        return (ClusterEventWithHint(ClusterEvent(POD, ActionType.DELETE), _after_pod_deleted),
                ClusterEventWithHint(NODE_ADD))


def _after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue when the deleted pod was bound and held a port this pod wants."""
    if not isinstance(old, Pod) or not old.node_name:
        return QUEUE_SKIP
    freed = pod_host_ports(old)
    if not freed:
        return QUEUE_SKIP
    in_use: dict[HostPort, int] = dict.fromkeys(freed, 1)
    return QUEUE_SKIP if fits(wanted_ports(pod), in_use) else QUEUE


def new(args: Mapping[str, Any] | None = None) -> NodePorts:
    if args:
        raise PluginError(names.NODE_PORTS, [field_problem("", "NodePorts takes no arguments")])
    return NodePorts()
