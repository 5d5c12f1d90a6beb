"""Policies on pod groups (issue 30): `appliesTo.podGroup` selects gang members (either
PodGroup API), and a `sameTopology` rule keeps a gang's pods in one domain of a node
label, in the group cycle (placed whole in one zone or not at all) as pod by pod."""

from __future__ import annotations

from typing import Any

from policyd.config.plugins import default_framework
from policyd.engine.simulate import simulate
from policyd.features import with_settings
from policyd.model.cluster import ClusterState
from policyd.model.pod_groups import COSCHEDULING_LABEL, WORKLOAD_API, pod_group_from_dict
from policyd.model.records import Pod
from tests.builders import make_node, make_pod
from tests.unit.policy.conftest import check_docs, make_policy

GANG_GATES = with_settings([("GenericWorkload", True), ("GangScheduling", True)])
ZONE = "topology.kubernetes.io/zone"
ONE_ZONE = {"id": "one-zone", "message": "node(s) are not in the job's zone",
            "sameTopology": {"key": ZONE}}


def _policy(applies: dict[str, Any] | None = None) -> Any:
    spec: dict[str, Any] = {"filters": [ONE_ZONE]}
    if applies is not None:
        spec["appliesTo"] = applies
    result = check_docs(make_policy(plugin="OneZone", **spec))
    assert not result.problems, result.problems
    (policy,) = result.compiled
    return policy


def _member(name: str, group: str = "job", *, label: bool = False, cpu: str = "1") -> Pod:
    b = make_pod(name).uid(f"uid-{name}").scheduler("policyd").req(cpu=cpu)
    if label:
        return b.label(COSCHEDULING_LABEL, group).obj()
    return b.set("spec.schedulingGroup", {"podGroupName": group}).obj()


def _zoned_cluster(pods: list[Pod]) -> ClusterState:
    # Zone a: two nodes with room for 2 each; zone b: one node with room for 3.
    nodes = [make_node("a1").label(ZONE, "a").capacity(cpu="2", pods="110").obj(),
             make_node("a2").label(ZONE, "a").capacity(cpu="2", pods="110").obj(),
             make_node("b1").label(ZONE, "b").capacity(cpu="3", pods="110").obj(),
             make_node("bare").capacity(cpu="8", pods="110").obj()]
    cluster = ClusterState(nodes, pods)
    cluster.pod_groups.upsert(pod_group_from_dict({
        "apiVersion": WORKLOAD_API, "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "default", "uid": "g"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}))
    return cluster


def _zones(cluster: ClusterState, pods: list[Pod]) -> list[str | None]:
    out = []
    for p in pods:
        node = cluster.node_of(p.uid)
        info = cluster.get(node) if node else None
        out.append(info.node.labels.get(ZONE) if info is not None else None)
    return out


def test_a_gang_lands_in_one_zone_with_room_for_it() -> None:
    pods = [_member(f"w{i}") for i in range(4)]
    cluster = _zoned_cluster(pods)
    fw = default_framework([_policy()], features=GANG_GATES)
    out = simulate({"policyd": fw}, cluster, pods)
    assert out.scheduled == 4, [r.message for r in out.results]
    assert _zones(cluster, pods) == ["a"] * 4


def test_a_gang_no_zone_can_hold_is_held_whole() -> None:
    pods = [_member(f"w{i}") for i in range(5)]  # zone a holds 4, zone b 3
    cluster = _zoned_cluster(pods)
    cluster.pod_groups.upsert(pod_group_from_dict({
        "apiVersion": WORKLOAD_API, "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "default", "uid": "g"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 5}}}}))
    fw = default_framework([_policy()], features=GANG_GATES)
    out = simulate({"policyd": fw}, cluster, pods)
    assert out.scheduled == 0
    (summary,) = out.groups
    assert not summary.placed and len(summary.fitted) == 4
    assert "node(s) are not in the job's zone" in summary.missing[0][0]


def test_pod_by_pod_members_follow_the_first_one() -> None:
    # scheduler-plugins' label, no group cycle: each member filtered on its own sees
    # where the others went.
    pods = [_member(f"w{i}", label=True) for i in range(3)]
    cluster = _zoned_cluster(pods)
    fw = default_framework([_policy()])
    out = simulate({"policyd": fw}, cluster, pods)
    assert out.scheduled == 3
    assert len(set(_zones(cluster, pods))) == 1


def test_pods_of_no_group_are_not_constrained_and_need_no_label() -> None:
    loner = make_pod("loner").uid("uid-loner").scheduler("policyd").req(cpu="6").obj()
    cluster = _zoned_cluster([loner])
    out = simulate({"policyd": default_framework([_policy()])}, cluster, [loner])
    assert [r.node for r in out.results] == ["bare"]


def test_applies_to_pod_group() -> None:
    member, labelled = _member("m"), _member("l", "other", label=True)
    loner = make_pod("loner").obj()
    assert [_policy({"podGroup": {"member": True}}).applies(p)
            for p in (member, labelled, loner)] == [True, True, False]
    assert [_policy({"podGroup": {"member": False}}).applies(p)
            for p in (member, labelled, loner)] == [False, False, True]
    assert [_policy({"podGroup": {"names": ["other"]}}).applies(p)
            for p in (member, labelled, loner)] == [False, True, False]
