"""A node plus what is already placed on it (kube-scheduler's NodeInfo): the per-node
aggregates both evaluation paths read, apart from `ClusterState` so that the columnar
`NodeTable` can hold them without importing the state that owns the table.
"""

from __future__ import annotations

from policyd.features import DEFAULTS, FeatureGates
from policyd.model.records import Container, HostPort, Node, Pod
from policyd.model.resources import POD_LEVEL_RESIZE_GATE, REQUESTS_CACHE_PREFIX, pod_requests

# Pod.cache keys of what a pod adds to a node, by whether pod-level status resources
# count. Under REQUESTS_CACHE_PREFIX: `replace_pod` carries them over, since they
# follow from the fields `accounts_the_same` compares.
_ACCOUNT_KEYS = {False: f"{REQUESTS_CACHE_PREFIX}account.False",
                 True: f"{REQUESTS_CACHE_PREFIX}account.True"}

Accounting = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...],
                   tuple[HostPort, ...]]


class NodeInfo:
    """A node plus what is already placed on it (kube-scheduler's NodeInfo)."""

    __slots__ = ("features", "generation", "node", "non_zero_requested", "pods",
                 "requested", "used_ports")

    def __init__(self, node: Node, features: FeatureGates = DEFAULTS) -> None:
        self.node = node
        # Which resize rules count a pod here (InPlacePodLevelResourcesVerticalScaling).
        self.features = features
        self.pods: dict[str, Pod] = {}  # by uid
        self.requested: dict[str, int] = {}
        self.non_zero_requested: dict[str, int] = {}
        self.used_ports: dict[HostPort, int] = {}  # port -> number of pods using it
        # Bumped on every change so caches keyed on a node can tell they are stale.
        self.generation = 0

    @property
    def name(self) -> str:
        return self.node.name

    def clone(self) -> NodeInfo:
        """A copy to add and remove pods on without touching this one (upstream's
        NodeInfo.Snapshot): preemption's dry runs change a copy of one node, not the
        cluster. Caches keyed on a NodeInfo check its identity, so none mistakes the
        copy for the original."""
        out = NodeInfo.__new__(NodeInfo)
        # Every slot, so that one added later is not forgotten here; the dicts the
        # dry run changes are copied, the rest (node, gates, generation) shared.
        for name in NodeInfo.__slots__:
            value = getattr(self, name)
            setattr(out, name, dict(value) if isinstance(value, dict) else value)
        return out

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

    def replace_pod(self, pod: Pod) -> bool:
        """Swap the record of a pod already here for `pod` when it accounts exactly the
        same (same requests and host ports); False, and nothing changed, otherwise.

        Most updates of a bound pod are of this kind (the watch confirming a binding
        of ours, status moving to Running): removing and adding it again would
        recompute its requests for the same sums. The request sums cached on the old
        record are carried over, since they follow from the fields compared."""
        old = self.pods.get(pod.uid)
        if old is None or not accounts_the_same(old, pod):
            return False
        for key, value in old.cache.items():
            if key.startswith(REQUESTS_CACHE_PREFIX):
                pod.cache.setdefault(key, value)
        self.pods[pod.uid] = pod
        self.generation += 1
        return True

    def _account(self, pod: Pod, sign: int) -> None:
        requests, non_zero, ports = accounting(pod, self.features)
        requested = self.requested
        for name, value in requests:
            requested[name] = requested.get(name, 0) + sign * value
        non_zero_requested = self.non_zero_requested
        for name, value in non_zero:
            non_zero_requested[name] = non_zero_requested.get(name, 0) + sign * value
        if ports:
            used = self.used_ports
            for port in ports:
                count = used.get(port, 0) + sign
                if count > 0:
                    used[port] = count
                else:
                    used.pop(port, None)
        self.generation += 1


def accounting(pod: Pod, features: FeatureGates) -> Accounting:
    """What `pod` adds to a node (requests, non-zero requests, host ports), computed
    once per pod record: preemption's dry runs take the same pods off a node copy and
    put them back hundreds of times per preemption."""
    key = _ACCOUNT_KEYS[features.enabled(POD_LEVEL_RESIZE_GATE)]
    cached: Accounting | None = pod.cache.get(key)
    if cached is None:
        cached = pod.cache[key] = (
            tuple(pod_requests(pod, use_status=True, features=features).items()),
            tuple(pod_requests(pod, non_zero=True, use_status=True,
                               features=features).items()),
            tuple(pod_host_ports(pod)))
    return cached


def pod_host_ports(pod: Pod) -> list[HostPort]:
    """Host ports a pod occupies: its containers' and its sidecars' (restartable init)."""
    ports = [p for c in pod.containers for p in c.ports]
    ports.extend(p for c in pod.init_containers if c.restart_policy == "Always" for p in c.ports)
    return ports


def accounts_the_same(a: Pod, b: Pod) -> bool:
    """Whether two records of a pod add the same to a node: every input of
    `pod_requests` (spec and status) and of `pod_host_ports` equal."""
    return (a.overhead == b.overhead and a.pod_requests == b.pod_requests
            and a.resize_infeasible == b.resize_infeasible
            and a.status_pod_requests == b.status_pod_requests
            and a.allocated_pod == b.allocated_pod
            and _same_containers(a.containers, b.containers)
            and _same_containers(a.init_containers, b.init_containers))


def _same_containers(a: tuple[Container, ...], b: tuple[Container, ...]) -> bool:
    # Container compares by identity (eq=False): compare what accounting reads.
    return len(a) == len(b) and all(
        x.requests == y.requests and x.restart_policy == y.restart_policy
        and x.ports == y.ports and x.status_requests == y.status_requests
        and x.allocated == y.allocated for x, y in zip(a, b, strict=True))
