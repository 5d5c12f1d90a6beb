"""scheduler-plugins' Coscheduling end to end: `policyd run` with a profile enabling it
as scheduler-plugins' sample config does, scheduler-plugins' PodGroup CRD
(deploy/crds/scheduling.x-k8s.io_podgroups.yaml) on the real API server.

- A Job-shaped group: a batch/v1 Job with parallelism 4 and the group label in its
  template, and its 4 pods created as the Job controller would (ownerReferences to the
  Job; the local control plane runs no job controller). All 4 bind as one group, and the
  PodGroup's status reads as scheduler-plugins' controller would write it (Scheduling,
  occupiedBy the Job; Running with running=4 once the pods run: the test writes
  status.phase Running as a kubelet would, there is none here).
- Not enough room: nothing bound after scheduleTimeoutSeconds; a node added, all bind
  within seconds.
- minResources the cluster cannot hold: refused at PreFilter with upstream's
  "resource gap" text, nothing bound.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster.controlplane import ControlPlane
from tests.e2e.helpers import (
    Cluster,
    DaemonFactory,
    apply_crds,
    daemons_on,
    fresh_cluster,
    write_profile,
)
from tests.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "deploy" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
LABEL = "scheduling.x-k8s.io/pod-group"
PROFILE_EXTRA = """  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
"""


@pytest.fixture(scope="module")
def cosched_plane() -> Iterator[ControlPlane]:
    cp = ControlPlane(controller_manager=False)
    try:
        cp.start()
        apply_crds(cp, CRD_PATH)
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def cosched(cosched_plane: ControlPlane) -> Iterator[Cluster]:
    with fresh_cluster(cosched_plane, "cosched") as c:
        yield c


@pytest.fixture
def cosched_daemons(cosched_plane: ControlPlane, tmp_path: Path) -> Iterator[DaemonFactory]:
    with daemons_on(cosched_plane, tmp_path) as factory:
        yield factory


def _groups(c: Cluster) -> str:
    return f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{c.ns}/podgroups"


def _pod_group(c: Cluster, name: str, min_member: int, **spec: Any) -> dict[str, Any]:
    return c.client.request("POST", _groups(c), body={
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name}, "spec": {"minMember": min_member, **spec}})


def _status(c: Cluster, name: str) -> dict[str, Any]:
    return dict(c.client.request("GET", f"{_groups(c)}/{name}").get("status") or {})


def _job(c: Cluster, name: str, group: str, scheduler: str, parallelism: int,
         cpu: str = "1") -> list[str]:
    """A batch/v1 Job whose template carries the group label, and its pods as the Job
    controller would create them (it does not run here)."""
    template = {"metadata": {"labels": {LABEL: group}},
                "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {"requests": {"cpu": cpu,
                                                                    "memory": "64Mi"}}}]}}
    job = c.client.request("POST", f"/apis/batch/v1/namespaces/{c.ns}/jobs", body={
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"parallelism": parallelism, "completions": parallelism,
                 "template": template}})
    uid = job["metadata"]["uid"]
    names = []
    for i in range(parallelism):
        labels = {**job["spec"]["template"]["metadata"]["labels"],
                  "batch.kubernetes.io/job-name": name, "job-name": name,
                  "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{name}-{i}", "labels": labels,
                            "ownerReferences": [{
                                "apiVersion": "batch/v1", "kind": "Job", "name": name,
                                "uid": uid, "controller": True,
                                "blockOwnerDeletion": True}]},
               "spec": job["spec"]["template"]["spec"]}
        c.client.request("POST", f"/api/v1/namespaces/{c.ns}/pods", body=pod)
        names.append(f"{name}-{i}")
    return names


def _bound(c: Cluster, names: list[str]) -> list[str]:
    return [n for n in names if c.node_of(n)]


def _failed_scheduling(c: Cluster, containing: str, what: str) -> str:
    """The first FailedScheduling message containing `containing`, once there is one."""
    def found() -> str | None:
        return next((e["message"] for e in c.events(reason="FailedScheduling")
                     if containing in e.get("message", "")), None)
    wait_for(lambda: found() is not None, 30, what)
    message = found()
    assert message is not None
    return message


def _start(daemons: DaemonFactory, tmp_path: Path, scheduler: str) -> Any:
    return daemons.start(write_profile(tmp_path, scheduler, policies=None,
                                       extra=PROFILE_EXTRA))


def test_a_job_shaped_group_is_scheduled_as_one_and_its_status_follows(
        cosched: Cluster, cosched_daemons: DaemonFactory, tmp_path: Path) -> None:
    scheduler = f"cosched-{uuid.uuid4().hex[:6]}"
    _start(cosched_daemons, tmp_path, scheduler)
    for i in range(2):
        cosched.node(f"n{i}", cpu="2")
    _pod_group(cosched, "train", 4)
    wait_for(lambda: _status(cosched, "train").get("phase") == "Pending", 20,
             "the new PodGroup Pending")
    names = _job(cosched, "train", "train", scheduler, 4)
    wait_for(lambda: len(_bound(cosched, names)) == 4, 30, "all 4 members bound")
    wait_for(lambda: _status(cosched, "train").get("phase") == "Scheduling", 20,
             "the PodGroup Scheduling")
    assert _status(cosched, "train") == {"phase": "Scheduling",
                                         "occupiedBy": f"{cosched.ns}/train"}
    # The pods run (as a kubelet would report): Running, with the count.
    for name in names:
        cosched.client.request(
            "PATCH", f"/api/v1/namespaces/{cosched.ns}/pods/{name}/status",
            body={"status": {"phase": "Running"}},
            content_type="application/merge-patch+json")
    wait_for(lambda: _status(cosched, "train").get("phase") == "Running", 20,
             "the PodGroup Running")
    assert _status(cosched, "train") == {"phase": "Running", "running": 4,
                                         "occupiedBy": f"{cosched.ns}/train"}


def test_a_group_without_room_holds_nothing_then_binds_when_a_node_comes(
        cosched: Cluster, cosched_daemons: DaemonFactory, tmp_path: Path) -> None:
    scheduler = f"cosched-{uuid.uuid4().hex[:6]}"
    _start(cosched_daemons, tmp_path, scheduler)
    for i in range(3):
        cosched.node(f"n{i}", cpu="1")  # room for 3 of 4
    _pod_group(cosched, "tight", 4, scheduleTimeoutSeconds=3)
    names = _job(cosched, "tight", "tight", scheduler, 4)
    _failed_scheduling(cosched, "gets rejected due to Pod", "the group rejected in PostFilter")
    deadline = time.monotonic() + 5  # past scheduleTimeoutSeconds
    while time.monotonic() < deadline:
        assert _bound(cosched, names) == []
        time.sleep(0.5)
    message = _failed_scheduling(cosched, "Insufficient cpu", "Insufficient cpu told")
    assert message.startswith("0/3 nodes are available: 3 Insufficient cpu.")
    assert f"PodGroup {cosched.ns}/tight gets rejected due to Pod tight-" in message
    assert message.endswith("is unschedulable even after PostFilter")
    added = time.monotonic()
    cosched.node("n3", cpu="1")
    # Members last refused at Permit wait for a Node Add in policyd (scheduler-plugins
    # would leave them to the 5-minute flush): all 4 bind soon after the node comes.
    wait_for(lambda: len(_bound(cosched, names)) == 4, 30, "all 4 bound once a node came")
    assert time.monotonic() - added < 10


def test_min_resources_the_cluster_cannot_hold_are_refused_at_pre_filter(
        cosched: Cluster, cosched_daemons: DaemonFactory, tmp_path: Path) -> None:
    scheduler = f"cosched-{uuid.uuid4().hex[:6]}"
    _start(cosched_daemons, tmp_path, scheduler)
    for i in range(2):
        cosched.node(f"n{i}", cpu="2")
    _pod_group(cosched, "big", 2, minResources={"cpu": "8"})
    names = _job(cosched, "big", "big", scheduler, 2)
    message = _failed_scheduling(cosched, "resource gap", "the resource gap told")
    assert message.startswith(
        "0/2 nodes are available: resource gap: map[cpu:{{4000 -3} {<nil>}  DecimalSI}].")
    assert _bound(cosched, names) == []


