"""The differential test's own pieces that need no API server: case generation is
deterministic and isolated, pinned copies keep the pod's constraints, the
FailedScheduling parser reads what `fit_error_message` writes, the columnar path's
recorded scores are the reference path's, and a score difference is reported."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.framework.fit_error import Diagnosis, fit_error_message
from policyd.framework.status import Status
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict, pod_from_dict
from tests.gen.clusters import HOSTNAME
from tests.gen.differential import CASE_LABEL, gen_case, pinned_copy
from tests.integration.differential.runner import (
    MESSAGE_COMPARED,
    SCORE_COMPARED,
    SCORED,
    TOTAL,
    UNSCHEDULABLE,
    VERDICT_ONLY,
    ColumnarScores,
    KubeDecision,
    Outcome,
    Tally,
    _alternate,
    check_best,
    parse_fit_error,
    record_score_diffs,
    reference_scores,
    split_fit_error,
)


def test_cases_are_a_function_of_seed_and_index() -> None:
    a, b = gen_case(3, 7, "x"), gen_case(3, 7, "x")
    assert json.dumps([a.nodes, a.pods, a.pod, a.workloads], sort_keys=True) == \
        json.dumps([b.nodes, b.pods, b.pod, b.workloads], sort_keys=True)
    c = gen_case(3, 8, "x")
    assert json.dumps(c.nodes, sort_keys=True) != json.dumps(a.nodes, sort_keys=True)


@pytest.mark.parametrize("index", range(40))
def test_cases_stay_inside_their_prefix(index: int) -> None:
    case = gen_case(11, index, f"p{index}")
    for node in case.nodes:
        assert node["metadata"]["name"].startswith(f"p{index}-")
        assert node["metadata"]["labels"][CASE_LABEL] == f"p{index}"
    assert case.pod["spec"]["nodeSelector"][CASE_LABEL] == f"p{index}"
    for pod in [*case.pods, case.pod]:
        assert pod["metadata"]["namespace"] in case.namespaces
        assert pod["spec"].get("nodeName", case.node_names[0]) in case.node_names
    # Every namespaceSelector is scoped to the case's namespaces.
    text = json.dumps([*case.pods, case.pod])
    assert text.count('"namespaceSelector"') == text.count(
        f'"namespaceSelector": {{"matchLabels": {{"{CASE_LABEL}": "p{index}"')


@pytest.mark.parametrize("index", range(40))
def test_generated_objects_decode(index: int) -> None:
    case = gen_case(5, index, "d")
    cluster = ClusterState([node_from_dict(n) for n in case.nodes],
                           [pod_from_dict(p) for p in case.pods])
    result = schedule_one(default_framework(seed=1), pod_from_dict(case.pod), cluster)
    assert result.error is None


def test_pinned_copy_adds_hostname_to_every_term() -> None:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}},
           "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n9",
                    "affinity": {"nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "k", "operator": "Exists"}]},
                                {"matchFields": [{"key": "metadata.name", "operator": "In",
                                                  "values": ["n1"]}]}]}}}}}
    out = pinned_copy(pod, "n1", "copy")
    assert out["metadata"] == {"name": "copy", "namespace": "ns", "labels": {"app": "a"}}
    assert "nodeName" not in out["spec"]
    terms = out["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    pin = {"key": HOSTNAME, "operator": "In", "values": ["n1"]}
    assert terms[0]["matchExpressions"] == [{"key": "k", "operator": "Exists"}, pin]
    assert terms[1]["matchExpressions"] == [pin]
    # The original is untouched.
    assert len(pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"]) == 1


def test_pinned_copy_without_affinity() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    out = pinned_copy(pod, "n1", "copy")
    assert out["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"] == {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["n1"]}]}]}


def test_parse_fit_error_reads_fit_error_message() -> None:
    diagnosis = Diagnosis(node_to_status={
        "a": Status.unschedulable("Insufficient cpu", "Insufficient memory"),
        "b": Status.unschedulable("node(s) didn't match Pod's node affinity/selector"),
        **{f"n{i}": Status.unschedulable("node(s) had untolerated taint(s)")
           for i in range(10)}})
    message = fit_error_message(12, diagnosis)
    assert parse_fit_error(message) == (12, {
        "Insufficient cpu": 1, "Insufficient memory": 1,
        "node(s) didn't match Pod's node affinity/selector": 1,
        "node(s) had untolerated taint(s)": 10})
    assert parse_fit_error("0/3 nodes are available: "
                           "3 node(s) didn't satisfy plugin(s) [NodeAffinity].") == (
        3, {"node(s) didn't satisfy plugin(s) [NodeAffinity]": 3})
    assert parse_fit_error("0/0 nodes are available:") == (0, {})
    assert parse_fit_error("something else") is None


def test_the_post_filter_part_is_split_off_and_not_counted() -> None:
    message = ("0/3 nodes are available: 1 Insufficient example.com/gpu, 2 node(s) had "
               "untolerated taint(s). preemption: 0/3 nodes are available: 1 No preemption "
               "victims found for incoming pod, 2 Preemption is not helpful for scheduling.")
    filters, post_filter = split_fit_error(message)
    assert filters == ("0/3 nodes are available: 1 Insufficient example.com/gpu, "
                       "2 node(s) had untolerated taint(s).")
    assert post_filter.startswith("preemption: 0/3 nodes are available: 1 No preemption")
    assert parse_fit_error(message) == (3, {"Insufficient example.com/gpu": 1,
                                            "node(s) had untolerated taint(s)": 2})
    assert split_fit_error("0/1 nodes are available: 1 Insufficient cpu.") == (
        "0/1 nodes are available: 1 Insufficient cpu.", "")


def _cluster(case_seed: int, index: int) -> tuple[ClusterState, dict[str, Any]]:
    case = gen_case(case_seed, index, "d")
    return ClusterState([node_from_dict(n) for n in case.nodes],
                        [pod_from_dict(p) for p in case.pods]), case.pod


def test_columnar_scores_are_recorded_without_changing_the_decision() -> None:
    scored = 0
    for index in range(120):
        cluster, pod = _cluster(9, index)
        fw = default_framework(seed=1)
        recorder = ColumnarScores(fw)
        result = schedule_one(fw, pod_from_dict(pod), cluster)
        plain = schedule_one(default_framework(seed=1), pod_from_dict(pod), cluster)
        assert (result.node, result.feasible) == (plain.node, plain.feasible)
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        if len(result.feasible) < 2:
            assert key not in recorder.by_pod  # nothing to score, as upstream
            continue
        scored += 1
        ref = schedule_one(default_framework(seed=1), pod_from_dict(pod), cluster,
                           reference=True)
        assert ref.scores is not None
        assert recorder.by_pod[key] == reference_scores(ref.scores)
        for by_plugin in recorder.by_pod[key].values():
            assert by_plugin[TOTAL] == sum(v for k, v in by_plugin.items() if k != TOTAL)
    assert scored >= 8


def _outcome() -> Outcome:
    return Outcome(gen_case(1, 0, "d"), KubeDecision(node="n1"))


def test_diff_scores_names_every_difference() -> None:
    o = _outcome()
    same = {"n1": {"A": 1, TOTAL: 1}}
    record_score_diffs(o, "kube", same, "mine", {"n1": {"A": 1, TOTAL: 1}})
    assert o.problems == []
    record_score_diffs(o, "kube", {"n1": {"A": 1, TOTAL: 1}, "n2": {"A": 0, TOTAL: 0}},
                 "mine", {"n1": {"A": 2, "B": 0, TOTAL: 2}})
    assert o.problems == [
        "weighted scores differ (kube vs mine): n1 (total): kube 1, mine 2; "
        "n1 A: kube 1, mine 2; n1 B: kube None, mine 0; n2 (total): kube 0, mine None; "
        "n2 A: kube 0, mine None"]


def test_check_best_requires_a_highest_total() -> None:
    for index in range(60):
        cluster, pod = _cluster(9, index)
        ref = schedule_one(default_framework(seed=1), pod_from_dict(pod), cluster,
                           reference=True)
        if ref.scores is not None and len(set(ref.scores.totals)) > 1:
            break
    assert ref.scores is not None
    names = [n.name for n in ref.scores.nodes]
    best = names[ref.scores.totals.index(max(ref.scores.totals))]
    worst = names[ref.scores.totals.index(min(ref.scores.totals))]
    o = _outcome()
    check_best(o, ref.scores, best, "kube-scheduler")
    check_best(o, ref.scores, None, "kube-scheduler")
    assert o.problems == []
    check_best(o, ref.scores, worst, "kube-scheduler")
    assert len(o.problems) == 1
    assert o.problems[0].startswith(f"kube-scheduler chose {worst}, which policyd's "
                                    "reference path scores")


def test_probes_alternate_rejected_and_accepted_nodes() -> None:
    assert _alternate(["r1", "r2", "r3"], ["a1"]) == ["r1", "a1", "r2", "r3"]
    assert _alternate([], ["a1", "a2"]) == ["a1", "a2"]
    assert _alternate([], []) == []


def test_tally_fails_a_run_whose_scores_were_not_compared() -> None:
    tally = Tally()
    assert tally.too_few_score_compared() is None  # nothing scored, nothing owed
    for _ in range(9):
        tally.add(Outcome(gen_case(1, 0, "d"), KubeDecision(), mix=SCORED,
                          compared=SCORE_COMPARED))
    tally.add(Outcome(gen_case(1, 0, "d"), KubeDecision(), mix=SCORED,
                      compared=VERDICT_ONLY))
    tally.add(Outcome(gen_case(1, 0, "d"), KubeDecision(), mix=UNSCHEDULABLE,
                      compared=MESSAGE_COMPARED))
    assert tally.too_few_score_compared() is None  # 9 of 10
    tally.add(Outcome(gen_case(1, 0, "d"), KubeDecision(), mix=SCORED,
                      compared=VERDICT_ONLY))
    problem = tally.too_few_score_compared()
    assert problem is not None and problem.startswith("only 9 of 11 scored cases")
    assert tally.summary() == (
        "1 unschedulable, 0 single feasible node, 11 scored; 1 message-compared, "
        "2 verdict-only, 9 score-compared; 72 bound pods resizing in place (12 at pod "
        "level); 0 probes on rejected nodes, "
        "0 probes on accepted nodes, 0 decisions of policyd run")
