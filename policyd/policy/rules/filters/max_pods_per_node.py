"""`maxPodsPerNode`: at most this many pods the policy applies to on one node.

The pod itself, if already counted on a node, does not count against it.
"""

from __future__ import annotations

from policyd.framework.events import ClusterEventWithHint
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.policy.requeue import NODE_ADDED, POD_COUNTED, uncounted_hint
from policyd.policy.rules.base import FilterRule, NodeCheck, RulePolicy
from policyd.policy.rules.filters import schemas


class MaxPodsPerNode(FilterRule):
    kind = schemas.MAX_PODS_PER_NODE
    unresolvable = False

    def __init__(self, rule_id: str, message: str, cap: int) -> None:
        super().__init__(rule_id, message)
        self.cap = int(cap)

    def bind(self, policy: RulePolicy, pod: Pod) -> NodeCheck | None:
        cap, uid, applies = self.cap, pod.uid, policy.applies

        def check(info: NodeInfo) -> bool:
            n = 0
            for other in info.pods.values():
                if other.uid != uid and applies(other):
                    n += 1
                    if n >= cap:
                        return False
            return True
        return check

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(NODE_ADDED),
                ClusterEventWithHint(POD_COUNTED, uncounted_hint(policy)))
