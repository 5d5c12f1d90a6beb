"""`clusterPolicies: true` against the real API server: SchedulingPolicy objects applied,
updated and deleted while `policyd run` schedules, their status, and the CRD missing
at start.

The CRD (`policyd.policy.crd`) is cluster-wide and so are the objects: each test names
its own objects and deletes them, and the test that needs the CRD absent deletes it
first.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster import ControlPlane
from policyd.devcluster.build import resolve_binaries
from policyd.kube.api import SCHEDULING_POLICIES, scheduling_policies_served
from policyd.kube.client import ApiError, KubeClient
from policyd.policy.crd import build_crd
from tests.e2e.helpers import Cluster, DaemonFactory, write_profile
from tests.polling import wait_for

Obj = dict[str, Any]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRD_NAME = "schedulingpolicies.policyd.io"


def install_crd(client: KubeClient) -> None:
    try:
        client.request("POST", CRDS, body=build_crd())
    except ApiError as exc:
        if exc.status != 409:
            raise
    wait_for(lambda: scheduling_policies_served(client), 30, "the SchedulingPolicy resource served")


def remove_crd(client: KubeClient) -> None:
    try:
        client.request("DELETE", f"{CRDS}/{CRD_NAME}")
    except ApiError as exc:
        if exc.status != 404:
            raise
    wait_for(lambda: not scheduling_policies_served(client), 60,
             "the SchedulingPolicy resource gone")


def policy(name: str, plugin: str, message: str, **filter_rule: Any) -> Obj:
    rule = filter_rule or {"nodeLabels": {"matchLabels": {"policy-ok": "true"}}}
    return {"apiVersion": "policyd.io/v1alpha1", "kind": "SchedulingPolicy",
            "metadata": {"name": name},
            "spec": {"pluginName": plugin,
                     "filters": [{"id": "ok-nodes", "message": message, **rule}]}}


class Policies:
    """SchedulingPolicy objects of one test, deleted at its end."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.names: list[str] = []

    def create(self, body: Obj) -> Obj:
        self.names.append(body["metadata"]["name"])
        return self.client.request("POST", SCHEDULING_POLICIES, body=body)

    def get(self, name: str) -> Obj:
        return self.client.request("GET", f"{SCHEDULING_POLICIES}/{name}")

    def update_spec(self, name: str, spec: Obj) -> Obj:
        for _ in range(5):  # the daemon writes status meanwhile: 409, read again
            obj = self.get(name)
            obj["spec"] = spec
            try:
                return self.client.request("PUT", f"{SCHEDULING_POLICIES}/{name}", body=obj)
            except ApiError as exc:
                if exc.status != 409:
                    raise
        raise AssertionError(f"could not update {name}")

    def delete(self, name: str) -> None:
        try:
            self.client.request("DELETE", f"{SCHEDULING_POLICIES}/{name}")
        except ApiError as exc:
            if exc.status != 404:
                raise

    def accepted(self, name: str) -> Obj | None:
        for c in (self.get(name).get("status") or {}).get("conditions") or []:
            if c.get("type") == "Accepted":
                return dict(c)
        return None

    def wait_accepted(self, name: str, status: str, generation: int) -> Obj:
        def shown() -> Obj | None:
            c = self.accepted(name)
            if c and c.get("status") == status and c.get("observedGeneration") == generation:
                return c
            return None
        return dict(wait_for(shown, 20, f"{name} Accepted={status} at generation "
                                         f"{generation}"))

    def cleanup(self) -> None:
        for name in self.names:
            self.delete(name)


@pytest.fixture
def policies(cluster: Cluster) -> Iterator[Policies]:
    p = Policies(cluster.client)
    try:
        yield p
    finally:
        if scheduling_policies_served(cluster.client):
            p.cleanup()


def failed_message(cluster: Cluster, pod: str, containing: str) -> str:
    def seen() -> str | None:
        for e in cluster.events(pod, "FailedScheduling"):
            if containing in e.get("message", ""):
                return str(e["message"])
        return None
    return str(wait_for(seen, 20, f"FailedScheduling of {pod} naming {containing!r}"))


def kubectl_get(control_plane: ControlPlane, name: str) -> dict[str, str]:
    """`kubectl get schedulingpolicies NAME`, the real binary: column -> value."""
    kubectl = resolve_binaries().kubectl
    assert kubectl is not None, "kubectl was not built"
    out = subprocess.run([str(kubectl), "--kubeconfig", str(control_plane.kubeconfig_path),
                          "get", "schedulingpolicies", name], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    header, row = out.splitlines()[:2]
    return dict(zip(header.split(), row.split(), strict=False))


def start(daemons: DaemonFactory, tmp_path: Path, scheduler: str,
          policies_dir: str | None = None) -> Any:
    profile = write_profile(tmp_path, scheduler, policies=policies_dir,
                            extra="clusterPolicies: true\n")
    return daemons.start(profile)


def test_objects_applied_updated_and_deleted_take_effect_without_restart(
        control_plane: ControlPlane, cluster: Cluster, daemons: DaemonFactory,
        policies: Policies, tmp_path: Path) -> None:
    install_crd(cluster.client)
    scheduler = f"cp-{uuid.uuid4().hex[:6]}"
    name = f"ok-nodes-{uuid.uuid4().hex[:6]}"
    cluster.node("good", labels={"policy-ok": "true"})
    cluster.node("plain")
    start(daemons, tmp_path, scheduler)

    # (1) Applied while the daemon runs: it takes effect and says so.
    created = policies.create(policy(name, "OkNodes", "node(s) were not ok"))
    assert created["metadata"]["generation"] == 1
    cond = policies.wait_accepted(name, "True", 1)
    assert cond["reason"] == "Compiled" and "OkNodes" in cond["message"]
    assert policies.get(name)["status"]["observedGeneration"] == 1
    assert kubectl_get(control_plane, name)["ACCEPTED"] == "True"
    cluster.pod("free", scheduler)
    assert cluster.wait_bound("free") == "good"
    cluster.pod("pinned", scheduler, nodeSelector={"kubernetes.io/hostname": "plain"})
    message = failed_message(cluster, "pinned", "node(s) were not ok")
    assert message.startswith("0/2 nodes are available: 1 node(s) didn't match Pod's "
                              "node affinity/selector, 1 node(s) were not ok.")

    # (2) An update the API server admits but policyd refuses: the old version keeps
    # scheduling, and the status says why, for the new generation.
    policies.update_spec(name, {"pluginName": "OkNodes", "filters": [
        {"id": "ok-nodes", "message": "broken", "jmespath": "node.metadata.["}]})
    cond = policies.wait_accepted(name, "False", 2)
    assert cond["reason"] == "Invalid"
    assert "spec.filters[0].jmespath" in cond["message"]
    assert cond["message"].endswith("generation 1 still in effect")
    assert kubectl_get(control_plane, name)["ACCEPTED"] == "False"
    cluster.pod("pinned2", scheduler, nodeSelector={"kubernetes.io/hostname": "plain"})
    failed_message(cluster, "pinned2", "node(s) were not ok")
    warnings = [e for e in cluster.events(name, "InvalidPolicy", namespace="default")
                if e["involvedObject"].get("kind") == "SchedulingPolicy"]
    assert warnings and "spec.filters[0].jmespath" in warnings[0]["message"]

    # Fixed: generation 3 runs (its own message on the waiting pods).
    policies.update_spec(name, policy(name, "OkNodes", "node(s) were not ok v3")["spec"])
    cond = policies.wait_accepted(name, "True", 3)
    assert cond["reason"] == "Compiled"
    failed_message(cluster, "pinned2", "node(s) were not ok v3")

    # (3) Deleted: the policy goes, the pods it held back bind.
    policies.delete(name)
    assert cluster.wait_bound("pinned", 20) == "plain"
    assert cluster.wait_bound("pinned2", 20) == "plain"


def test_without_the_crd_the_daemon_schedules_and_picks_objects_up_once_installed(
        cluster: Cluster, daemons: DaemonFactory, policies: Policies,
        policy_dir: Path, tmp_path: Path) -> None:
    remove_crd(cluster.client)
    scheduler = f"cp-{uuid.uuid4().hex[:6]}"
    name = f"ok-nodes-{uuid.uuid4().hex[:6]}"
    cluster.node("good", labels={"policy-ok": "true"})
    cluster.node("plain")
    daemon = start(daemons, tmp_path, scheduler, str(policy_dir))
    assert not daemon.crd_served
    cluster.pod("early", scheduler, nodeSelector={"kubernetes.io/hostname": "plain"})
    assert cluster.wait_bound("early") == "plain"  # the file policies schedule

    install_crd(cluster.client)
    policies.create(policy(name, "OkNodes", "node(s) were not ok"))
    # Picked up within the daemon's poll for the CRD (10 s) and a rebuild.
    policies.wait_accepted(name, "True", 1)
    assert daemon.crd_served
    cluster.pod("late", scheduler, nodeSelector={"kubernetes.io/hostname": "plain"})
    failed_message(cluster, "late", "node(s) were not ok")
