"""Priorities and preemption end to end (issue 17): `policyd run` as a real process with
the default profile (DefaultPreemption in it), on the real API server.

This control plane has no kubelet: a victim with a grace period stays Terminating
until the test finishes its deletion (what a kubelet does once the container stopped),
which is how these tests hold a preemption between "victims deleted" and "preemptor
bound" to look at it. Victims with grace 0 go at once.
"""

from __future__ import annotations

import signal
import subprocess
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster.ports import free_ports
from tests.e2e.helpers import (
    Cluster,
    DaemonFactory,
    ProcessFactory,
    metric,
    scrape_when,
    write_profile,
)
from tests.polling import wait_for
from tests.unit.daemon.fixed_preemption import PreemptOn

Obj = dict[str, Any]
GRACE = 120  # a victim's grace period when the test wants to see it Terminating


class Scene:
    """One test's scheduler, PriorityClasses and pods."""

    def __init__(self, cluster: Cluster, processes: ProcessFactory, tmp: Path) -> None:
        self.c = cluster
        self.processes = processes
        self.tmp = tmp
        self.sched = f"policyd-{uuid.uuid4().hex[:6]}"
        self.classes: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.metrics_port = 0  # the last started process's

    def start(self) -> subprocess.Popen[bytes]:
        (self.metrics_port,) = free_ports(1)
        profile = write_profile(self.tmp, self.sched, policies=None)
        self.proc = self.processes.start(
            "--config", str(profile), "-v", "2", "--identity",
            f"p{len(self.processes.procs)}",
            "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}")
        return self.proc

    def log(self) -> str:
        return "\n".join(self.processes.log(i) for i in range(len(self.processes.procs)))

    def priority_class(self, name: str, value: int, *, never: bool = False) -> str:
        unique = f"{self.sched}-{name}"
        body: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": unique}, "value": value}
        if never:
            body["preemptionPolicy"] = "Never"
        self.c._create_cluster_object("/apis/scheduling.k8s.io/v1/priorityclasses", body)
        self.classes[name] = unique
        return unique

    def pod(self, name: str, priority: str, cpu: str, *, grace: int = 0,
            labels: dict[str, str] | None = None) -> Obj:
        return self.c.pod(name, self.sched, cpu=cpu, labels=labels,
                          priorityClassName=self.classes[priority],
                          terminationGracePeriodSeconds=grace)

    def nominated(self, name: str) -> str | None:
        return ((self.c.get_pod(name) or {}).get("status") or {}).get("nominatedNodeName")

    def terminating(self, name: str) -> bool:
        pod = self.c.get_pod(name)
        return pod is not None and bool(pod["metadata"].get("deletionTimestamp"))

    def gone(self, name: str) -> bool:
        return self.c.get_pod(name) is None

    def finish_deletion(self, name: str) -> None:
        """What the kubelet does for a Terminating pod: the final delete."""
        self.c.delete_pod(name)


@pytest.fixture
def scene(cluster: Cluster, processes: ProcessFactory, tmp_path: Path) -> Scene:
    return Scene(cluster, processes, tmp_path)


def test_the_daemon_acts_on_a_fixed_decision_on_the_real_api_server(
        scene: Scene, daemons: DaemonFactory, tmp_path: Path) -> None:
    """Every API write of a preemption, with a test PostFilter plugin that always
    picks n1: the preemptor's nomination in its status patch, the victim's
    DisruptionTarget then its deletion (uid precondition) and Preempted event, a
    lower-priority nomination on n1 cleared; the preemptor bound once the victim is
    gone."""
    c = scene.c
    c.node("n1", cpu="2")
    scene.priority_class("low", 10)
    scene.priority_class("high", 1000)
    daemon = daemons.start(write_profile(tmp_path, scene.sched, policies=None))
    fw = daemon.scheduler.frameworks[scene.sched]
    fw.post_filter_plugins = [PreemptOn("n1")]
    scene.pod("victim", "low", "1500m", grace=GRACE)
    assert c.wait_bound("victim", 30) == "n1"
    # A pending low-priority pod an earlier preemption nominated to n1 (the test
    # writes the status as the scheduler would); it fits nowhere.
    scene.pod("waiting", "low", "8")
    c.client.request("PATCH", f"/api/v1/namespaces/{c.ns}/pods/waiting/status",
                     body={"status": {"nominatedNodeName": "n1"}},
                     content_type="application/strategic-merge-patch+json")
    wait_for(lambda: daemon.scheduler.cluster.nominated_node(
        (c.get_pod("waiting") or {})["metadata"]["uid"]) == "n1", 15, "waiting nominated")

    high = scene.pod("high", "high", "1500m")
    wait_for(lambda: scene.nominated("high") == "n1", 30, "high nominated to n1")
    cond = c.condition("high")
    assert cond is not None and cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    wait_for(lambda: scene.terminating("victim"), 30, "the victim's deletion started")
    target = c.condition("victim", "DisruptionTarget")
    assert target is not None and (target["status"], target["reason"]) == (
        "True", "PreemptionByScheduler")
    preempted = wait_for(lambda: c.events("victim", "Preempted"), 15, "Preempted event")
    assert preempted[0]["message"] == (f"Preempted by pod {high['metadata']['uid']} "
                                       "on node n1")
    assert preempted[0]["related"]["name"] == "high"
    wait_for(lambda: scene.nominated("waiting") is None, 15, "waiting's nomination cleared")
    assert c.node_of("high") is None  # the victim is still Terminating

    scene.finish_deletion("victim")
    assert c.wait_bound("high", 30) == "n1"
    assert c.node_of("waiting") is None


def test_a_high_priority_pod_preempts_the_right_victim_is_nominated_then_bound(
        scene: Scene) -> None:
    c = scene.c
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    scene.priority_class("low", 10)
    scene.priority_class("mid", 20)
    scene.priority_class("high", 1000)
    scene.start()
    # A full cluster: each node's victim has a different priority; upstream picks the
    # node whose most important victim matters least (n1).
    scene.pod("low-1", "low", "1500m", grace=GRACE)
    assert c.wait_bound("low-1", 30) in ("n1", "n2"), scene.log()
    first = c.node_of("low-1")
    other = "n2" if first == "n1" else "n1"
    scene.pod("mid-1", "mid", "1500m")
    assert c.wait_bound("mid-1", 30) == other, scene.log()

    high = scene.pod("high", "high", "1500m")
    wait_for(lambda: scene.nominated("high") == first, 30,
             f"high nominated to {first}\n{scene.log()}")
    wait_for(lambda: scene.terminating("low-1"), 30, "the victim's deletion started")
    victim = c.condition("low-1", "DisruptionTarget")
    assert victim is not None and victim["status"] == "True"
    assert victim["reason"] == "PreemptionByScheduler"
    assert victim["message"] == (f"{scene.sched}: preempting to accommodate a higher "
                                 "priority pod")
    preempted = wait_for(lambda: c.events("low-1", "Preempted"), 15, "Preempted event")
    assert preempted[0]["message"] == (f"Preempted by pod {high['metadata']['uid']} "
                                       f"on node {first}")
    cond = c.condition("high")
    assert cond is not None and cond["reason"] == "Unschedulable"
    # Not bound while the victim is still there; the other node's pod is untouched.
    assert c.node_of("high") is None and not scene.terminating("mid-1")

    scene.finish_deletion("low-1")
    assert c.wait_bound("high", 30) == first, scene.log()
    assert c.node_of("mid-1") == other
    # One preemption of one victim; DefaultPreemption ran at least in that cycle.
    text = scrape_when(scene.metrics_port, "scheduler_preemption_attempts_total", 1)
    assert metric(text, "scheduler_preemption_victims_count") == 1
    assert metric(text, "scheduler_preemption_victims_sum") == 1


def test_a_pod_disruption_budget_steers_the_choice(scene: Scene) -> None:
    c = scene.c
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    scene.priority_class("low", 10)
    scene.priority_class("mid", 20)
    scene.priority_class("high", 1000)
    scene.start()
    scene.pod("guarded", "low", "1500m", labels={"app": "guarded"})
    guarded_on = c.wait_bound("guarded", 30)
    scene.pod("plain", "mid", "1500m")
    plain_on = c.wait_bound("plain", 30)
    assert {guarded_on, plain_on} == {"n1", "n2"}
    # This control plane runs no disruption controller: the budget's status never says
    # a disruption is allowed, so evicting "guarded" would violate it. Without it the
    # lower-priority "guarded" would be the victim (see the test above).
    c.client.request("POST", f"/apis/policy/v1/namespaces/{c.ns}/poddisruptionbudgets",
                     body={"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": "guard"},
                           "spec": {"minAvailable": 1,
                                    "selector": {"matchLabels": {"app": "guarded"}}}})
    scene.pod("high", "high", "1500m")
    assert c.wait_bound("high", 30) == plain_on, scene.log()
    assert scene.gone("plain") and c.node_of("guarded") == guarded_on


def test_preemption_policy_never_waits(scene: Scene) -> None:
    c = scene.c
    c.node("n1", cpu="2")
    scene.priority_class("low", 10)
    scene.priority_class("polite", 1000, never=True)
    scene.start()
    scene.pod("low", "low", "1500m")
    c.wait_bound("low", 30)
    scene.pod("polite", "polite", "1500m")
    cond = wait_for(lambda: c.condition("polite"), 30, "polite's PodScheduled condition")
    # (DynamicResources' PostFilter part, when registered, comes between the two.)
    assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu. "), cond
    assert cond["message"].endswith("not eligible due to preemptionPolicy=Never."), cond
    assert c.node_of("low") == "n1" and not scene.terminating("low")
    assert scene.nominated("polite") is None
    # DefaultPreemption ran (and found the pod ineligible): an attempt, no victims.
    text = scrape_when(scene.metrics_port, "scheduler_preemption_attempts_total", 1)
    assert metric(text, "scheduler_preemption_victims_count") == 0
    # It takes the room once the low pod goes of its own accord.
    c.delete_pod("low")
    assert c.wait_bound("polite", 30) == "n1", scene.log()


def test_two_preemptors_do_not_pick_the_same_space(scene: Scene) -> None:
    c = scene.c
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    scene.priority_class("low", 10)
    scene.priority_class("high", 1000)
    scene.start()
    for name in ("low-1", "low-2"):
        scene.pod(name, "low", "1500m", grace=GRACE)
        c.wait_bound(name, 30)
    assert {c.node_of("low-1"), c.node_of("low-2")} == {"n1", "n2"}
    scene.pod("high-1", "high", "1500m")
    scene.pod("high-2", "high", "1500m")
    # Each is nominated to its own node: the second counts the first's nomination.
    wait_for(lambda: scene.nominated("high-1") and scene.nominated("high-2"), 30,
             f"both nominated\n{scene.log()}")
    assert scene.nominated("high-1") != scene.nominated("high-2")
    for name in ("low-1", "low-2"):
        wait_for(partial(scene.terminating, name), 15, f"{name} terminating")
        scene.finish_deletion(name)
    bound = {c.wait_bound("high-1", 30), c.wait_bound("high-2", 30)}
    assert bound == {"n1", "n2"}, scene.log()


def test_the_daemon_killed_between_victim_deletion_and_bind_recovers(
        scene: Scene) -> None:
    c = scene.c
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    scene.priority_class("low", 10)
    scene.priority_class("mid", 500)
    scene.priority_class("high", 1000)
    proc = scene.start()
    scene.pod("victim", "low", "1500m", grace=GRACE)
    victim_on = c.wait_bound("victim", 30)
    other = "n2" if victim_on == "n1" else "n1"
    # Of higher priority than the victim, so the preemptor's choice is the victim's
    # node (upstream's second criterion), not the bystander's.
    scene.pod("bystander", "mid", "1", grace=0)
    assert c.wait_bound("bystander", 30) == other
    scene.pod("high", "high", "1500m")
    wait_for(lambda: scene.nominated("high") == victim_on, 30,
             f"high nominated\n{scene.log()}")
    wait_for(lambda: scene.terminating("victim"), 15, "the victim's deletion started")

    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    # While no scheduler runs: the victim's deletion completes, and another pod
    # arrives that fits beside the bystander.
    scene.finish_deletion("victim")
    scene.pod("late", "mid", "500m")

    scene.start()
    # The restarted daemon reads the nomination from the API: the preemptor goes to
    # its node, the late pod to the room left, and nothing else is preempted.
    assert c.wait_bound("high", 30) == victim_on, scene.log()
    assert c.wait_bound("late", 30) == other, scene.log()
    assert c.node_of("bystander") == other and not scene.terminating("bystander")
