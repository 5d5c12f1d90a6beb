"""Coscheduling (scheduler-plugins v0.34.7) at each extension point, with plain
objects: the texts are upstream's (its coscheduling_test.go asserts "podGroup %v failed
recently" and "PodGroup ns/pg1 gets rejected due to Pod p is unschedulable even after
PostFilter"), and a whole profile through `simulate`."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.config.plugins import build_framework
from policyd.engine.simulate import simulate
from policyd.framework import Code, CycleState, PluginError
from policyd.framework.cycle_state import PODS_TO_ACTIVATE
from policyd.framework.fit_error import Diagnosis
from policyd.framework.runtime import Framework
from policyd.framework.waiting_pods import WaitingPods
from policyd.model.cluster import ClusterState
from policyd.model.pod_groups import COSCHEDULING_API, COSCHEDULING_LABEL, pod_group_from_dict
from policyd.model.records import Pod
from policyd.plugins.coscheduling.plugin import (
    GROUP_REJECTED,
    NO_POD_GROUP,
    Coscheduling,
    coscheduling_group,
    new,
)
from tests.builders import make_node, make_pod

PROFILE: dict[str, Any] = {
    "schedulerName": "policyd",
    "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {"enabled": [{"name": "Coscheduling"}],
                              "disabled": [{"name": "*"}]}},
    "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
}


def _group(name: str, min_member: int, *, created: str = "2026-01-01T00:00:00Z",
           **spec: Any) -> dict[str, Any]:
    return {"apiVersion": COSCHEDULING_API, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "creationTimestamp": created},
            "spec": {"minMember": min_member, **spec}}


def _member(name: str, group: str, cpu: str = "1", created: str = "2026-01-02T00:00:00Z"
            ) -> Pod:
    return (make_pod(name, "ns").uid(f"uid-{name}").scheduler("policyd").req(cpu=cpu)
            .label(COSCHEDULING_LABEL, group).created(created).obj())


def _cluster(nodes: int, cpu: str, pods: list[Pod], *groups: dict[str, Any]) -> ClusterState:
    cluster = ClusterState([make_node(f"n{i}").capacity(cpu=cpu, memory="8Gi", pods="110")
                            .obj() for i in range(nodes)], pods)
    for g in groups:
        cluster.pod_groups.upsert(pod_group_from_dict(g, COSCHEDULING_API))
    return cluster


def _plugin(cluster: ClusterState, **args: Any) -> tuple[Coscheduling, WaitingPods]:
    plugin = new(args or None)
    waiting = WaitingPods()
    plugin.use_waiting_pods(waiting)
    plugin.use_cluster(cluster)
    return plugin, waiting


def _state(cluster: ClusterState) -> CycleState:
    return CycleState(list(cluster), cluster)


def test_args_are_validated_with_upstreams_messages() -> None:
    with pytest.raises(PluginError) as exc:
        new({"permitWaitingTimeSeconds": -1, "podGroupBackoffSeconds": -2,
             "podGroupRejectPercentage": 101, "kind": "CoschedulingArgs"})
    assert [(p.path, p.message) for p in exc.value.problems] == [
        ("permitWaitingTimeSeconds", "Invalid value: -1: must be greater than 0"),
        ("podGroupBackoffSeconds", "Invalid value: -2: must be greater than 0"),
        ("podGroupRejectPercentage", "Invalid value: 101: must be between 0 and 100")]
    with pytest.raises(PluginError, match="must be an integer"):
        new({"permitWaitingTimeSeconds": "10"})
    assert new(None).args.permit_waiting_time_s == 60


def test_less_orders_by_priority_then_group_creation_then_name() -> None:
    old, young = _group("old", 2, created="2026-01-01T00:00:00Z"), \
        _group("young", 2, created="2026-01-05T00:00:00Z")
    # The young group's pods were created before the old group's.
    a = _member("b-old", "old", created="2026-01-09T00:00:00Z")
    b = _member("a-young", "young", created="2026-01-02T00:00:00Z")
    alone = _member("alone", "", created="2026-01-03T00:00:00Z")
    cluster = _cluster(1, "4", [a, b, alone], old, young)
    plugin, _ = _plugin(cluster)
    assert plugin.less(a, b) and not plugin.less(b, a)
    # A pod of no group sorts by its own time: after the old group, before the young.
    assert plugin.less(a, alone) and plugin.less(alone, b)
    # Equal times: namespace/name decides.
    a2 = _member("a-old", "old")
    assert plugin.less(a2, a) and not plugin.less(a, a2)
    # Priority first.
    high = make_pod("z", "ns").priority(10).created("2027-01-01T00:00:00Z").obj()
    assert plugin.less(high, a)
    # A failed group sorts by its failure time: behind the young group now.
    key = coscheduling_group(a)
    assert key is not None
    plugin._failed(key)
    assert plugin.less(b, a)


def test_pre_filter_refusals_and_their_texts() -> None:
    pods = [_member(f"p{i}", "pg") for i in range(2)]
    cluster = _cluster(2, "2", pods, _group("pg", 3))
    plugin, _ = _plugin(cluster)
    _, status = plugin.pre_filter(_state(cluster), pods[0], list(cluster))
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == ("pre-filter pod p0 cannot find enough sibling pods, current "
                              "pods number: 2, minMember of group: 3")
    # A missing group is Permit's to refuse, not PreFilter's (upstream).
    lone = _member("lone", "nowhere")
    assert plugin.pre_filter(_state(cluster), lone, list(cluster)) == (None, None)
    # Gated pods count against the spare members.
    gated = (make_pod("g", "ns").uid("uid-g").label(COSCHEDULING_LABEL, "pg")
             .set("spec.schedulingGates", [{"name": "x"}]).obj())
    cluster.upsert_pod(gated)
    _, status = plugin.pre_filter(_state(cluster), pods[0], list(cluster))
    assert status is not None
    assert status.message == ("pre-filter pod p0 cannot proceed due to gated pods in the same "
                              "PodGroup")


def test_min_resources_gap_is_printed_as_go_prints_the_quantities() -> None:
    pods = [_member(f"p{i}", "pg") for i in range(2)]
    group = _group("pg", 2, minResources={"cpu": "8", "memory": "4Gi"})
    cluster = _cluster(2, "2", pods, group)
    plugin, _ = _plugin(cluster)
    _, status = plugin.pre_filter(_state(cluster), pods[0], list(cluster))
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    # cpu 8 - 2000m - 2000m keeps the node's milli scale; memory is covered; pods too.
    assert status.message == "resource gap: map[cpu:{{4000 -3} {<nil>}  DecimalSI}]"
    # Room enough: passes, and is not checked again meanwhile.
    cluster.pod_groups.upsert(pod_group_from_dict(
        _group("pg", 2, minResources={"cpu": "3"}), COSCHEDULING_API))
    assert plugin.pre_filter(_state(cluster), pods[0], list(cluster)) == (None, None)


def test_post_filter_rejects_the_waiting_members_and_backs_off() -> None:
    pods = [_member(f"p{i}", "pg") for i in range(3)]
    cluster = _cluster(1, "8", pods, _group("pg", 3))
    plugin, waiting = _plugin(cluster, podGroupBackoffSeconds=30)
    now = [100.0]
    plugin.now = lambda: now[0]
    cluster.assume(pods[0], "n0")
    parked = waiting.add(pods[0], "n0", {"Coscheduling": 10}, 0)
    result, status = plugin.post_filter(_state(cluster), pods[1], Diagnosis())
    assert result is None and status.code is Code.UNSCHEDULABLE
    assert status.message == GROUP_REJECTED.format(group="ns/pg", pod="p1")
    assert status.message == ("PodGroup ns/pg gets rejected due to Pod p1 is unschedulable "
                              "even after PostFilter")
    assert parked.resolved and parked.outcome is not None
    assert parked.outcome.message == "optimistic rejection in PostFilter"
    _, status2 = plugin.pre_filter(_state(cluster), pods[2], list(cluster))
    assert status2 is not None and status2.message == "podGroup ns/pg failed recently"
    now[0] += 31
    assert plugin.pre_filter(_state(cluster), pods[2], list(cluster)) == (None, None)
    # A pod of no group: upstream's text.
    other = make_pod("x", "ns").obj()
    assert plugin.post_filter(_state(cluster), other, Diagnosis())[1].message == NO_POD_GROUP


def test_permit_waits_for_the_quorum_then_allows_the_waiting() -> None:
    pods = [_member(f"p{i}", "pg") for i in range(3)]
    cluster = _cluster(1, "8", pods, _group("pg", 3, scheduleTimeoutSeconds=7))
    plugin, waiting = _plugin(cluster)
    parked = []
    for i, pod in enumerate(pods):
        cluster.assume(pod, "n0")
        state = _state(cluster)
        status, timeout = plugin.permit(state, pod, "n0")
        if i < 2:
            assert status is not None and status.code is Code.WAIT and timeout == 7.0
            parked.append(waiting.add(pod, "n0", {"Coscheduling": timeout}, 0))
            # The first to wait asks for its siblings to be activated.
            assert state.get(PODS_TO_ACTIVATE) == ({"uid-p1", "uid-p2"} if i == 0 else None)
        else:
            assert status is None
    assert all(w.resolved and w.outcome is None for w in parked)
    # No group object: refused at Permit.
    lone = _member("lone", "nowhere")
    status, _ = plugin.permit(_state(cluster), lone, "n0")
    assert status is not None and status.message == "PodGroup not found"


def test_unreserve_rejects_the_groups_waiting_members() -> None:
    pods = [_member(f"p{i}", "pg") for i in range(2)]
    cluster = _cluster(1, "8", pods, _group("pg", 3))
    plugin, waiting = _plugin(cluster)
    parked = waiting.add(pods[0], "n0", {"Coscheduling": 10}, 0)
    plugin.unreserve(_state(cluster), pods[1], "n0")
    assert parked.outcome is not None and parked.outcome.message == "rejection in Unreserve"


def _framework() -> Framework:
    return build_framework(PROFILE)


def test_a_group_that_fits_is_placed_whole_in_simulate() -> None:
    pods = [_member(f"w{i}", "job") for i in range(4)]
    cluster = _cluster(2, "2", pods, _group("job", 4))
    out = simulate({"policyd": _framework()}, cluster, pods)
    assert sorted(r.pod.name for r in out.results if r.node is not None) == \
        ["w0", "w1", "w2", "w3"]


def test_a_group_short_of_room_holds_nothing_in_simulate() -> None:
    pods = [_member(f"w{i}", "job") for i in range(4)]
    cluster = _cluster(3, "1", pods, _group("job", 4))
    out = simulate({"policyd": _framework()}, cluster, pods)
    assert [r.node for r in out.results] == [None] * 4
    refused = next(r for r in out.results if "Insufficient cpu" in r.message)
    assert refused.message.endswith(
        "PodGroup ns/job gets rejected due to Pod w3 is unschedulable even after PostFilter")
    assert all(not info.pods for info in cluster)
