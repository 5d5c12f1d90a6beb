"""`cel` filters: a CEL expression over `pod` and `node` (see policyd/policy/celexpr.py);
the node passes when it gives true.

False, a non-bool result (an expression typed dyn) or an evaluation error (a missing
key, which CEL does not read as null) rejects the node.
"""

from __future__ import annotations

from policyd.framework.events import ClusterEventWithHint
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.policy.celexpr import CelInput
from policyd.policy.requeue import NODE_ANY, node_hint
from policyd.policy.rules.base import FilterRule, NodeCheck, RulePolicy
from policyd.policy.rules.filters import schemas


class CelFilter(FilterRule):
    kind = schemas.CEL
    reads_pod = True

    def __init__(self, rule_id: str, message: str, source: str) -> None:
        super().__init__(rule_id, message)
        self.expr = CelInput(source, rule_id)
        # Only a rule that names `pod` can change its verdict when the pod does.
        self.reads_pod = self.expr.reads_pod

    def node_label_keys(self) -> tuple[str, ...]:
        return self.expr.node_label_keys()

    def bind(self, policy: RulePolicy, pod: Pod) -> NodeCheck | None:
        evaluate = self.expr.bind(pod.raw)

        def check(info: NodeInfo) -> bool:
            try:
                return evaluate(info.node) is True
            except Exception:  # an evaluation error rejects the node
                return False
        return check

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(NODE_ANY, node_hint(policy, self)),)
