"""`nodeLabels`: node labels that must match, with Kubernetes semantics.

NotIn and DoesNotExist match a missing label; In, Exists, Gt and Lt do not; Gt/Lt never
match a value that is not an integer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from policyd.framework.events import ClusterEventWithHint
from policyd.model.records import Pod
from policyd.model.selectors import NodeSelectorTerm, compile_node_selector_term
from policyd.policy.requeue import NODE_LABELS, node_hint
from policyd.policy.rules.base import (
    ALWAYS,
    FilterRule,
    NodeCheck,
    Projection,
    RulePolicy,
    label_group_mask,
)
from policyd.policy.rules.filters import schemas

if TYPE_CHECKING:
    from policyd.model.table import BoolArray, IntArray, NodeTable


class NodeLabels(FilterRule):
    kind = schemas.NODE_LABELS
    autoscaler_visible = ALWAYS

    def __init__(self, rule_id: str, message: str, spec: Mapping[str, Any]) -> None:
        super().__init__(rule_id, message)
        exprs = [{"key": k, "operator": "In", "values": [v]}
                 for k, v in (spec.get("matchLabels") or {}).items()]
        exprs.extend(spec.get("matchExpressions") or [])
        self.term: NodeSelectorTerm = compile_node_selector_term({"matchExpressions": exprs})
        # As kube-scheduler's NodeSelectorRequirements (the same semantics, the
        # spelling given): what the rule projects to.
        self.expressions = tuple(
            {"key": e["key"], "operator": e["operator"],
             **({"values": [str(v) for v in e["values"]]} if e.get("values") else {})}
            for e in exprs)

    def project(self, pod: Pod) -> Projection:
        return Projection(self.expressions)

    def bind(self, policy: RulePolicy, pod: Pod) -> NodeCheck | None:
        reqs = self.term.label_requirements
        return lambda info: all(r.matches(info.node.labels) for r in reqs)

    def mask(self, check: NodeCheck, policy: RulePolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        keys = tuple(sorted({r.key for r in self.term.label_requirements}))
        return label_group_mask(keys, check, table, idx)

    def node_label_keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.key for r in self.term.label_requirements))

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(NODE_LABELS, node_hint(policy, self)),)
