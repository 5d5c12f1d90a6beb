"""The preemption Evaluator: victims on one node (remove every lower-priority pod, then
reprieve, PDB-violating pods first), the dry runs with their offset and cut, the choice
among candidates, eligibility. Cases after upstream's default_preemption_test.go and
preemption_test.go, in our own data."""

from __future__ import annotations

import pytest

from policyd.framework.fit_error import Diagnosis
from policyd.framework.status import Code, Status
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.plugins.defaultpreemption.evaluator import (
    FIRST,
    NO_VICTIMS,
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    Candidate,
    Evaluator,
    ineligibility,
    nodes_preemption_might_help,
    pick_one_node,
)
from tests.unit.plugins.defaultpreemption.scene import (
    HIGH,
    LOW,
    MID,
    budget,
    cluster_of,
    framework,
    names,
    node,
    pending,
    running,
)


def evaluator(cluster: ClusterState, pod: Pod) -> Evaluator:
    return Evaluator(framework(), pod, cluster, cluster.disruption_budgets.budgets(),
                     cluster.nominations())


def victims_on(cluster: ClusterState, pod: Pod, node_name: str
               ) -> tuple[list[str], int, Status | None]:
    info = cluster.get(node_name)
    assert info is not None
    victims, violations, status = evaluator(cluster, pod).select_victims_on_node(info)
    return names(victims), violations, status


def snapshot(cluster: ClusterState) -> list[tuple[str, list[str], dict[str, int]]]:
    return [(n.name, sorted(n.pods), dict(n.requested)) for n in cluster]


# SelectVictimsOnNode
def test_the_bigger_middle_pod_goes_and_the_small_low_one_stays() -> None:
    cluster = cluster_of([node("n1", cpu="4")], [
        running("low", "n1", LOW, cpu="1"),
        running("mid", "n1", MID, cpu="2"),
        running("top", "n1", HIGH + 1, cpu="1"),  # above the preemptor: never a victim
    ])
    before = snapshot(cluster)
    pod = pending("p", HIGH, cpu="2").obj()
    assert victims_on(cluster, pod, "n1") == (["mid"], 0, None)
    assert snapshot(cluster) == before  # every dry run is undone


def test_victims_come_most_important_first() -> None:
    cluster = cluster_of([node("n1", cpu="3")], [
        running("a", "n1", LOW, cpu="1"),
        running("b", "n1", MID, cpu="1"),
        running("c", "n1", LOW + 1, cpu="1"),
    ])
    pod = pending("p", HIGH, cpu="3").obj()
    assert victims_on(cluster, pod, "n1") == (["b", "c", "a"], 0, None)


def test_of_equal_priority_the_later_started_pod_goes() -> None:
    cluster = cluster_of([node("n1", cpu="2")], [
        running("older", "n1", MID, cpu="1", started="2026-01-01T00:00:00Z"),
        running("newer", "n1", MID, cpu="1", started="2026-01-02T00:00:00Z"),
    ])
    pod = pending("p", HIGH, cpu="1").obj()
    assert victims_on(cluster, pod, "n1") == (["newer"], 0, None)


def test_a_pod_without_start_time_counts_as_just_started() -> None:
    cluster = cluster_of([node("n1", cpu="2")], [
        running("started", "n1", MID, cpu="1"),
        pending("assumed", MID, cpu="1").obj(),
    ])
    cluster.assume(cluster.pending_pods()[0], "n1")  # assumed pods are victims too
    pod = pending("p", HIGH, cpu="1").obj()
    assert victims_on(cluster, pod, "n1") == (["assumed"], 0, None)


def test_no_lower_priority_pod_means_no_victims() -> None:
    cluster = cluster_of([node("n1", cpu="1")], [running("same", "n1", HIGH, cpu="1")])
    _, _, status = victims_on(cluster, pending("p", HIGH, cpu="1").obj(), "n1")
    assert status == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,))


def test_still_not_fitting_without_every_victim_gives_the_filters_reason() -> None:
    cluster = cluster_of([node("n1", cpu="2")], [
        running("low", "n1", LOW, cpu="1"),
        running("top", "n1", HIGH + 1, cpu="1"),
    ])
    victims, _, status = victims_on(cluster, pending("p", HIGH, cpu="2").obj(), "n1")
    assert victims == []
    assert status is not None
    assert (status.reasons, status.plugin) == (("Insufficient cpu",), "NodeResourcesFit")


def test_a_victim_that_keeps_an_anti_affinity_rule_from_passing_goes() -> None:
    cluster = cluster_of([node("n1", cpu="4")], [
        running("cache", "n1", LOW, cpu="1", app="cache"),
        running("other", "n1", LOW, cpu="1", app="other"),
    ])
    pod = pending("p", HIGH, cpu="1").affinity({"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "cache"}},
            "topologyKey": "kubernetes.io/hostname"}]}}).obj()
    assert victims_on(cluster, pod, "n1") == (["cache"], 0, None)


def test_pdb_violating_pods_are_reprieved_first() -> None:
    # Without budgets the more important `b` would be given back first and the
    # protected `a` evicted; the budget makes `a` come back first instead.
    pods = [running("a", "n1", LOW, cpu="2", app="protected"),
            running("b", "n1", MID, cpu="2")]
    pod = pending("p", HIGH, cpu="2").obj()
    assert victims_on(cluster_of([node("n1", cpu="4")], pods), pod, "n1") == (["a"], 0, None)
    protected = cluster_of([node("n1", cpu="4")], pods,
                           [budget("keep", 0, app="protected")])
    assert victims_on(protected, pod, "n1") == (["b"], 0, None)


@pytest.mark.parametrize(("disrupted", "count", "violations"), [
    ((), 2, 1),            # two pods of a budget allowing one disruption
    (("other",), 2, 1),    # an unrelated pod already disrupted changes nothing
    (("x1",), 2, 0),       # one victim already counted by the disruption controller
    (("x2",), 3, 1),       # ... which does not spare the third one
])
def test_pdb_violations_are_counted(disrupted: tuple[str, ...], count: int,
                                    violations: int) -> None:
    pods = [running(f"x{i}", "n1", MID, cpu="1", app="foo") for i in range(count)]
    cluster = cluster_of([node("n1", cpu=str(count))], pods,
                         [budget("foo", 1, disrupted=disrupted, app="foo")])
    pod = pending("p", HIGH, cpu=str(count)).obj()
    victims, found, status = victims_on(cluster, pod, "n1")
    # Equally important victims: their order is not specified (upstream: sort.Slice).
    assert (sorted(victims), found, status) == ([f"x{i}" for i in range(count)],
                                                violations, None)


def test_budgets_of_other_namespaces_do_not_count() -> None:
    pods = [running("x", "n1", MID, cpu="1", namespace="shop", app="foo")]
    cluster = cluster_of([node("n1", cpu="1")], pods,
                         [budget("foo", 0, namespace="default", app="foo")])
    assert victims_on(cluster, pending("p", HIGH, cpu="1").obj(), "n1") == (["x"], 0, None)


def test_nominated_pods_of_at_least_the_pods_priority_keep_their_space() -> None:
    pods = [running("l1", "n1", LOW, cpu="2"), running("l2", "n1", LOW, cpu="2")]
    preemptor = pending("p", MID, cpu="2").obj()
    cluster = cluster_of([node("n1", cpu="4")], pods)
    assert victims_on(cluster, preemptor, "n1")[0] == ["l2"]
    # A pending pod nominated to n1 at the preemptor's priority takes 2 cpu there.
    ahead = pending("ahead", MID, cpu="2").set("status.nominatedNodeName", "n1").obj()
    cluster = cluster_of([node("n1", cpu="4")], [*pods, ahead])
    before = snapshot(cluster)
    assert victims_on(cluster, preemptor, "n1")[0] == ["l1", "l2"]
    assert [p.name for p in cluster.pending_pods()] == ["ahead"]  # still pending after
    assert snapshot(cluster) == before
    # One of lower priority does not: the preemptor may take what was freed for it.
    behind = pending("behind", LOW, cpu="2").set("status.nominatedNodeName", "n1").obj()
    cluster = cluster_of([node("n1", cpu="4")], [*pods, behind])
    assert victims_on(cluster, preemptor, "n1")[0] == ["l2"]


# DryRunPreemption
def five_full_nodes(labels: dict[int, dict[str, str]] | None = None) -> ClusterState:
    labels = labels or {}
    return cluster_of([node(f"node{i}", cpu="2") for i in range(1, 6)],
                      [running(f"p{i}", f"node{i}", MID, cpu="2", **labels.get(i, {}))
                       for i in range(1, 6)])


@pytest.mark.parametrize(("offset", "expected"), [
    (4, ["node5", "node1"]),  # wraps around
    (1, ["node2", "node3"]),
    (3, ["node4", "node5"]),
])
def test_dry_runs_start_at_the_offset_and_stop_at_enough_candidates(
        offset: int, expected: list[str]) -> None:
    cluster = five_full_nodes()
    pod = pending("p", HIGH, cpu="2").obj()
    candidates, statuses, trials = evaluator(cluster, pod).dry_run(
        cluster.node_infos(), offset, 2)
    assert [c.node for c in candidates] == expected
    assert statuses == {}
    assert [t.node for t in trials] == expected


def test_dry_runs_look_past_enough_candidates_for_one_without_pdb_violations() -> None:
    foo = {"app": "foo"}
    cluster = five_full_nodes({1: foo, 2: foo, 5: foo})
    cluster.disruption_budgets.upsert("PodDisruptionBudget", budget("foo", 0, app="foo"))
    pod = pending("p", HIGH, cpu="2").obj()
    candidates, _, trials = evaluator(cluster, pod).dry_run(cluster.node_infos(), 4, 2)
    # node5, node1 violate; node2 violates too but two of a kind are enough; node3 is
    # the first clean one and ends the search. Clean candidates come first.
    assert [(c.node, c.num_pdb_violations) for c in candidates] == [
        ("node3", 0), ("node5", 1), ("node1", 1)]
    assert [t.node for t in trials] == ["node5", "node1", "node2", "node3"]


def test_nodes_without_a_candidate_get_their_status() -> None:
    cluster = cluster_of([node("n1", cpu="2"), node("n2", cpu="2")], [
        running("top", "n1", HIGH, cpu="2"), running("low", "n2", LOW, cpu="2")])
    pod = pending("p", HIGH, cpu="2").obj()
    candidates, statuses, trials = evaluator(cluster, pod).dry_run(cluster.node_infos(), 0, 5)
    assert [(c.node, names(c.victims)) for c in candidates] == [("n2", ["low"])]
    assert {n: s.reasons for n, s in statuses.items()} == {"n1": (NO_VICTIMS,)}
    assert [(t.node, t.candidate is None) for t in trials] == [("n1", True), ("n2", False)]


# pickOneNodeForPreemption
def victim(name: str, priority: int, started: str = "2026-01-01T00:00:00Z") -> Pod:
    return running(name, "x", priority, started=started)


def cand(node_name: str, *victims: Pod, violations: int = 0) -> Candidate:
    return Candidate(node_name, victims, violations)


@pytest.mark.parametrize(("candidates", "chosen", "lost"), [
    ([cand("a", victim("v", LOW), violations=1), cand("b", victim("w", MID))],
     "b", {"a": "fewest PodDisruptionBudget violations"}),
    ([cand("a", victim("v", MID)), cand("b", victim("w", LOW), victim("x", LOW))],
     "b", {"a": "lowest highest-priority victim"}),
    ([cand("a", victim("v", MID), victim("w", LOW + 5)),
      cand("b", victim("x", MID), victim("y", LOW))],
     "b", {"a": "lowest sum of victim priorities"}),
    # Priorities are shifted by 2^31 before summing: two victims at -1 weigh more
    # than one, although their plain sum is lower.
    ([cand("a", victim("v", -1), victim("w", -1)), cand("b", victim("x", -1))],
     "b", {"a": "lowest sum of victim priorities"}),
    # Equal shifted sums, one victim fewer.
    ([cand("a", victim("v", 0), victim("w", -2**31)), cand("b", victim("x", 0))],
     "b", {"a": "fewest victims"}),
    ([cand("a", victim("v", MID, "2026-01-01T00:00:00Z")),
      cand("b", victim("w", MID, "2026-01-03T00:00:00Z")),
      cand("c", victim("x", MID, "2026-01-02T00:00:00Z"))],
     "b", {"a": "latest start of the highest-priority victims",
           "c": "latest start of the highest-priority victims"}),
    # Only the highest-priority victims' earliest start counts.
    ([cand("a", victim("v", MID, "2026-01-02T00:00:00Z"),
           victim("w", LOW, "2026-01-09T00:00:00Z")),
      cand("b", victim("x", MID, "2026-01-03T00:00:00Z"),
           victim("y", LOW, "2026-01-01T00:00:00Z"))],
     "b", {"a": "latest start of the highest-priority victims"}),
    ([cand("a", victim("v", MID)), cand("b", victim("w", MID))], "a", {"b": FIRST}),
    ([cand("only", victim("v", MID), violations=3)], "only", {}),
])
def test_pick_one_node(candidates: list[Candidate], chosen: str, lost: dict[str, str]
                       ) -> None:
    best, why = pick_one_node(candidates)
    assert best.node == chosen
    assert why == lost


# PodEligibleToPreemptOthers
def preempted(name: str, node_name: str, priority: int, condition: bool = True) -> Pod:
    b = pending(name, priority).node(node_name).terminating()
    if condition:
        b.set("status.conditions", [{"type": "DisruptionTarget", "status": "True",
                                      "reason": "PreemptionByScheduler"}])
    return b.obj()


@pytest.mark.parametrize(("victim_pod", "node_status", "reason"), [
    (preempted("v", "n1", LOW), Status.unschedulable("x"), NOT_ELIGIBLE_TERMINATING),
    # The nominated node is now out of the question: preempt again elsewhere.
    (preempted("v", "n1", LOW), Status.unresolvable("x"), ""),
    # Terminating for another reason, or not below the pod's priority.
    (preempted("v", "n1", LOW, condition=False), Status.unschedulable("x"), ""),
    (preempted("v", "n1", HIGH), Status.unschedulable("x"), ""),
    (running("v", "n1", LOW), Status.unschedulable("x"), ""),
])
def test_a_nominated_pod_waits_for_its_victims(victim_pod: Pod, node_status: Status,
                                               reason: str) -> None:
    cluster = cluster_of([node("n1")], [victim_pod])
    pod = pending("p", HIGH).set("status.nominatedNodeName", "n1").obj()
    assert ineligibility(pod, cluster, Diagnosis({"n1": node_status})) == reason
    plain = pending("p", HIGH).obj()
    assert ineligibility(plain, cluster, Diagnosis({"n1": node_status})) == ""


def test_the_nominators_nomination_counts_before_the_api_shows_it() -> None:
    """A daemon that nominated the pod but whose status patch has not come back yet
    must not let it preempt again while its victim terminates."""
    cluster = cluster_of([node("n1")], [preempted("v", "n1", LOW)])
    pod = pending("p", HIGH).obj()
    assert ineligibility(pod, cluster, Diagnosis({"n1": Status.unschedulable("x")})) == ""
    cluster.nominate(pod, "n1")
    assert ineligibility(pod, cluster, Diagnosis({"n1": Status.unschedulable("x")})) \
        == NOT_ELIGIBLE_TERMINATING


def test_preemption_policy_never_is_not_eligible() -> None:
    cluster = cluster_of([node("n1")])
    never = pending("p", HIGH).set("spec.preemptionPolicy", "Never").obj()
    lower = pending("p", HIGH).set("spec.preemptionPolicy", "PreemptLowerPriority").obj()
    assert ineligibility(never, cluster, Diagnosis()) == NOT_ELIGIBLE_NEVER
    assert ineligibility(lower, cluster, Diagnosis()) == ""


def test_only_unschedulable_nodes_are_potential_candidates() -> None:
    cluster = cluster_of([node(f"n{i}") for i in range(4)])
    statuses = {"n0": Status.unschedulable("a"), "n1": Status.unresolvable("b")}
    diagnosis = Diagnosis(dict(statuses))
    assert [n.name for n in nodes_preemption_might_help(diagnosis, cluster.node_infos())] \
        == ["n0"]  # absent nodes are UnschedulableAndUnresolvable by default
    # A PreFilter rejection with Unschedulable applies to every absent node.
    diagnosis = Diagnosis(dict(statuses), absent_nodes_status=Status.unschedulable("c"))
    assert [n.name for n in nodes_preemption_might_help(diagnosis, cluster.node_infos())] \
        == ["n0", "n2", "n3"]
    # Nodes sharing one status object each get its verdict.
    shared = Status.unschedulable("d")
    diagnosis = Diagnosis({"n0": shared, "n1": Status.unresolvable("b"), "n2": shared})
    assert [n.name for n in nodes_preemption_might_help(diagnosis, cluster.node_infos())] \
        == ["n0", "n2"]
