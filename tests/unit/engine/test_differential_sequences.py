"""The differential test's sequence cases, without an API server: generation is
deterministic, isolated and contended (the queue order decides who fits often enough
to be worth comparing), orders are compared up to equal priorities, and the Tally
counts and enforces what a run covered."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.engine.simulate import queue_order
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod, node_from_dict, pod_from_dict
from tests.gen.differential import (
    CASE_LABEL,
    PRIORITY_CLASSES,
    SEQUENCE,
    SEQUENCE_SCHEDULER_NAME,
    UNDER_TEST_LABEL,
    gen_sequence_case,
)
from tests.integration.differential.runner import (
    MESSAGE_COMPARED,
    SCORE_COMPARED,
    SCORED,
    UNSCHEDULABLE,
    KubeDecision,
    Tally,
)
from tests.integration.differential.sequences import (
    ORDER_SENSITIVE,
    QUEUED,
    SEQUENCES,
    SequenceOutcome,
    SequenceStep,
    _same_up_to_ties,
)


def test_sequence_cases_are_a_function_of_seed_and_index() -> None:
    a, b = gen_sequence_case(3, 7, "x"), gen_sequence_case(3, 7, "x")
    assert json.dumps([a.nodes, a.pods, a.queue, a.workloads], sort_keys=True) == \
        json.dumps([b.nodes, b.pods, b.queue, b.workloads], sort_keys=True)
    c = gen_sequence_case(3, 8, "x")
    assert json.dumps(c.queue, sort_keys=True) != json.dumps(a.queue, sort_keys=True)


@pytest.mark.parametrize("index", range(30))
def test_queued_pods_stay_inside_their_case(index: int) -> None:
    case = gen_sequence_case(11, index, f"q{index}")
    assert 3 <= len(case.queue) <= 8
    assert len({p["metadata"]["namespace"] for p in case.queue}) == 1
    for pod in case.queue:
        assert pod["metadata"]["namespace"] in case.namespaces
        assert pod["metadata"]["labels"][UNDER_TEST_LABEL] == SEQUENCE
        assert pod["spec"]["schedulerName"] == SEQUENCE_SCHEDULER_NAME
        assert pod["spec"]["nodeSelector"][CASE_LABEL] == f"q{index}"
        assert pod["spec"]["priorityClassName"] in PRIORITY_CLASSES
        assert "nodeName" not in pod["spec"]
    for node in case.nodes:
        assert node["metadata"]["labels"][CASE_LABEL] == f"q{index}"


def _as_admitted(pod: dict[str, Any], index: int) -> Pod:
    """The pod as the API server stores it: priority from its class, a uid."""
    out = copy.deepcopy(pod)
    out["spec"]["priority"] = PRIORITY_CLASSES[out["spec"]["priorityClassName"]]
    out["spec"]["preemptionPolicy"] = "Never"  # as every sequence class says
    out["metadata"]["uid"] = f"uid-{index}"
    return pod_from_dict(out)


def _placed(case_index: int, order: str) -> set[str]:
    """The pods policyd places trying them in queue order or in the order of names."""
    case = gen_sequence_case(5, case_index, "c")
    fw = default_framework(seed=1)
    cluster = ClusterState([node_from_dict(n) for n in case.nodes],
                           [pod_from_dict(p) for p in case.pods
                            if not p["metadata"].get("finalizers")])
    cluster.namespace_labels = case.namespaces
    pods = [_as_admitted(p, i) for i, p in enumerate(case.queue)]
    placed = set()
    for pod in queue_order(fw, pods) if order == "queue" else pods:
        result = schedule_one(fw, pod, cluster)
        if result.node is not None:
            cluster.assume(pod, result.node)
            placed.add(pod.name)
    return placed


def test_the_queue_order_often_decides_who_fits() -> None:
    # Measured: 4 to 7 sequences in 24. A generator change that loses contention would
    # make the order comparison prove little; the integration test also requires one.
    sensitive = sum(_placed(i, "queue") != _placed(i, "names") for i in range(24))
    assert sensitive >= 3


def _pods(priorities: dict[str, int]) -> dict[str, Pod]:
    return {key: pod_from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": key.split("/")[1], "namespace": "ns", "uid": key},
        "spec": {"containers": [{"name": "c", "image": "i"}], "priority": priority}})
        for key, priority in priorities.items()}


def test_orders_are_compared_up_to_equal_priorities() -> None:
    pods = _pods({"ns/a": 0, "ns/b": 0, "ns/c": 1000, "ns/d": -10})
    mine = ["ns/c", "ns/a", "ns/b", "ns/d"]
    assert _same_up_to_ties(["ns/c", "ns/b", "ns/a", "ns/d"], mine, pods)
    assert not _same_up_to_ties(["ns/a", "ns/c", "ns/b", "ns/d"], mine, pods)
    assert not _same_up_to_ties(["ns/c", "ns/a", "ns/b"], mine, pods)  # one never tried


def test_a_default_run_needs_a_hundred_score_compared() -> None:
    tally = Tally()
    tally.mix[SCORED] = tally.compared[SCORE_COMPARED] = 99
    assert tally.too_few_score_compared() is None  # a replay of a few cases
    problem = tally.too_few_score_compared(at_least=100)
    assert problem is not None and "only 99 cases" in problem
    tally.mix[SCORED] = tally.compared[SCORE_COMPARED] = 100
    assert tally.too_few_score_compared(at_least=100) is None
    # Missing score lines are reported as such, before the count.
    tally.mix[SCORED] = 200
    problem = tally.too_few_score_compared(at_least=100)
    assert problem is not None and "score lines" in problem


def test_sequences_are_counted_in_the_tally() -> None:
    case = gen_sequence_case(1, 0, "t")
    keys = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in case.queue]
    steps = [SequenceStep(k, KubeDecision(), mix=SCORED, compared=SCORE_COMPARED)
             for k in keys[:-1]]
    steps.append(SequenceStep(keys[-1], KubeDecision(), mix=UNSCHEDULABLE,
                              compared=MESSAGE_COMPARED))
    outcome = SequenceOutcome(case, kube_order=keys, policyd_order=keys, steps=steps,
                              order_sensitive=True)
    tally = Tally()
    outcome.count(tally)
    outcome.count(tally)
    assert tally.sequences[SEQUENCES] == 2
    assert tally.sequences[QUEUED] == 2 * len(keys)
    assert tally.sequences[ORDER_SENSITIVE] == 2
    assert tally.mix[SCORED] == 2 * (len(keys) - 1)
    assert tally.compared[MESSAGE_COMPARED] == 2
    assert f"2 {SEQUENCES}, {2 * len(keys)} {QUEUED}" in tally.summary()
