"""Gangs end to end: `policyd run` with GenericWorkload and GangScheduling on, against a
kube-apiserver v1.36.3 serving scheduling.k8s.io/v1alpha2, and kube-scheduler v1.36.3
with the same gates on the same server.

- A 16-pod gang with room for 12 holds nothing (no pod bound, none assumed or waiting
  in the daemon), its PodGroup says PodGroupScheduled=False, and all 16 bind soon
  after a node with room for the rest is added.
- Two gangs that fit alone but not together: one is placed whole, the other waits
  whole, and binds once the first is gone (no deadlock).
- kube-scheduler and policyd, given the same gang on the same nodes in turn, write the
  same FailedScheduling messages and the same PodGroup conditions.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.cli.options import feature_gate_settings
from policyd.devcluster.controlplane import ControlPlane
from tests.e2e.helpers import Cluster, DaemonFactory, daemons_on, fresh_cluster, write_profile
from tests.polling import wait_for

GATES = "GenericWorkload=true,GangScheduling=true"
GROUPS = "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups"


@pytest.fixture(scope="module")
def gang_plane() -> Iterator[ControlPlane]:
    # The gates reach the API server (which then serves scheduling.k8s.io/v1alpha2) and
    # every kube-scheduler it starts; the controller manager removes the PodGroups'
    # protection finalizer.
    cp = ControlPlane(feature_gates={"GenericWorkload": True, "GangScheduling": True})
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def gangs(gang_plane: ControlPlane) -> Iterator[Cluster]:
    with fresh_cluster(gang_plane, "gang") as c:
        yield c


@pytest.fixture
def gang_daemons(gang_plane: ControlPlane, tmp_path: Path) -> Iterator[DaemonFactory]:
    with daemons_on(gang_plane, tmp_path) as factory:
        yield factory


def _pod_group(c: Cluster, name: str, min_count: int) -> dict[str, Any]:
    return c.client.request("POST", GROUPS.format(ns=c.ns), body={
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})


def _condition(c: Cluster, group: str) -> dict[str, Any] | None:
    obj = c.client.request("GET", GROUPS.format(ns=c.ns) + f"/{group}")
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodGroupScheduled":
            return dict(cond)
    return None


def _members(c: Cluster, group: str, scheduler: str, count: int, cpu: str = "1"
             ) -> list[str]:
    names = [f"{group}-{i}" for i in range(count)]
    for name in names:
        c.pod(name, scheduler, cpu=cpu, schedulingGroup={"podGroupName": group})
    return names


def _told(c: Cluster) -> set[str]:
    """The pods with a FailedScheduling event."""
    return {e["involvedObject"]["name"] for e in c.events(reason="FailedScheduling")}


def _bound(c: Cluster, names: list[str]) -> list[str]:
    return [n for n in names if c.node_of(n)]


def _start(daemons: DaemonFactory, tmp_path: Path, scheduler: str) -> Any:
    return daemons.start(write_profile(tmp_path, scheduler, policies=None),
                         feature_gates=feature_gate_settings([GATES]))


def test_a_gang_without_room_holds_nothing_then_binds_whole(
        gangs: Cluster, gang_daemons: DaemonFactory, tmp_path: Path) -> None:
    scheduler = f"gang-{uuid.uuid4().hex[:6]}"
    daemon = _start(gang_daemons, tmp_path, scheduler)
    for i in range(3):
        gangs.node(f"n{i}", cpu="4")  # room for 12 one-CPU pods
    _pod_group(gangs, "train", 16)
    names = _members(gangs, "train", scheduler, 16)
    wait_for(lambda: (_condition(gangs, "train") or {}).get("status") == "False", 20,
             "PodGroupScheduled=False")
    cond = _condition(gangs, "train")
    assert cond is not None
    assert (cond["reason"], cond["message"]) == ("Unschedulable", "pod group is unschedulable")
    wait_for(lambda: len(gangs.events(reason="FailedScheduling")) >= 16, 20,
             "every member told")
    messages = {e["message"] for e in gangs.events(reason="FailedScheduling")}
    assert ("pod group is unschedulable, waiting for minCount pods from a gang to be "
            "scheduled, one or more plugins asked to wait and no plugin rejected pod"
            in messages), messages
    assert any(m.startswith("0/3 nodes are available: 3 Insufficient cpu.")
               for m in messages), messages
    # Nothing held: no pod bound, assumed or waiting at Permit.
    time.sleep(1.0)
    assert _bound(gangs, names) == []
    state = daemon.scheduler.state
    assert state.assumed == {} and state.waiting_pods.all() == []
    added = time.monotonic()
    gangs.node("n3", cpu="4")
    wait_for(lambda: len(_bound(gangs, names)) == 16, 30, "all 16 bound")
    took = time.monotonic() - added
    assert took < 3.0, took
    wait_for(lambda: (_condition(gangs, "train") or {}).get("status") == "True", 10,
             "PodGroupScheduled=True")


def test_two_gangs_that_do_not_fit_together_do_not_deadlock(
        gangs: Cluster, gang_daemons: DaemonFactory, tmp_path: Path) -> None:
    scheduler = f"gang-{uuid.uuid4().hex[:6]}"
    _start(gang_daemons, tmp_path, scheduler)
    gangs.node("n0", cpu="4")
    gangs.node("n1", cpu="2")  # room for 6; each gang needs 4
    _pod_group(gangs, "a", 4)
    _pod_group(gangs, "b", 4)
    a = _members(gangs, "a", scheduler, 4)
    b = _members(gangs, "b", scheduler, 4)
    wait_for(lambda: len(_bound(gangs, a)) + len(_bound(gangs, b)) == 4, 30,
             "one gang bound")
    time.sleep(2.0)
    winner, loser = (a, b) if _bound(gangs, a) else (b, a)
    assert len(_bound(gangs, winner)) == 4 and _bound(gangs, loser) == []
    for name in winner:
        gangs.delete_pod(name)
    wait_for(lambda: len(_bound(gangs, loser)) == 4, 30, "the other gang bound")


def test_the_same_gang_is_told_the_same_by_kube_scheduler_and_policyd(
        gangs: Cluster, gang_plane: ControlPlane, gang_daemons: DaemonFactory,
        tmp_path: Path) -> None:
    kube, ours = f"kube-{uuid.uuid4().hex[:6]}", f"ours-{uuid.uuid4().hex[:6]}"
    config = tmp_path / "kube-scheduler.json"
    config.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": kube, "percentageOfNodesToScore": 100}]}))
    ks = gang_plane.start_kube_scheduler(config)
    seen: dict[str, tuple[set[str], tuple[str, str, str]]] = {}
    try:
        _start(gang_daemons, tmp_path, ours)
        for scheduler in (kube, ours):
            gangs.delete_all_nodes()
            gangs.node("n0", cpu="2")
            gangs.node("n1", cpu="1")  # room for 3 of the 4
            group = f"g-{scheduler}"
            _pod_group(gangs, group, 4)
            names = _members(gangs, group, scheduler, 4)
            wait_for(lambda: _condition(gangs, group) is not None, 30,  # noqa: B023
                     f"{scheduler}: condition written")
            wait_for(lambda: _told(gangs) >= set(names), 30,  # noqa: B023
                     f"{scheduler}: members told")
            messages = {e["message"] for e in gangs.events(reason="FailedScheduling")
                        if e["involvedObject"]["name"] in names}
            cond = _condition(gangs, group)
            assert cond is not None
            seen[scheduler] = (messages, (cond["status"], cond["reason"], cond["message"]))
            assert _bound(gangs, names) == []
            for name in names:
                gangs.delete_pod(name)
    finally:
        ks.stop()
    assert seen[kube] == seen[ours], seen
