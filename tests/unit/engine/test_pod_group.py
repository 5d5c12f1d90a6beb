"""The pod group cycle and GangScheduling (kube-scheduler v1.36, GenericWorkload and
GangScheduling on) in `simulate`: a gang is placed whole or not at all, members short
of their quorum are told the group's verdict, the others their own FitError, and the
cluster is left as it was when the group does not fit."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.config.plugins import default_framework
from policyd.engine.pod_group import GROUP_UNSCHEDULABLE, try_pod_group
from policyd.engine.simulate import simulate
from policyd.features import FeatureGates, with_settings
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.pod_groups import WORKLOAD_API, GroupKey, pod_group_from_dict
from policyd.model.records import Pod
from policyd.plugins.gangscheduling.plugin import (
    WAITING_FOR_GROUP,
    WAITING_FOR_PODS,
    WAITING_FOR_QUORUM,
)
from tests.builders import make_node, make_pod

GANG_GATES = with_settings([("GenericWorkload", True), ("GangScheduling", True)])
WAIT_TAIL = "one or more plugins asked to wait and no plugin rejected pod"


def _framework(gates: FeatureGates = GANG_GATES) -> Framework:
    return default_framework(features=gates)


def _group(name: str, min_count: int | None, namespace: str = "default") -> dict[str, Any]:
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {
        "gang": {"minCount": min_count}}
    return {"apiVersion": WORKLOAD_API, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         "generation": 1},
            "spec": {"schedulingPolicy": policy}}


def _member(name: str, group: str, cpu: str = "1", priority: int = 0) -> Pod:
    return (make_pod(name).uid(f"uid-{name}").scheduler("policyd").req(cpu=cpu)
            .set("spec.schedulingGroup", {"podGroupName": group})
            .set("spec.priority", priority).obj())


def _cluster(nodes: int, cpu: str, pods: list[Pod], *groups: dict[str, Any]
             ) -> ClusterState:
    cluster = ClusterState([make_node(f"n{i}").capacity(cpu=cpu, pods="110").obj()
                            for i in range(nodes)], pods)
    for g in groups:
        cluster.pod_groups.upsert(pod_group_from_dict(g))
    return cluster


def _outcomes(pods: list[Pod], cluster: ClusterState, fw: Framework | None = None
              ) -> tuple[dict[str, tuple[str | None, str]], list[str]]:
    out = simulate({"policyd": fw or _framework()}, cluster, pods)
    placed = {r.pod.name: (r.node, r.message) for r in out.results}
    gated = [f"{g.pod.name}: {g.reason}" for g in out.gated]
    return placed, gated


def test_a_gang_that_fits_is_placed_whole() -> None:
    pods = [_member(f"w{i}", "job") for i in range(4)]
    cluster = _cluster(2, "2", pods, _group("job", 4))
    placed, gated = _outcomes(pods, cluster)
    assert gated == []
    assert all(node is not None for node, _ in placed.values()), placed
    assert cluster.group_counts(GroupKey(WORKLOAD_API, "default", "job")).scheduled == 4


def test_a_gang_short_of_its_quorum_places_nobody_and_says_why() -> None:
    # Room for 3 one-CPU pods, a gang of 4 needing all 4: nobody is placed; the three
    # that fitted get the group's verdict, the fourth its own FitError.
    pods = [_member(f"w{i}", "job") for i in range(4)]
    cluster = _cluster(3, "1", pods, _group("job", 4))
    placed, _ = _outcomes(pods, cluster)
    assert [node for node, _ in placed.values()] == [None] * 4
    verdict = f"{GROUP_UNSCHEDULABLE}, {WAITING_FOR_QUORUM}, {WAIT_TAIL}"
    assert [placed[f"w{i}"][1] for i in range(3)] == [verdict] * 3
    # PostFilter ran for the message, as upstream's group cycle runs it.
    assert placed["w3"][1] == ("0/3 nodes are available: 3 Insufficient cpu. no new claims "
                               "to deallocate, preemption: 0/3 nodes are available: 3 No "
                               "preemption victims found for incoming pod.")
    # Nothing is left assumed: every node is empty again.
    assert all(not info.pods for info in cluster)


def test_a_quorum_below_the_group_size_places_those_that_fit() -> None:
    # minCount 3 of 4 with room for 3: the three are placed, the fourth is refused
    # with its own FitError (and retried later as the group's remainder).
    pods = [_member(f"w{i}", "job") for i in range(4)]
    cluster = _cluster(3, "1", pods, _group("job", 3))
    placed, _ = _outcomes(pods, cluster)
    nodes = [node for node, _ in placed.values()]
    assert sum(n is not None for n in nodes) == 3
    (refused,) = [m for n, m in placed.values() if n is None]
    assert refused.startswith("0/3 nodes are available: 3 Insufficient cpu.")


def test_pre_enqueue_holds_members_until_the_group_and_its_pods_exist() -> None:
    pods = [_member(f"w{i}", "job") for i in range(2)]
    # No PodGroup object yet.
    _, gated = _outcomes(pods, _cluster(2, "4", pods))
    assert gated == [f"w{i}: {WAITING_FOR_GROUP.format(name='job')}" for i in range(2)]
    assert 'pod group "job" to appear' in gated[0]
    # The group wants 3 pods, 2 exist.
    _, gated = _outcomes(pods, _cluster(2, "4", pods, _group("job", 3)))
    assert gated == [f"w{i}: {WAITING_FOR_PODS}" for i in range(2)]


def test_a_basic_group_is_not_a_gang() -> None:
    pods = [_member(f"w{i}", "job") for i in range(3)]
    cluster = _cluster(2, "1", pods, _group("job", None))
    placed, gated = _outcomes(pods, cluster)
    assert gated == []
    assert sum(n is not None for n, _ in placed.values()) == 2


def test_without_generic_workload_members_are_plain_pods() -> None:
    # The gates off: GangScheduling is not in the profile and no group cycle runs.
    pods = [_member(f"w{i}", "job") for i in range(4)]
    cluster = _cluster(3, "1", pods, _group("job", 4))
    placed, gated = _outcomes(pods, cluster, default_framework())
    assert gated == []
    assert sum(n is not None for n, _ in placed.values()) == 3


def test_two_gangs_that_fit_alone_but_not_together_do_not_deadlock() -> None:
    # Room for 4; two gangs of 3: the first placed whole, the second held whole.
    a = [_member(f"a{i}", "a") for i in range(3)]
    b = [_member(f"b{i}", "b") for i in range(3)]
    cluster = _cluster(4, "1", a + b, _group("a", 3), _group("b", 3))
    placed, _ = _outcomes(a + b, cluster)
    assert [placed[p.name][0] is not None for p in a] == [True] * 3
    assert [placed[p.name][0] for p in b] == [None] * 3


def test_members_are_tried_by_priority_first() -> None:
    # Room for 2 two-CPU pods; the gang (minCount 1) has a low and a high priority
    # pod needing 2 CPUs each and a one-CPU pod: the high one is tried first.
    pods = [_member("low", "job", cpu="2", priority=1),
            _member("high", "job", cpu="2", priority=100),
            _member("small", "job", cpu="1", priority=50)]
    cluster = _cluster(1, "3", pods, _group("job", 1))
    attempt = try_pod_group(_framework(), sorted(pods, key=lambda p: -p.priority),
                            cluster)
    assert attempt.schedulable
    assert [m.result.pod.name for m in attempt.members if m.fitted] == ["high", "small"]
    # The trial left nothing behind.
    assert all(not info.pods for info in cluster)


@pytest.mark.parametrize("size,room", [(16, 12), (5, 4), (2, 1)])
def test_gang_sizes_never_half_placed(size: int, room: int) -> None:
    pods = [_member(f"w{i}", "job") for i in range(size)]
    cluster = _cluster(room, "1", pods, _group("job", size))
    placed, _ = _outcomes(pods, cluster)
    assert all(n is None for n, _ in placed.values())
    assert all(not info.pods for info in cluster)


def test_simulate_answers_for_the_group() -> None:
    """simulate says which pods of the gang fit where, and what the rest lack."""
    from policyd.engine.report import simulate_json, simulate_text

    pods = [_member(f"w{i}", "job") for i in range(4)]
    cluster = _cluster(3, "1", pods, _group("job", 4))
    out = simulate({"policyd": _framework()}, cluster, pods)
    (summary,) = out.groups
    assert (summary.tried, len(summary.fitted), summary.placed) == (4, 3, False)
    assert summary.nodes == ["n0", "n1", "n2"]
    text = summary.describe()
    assert text.startswith("pod group default/job (gang of minCount 4): 3 of 4 fit (on 3 "
                           "nodes: n0, n1, n2); held, nothing placed: 1 short of its "
                           "minCount. 1 that does not fit: 0/3 nodes are available: 3 "
                           "Insufficient cpu."), text
    assert "Pod groups (each placed whole or not at all):\n  pod group default/job" \
        in simulate_text(out)
    (g,) = simulate_json(out)["podGroups"]
    assert g["placed"] is False and g["nodes"] == ["n0", "n1", "n2"]
    assert [f["pod"] for f in g["fits"]] == ["default/w0", "default/w1", "default/w2"]
    assert g["notFitting"][0]["pods"] == 1


def test_simulate_answers_for_a_placed_group() -> None:
    pods = [_member(f"w{i}", "job") for i in range(4)]
    out = simulate({"policyd": _framework()}, _cluster(2, "2", pods, _group("job", 4)), pods)
    (summary,) = out.groups
    assert summary.placed and summary.missing == ()
    assert summary.describe() == ("pod group default/job (gang of minCount 4): 4 of 4 fit "
                                  "(on 2 nodes: n0, n1); placed.")


def test_the_group_counts_follow_assume_forget_bind_and_delete() -> None:
    """Kept as counters (Permit asks per member): every way a pod is placed or
    unplaced moves them, and a pod confirmed bound is no longer only assumed."""
    pods = [_member(f"w{i}", "job") for i in range(3)]
    cluster = _cluster(2, "4", pods, _group("job", 3))
    key = GroupKey(WORKLOAD_API, "default", "job")
    cluster.assume(pods[0], "n0")
    cluster.assume(pods[1], "n1")
    assert (cluster.group_counts(key).all, cluster.group_counts(key).scheduled) == (3, 2)
    assert sorted(cluster.group_assumed(key)) == ["uid-w0", "uid-w1"]
    cluster.forget(pods[1])
    assert cluster.group_counts(key).scheduled == 1
    bound = _member("w0", "job")
    bound.raw["spec"]["nodeName"] = "n0"
    from dataclasses import replace
    cluster.upsert_pod(replace(bound, node_name="n0", cache={}))
    assert cluster.group_counts(key).scheduled == 1 and cluster.group_assumed(key) == []
    with cluster.what_if(remove=[pods[0]]):
        assert cluster.group_counts(key).scheduled == 0
    assert cluster.group_counts(key).scheduled == 1
    cluster.remove_pod("uid-w0")
    assert (cluster.group_counts(key).all, cluster.group_counts(key).scheduled) == (2, 0)
