"""`sameTopology`: the pods of one pod group share one domain of a node label.

A gang spread over zones pays cross-zone traffic on every all-reduce; a rule keeps it
in one zone (or rack). For a pod of a group (either PodGroup API: `model.pod_groups`),
a node passes when it has the label and, once some of the group's pods are placed
(bound, assumed, or placed earlier in the same group cycle), its value is one of
theirs. A pod of no group is not constrained.

Pod by pod (scheduler-plugins' groups), the first member placed picks the domain (by
the scores, as any pod). In a pod group cycle (scheduling.k8s.io groups) a group that
does not fit in the domain its first member picked is tried again one domain at a time
(`PodGroups.pinned`, in the order of the domains' values), and takes the first that
holds it whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from policyd.framework.events import ClusterEventWithHint
from policyd.model.node_info import NodeInfo
from policyd.model.pod_groups import group_key
from policyd.model.records import Pod
from policyd.policy.requeue import NODE_LABELS, POD_COUNTED
from policyd.policy.rules.base import FilterRule, NodeCheck, RulePolicy
from policyd.policy.rules.filters import schemas

if TYPE_CHECKING:
    from policyd.model.cluster import ClusterState


class SameTopology(FilterRule):
    kind = schemas.SAME_TOPOLOGY
    reads_cluster = True

    def __init__(self, rule_id: str, message: str, spec: dict[str, str]) -> None:
        super().__init__(rule_id, message)
        self.key = spec["key"]

    def node_label_keys(self) -> tuple[str, ...]:
        return (self.key,)

    def group_topology_key(self) -> str | None:
        return self.key

    def bind(self, policy: RulePolicy, pod: Pod) -> NodeCheck | None:
        return self.bind_in(policy, pod, None)

    def bind_in(self, policy: RulePolicy, pod: Pod, cluster: ClusterState | None
                ) -> NodeCheck | None:
        group = group_key(pod)
        if group is None:
            return None
        key = self.key
        domains: set[str] = set()
        if cluster is not None:
            for uid in cluster.pod_groups.members(group):
                node = cluster.node_of(uid)
                info = cluster.get(node) if node is not None and uid != pod.uid else None
                if info is not None and key in info.node.labels:
                    domains.add(info.node.labels[key])
            pinned = cluster.pod_groups.pinned.get(group)
            if not domains and pinned is not None and pinned[0] == key:
                domains.add(pinned[1])

        def check(info: NodeInfo) -> bool:
            value = info.node.labels.get(key)
            return value is not None and (not domains or value in domains)
        return check

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        # A node labelled into the domain; members leaving it (deleted, finished).
        return (ClusterEventWithHint(NODE_LABELS), ClusterEventWithHint(POD_COUNTED))
