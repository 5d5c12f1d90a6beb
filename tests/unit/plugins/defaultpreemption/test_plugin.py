"""DefaultPreemption's PostFilter: its result and status as upstream's
(default_preemption_test.go TestPostFilter, in our own data), the whole
FailedScheduling message through the cycle on both paths, and the report explain
reads."""

from __future__ import annotations

import pytest

from policyd.engine.cycle import schedule_one
from policyd.framework.cycle_state import CycleState
from policyd.framework.interfaces import PostFilterResult
from policyd.framework.runtime import Framework
from policyd.framework.status import Code, Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod
from tests.builders import make_node
from tests.unit.plugins.defaultpreemption.scene import (
    HIGH,
    LOW,
    MID,
    VERY_HIGH,
    budget,
    cluster_of,
    framework,
    names,
    node,
    one_pod_node,
    pending,
    post_filter,
    running,
)

U = Status.unschedulable()
UU = Status.unresolvable()


def cpu_node(name: str) -> Node:
    """200m cpu: too little for the 500m pods below, whatever is evicted."""
    return make_node(name).capacity(cpu="200m", memory="400", pods="10").obj()


def test_a_higher_priority_pod_preempts() -> None:
    cluster = cluster_of([one_pod_node("node1")], [running("p1", "node1", LOW)])
    result, status, _ = post_filter(cluster, pending("p", HIGH).obj(), {"node1": U})
    assert status.code is Code.SUCCESS and status.message == ""
    assert result is not None
    assert (result.nominated_node, names(result.victims)) == ("node1", ["p1"])
    assert result.clear_nominations == ()


@pytest.mark.parametrize(("pods", "nodes", "statuses", "message"), [
    # Tied priority: nothing to evict.
    ([running("p1", "node1", LOW)], [one_pod_node("node1")], {"node1": U},
     "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."),
    # The filters ruled the node out for good.
    ([running("p1", "node1", LOW - 1)], [one_pod_node("node1")], {"node1": UU},
     "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
    # Absent from the statuses: UnschedulableAndUnresolvable.
    ([running("p1", "node1", LOW - 1)], [one_pod_node("node1")], {},
     "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
    # Too little cpu even with every pod gone.
    ([running("p1", "node1", LOW - 1), running("p2", "node2", LOW - 1)],
     [cpu_node("node1"), cpu_node("node2")], {"node1": U, "node2": U},
     "preemption: 0/2 nodes are available: 2 Insufficient cpu."),
    ([running("p1", "node1", LOW), running("p2", "node2", LOW - 1),
      running("p3", "node3", LOW)],
     [one_pod_node("node1"), cpu_node("node2"), one_pod_node("node3")],
     {"node1": U, "node2": U, "node3": U},
     "preemption: 0/3 nodes are available: 1 Insufficient cpu, "
     "2 No preemption victims found for incoming pod."),
    ([running("p1", "node1", LOW - 1), running("p2", "node2", LOW - 1)],
     [cpu_node(f"node{i}") for i in range(1, 5)], {"node1": U, "node2": U, "node4": UU},
     "preemption: 0/4 nodes are available: 2 Insufficient cpu, "
     "2 Preemption is not helpful for scheduling."),
])
def test_no_candidate(pods: list[Pod], nodes: list[Node], statuses: dict[str, Status],
                      message: str) -> None:
    pod = pending("p", LOW, cpu="500m").obj()
    result, status, report = post_filter(cluster_of(nodes, pods), pod, statuses)
    assert status == Status(Code.UNSCHEDULABLE, (message,))
    # No candidate: the pod's own nomination, if any, is to be cleared.
    assert result == PostFilterResult(nominated_node="")
    assert report is not None and report.chosen is None


def test_the_node_with_the_least_important_victims_is_chosen() -> None:
    cluster = cluster_of([one_pod_node("node1"), one_pod_node("node2")], [
        running("p1", "node1", HIGH), running("p2", "node2", LOW)])
    result, status, report = post_filter(cluster, pending("p", MID).obj(),
                                         {"node1": U, "node2": U})
    assert status.is_success and result is not None
    assert (result.nominated_node, names(result.victims)) == ("node2", ["p2"])
    assert report is not None
    assert [(t.node, t.status.reasons if t.status else None) for t in report.trials] in (
        [("node1", ("No preemption victims found for incoming pod",)), ("node2", None)],
        [("node2", None), ("node1", ("No preemption victims found for incoming pod",))])


def test_a_budget_steers_the_choice() -> None:
    # node1's victim is more important than node2's, but evicting node2's breaks a
    # budget: fewer violations come first.
    nodes = [one_pod_node("node1"), one_pod_node("node2")]
    pods = [running("p1", "node1", HIGH, app="free"), running("p3", "node2", MID, app="kept")]
    statuses = {"node1": U, "node2": U}
    result, _, report = post_filter(cluster_of(nodes, pods), pending("p", VERY_HIGH).obj(),
                                    statuses)
    assert result is not None and result.nominated_node == "node2"
    assert report is not None and report.lost == {"node1": "lowest highest-priority victim"}
    protected = cluster_of(nodes, pods, [budget("kept", 0, app="kept"),
                                         budget("free", 1_000_000, app="free")])
    result, status, report = post_filter(protected, pending("p", VERY_HIGH).obj(), statuses)
    assert status.is_success and result is not None
    assert result.nominated_node == "node1"
    assert report is not None
    assert report.lost == {"node2": "fewest PodDisruptionBudget violations"}
    assert [(t.node, t.candidate.num_pdb_violations if t.candidate else None)
            for t in sorted(report.trials, key=lambda t: t.node)] == [("node1", 0),
                                                                     ("node2", 1)]


def test_preemption_policy_never_keeps_the_nomination() -> None:
    cluster = cluster_of([one_pod_node("node1")], [running("p1", "node1", LOW)])
    pod = pending("p", HIGH).set("spec.preemptionPolicy", "Never").obj()
    result, status, report = post_filter(cluster, pod, {"node1": U})
    assert result is None
    assert status == Status(Code.UNSCHEDULABLE,
                            ("preemption: not eligible due to preemptionPolicy=Never.",))
    assert report is not None and report.ineligible and not report.trials


def test_lower_priority_pods_nominated_to_the_chosen_node_lose_their_nomination() -> None:
    nominated_low = pending("nl", LOW).set("status.nominatedNodeName", "node1").obj()
    nominated_top = pending("nt", VERY_HIGH).set("status.nominatedNodeName", "node1").obj()
    elsewhere = pending("ne", LOW).set("status.nominatedNodeName", "node2").obj()
    cluster = cluster_of([node("node1", cpu="2"), node("node2", cpu="1")],
                         [running("v", "node1", LOW, cpu="2"),
                          running("w", "node2", HIGH, cpu="1"),
                          nominated_low, nominated_top, elsewhere])
    result, status, _ = post_filter(cluster, pending("p", HIGH, cpu="1").obj(),
                                    {"node1": U, "node2": U})
    assert status.is_success and result is not None
    assert result.nominated_node == "node1"
    assert names(result.clear_nominations) == ["nl"]


class _Failing:
    """A Filter plugin that crashes on nodes labelled error=true."""

    name = "Failing"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if node_info.node.labels.get("error") == "true":
            raise RuntimeError("boom")
        return None


def _with_failing_filter() -> Framework:
    base = framework()
    return Framework("failing", queue_sort=base.queue_sort,
                     pre_filter=base.pre_filter_plugins,
                     filter=[*base.filter_plugins, _Failing()], seed=0)


def test_an_erring_dry_run_is_an_error_unless_another_node_is_a_candidate() -> None:
    fw = _with_failing_filter()
    bad = make_node("node1").capacity(pods="1").label("error", "true").obj()
    cluster = cluster_of([bad], [running("p1", "node1", LOW)])
    result, status, _ = post_filter(cluster, pending("p", HIGH).obj(), {"node1": U},
                                    fw=fw)
    assert result is None
    assert status.code is Code.ERROR
    assert status.message == ("preemption: running Filter plugin 'Failing': "
                              "RuntimeError: boom")
    cluster = cluster_of([bad, one_pod_node("node2")],
                         [running("p1", "node1", LOW), running("p2", "node2", LOW)])
    result, status, _ = post_filter(cluster, pending("p", HIGH).obj(),
                                    {"node1": U, "node2": U}, fw=fw)
    assert status.is_success and result is not None and result.nominated_node == "node2"


def test_the_seeded_framework_decides_the_offset() -> None:
    cluster = cluster_of([node(f"n{i}", cpu="1") for i in range(20)],
                         [running(f"v{i}", f"n{i}", LOW, cpu="1") for i in range(20)])
    statuses = {f"n{i}": U for i in range(20)}
    args = {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}
    offsets = set()
    for seed in range(5):
        runs = [post_filter(cluster, pending("p", HIGH, cpu="1").obj(), statuses, args=args,
                            fw=framework(seed))[2] for _ in range(2)]
        assert runs[0] is not None and runs[1] is not None
        assert runs[0].offset == runs[1].offset  # same seed, same start
        assert [t.node for t in runs[0].trials] == [f"n{runs[0].offset}"]  # one is enough
        offsets.add(runs[0].offset)
    assert len(offsets) > 1


@pytest.mark.parametrize("reference", [False, True])
def test_the_whole_failed_scheduling_message_on_both_paths(reference: bool) -> None:
    # The default profile runs DefaultPreemption as kube-scheduler's does.
    fw = framework(seed=3)
    full = cluster_of([node("n1", cpu="2"), node("n2", cpu="2"),
                       make_node("tainted").capacity(cpu="8").taint("k", "v").obj()],
                      [running("a", "n1", HIGH, cpu="2"), running("b", "n2", HIGH, cpu="2")])
    result = schedule_one(fw, pending("p", HIGH, cpu="1").obj(), full, reference=reference)
    assert result.node is None and result.post_filter == PostFilterResult("")
    assert result.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
        "no new claims to deallocate, preemption: 0/3 nodes are available: 1 Preemption "
        "is not helpful for scheduling, 2 No preemption victims found for incoming pod.")
    result = schedule_one(fw, pending("q", VERY_HIGH, cpu="1").obj(), full,
                          reference=reference)
    # Preemption found a node: the message is the filters' alone (upstream's Success
    # status has no message).
    assert result.message == ("0/3 nodes are available: 1 node(s) had untolerated "
                              "taint(s), 2 Insufficient cpu.")
    assert result.post_filter is not None
    assert result.post_filter.nominated_node in ("n1", "n2")
    assert len(result.post_filter.victims) == 1
    assert result.post_filter.victims[0].node_name == result.post_filter.nominated_node


def test_the_report_in_words() -> None:
    cluster = cluster_of([one_pod_node("node1"), one_pod_node("node2"),
                          one_pod_node("node3")],
                         [running("p1", "node1", MID), running("p2", "node2", LOW),
                          running("p3", "node3", HIGH)])
    _, _, report = post_filter(cluster, pending("p", HIGH).obj(),
                               {"node1": U, "node2": U, "node3": U})
    assert report is not None
    lines = report.lines()
    assert lines[0] == "would evict 1 pod(s) on node2 and nominate the pod there"
    assert sorted(lines[1:4]) == [
        "  node1: lost on lowest highest-priority victim; victims default/p1 (priority 100);"
        " 0 PodDisruptionBudget violation(s)",
        "  node2: chosen; victims default/p2 (priority 0); 0 PodDisruptionBudget violation(s)",
        "  node3: no candidate: No preemption victims found for incoming pod",
    ]
    assert lines[4] == (f"  3 of 3 node(s) tried from offset {report.offset}, "
                        "3 candidate(s) wanted")
    never = pending("p", HIGH).set("spec.preemptionPolicy", "Never").obj()
    _, _, report = post_filter(cluster, never, {"node1": U})
    assert report is not None and report.lines() == [
        "the pod may not preempt: not eligible due to preemptionPolicy=Never."]
    _, _, report = post_filter(cluster, pending("p", HIGH).obj(), {})
    assert report is not None and report.lines() == [
        "no node rejected the pod for a reason evicting pods can undo"]
