"""`jmespath` filters: a JMESPath expression over {pod, node}; the node passes when the
result is truthy.

A missing field is null; a result that is not truthy, or an evaluation error, rejects
the node.
"""

from __future__ import annotations

from policyd.framework.events import ClusterEventWithHint
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.policy.jmes import Expression, truthy
from policyd.policy.requeue import NODE_ANY, node_hint
from policyd.policy.rules.base import FilterRule, NodeCheck, RulePolicy
from policyd.policy.rules.filters import schemas


class JmesFilter(FilterRule):
    kind = schemas.JMESPATH
    reads_pod = True

    def __init__(self, rule_id: str, message: str, source: str) -> None:
        super().__init__(rule_id, message)
        self.expr = Expression(source)

    def bind(self, policy: RulePolicy, pod: Pod) -> NodeCheck | None:
        raw = pod.raw
        search = self.expr.search

        def check(info: NodeInfo) -> bool:
            # A fresh two-key dict per node (cheap next to the search itself) keeps the
            # check safe if nodes are ever filtered from several threads.
            try:
                return truthy(search({"pod": raw, "node": info.node.raw}))
            except Exception:  # a runtime error in the expression rejects the node
                return False
        return check

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(NODE_ANY, node_hint(policy, self)),)
