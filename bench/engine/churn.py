"""Node churn: every node's status rewritten once per period, as kubelets post it.

A status update carries nothing the scheduler filters on (only the conditions'
lastHeartbeatTime and the resourceVersion move), but it is a new Node record, and
every cache keyed on records (the NodeTable's label and image columns, per-node plugin
caches) must notice. Static nodes hide that cost; this puts it back.

The updates are spread evenly over the period, node after node (a cluster's kubelets
are not in step), and interleaved with the pods: after each pod the bench applies those
whose time has come. They go through the daemon's own path for a node update
(`EventHandlers._node_changed` in policyd/daemon/event_handlers.py): decode with
`node_from_dict`, `ClusterState.upsert_node`, then `node_update_events` to tell the
queue what changed (nothing, for a heartbeat). The watch's `json.loads` is the
informer's cost and is not counted here.

10 s is the kubelet's `nodeStatusUpdateFrequency`. With node leases (every cluster
since 1.17) a kubelet posts an unchanged status only every `nodeStatusReportFrequency`
(5 min), so 10 s is the heavy case: kubelets configured to report every update, or
status that really changes (conditions, images, allocatable) that often.
"""

from __future__ import annotations

import datetime
from typing import Any

from policyd.framework.events import node_update_events
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict

EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


class HeartbeatSchedule:
    """How many updates are due: `nodes` per `period` seconds, evenly spaced from 0.

    Pure arithmetic on an elapsed time the caller measures (wall or CPU), so a test can
    drive it without a clock. A period of 0 means no churn.
    """

    def __init__(self, nodes: int, period: float) -> None:
        if period < 0:
            raise ValueError(f"churn period must be >= 0, got {period}")
        self.nodes = nodes
        self.period = period
        self.sent = 0

    def due(self, elapsed: float) -> int:
        """Updates whose time has come by `elapsed` and not yet handed out; counts them
        as handed out. The k-th update (from 0) is due at k * period / nodes."""
        if self.period == 0 or self.nodes == 0 or elapsed < 0:
            return 0
        total = int(elapsed * self.nodes / self.period) + 1
        n = max(0, total - self.sent)
        self.sent += n
        return n


class NodeHeartbeats:
    """Applies heartbeats to a cluster's nodes, round robin in the cluster's order."""

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.names = [info.node.name for info in cluster]
        self.applied = 0
        self.events = 0  # queue events the updates raised: 0 unless a heartbeat is wrong

    def apply(self, count: int, elapsed: float) -> None:
        """`count` updates, stamped `elapsed` seconds after the run's start."""
        if not self.names:
            return
        stamp = (EPOCH + datetime.timedelta(seconds=int(elapsed))).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        for _ in range(count):
            name = self.names[self.applied % len(self.names)]
            self.applied += 1
            info = self.cluster.get(name)
            if info is None:
                continue
            before = info.node
            node = node_from_dict(heartbeat(before.raw, stamp))
            self.cluster.upsert_node(node)
            self.events += len(node_update_events(before, node))


def heartbeat(raw: dict[str, Any], stamp: str) -> dict[str, Any]:
    """The object a status update delivers: the same node, a new resourceVersion and
    every condition's lastHeartbeatTime set to `stamp`. A new object (the watch decodes
    each event afresh); the parts a heartbeat leaves alone are shared, not copied, so
    memory reflects records and not this generator."""
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    version = int(meta.get("resourceVersion") or 0) + 1
    return {**raw,
            "metadata": {**meta, "resourceVersion": str(version)},
            "status": {**status, "conditions": [
                {**c, "lastHeartbeatTime": stamp} for c in status.get("conditions") or ()]}}
