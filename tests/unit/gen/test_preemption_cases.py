"""The preemption cases of the differential test (`tests.gen.preemption`) without an API
server: deterministic, isolated, free of the ties where kube-scheduler's choice is
random, held after deletion, and with budgets whose status is the disruption
controller's; and policyd on them preempts often enough for the test's minimum."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.model.cluster import ClusterState
from policyd.model.disruption import POD_DISRUPTION_BUDGET
from policyd.model.records import node_from_dict, pod_from_dict
from tests.gen.differential import CASE_LABEL, SCHEDULER_NAME, UNDER_TEST_LABEL
from tests.gen.preemption import (
    BUDGET_APP,
    BUDGET_LABEL,
    VICTIM_FINALIZER,
    PreemptionCase,
    gen_preemption_case,
    priority_class_name,
    step_label,
)

Obj = dict[str, Any]
CASES = [gen_preemption_case(11, i, f"x-{i}") for i in range(48)]


def _value(case: PreemptionCase, pod: Obj) -> int:
    classes = {c["metadata"]["name"]: c["value"] for c in case.priority_classes}
    return int(classes[pod["spec"]["priorityClassName"]])


def test_a_case_is_a_function_of_seed_and_index() -> None:
    again = gen_preemption_case(11, 5, "x-5")
    assert json.dumps(again.__dict__, sort_keys=True, default=str) == json.dumps(
        CASES[5].__dict__, sort_keys=True, default=str)
    assert json.dumps(gen_preemption_case(12, 5, "x-5").pods) != json.dumps(CASES[5].pods)


@pytest.mark.parametrize("case", CASES[:16], ids=lambda c: c.prefix)
def test_priorities_are_distinct_and_preemptors_go_in_falling_order(
        case: PreemptionCase) -> None:
    values = [_value(case, p) for p in [*case.pods, *case.steps]]
    assert len(values) == len(set(values))
    steps = [_value(case, p) for p in case.steps]
    assert steps == sorted(steps, reverse=True)
    names = [c["metadata"]["name"] for c in case.priority_classes]
    assert len(names) == len(set(names))
    assert {p["spec"]["priorityClassName"] for p in [*case.pods, *case.steps]} <= set(names)


@pytest.mark.parametrize("case", CASES[:16], ids=lambda c: c.prefix)
def test_a_case_is_isolated_and_its_victims_are_held(case: PreemptionCase) -> None:
    assert len(case.nodes) <= 5  # all potential nodes are dry-run: no offset matters
    namespaces = set(case.namespaces)
    for node in case.nodes:
        assert node["metadata"]["name"].startswith(case.prefix)
        assert node["metadata"]["labels"][CASE_LABEL] == case.prefix
    for pod in case.pods:
        assert pod["metadata"]["namespace"] in namespaces
        assert pod["spec"]["nodeName"] in case.node_names
        assert pod["metadata"]["finalizers"] == [VICTIM_FINALIZER]
        assert pod["spec"]["terminationGracePeriodSeconds"] == 0
    for k, step in enumerate(case.steps):
        assert step["spec"]["schedulerName"] == SCHEDULER_NAME
        assert step["spec"]["nodeSelector"][CASE_LABEL] == case.prefix
        assert step["metadata"]["labels"][UNDER_TEST_LABEL] == step_label(k)
        assert "nodeName" not in step["spec"] and "finalizers" not in step["metadata"]


def test_budgets_carry_the_disruption_controllers_status() -> None:
    budgets = [(c, b) for c in CASES for b in c.budgets]
    assert len(budgets) >= 10
    kinds = {k for _, b in budgets for k in ("minAvailable", "maxUnavailable")
             if k in b["spec"]}
    assert kinds == {"minAvailable", "maxUnavailable"}
    for case, b in budgets:
        covered = [p for p in case.pods
                   if p["metadata"]["labels"].get(BUDGET_LABEL) == BUDGET_APP]
        status, spec = b["status"], b["spec"]
        assert status["expectedPods"] == status["currentHealthy"] == len(covered)
        expected = (len(covered) - spec["minAvailable"] if "minAvailable" in spec
                    else spec["maxUnavailable"])
        assert status["disruptionsAllowed"] == max(0, expected)
    assert any(b["status"]["disruptionsAllowed"] == 0 for _, b in budgets)


def test_never_classes_say_so() -> None:
    never = [c for case in CASES for c in case.priority_classes
             if c["metadata"]["name"].endswith("-never")]
    assert never and all(c["preemptionPolicy"] == "Never" for c in never)
    assert priority_class_name(7, never=True) == "diff-prio-7-never"


def test_policyd_preempts_in_most_first_steps() -> None:
    """Offline, each case's first preemptor on its own cluster: the generator is tuned
    so that preemption happens (the integration test requires enough of it)."""
    fw = default_framework(seed=0)
    nominated = 0
    for case in CASES:
        cluster = ClusterState([node_from_dict(n) for n in case.nodes],
                               [pod_from_dict(_with_priority(case, p)) for p in case.pods])
        for b in case.budgets:
            cluster.disruption_budgets.upsert(POD_DISRUPTION_BUDGET, b)
        result = schedule_one(fw, pod_from_dict(_with_priority(case, case.steps[0])), cluster)
        nominated += bool(result.post_filter and result.post_filter.nominated_node)
    assert nominated >= len(CASES) // 3


def _with_priority(case: PreemptionCase, pod: Obj) -> Obj:
    """The pod as the priority admission plugin stores it."""
    out: Obj = json.loads(json.dumps(pod))
    out["spec"]["priority"] = _value(case, pod)
    if pod["spec"]["priorityClassName"].endswith("-never"):
        out["spec"]["preemptionPolicy"] = "Never"
    out["metadata"].setdefault("uid", f"uid-{pod['metadata']['name']}")
    return out
