"""filterPodsWithPDBViolation: which victims break a budget, evicted in order."""

from __future__ import annotations

from policyd.model.disruption import decode_budget
from policyd.plugins.defaultpreemption.pdb import split_by_pdb_violation
from tests.unit.plugins.defaultpreemption.scene import LOW, budget, names, running


def test_each_covering_budget_is_drawn_on_and_order_decides_who_violates() -> None:
    a = running("a", "n", LOW, app="web", tier="front")
    b = running("b", "n", LOW, app="web")
    c = running("c", "n", LOW, tier="front")
    plain = running("plain", "n", LOW)
    budgets = [decode_budget(budget("web", 1, app="web")),
               decode_budget(budget("front", 1, tier="front"))]
    violating, clean = split_by_pdb_violation([a, b, c, plain], budgets)
    # `a` uses up both budgets; `b` and `c` each break one.
    assert (names(violating), names(clean)) == (["b", "c"], ["a", "plain"])
    violating, clean = split_by_pdb_violation([plain, c, b, a], budgets)
    assert (names(violating), names(clean)) == (["a"], ["plain", "c", "b"])


def test_already_disrupted_pods_do_not_draw_on_the_budget() -> None:
    pods = [running(f"x{i}", "n", LOW, app="web") for i in range(3)]
    budgets = [decode_budget(budget("web", 1, disrupted=["x0"], app="web"))]
    violating, clean = split_by_pdb_violation(pods, budgets)
    assert (names(violating), names(clean)) == (["x2"], ["x0", "x1"])
