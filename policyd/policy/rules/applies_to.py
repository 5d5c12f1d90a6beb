"""Which pods a policy applies to: the `appliesTo` section, compiled once.

An absent section applies to every pod; a `condition` that raises applies to no pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyd.model.pod_groups import group_key
from policyd.model.records import Pod
from policyd.model.selectors import LabelSelector, compile_label_selector
from policyd.policy.jmes import Expression, truthy


class AppliesTo:
    """Which pods a policy applies to; every part ANDed, absent parts match all."""

    __slots__ = ("annotations", "condition", "exclude", "group_member", "group_names",
                 "include", "labels")

    def __init__(self, spec: Mapping[str, Any] | None) -> None:
        spec = spec or {}
        ns = spec.get("namespaces") or {}
        self.include: frozenset[str] | None = frozenset(ns["include"]) \
            if ns.get("include") else None
        self.exclude: frozenset[str] = frozenset(ns.get("exclude") or ())
        self.labels: LabelSelector | None = compile_label_selector(spec["labelSelector"]) \
            if "labelSelector" in spec else None
        ann = spec.get("annotationSelector")
        self.annotations: LabelSelector | None = compile_label_selector({
            "matchLabels": ann.get("matchAnnotations") or {},
            "matchExpressions": ann.get("matchExpressions") or [],
        }) if ann is not None else None
        cond = spec.get("condition")
        self.condition: Expression | None = Expression(cond) if cond else None
        group = spec.get("podGroup") or {}
        # Members of a pod group (either API) only, or pods of none; and of which groups.
        self.group_member: bool | None = group.get("member")
        names = group.get("names")
        self.group_names: frozenset[str] | None = frozenset(names) \
            if names is not None else None

    def matches(self, pod: Pod) -> bool:
        if self.include is not None and pod.namespace not in self.include:
            return False
        if pod.namespace in self.exclude:
            return False
        if self.labels is not None and not self.labels.matches(pod.labels):
            return False
        if self.annotations is not None and not self.annotations.matches(pod.annotations):
            return False
        if self.group_member is not None or self.group_names is not None:
            group = group_key(pod)
            if self.group_member is not None and self.group_member != (group is not None):
                return False
            if self.group_names is not None and (group is None
                                                 or group.name not in self.group_names):
                return False
        if self.condition is not None:
            try:
                return truthy(self.condition.search(pod.raw))
            except Exception:  # a JMESPath runtime error: the policy does not apply
                return False
        return True
