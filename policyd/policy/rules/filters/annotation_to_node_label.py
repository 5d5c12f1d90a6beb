"""`annotationToNodeLabel`: a pod annotation requires a node label.

Inactive when the pod lacks the annotation (or has another value than `value`); a node
without the label fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from policyd.framework.events import ClusterEventWithHint
from policyd.model.records import Pod
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


class AnnotationToNodeLabel(FilterRule):
    kind = schemas.ANNOTATION_TO_NODE_LABEL
    autoscaler_visible = ALWAYS
    reads_pod = True

    def __init__(self, rule_id: str, message: str, spec: Mapping[str, Any]) -> None:
        super().__init__(rule_id, message)
        self.annotation: str = spec["annotation"]
        self.value: str | None = spec.get("value")
        self.label: str = spec["label"]
        self.label_value: str | None = spec.get("labelValue")
        self.use_annotation_value = bool(spec.get("useAnnotationValue"))

    def _expected(self, pod: Pod) -> tuple[bool, str | None]:
        """(active for the pod, the label value a node must have: None for none)."""
        actual = pod.annotations.get(self.annotation)
        if actual is None or (self.value is not None and actual != self.value):
            return False, None
        return True, actual if self.use_annotation_value else self.label_value

    def bind(self, policy: RulePolicy, pod: Pod) -> NodeCheck | None:
        active, expected = self._expected(pod)
        if not active:
            return None
        label = self.label
        return lambda info: info.node.labels.get(label) == expected

    def project(self, pod: Pod) -> Projection | None:
        active, expected = self._expected(pod)
        if not active:
            return None
        if expected is None:
            return Projection(({"key": self.label, "operator": "DoesNotExist"},))
        return Projection(({"key": self.label, "operator": "In", "values": [expected]},))

    def mask(self, check: NodeCheck, policy: RulePolicy, pod: Pod, table: NodeTable,
             idx: IntArray) -> BoolArray:
        return label_group_mask((self.label,), check, table, idx)

    def node_label_keys(self) -> tuple[str, ...]:
        return (self.label,)

    def events(self, policy: RulePolicy) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(NODE_LABELS, node_hint(policy, self)),)
