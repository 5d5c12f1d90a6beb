"""`policyd diff` on pod groups: a gang's pending pods are compared as their group (held
or placed whole, and where), each claim checked against the group's answer under each
version alone (`simulate.group_answer`, what explain says of a member), for both
PodGroup APIs; and a version that does not place the group as one compares its pods
one by one."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from policyd.config.plugins import build_framework, default_framework
from policyd.engine.audit import by_scheduler
from policyd.engine.diff import (
    SAME,
    STARTS_FITTING,
    STILL_UNFIT,
    STOPS_FITTING,
    TIE,
    Version,
    diff,
)
from policyd.engine.simulate import group_answer
from policyd.features import FeatureGates, with_settings
from policyd.model.cluster import ClusterState
from policyd.model.pod_groups import (
    COSCHEDULING_API,
    COSCHEDULING_LABEL,
    WORKLOAD_API,
    pod_group_from_dict,
)
from policyd.model.records import Node, Pod
from policyd.policy.compiler import CompiledPolicy
from tests.builders import make_node, make_pod
from tests.unit.engine.test_diff import compiled
from tests.unit.policy.conftest import make_policy

GANG_GATES = with_settings([("GenericWorkload", True), ("GangScheduling", True)])
SCHEDULER = "policyd"


def zone_policy(zones: list[str]) -> dict[str, Any]:
    return make_policy("zones", "Zones", filters=[{
        "id": "zone", "message": "not an allowed zone", "nodeLabels": {
            "matchExpressions": [{"key": "zone", "operator": "In", "values": zones}]}}])


def gang(name: str, min_count: int) -> dict[str, Any]:
    return {"apiVersion": WORKLOAD_API, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "generation": 1},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def member(name: str, group: str, cpu: str = "1") -> Pod:
    return (make_pod(name).uid(f"uid-{name}").scheduler(SCHEDULER).req(cpu=cpu)
            .set("spec.schedulingGroup", {"podGroupName": group}).obj())


def nodes(zones: list[str], cpu: str = "2") -> list[Node]:
    return [make_node(f"n{i}").label("zone", z).capacity(cpu=cpu, pods="110").obj()
            for i, z in enumerate(zones)]


def state(ns: list[Node], pods: list[Pod], groups: list[dict[str, Any]],
          api: str = WORKLOAD_API) -> ClusterState:
    cluster = ClusterState(ns, pods)
    for g in groups:
        cluster.pod_groups.upsert(pod_group_from_dict(g, api))
    return cluster


def version(ns: list[Node], pods: list[Pod], groups: list[dict[str, Any]],
            policies: list[CompiledPolicy], gates: FeatureGates = GANG_GATES) -> Version:
    fw = default_framework(policies, scheduler_name=SCHEDULER, seed=1, features=gates)
    return Version({SCHEDULER: fw}, state(ns, pods, groups), policies,
                   by_scheduler({}, policies))


def test_a_gang_a_narrowed_policy_no_longer_holds_whole_stops_fitting() -> None:
    ns = nodes(["a", "a", "b"])
    pods = [member(f"w{i}", "train") for i in range(4)]
    old = version(ns, pods, [gang("train", 4)], compiled([zone_policy(["a", "b"])]))
    new = version(ns, pods, [gang("train", 4)], compiled([zone_policy(["b"])]))
    result = diff(old, new, pods)
    assert result.pending == []  # the members are compared as their group only
    [g] = result.groups
    assert (g.group, g.pods, g.change) == ("default/train", 4, STOPS_FITTING)
    assert g.old_whole and g.new_whole
    assert g.old.placed and len(g.old.fitted) == 4
    assert not g.new.placed and len(g.new.fitted) == 2
    assert any("not an allowed zone" in reason for reason, _ in g.new.missing)
    # And the reverse change starts it fitting.
    [back] = diff(new, old, pods).groups
    assert back.change == STARTS_FITTING


def test_a_version_without_gangs_compares_the_members_one_by_one() -> None:
    ns = nodes(["a", "b"])
    pods = [member(f"w{i}", "train") for i in range(3)]
    off = with_settings([("GenericWorkload", False)])
    old = version(ns, pods, [gang("train", 3)], [], gates=off)
    new = version(ns, pods, [gang("train", 3)], [], gates=off)
    result = diff(old, new, pods)
    assert result.groups == []
    assert len(result.pending) == 3


def check_claim(change: Any, old: Version, new: Version, pod: Pod,
                fresh: Callable[[], ClusterState]) -> None:
    """The group's answer under each version alone, each on a state of its own."""
    alone_old = group_answer(old.frameworks[SCHEDULER], fresh(), pod)
    alone_new = group_answer(new.frameworks[SCHEDULER], fresh(), pod)
    assert alone_old is not None and alone_new is not None
    assert (change.old.placed, change.new.placed) == (alone_old.placed, alone_new.placed)
    assert len(change.old.fitted) == len(alone_old.fitted)
    assert len(change.new.fitted) == len(alone_new.fitted)
    expected = {(True, True): {SAME, TIE}, (False, True): {STARTS_FITTING},
                (True, False): {STOPS_FITTING}, (False, False): {STILL_UNFIT}}
    assert change.change in expected[(alone_old.placed, alone_new.placed)]
    if change.change == SAME:
        assert change.old.nodes == change.new.nodes


SEEN: dict[str, int] = {}


@pytest.mark.parametrize("seed", range(30))
def test_generated_gangs_and_zone_changes_match_each_version_alone(seed: int) -> None:
    rng = random.Random(seed)
    zones = ["a", "b", "c"]
    ns = nodes([rng.choice(zones) for _ in range(rng.randint(2, 6))],
               cpu=rng.choice(["2", "3", "4"]))
    groups, pods = [], []
    for g in range(rng.randint(1, 3)):
        size = rng.randint(1, 6)
        groups.append(gang(f"g{g}", rng.randint(1, size)))
        pods += [member(f"g{g}-{i}", f"g{g}", cpu=rng.choice(["500m", "1", "2"]))
                 for i in range(size)]
    pods += [make_pod(f"plain{i}").uid(f"uid-plain{i}").scheduler(SCHEDULER).req(cpu="1")
             .obj() for i in range(rng.randint(0, 3))]

    def policies() -> list[CompiledPolicy]:
        return compiled([zone_policy(rng.sample(zones, rng.randint(1, 3)))])

    old = version(ns, pods, groups, policies())
    new = version(ns, pods, groups, policies())
    result = diff(old, new, pods)
    assert {g.group for g in result.groups} == {f"default/g{g}" for g in range(len(groups))}
    assert all(c.pod.startswith("default/plain") for c in result.pending)
    for change in result.groups:
        first = next(p for p in pods if f"default/{p.scheduling_group}" == change.group)
        check_claim(change, old, new, first, lambda: state(ns, pods, groups))
        SEEN[change.change] = SEEN.get(change.change, 0) + 1


def test_the_generated_cases_cover_every_group_claim() -> None:
    if len(SEEN) == 0:
        pytest.skip("run with the generated cases")
    for kind in (STARTS_FITTING, STOPS_FITTING, SAME, STILL_UNFIT):
        assert SEEN.get(kind, 0) > 0, (kind, SEEN)


COSCHEDULING_PROFILE: dict[str, Any] = {
    "schedulerName": SCHEDULER,
    "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}, {"name": "Zones"}]},
                "queueSort": {"enabled": [{"name": "Coscheduling"}],
                              "disabled": [{"name": "*"}]}},
    "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
}


def test_a_scheduler_plugins_group_is_simulated_on_a_state_of_its_own() -> None:
    ns = nodes(["a", "a", "b"])
    pods = [(make_pod(f"w{i}").uid(f"uid-w{i}").scheduler(SCHEDULER).req(cpu="1")
             .label(COSCHEDULING_LABEL, "job").obj()) for i in range(4)]
    group = {"apiVersion": COSCHEDULING_API, "kind": "PodGroup",
             "metadata": {"name": "job", "namespace": "default", "uid": "uid-job",
                          "creationTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"minMember": 4}}

    def cosched(zones: list[str]) -> Version:
        policies = compiled([zone_policy(zones)])
        fw = build_framework(COSCHEDULING_PROFILE, {p.name: p for p in policies}, seed=1)
        return Version({SCHEDULER: fw}, state(ns, pods, [group], COSCHEDULING_API),
                       policies, by_scheduler({}, policies),
                       scratch=lambda: state(ns, pods, [group], COSCHEDULING_API))

    old, new = cosched(["a", "b"]), cosched(["b"])
    result = diff(old, new, pods)
    [g] = result.groups
    assert (g.change, g.old_whole, g.new_whole) == (STOPS_FITTING, True, True)
    assert len(g.old.fitted) == 4 and not g.new.placed
    # The versions' own states were only asked, never changed.
    assert all(old.cluster.node_of(p.uid) is None for p in pods)
    # Without a scratch state the members are tried one by one (each alone fits).
    old.scratch = new.scratch = None
    [alone] = diff(old, new, pods).groups
    assert (alone.old_whole, alone.new_whole) == (False, False)
    assert alone.old.tried == 4


def test_every_format_tells_the_group_change() -> None:
    from policyd.cli.diff_report import DIFF_FORMATS, DiffReport, diff_json

    ns = nodes(["a", "a", "b"])
    pods = [member(f"w{i}", "train") for i in range(4)]
    old = version(ns, pods, [gang("train", 4)], compiled([zone_policy(["a", "b"])]))
    new = version(ns, pods, [gang("train", 4)], compiled([zone_policy(["b"])]))
    report = DiffReport(diff(old, new, pods), "old", "new")
    text = DIFF_FORMATS["text"](report)
    assert "pod groups that stop fitting" in text
    line = next(ln for ln in text.splitlines() if "pod group default/train" in ln)
    assert "stops-fitting: placed on 3 nodes (n0, n1, n2) -> held (2 of 4 fit)" in line
    assert "2 pod(s): 0/3 nodes are available" in line and "not an allowed zone" in line
    doc = diff_json(report)
    assert doc["summary"]["podGroups"] == 1 and doc["summary"]["podGroupsStopsFitting"] == 1
    [g] = doc["podGroups"]
    assert (g["group"], g["change"], g["old"]["placed"], g["new"]["placed"]) == (
        "default/train", "stops-fitting", True, False)
    assert len(g["old"]["fitted"]) == 4 and g["new"]["missing"][0]["pods"] == 2
    markdown = DIFF_FORMATS["markdown"](report)
    assert "<details><summary>Pod groups (1)</summary>" in markdown
    assert "| default/train | 4 | stops-fitting |" in markdown
