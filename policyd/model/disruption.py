"""PodDisruptionBudgets and PriorityClasses, as raw JSON, for preemption.

DefaultPreemption counts, for each set of victims it considers, how many would break a
PodDisruptionBudget (upstream's filterPodsWithPDBViolation reads the budgets' selector,
namespace, `status.disruptionsAllowed` and `status.disruptedPods`). PriorityClasses
are kept so that the daemon (informers) and the offline commands (snapshots) see the
same objects; kube-scheduler itself only reads a pod's resolved `spec.priority`.

The same container serves the daemon and the offline commands, like
`policyd.model.storage`: objects stay raw, and what preemption reads from a budget is
decoded once per object version (`DisruptionBudgets.budgets`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.model.records import Pod
from policyd.model.selectors import LabelSelector, SelectorError, compile_label_selector
from policyd.model.storage import DecodeMemo

# Kinds held here, as they appear in snapshot files and `kind:` fields.
POD_DISRUPTION_BUDGET = "PodDisruptionBudget"
PRIORITY_CLASS = "PriorityClass"
DISRUPTION_KINDS = (POD_DISRUPTION_BUDGET, PRIORITY_CLASS)


def disruption_key(kind: str, obj: Mapping[str, Any]) -> str:
    """`namespace/name` for a budget (namespaced), `name` for a PriorityClass."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    if kind == POD_DISRUPTION_BUDGET:
        return f"{meta.get('namespace') or 'default'}/{name}"
    return name


@dataclass(frozen=True, slots=True)
class Budget:
    """What preemption reads from one PodDisruptionBudget."""

    namespace: str
    name: str
    # None: the budget protects no pod. Upstream skips a budget whose selector is nil,
    # empty ("selector.Empty()") or does not convert (LabelSelectorAsSelector fails).
    selector: LabelSelector | None
    disruptions_allowed: int
    # Pods the disruption controller already counted as disrupted: evicting one of
    # them again does not use up the budget (status.disruptedPods, by pod name).
    disrupted_pods: frozenset[str]

    def covers(self, pod: Pod) -> bool:
        """Whether evicting `pod` draws on this budget (namespace and selector; a pod
        with no labels matches no budget, as upstream short-cuts it)."""
        return (self.selector is not None and bool(pod.labels)
                and pod.namespace == self.namespace and self.selector.matches(pod.labels))


def decode_budget(obj: Mapping[str, Any]) -> Budget:
    """A budget from raw JSON. Never raises: a malformed field protects nothing (the
    selector) or allows nothing (`disruptionsAllowed`, as a missing status reads 0)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    selector: LabelSelector | None = None
    raw_selector = spec.get("selector") if isinstance(spec, Mapping) else None
    if raw_selector is not None:
        try:
            compiled = compile_label_selector(raw_selector)
        except SelectorError:
            compiled = None
        if compiled is not None and not compiled.is_empty:
            selector = compiled
    allowed = status.get("disruptionsAllowed") if isinstance(status, Mapping) else None
    disrupted = status.get("disruptedPods") if isinstance(status, Mapping) else None
    return Budget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        selector=selector,
        disruptions_allowed=allowed if isinstance(allowed, int)
        and not isinstance(allowed, bool) else 0,
        disrupted_pods=frozenset(disrupted) if isinstance(disrupted, Mapping) else frozenset(),
    )


class DisruptionBudgets:
    """PodDisruptionBudgets (by `namespace/name`) and PriorityClasses (by name), raw."""

    def __init__(self) -> None:
        self._memo = DecodeMemo()
        self.pdbs: dict[str, dict[str, Any]] = {}
        self.priority_classes: dict[str, dict[str, Any]] = {}
        self._by_kind = {POD_DISRUPTION_BUDGET: self.pdbs, PRIORITY_CLASS: self.priority_classes}
        # Bumped on every change, so caches derived from the objects can tell staleness.
        self.generation = 0

    def upsert(self, kind: str, obj: dict[str, Any]) -> None:
        objects = self._by_kind[kind]
        key = disruption_key(kind, obj)
        self._memo.forget(objects.get(key))
        objects[key] = obj
        self.generation += 1

    def delete(self, kind: str, key: str) -> None:
        old = self._by_kind[kind].pop(key, None)
        if old is not None:
            self._memo.forget(old)
            self.generation += 1

    def budgets(self) -> list[Budget]:
        """Every PodDisruptionBudget, decoded once per stored version, in a stable
        order (by key: upstream's lister order is a map's, i.e. none in particular)."""
        return [self._memo.get(self.pdbs[key], "budget", decode_budget)
                for key in sorted(self.pdbs)]

    def priority_value(self, class_name: str) -> int | None:
        """The `value` of PriorityClass `class_name`, None when unknown or malformed."""
        obj = self.priority_classes.get(class_name)
        value = obj.get("value") if obj is not None else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None
