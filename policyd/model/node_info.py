"""A node plus what is already placed on it (kube-scheduler's NodeInfo): the per-node
aggregates both evaluation paths read, apart from `ClusterState` so that the columnar
`NodeTable` can hold them without importing the state that owns the table.
"""

from __future__ import annotations

from policyd.model.records import HostPort, Node, Pod
from policyd.model.resources import pod_requests


class NodeInfo:
    """A node plus what is already placed on it (kube-scheduler's NodeInfo)."""

    __slots__ = ("generation", "node", "non_zero_requested", "pods", "requested",
                 "used_ports")

    def __init__(self, node: Node) -> None:
        self.node = node
        self.pods: dict[str, Pod] = {}  # by uid
        self.requested: dict[str, int] = {}
        self.non_zero_requested: dict[str, int] = {}
        self.used_ports: dict[HostPort, int] = {}  # port -> number of pods using it
        # Bumped on every change so caches keyed on a node can tell they are stale.
        self.generation = 0

    @property
    def name(self) -> str:
        return self.node.name

    def add_pod(self, pod: Pod) -> None:
        if pod.uid in self.pods:
            self.remove_pod(self.pods[pod.uid])
        self.pods[pod.uid] = pod
        self._account(pod, +1)

    def remove_pod(self, pod: Pod) -> bool:
        existing = self.pods.pop(pod.uid, None)
        if existing is None:
            return False
        self._account(existing, -1)
        return True

    def _account(self, pod: Pod, sign: int) -> None:
        for name, value in pod_requests(pod, use_status=True).items():
            self.requested[name] = self.requested.get(name, 0) + sign * value
        for name, value in pod_requests(pod, non_zero=True, use_status=True).items():
            self.non_zero_requested[name] = self.non_zero_requested.get(name, 0) + sign * value
        for port in pod_host_ports(pod):
            count = self.used_ports.get(port, 0) + sign
            if count > 0:
                self.used_ports[port] = count
            else:
                self.used_ports.pop(port, None)
        self.generation += 1


def pod_host_ports(pod: Pod) -> list[HostPort]:
    """Host ports a pod occupies: its containers' and its sidecars' (restartable init)."""
    ports = [p for c in pod.containers for p in c.ports]
    ports.extend(p for c in pod.init_containers if c.restart_policy == "Always" for p in c.ports)
    return ports
