"""PodDisruptionBudget violations of a set of victims (filterPodsWithPDBViolation)."""

from __future__ import annotations

from collections.abc import Sequence

from policyd.model.disruption import Budget
from policyd.model.records import Pod


def split_by_pdb_violation(pods: Sequence[Pod], budgets: Sequence[Budget]
                           ) -> tuple[list[Pod], list[Pod]]:
    """(violating, non-violating) pods, each in the order given.

    Evicting the pods in order draws on every budget covering each pod; a pod whose
    eviction takes any covering budget below zero disruptions allowed is violating.
    A pod the budget already lists in `disruptedPods` does not draw on it again (the
    disruption controller counted it already)."""
    allowed = [b.disruptions_allowed for b in budgets]
    violating: list[Pod] = []
    non_violating: list[Pod] = []
    for pod in pods:
        violates = False
        for i, budget in enumerate(budgets):
            if not budget.covers(pod) or pod.name in budget.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                violates = True
        (violating if violates else non_violating).append(pod)
    return violating, non_violating
