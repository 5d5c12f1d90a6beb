"""The admission cases of the live equivalence test (`tests.gen.admission`) without an
API server: deterministic, isolated from other cases, policies that validate and
compile, pods the API server accepts, both kinds of case often enough for the test's
own minimum; and the comparison's judgement (`differential.admission`) on plain
values."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from policyd.admission.projection import RuleProjection, project_pod
from policyd.engine.cycle import ScheduleResult
from policyd.model.records import pod_from_dict
from policyd.model.selectors import compile_node_selector_term
from policyd.policy.compiler import compile_policy
from tests.gen.admission import (
    HW_ANNOTATION,
    HW_LABEL,
    AdmissionCase,
    gen_admission_case,
    hw_encrypt_policy,
)
from tests.gen.clusters import GPU
from tests.gen.differential import CASE_LABEL, SCHEDULER_NAME, UNDER_TEST_LABEL
from tests.gen.policies import ANN_KEYS
from tests.integration.differential.admission import (
    INVISIBLE,
    NO_RULES,
    VISIBLE,
    AdmissionOutcome,
    AdmissionTally,
    judge,
    kind_of,
    kube_feasible,
    spread_honors_affinity,
)
from tests.integration.differential.runner import KubeDecision
from tests.integration.differential.score_log import KubeScores
from tests.integration.test_differential_admission import DEFAULT_CASES, MIN_PER_KIND
from tests.unit.policy.conftest import check_docs, errors


def _text(c: AdmissionCase) -> str:
    s = c.case
    return json.dumps([s.nodes, s.pods, s.pod, s.workloads, c.policies], sort_keys=True)


def test_cases_are_a_function_of_seed_and_index() -> None:
    assert _text(gen_admission_case(3, 7, "x")) == _text(gen_admission_case(3, 7, "x"))
    assert _text(gen_admission_case(3, 8, "x")) != _text(gen_admission_case(3, 7, "x"))
    assert _text(gen_admission_case(4, 7, "x")) != _text(gen_admission_case(3, 7, "x"))


@pytest.mark.parametrize("index", range(24))
def test_cases_stay_inside_their_prefix(index: int) -> None:
    prefix = f"q{index}"
    case = gen_admission_case(11, index, prefix).case
    for node in case.nodes:
        assert node["metadata"]["name"].startswith(f"{prefix}-")
        assert node["metadata"]["labels"][CASE_LABEL] == prefix
    pod = case.pod
    assert pod["spec"]["nodeSelector"][CASE_LABEL] == prefix
    assert pod["spec"]["schedulerName"] == SCHEDULER_NAME
    assert pod["metadata"]["labels"][UNDER_TEST_LABEL] == "true"
    for p in [*case.pods, pod]:
        assert p["metadata"]["namespace"] in case.namespaces
        assert p["spec"].get("nodeName", case.node_names[0]) in case.node_names


@pytest.mark.parametrize("index", range(24))
def test_policies_validate_and_compile_under_distinct_plugin_names(index: int) -> None:
    c = gen_admission_case(5, index, "x")
    assert 1 <= len(c.policies) <= 4
    assert not errors(check_docs(*c.policies).problems)
    compiled = [compile_policy(doc) for doc in c.policies]
    assert len({p.name for p in compiled}) == len(compiled)
    for doc in c.policies:
        assert doc["spec"].get("filters") and not doc["spec"].get("scores")


@pytest.mark.parametrize("index", range(24))
def test_pods_are_what_the_api_server_accepts(index: int) -> None:
    """No spec.priority (no PriorityClass gives it) and an extended resource only with
    equal limits."""
    case = gen_admission_case(9, index, "x").case
    for pod in [*case.pods, case.pod]:
        assert "priority" not in pod["spec"]
        for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
            resources = c.get("resources", {})
            if GPU in resources.get("requests", {}):
                assert resources["limits"][GPU] == resources["requests"][GPU]


def test_the_hw_encrypt_policy_is_the_shipped_one_and_the_scene_reads_it() -> None:
    policy = hw_encrypt_policy()
    assert policy["metadata"]["name"] == "hw-encrypt"
    assert policy["spec"]["filters"][0]["annotationToNodeLabel"]["label"] == HW_LABEL
    cases = [gen_admission_case(2, i, "x") for i in range(40)]
    with_hw = [c for c in cases if any(p["metadata"]["name"] == "hw-encrypt"
                                       for p in c.policies)]
    assert with_hw
    for c in with_hw:
        assert c.case.pod["metadata"]["annotations"][HW_ANNOTATION] in ("true", "false")
    assert any(HW_LABEL in n["metadata"]["labels"] for c in with_hw for n in c.case.nodes)


def _projections(c: AdmissionCase) -> list[RuleProjection]:
    return project_pod(pod_from_dict(c.case.pod), [compile_policy(d) for d in c.policies])


@pytest.mark.parametrize("seed", [1, 2])
def test_a_run_of_the_default_size_has_both_kinds_and_nodes_that_meet_the_rules(
        seed: int) -> None:
    kinds: Counter[str] = Counter()
    met = 0  # visible cases with requirements where some node meets them all
    vocabulary: Counter[str] = Counter()
    for i in range(DEFAULT_CASES):
        c = gen_admission_case(seed, i, "x")
        vocabulary.update(c.case.pod["metadata"].get("annotations", {}).keys())
        projections = _projections(c)
        kinds[kind_of(projections)] += 1
        if c.projected_only:
            assert kind_of(projections) != INVISIBLE
        requirements = [r for p in projections for r in p.requirements]
        if kind_of(projections) == VISIBLE and requirements:
            term = compile_node_selector_term({"matchExpressions": requirements})
            met += any(term.matches(n["metadata"]["labels"], n["metadata"]["name"])
                       for n in c.case.nodes)
    assert kinds[VISIBLE] >= MIN_PER_KIND and kinds[INVISIBLE] >= MIN_PER_KIND, kinds
    assert met >= 10, met
    assert set(ANN_KEYS) <= set(vocabulary), vocabulary


# -- the judgement ------------------------------------------------------------------


def _pod(spread: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if spread is not None:
        spec["topologySpreadConstraints"] = spread
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "under-test", "namespace": "x-a", "labels": {}},
            "spec": spec}


def _result(feasible: list[str], n: int = 5) -> ScheduleResult:
    message = "" if feasible else f"0/{n} nodes are available: {n} filter failed."
    r = ScheduleResult(pod_from_dict(_pod()), feasible[0] if feasible else None, n,
                       message)
    r.feasible = feasible
    return r


VISIBLE_RULE = RuleProjection("p", "f0", ({"key": "env", "operator": "In",
                                           "values": ["a"]},), "")
INVISIBLE_RULE = RuleProjection("p", "f1", (), "a headroom rule has no equivalent")


def _outcome(projections: list[RuleProjection], kube: set[str], original: list[str],
             admitted: list[str] | None = None, *, n: int = 5,
             spread: list[dict[str, Any]] | None = None) -> AdmissionOutcome:
    case = gen_admission_case(1, 0, "x")
    case.case.pod = _pod(spread)
    decision = (KubeDecision(node=sorted(kube)[0]) if kube else KubeDecision(
        reason="Unschedulable",
        message=f"0/{n} nodes are available: {n} node(s) didn't match Pod's node "
                "affinity/selector. preemption: not eligible."))
    o = AdmissionOutcome(case, decision, projections, kube_nodes=set(kube),
                         original=_result(original, n),
                         admitted=_result(original if admitted is None else admitted, n),
                         default_admitted=set(kube))
    judge(o)
    return o


def test_kinds_and_what_kube_scheduler_found_feasible() -> None:
    assert kind_of([]) == NO_RULES
    assert kind_of([VISIBLE_RULE]) == VISIBLE
    assert kind_of([VISIBLE_RULE, INVISIBLE_RULE]) == INVISIBLE
    assert kube_feasible(KubeDecision(reason="Unschedulable"), None) == set()
    assert kube_feasible(KubeDecision(node="a"), None) == {"a"}
    scores = KubeScores(plugins={"a": {"NodeAffinity": 0}, "b": {"NodeAffinity": 0}},
                        totals={"a": 10, "b": 20})
    assert kube_feasible(KubeDecision(node="b"), scores) == {"a", "b"}


def test_visible_rules_need_equal_sets_and_invisible_ones_a_subset() -> None:
    assert _outcome([VISIBLE_RULE], {"a", "b"}, ["a", "b"]).ok
    assert _outcome([], {"a"}, ["a"]).ok
    differ = _outcome([VISIBLE_RULE], {"a", "b"}, ["a"])
    assert len(differ.problems) == 2  # the original pod and the admitted pod
    assert "only kube-scheduler: {b}" in differ.problems[0]
    assert _outcome([VISIBLE_RULE, INVISIBLE_RULE], {"a", "b"}, ["a"]).ok
    looser = _outcome([INVISIBLE_RULE], {"a"}, ["a", "c"])
    assert not looser.ok and "not a subset of" in looser.problems[0]


def test_an_unschedulable_pod_counts_the_same_nodes_on_both_sides() -> None:
    assert _outcome([VISIBLE_RULE], set(), []).ok
    counted = _outcome([VISIBLE_RULE], set(), [], n=7)
    assert counted.ok  # _result and the decision both say 0/7
    o = _outcome([VISIBLE_RULE], set(), [])
    o.kube.message = o.kube.message.replace("0/5", "0/6")
    o.problems.clear()
    judge(o)
    assert o.problems and "count different nodes" in o.problems[0]


def test_spreading_that_honors_the_projection_is_judged_on_the_admitted_pod() -> None:
    honor = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    ignore = [{**honor[0], "nodeAffinityPolicy": "Ignore"}]
    anyway = [{**honor[0], "whenUnsatisfiable": "ScheduleAnyway"}]
    assert spread_honors_affinity(_pod(honor))
    assert not spread_honors_affinity(_pod(ignore))
    assert not spread_honors_affinity(_pod(anyway))
    assert not spread_honors_affinity(_pod())
    excused = _outcome([VISIBLE_RULE], {"a", "b"}, [], ["a", "b"], spread=honor)
    assert excused.ok and excused.spread and excused.spread_differs
    assert not _outcome([VISIBLE_RULE], {"a", "b"}, [], ["a", "b"], spread=ignore).ok
    # Nothing projected into the affinity: the spreading counts the same nodes.
    assert not _outcome([INVISIBLE_RULE], {"a"}, ["a", "b"], ["a"], spread=honor).ok
    tally = AdmissionTally()
    tally.add(excused)
    assert (tally.spread, tally.spread_differs, tally.kinds[VISIBLE]) == (1, 1, 1)


def test_an_engine_difference_is_said_apart() -> None:
    o = _outcome([VISIBLE_RULE], {"a"}, ["a"])
    o.default_admitted = {"a", "b"}
    o.problems.clear()
    judge(o)
    assert len(o.problems) == 1 and "engine difference" in o.problems[0]
