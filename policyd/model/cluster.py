"""The cluster state a scheduling cycle reads: nodes (`NodeInfo`), their pods, a change log.

The same state serves the live daemon (fed by informers) and the offline commands (fed
by a snapshot file), so explain and simulate are not a second implementation. Bound
pods of every scheduler count on their nodes; finished pods do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from policyd.features import DEFAULTS, FeatureGates
from policyd.model.disruption import DisruptionBudgets
from policyd.model.dra_objects import DraObjects
from policyd.model.node_info import NodeInfo
from policyd.model.pod_groups import GroupKey, PodGroups, group_key
from policyd.model.records import Node, Pod
from policyd.model.storage import StorageObjects
from policyd.model.table import NodeTable


def has_pod_affinity(pod: Pod) -> bool:
    a = pod.affinity
    return bool(a) and bool(a.get("podAffinity") or a.get("podAntiAffinity"))


def nominated_node_name(pod: Pod) -> str:
    """The pod's `status.nominatedNodeName` as the API server last showed it."""
    status = pod.raw.get("status")
    value = status.get("nominatedNodeName") if isinstance(status, dict) else None
    return value if isinstance(value, str) else ""


def counts_on_node(pod: Pod) -> bool:
    """Whether a pod occupies its node's resources: bound and not finished."""
    return bool(pod.node_name) and not pod.finished


@dataclass(frozen=True, slots=True)
class GroupCounts:
    all: int
    scheduled: int  # assumed + assigned


class ClusterState:
    """Nodes with their pods, in a stable order, plus pods not bound to any node.

    `assume` places a pod on a node at once so the next decision sees it (the scheduler
    cache's assume); `forget` undoes it when binding fails.
    """

    def __init__(self, nodes: Iterable[Node] = (), pods: Iterable[Pod] = (), *,
                 features: FeatureGates = DEFAULTS) -> None:
        # The gates that decide how a pod counts on its node (NodeInfo's resize rules).
        self.features = features
        self._nodes: dict[str, NodeInfo] = {}
        self._pending: dict[str, Pod] = {}
        self._bound: dict[str, str] = {}  # pod uid -> node name
        # Pods bound to a node that is not (yet) known, kept so they count once it appears.
        self._orphans: dict[str, dict[str, Pod]] = {}
        self.generation = 0
        # Namespace name -> labels, for namespaceSelector in pod (anti-)affinity terms.
        self.namespace_labels: dict[str, dict[str, str]] = {}
        # Raw Services, ReplicaSets, StatefulSets and ReplicationControllers by kind: the
        # selectors behind PodTopologySpread's system default constraints.
        self.workloads: dict[str, list[dict[str, Any]]] = {}
        # Change tracking for derived views (the NodeTable, plugin indexes): a log of the
        # names of nodes whose record or pods changed, read from a cursor by each view,
        # and an epoch bumped whenever the set of nodes itself changes.
        self._log: list[str] = []
        self._log_base = 0  # epoch of _log[0]; older entries were dropped
        self.structure_epoch = 0
        # Bound pods with pod (anti-)affinity terms: while there are none, InterPodAffinity
        # has nothing to look for in the cluster and skips at no cost.
        self.pods_with_affinity = 0
        self._affinity_of: dict[str, int] = {}
        self._table: NodeTable | None = None
        # PersistentVolumes, claims, StorageClasses and the CSI objects (volume plugins).
        self.storage = StorageObjects()
        # DeviceClasses, ResourceSlices and ResourceClaims (DynamicResources), claims in
        # kube-scheduler's claim tracker.
        self.dra = DraObjects()
        # PodDisruptionBudgets and PriorityClasses (DefaultPreemption's victim choice).
        self.disruption_budgets = DisruptionBudgets()
        # PodGroup objects (both APIs) and each group's pods (`group_counts`).
        self.pod_groups = PodGroups()
        # "namespace/claim" -> pods on known nodes (assumed included) using the claim in
        # a persistentVolumeClaim volume: upstream's PVCRefCounts summed over the nodes,
        # which VolumeRestrictions reads for ReadWriteOncePod claims.
        self._claim_users: dict[str, int] = {}
        # The nominator (upstream's queue/nominator.go): pending pods that preemption
        # nominated to a node, by node and by uid. They are not counted on the node;
        # the cycle counts those of priority >= the pod's when it filters that node.
        self._nominated: dict[str, dict[str, Pod]] = {}
        self._nominated_on: dict[str, str] = {}
        for node in nodes:
            self.upsert_node(node)
        for pod in pods:
            self.upsert_pod(pod)

    # nodes
    def upsert_node(self, node: Node) -> NodeInfo:
        info = self._nodes.get(node.name)
        if info is None:
            info = NodeInfo(node, self.features)
            self._nodes[node.name] = info
            for pod in self._orphans.pop(node.name, {}).values():
                info.add_pod(pod)
                self._count_claims(pod, +1)
            self.structure_epoch += 1
        else:
            info.node = node
            info.generation += 1
            self._touch(node.name)
        self.generation += 1
        return info

    def claim_in_use(self, key: str) -> bool:
        """Whether a pod on a node (bound or assumed) uses claim `namespace/name`."""
        return self._claim_users.get(key, 0) > 0

    def _count_claims(self, pod: Pod, sign: int) -> None:
        for claim in pod.persistent_claims:
            key = f"{pod.namespace}/{claim}"
            count = self._claim_users.get(key, 0) + sign
            if count > 0:
                self._claim_users[key] = count
            else:
                self._claim_users.pop(key, None)

    def remove_node(self, name: str, uid: str = "") -> None:
        """Forget a node; its pods stay counted (as orphans) should it come back, since
        they name it by name. With `uid`, only that incarnation of the node is removed:
        a late delete of a node already replaced under the same name changes nothing."""
        info = self._nodes.get(name)
        if info is not None and (not uid or info.node.uid == uid):
            del self._nodes[name]
            self._orphans[name] = dict(info.pods)
            for pod in info.pods.values():
                self._count_claims(pod, -1)
            self.structure_epoch += 1
            self.generation += 1

    def node_infos(self) -> list[NodeInfo]:
        return list(self._nodes.values())

    def get(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self._nodes.values())

    # pods
    def upsert_pod(self, pod: Pod) -> None:
        """Record a pod as the API shows it: bound and running pods count on their node.
        A bound or finished pod leaves the nominator (its nomination is spent)."""
        if pod.node_name or pod.finished:
            self.clear_nomination(pod.uid)
        if pod.finished:
            self.pod_groups.remove_member(pod)
        else:
            self.pod_groups.add_member(pod)
        node_name = self._bound.get(pod.uid)
        if node_name is not None and node_name == pod.node_name and not pod.finished:
            # Still counted on the same node (a binding of ours confirmed, a status
            # update): swap the record in place when the node's sums stay the same.
            info = self._nodes.get(node_name)
            if (info is not None
                    and has_pod_affinity(pod) == (pod.uid in self._affinity_of)
                    and group_key(info.pods[pod.uid]) == group_key(pod)
                    and info.replace_pod(pod)):
                self._touch(node_name)
                self.generation += 1
                return
        self._unplace(pod.uid)
        if counts_on_node(pod):
            self._place(pod, pod.node_name)
        elif not pod.node_name and not pod.finished:
            self._pending[pod.uid] = pod
            # The nomination the API shows counts from the start (a snapshot's pods,
            # a restarted daemon's first list); the daemon's informer handler then
            # keeps it in step with sync_nomination.
            if shown := nominated_node_name(pod):
                self.nominate(pod, shown)
        self.generation += 1

    def remove_pod(self, uid: str) -> Pod | None:
        """The pod is gone (deleted, or no longer ours to count): off its node, out of
        the pending pods and of its pod group."""
        pod = self._unplace(uid)
        if pod is not None:
            self.pod_groups.remove_member(pod)
        return pod

    def _unplace(self, uid: str) -> Pod | None:
        pod = self._pending.pop(uid, None)
        node_name = self._bound.pop(uid, None)
        if node_name is not None:
            self.pods_with_affinity -= self._affinity_of.pop(uid, 0)
            info = self._nodes.get(node_name)
            if info is not None:
                pod = info.pods[uid]
                info.remove_pod(pod)
                self._count_claims(pod, -1)
                self._touch(node_name)
            else:
                pod = self._orphans.get(node_name, {}).pop(uid, None)
            if pod is not None:
                self.pod_groups.count_placed(pod, -1)
            self.generation += 1
        return pod

    def assume(self, pod: Pod, node_name: str) -> None:
        """Count `pod` on `node_name` now, before the binding is confirmed; a
        nomination it had is spent (upstream's assume deletes it from the nominator)."""
        self.clear_nomination(pod.uid)
        self._pending.pop(pod.uid, None)
        self._place(pod, node_name)
        self.generation += 1

    def forget(self, pod: Pod) -> None:
        """Undo `assume` after a failed bind: the pod is pending again."""
        self._unplace(pod.uid)
        self._pending[pod.uid] = pod
        self.generation += 1

    def _place(self, pod: Pod, node_name: str) -> None:
        self._bound[pod.uid] = node_name
        self.pod_groups.count_placed(pod, +1)
        if has_pod_affinity(pod):
            self._affinity_of[pod.uid] = 1
            self.pods_with_affinity += 1
        info = self._nodes.get(node_name)
        if info is None:
            self._orphans.setdefault(node_name, {})[pod.uid] = pod
        else:
            info.add_pod(pod)
            self._count_claims(pod, +1)
            self._touch(node_name)

    # change log
    _LOG_LIMIT = 1 << 16

    def _touch(self, node_name: str) -> None:
        self._log.append(node_name)
        if len(self._log) > self._LOG_LIMIT:
            half = len(self._log) // 2
            del self._log[:half]
            self._log_base += half

    @property
    def epoch(self) -> int:
        """Position in the change log; pass it to `changes_since` later."""
        return self._log_base + len(self._log)

    def changes_since(self, epoch: int) -> set[str] | None:
        """Names of nodes changed since `epoch`, or None when the log no longer reaches
        back that far (the caller must then look at every node)."""
        if epoch < self._log_base:
            return None
        return set(self._log[epoch - self._log_base:])

    def table(self) -> NodeTable:
        """The columnar view of the nodes, synced to the current state."""
        if self._table is None:
            self._table = NodeTable(self)
        else:
            self._table.sync()
        return self._table

    def pending_pods(self) -> list[Pod]:
        return list(self._pending.values())

    def assigned_pods(self) -> list[Pod]:
        """Every pod counted on a node, and every bound pod waiting for its node to be
        known (what kube-scheduler's cache and pod lister hold as assigned)."""
        out = [pod for info in self._nodes.values() for pod in info.pods.values()]
        out += [pod for pods in self._orphans.values() for pod in pods.values()]
        return out

    @property
    def assigned_count(self) -> int:
        """How many pods count on known nodes (scheduler_cache_size{type="pods"})."""
        return len(self._bound)

    def node_of(self, uid: str) -> str | None:
        return self._bound.get(uid)

    # nominator
    @property
    def has_nominations(self) -> bool:
        """Whether any pod is nominated: while none is, cycles skip the nominator."""
        return bool(self._nominated_on)

    def nominated_pods(self, node_name: str) -> list[Pod]:
        """The pods nominated to `node_name`, in the order they were nominated."""
        return list(self._nominated.get(node_name, {}).values())

    def nominated_node(self, uid: str) -> str | None:
        """Where the nominator holds pod `uid` nominated (memory, maybe ahead of the API)."""
        return self._nominated_on.get(uid)

    def nominations(self) -> dict[str, list[Pod]]:
        """Node name -> pods nominated there."""
        return {node: list(pods.values()) for node, pods in self._nominated.items()}

    def nominate(self, pod: Pod, node_name: str) -> None:
        """Hold `pod` nominated to `node_name` (upstream's AddNominatedPod in Override
        mode), an empty name clears it. A pod already bound is never nominated."""
        self.clear_nomination(pod.uid)
        if not node_name or pod.node_name or pod.uid in self._bound:
            return
        self._nominated_on[pod.uid] = node_name
        self._nominated.setdefault(node_name, {})[pod.uid] = pod

    def clear_nomination(self, uid: str) -> None:
        node_name = self._nominated_on.pop(uid, None)
        if node_name is None:
            return
        pods = self._nominated[node_name]
        pods.pop(uid, None)
        if not pods:
            del self._nominated[node_name]

    def sync_nomination(self, pod: Pod, old_nominated_node: str | None) -> None:
        """A pending pod as the informer shows it now (`old_nominated_node`: its
        nominatedNodeName before this update, None for an add), as upstream's
        addNominatedPod/UpdateNominatedPod: the API's nomination wins; when neither
        the old nor the new object carries one, a nomination made in memory (ahead of
        the API's copy of our own status patch) is kept, with the newer pod record."""
        node_name = nominated_node_name(pod)
        if not node_name and old_nominated_node == "":
            node_name = self._nominated_on.get(pod.uid, "")
        self.nominate(pod, node_name)

    # pod groups
    def group_counts(self, key: GroupKey) -> GroupCounts:
        """Upstream's PodGroupState of a group: its pods, and those scheduled (assumed
        here or bound in the API). Both kept as counts: asked per member at Permit."""
        return GroupCounts(len(self.pod_groups.members(key)),
                           self.pod_groups.placed(key))

    def group_assumed(self, key: GroupKey) -> list[str]:
        """The uids of the group's pods assumed here but not yet bound in the API."""
        return [uid for uid, pod in self.pod_groups.members(key).items()
                if uid in self._bound and not pod.node_name]

    def group_pending(self, key: GroupKey) -> list[Pod]:
        """The group's pods not placed (not assumed, not bound)."""
        return [p for uid, p in self.pod_groups.members(key).items() if uid in self._pending]

    @contextmanager
    def what_if(self, *, remove: Iterable[Pod] = (),
                place: Iterable[tuple[Pod, str]] = ()) -> Iterator[ClusterState]:
        """The state with `remove` gone from their nodes and each (pod, node) of `place`
        counted there, until the block ends; then exactly as before (pending pods
        pending again, bound and assumed pods on their nodes). Preemption's dry runs
        (victims removed) and nominated pods (counted on their nominated node) ask the
        plugins about such a state; their views follow the change log both ways."""
        removed: list[tuple[Pod, str]] = []
        placed: list[tuple[Pod, str | None, bool]] = []
        try:
            for pod in remove:
                node = self._bound.get(pod.uid)
                if node is not None:
                    current = self._unplace(pod.uid)
                    removed.append((current or pod, node))
            for pod, node in place:
                before = self._bound.get(pod.uid)
                was_pending = pod.uid in self._pending
                if before is not None:
                    current = self._unplace(pod.uid)
                    pod = current or pod
                self._pending.pop(pod.uid, None)
                self._place(pod, node)
                self.generation += 1
                placed.append((pod, before, was_pending))
            yield self
        finally:
            for pod, before, was_pending in reversed(placed):
                self._unplace(pod.uid)
                if before is not None:
                    self._place(pod, before)
                elif was_pending:
                    self._pending[pod.uid] = pod
                self.generation += 1
            for pod, node in reversed(removed):
                self._pending.pop(pod.uid, None)
                self._place(pod, node)
                self.generation += 1
