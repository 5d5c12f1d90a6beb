"""kube-controller-manager in the local control plane: the real volume controllers bind,
protect and create claims, the resource claim controller turns templates into
ResourceClaims (tests/integration/test_dra_objects.py), and nothing else runs (issue 16).

Every test here talks to the session's control plane (`control_plane` fixture), which
starts kube-controller-manager by default. The WaitForFirstConsumer path with dynamic
provisioning is in tests/e2e/test_provisioner.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster import ControlPlane
from policyd.devcluster.controllermanager import CONTROLLERS
from policyd.devcluster.kubeconfig import kube_client_from
from policyd.devcluster.probe import http_get, unverified_context
from policyd.devcluster.process import proc_start_time
from policyd.kube.client import KubeClient
from tests.api_reads import get_or_none
from tests.polling import wait_for

pytestmark = pytest.mark.integration

Obj = dict[str, Any]


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[KubeClient]:
    client = kube_client_from(control_plane.kubeconfig_path)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def namespace(kube: KubeClient) -> Iterator[str]:
    name = f"kcm-{uuid.uuid4().hex[:8]}"
    kube.request("POST", "/api/v1/namespaces", body={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        kube.request("DELETE", f"/api/v1/namespaces/{name}/pods",
                     query={"gracePeriodSeconds": 0})
        kube.request("DELETE", f"/api/v1/namespaces/{name}/persistentvolumeclaims")
        kube.request("DELETE", f"/api/v1/namespaces/{name}")


def _claim(name: str, storage_class: str, size: str = "1Gi", **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}, **spec}}


def _volume(name: str, storage_class: str, size: str = "2Gi") -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": storage_class,
                     "persistentVolumeReclaimPolicy": "Retain",
                     "hostPath": {"path": f"/tmp/{name}"}}}


def test_only_the_volume_and_claim_controllers_run(control_plane: ControlPlane) -> None:
    manager = control_plane.kube_controller_manager
    assert manager is not None and manager.alive()
    status, body = http_get(f"https://127.0.0.1:{manager.port}/healthz?verbose",
                            unverified_context())
    assert status == 200
    checks = {line[3:].rsplit(" ", 1)[0] for line in body.splitlines()
              if line.startswith("[+]")}
    assert checks == set(CONTROLLERS)
    log = manager.log_path.read_text()
    # The node lifecycle controller would taint every kubelet-less Node unreachable.
    assert 'controller is disabled" controller="node-lifecycle-controller"' in log
    assert 'controller is disabled" controller="garbage-collector-controller"' in log
    assert "forbidden" not in log.lower()


def test_immediate_claim_is_bound_by_the_pv_controller(kube: KubeClient,
                                                       namespace: str) -> None:
    # No StorageClass object: a class name nobody provisions for means static binding
    # only, and the binding mode is Immediate.
    klass = f"static-{namespace}"
    pv_name = f"pv-{namespace}"
    kube.request("POST", "/api/v1/persistentvolumes", body=_volume(pv_name, klass))
    try:
        kube.request("POST", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
                     body=_claim("data", klass))
        claim_path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data"
        claim = wait_for(
            lambda: (c := get_or_none(kube, claim_path)) and c.get("status", {}).get("phase")
            == "Bound" and c, 20, "claim Bound")
        assert claim["spec"]["volumeName"] == pv_name
        assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
        # The API server's StorageObjectInUseProtection admission adds the finalizer;
        # the protection controller below is what removes it.
        assert "kubernetes.io/pvc-protection" in claim["metadata"]["finalizers"]
        pv = wait_for(lambda: (v := get_or_none(kube, f"/api/v1/persistentvolumes/{pv_name}"))
                      and v["status"]["phase"] == "Bound" and v, 10, "PV Bound")
        assert pv["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
        # The claim asked for 1Gi, the volume has 2Gi: the claim reports the volume's.
        assert claim["status"]["capacity"]["storage"] == "2Gi"

        # Deleting the unused claim: the PVC protection controller lets it go, the PV
        # controller releases the volume, the PV protection controller lets it go too.
        kube.request("DELETE", claim_path)
        wait_for(lambda: get_or_none(kube, claim_path) is None, 20, "claim deleted")
        wait_for(lambda: (get_or_none(kube, f"/api/v1/persistentvolumes/{pv_name}") or {})
                 .get("status", {}).get("phase") == "Released", 20, "PV Released")
    finally:
        kube.request("DELETE", f"/api/v1/persistentvolumes/{pv_name}")
    wait_for(lambda: get_or_none(kube, f"/api/v1/persistentvolumes/{pv_name}") is None, 20,
             "PV deleted")


def test_generic_ephemeral_volume_gets_its_claim(kube: KubeClient, namespace: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "scratch"},
           "spec": {"schedulerName": "nobody", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                    "volumes": [{"name": "work", "ephemeral": {"volumeClaimTemplate": {
                        "spec": _claim("", "fast")["spec"]}}}]}}
    created = kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
    # The ephemeral volume controller names the claim <pod>-<volume>, owned by the pod.
    claim = wait_for(lambda: get_or_none(
        kube, f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/scratch-work"),
        20, "ephemeral claim")
    owners = claim["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in owners] == [
        ("Pod", "scratch", created["metadata"]["uid"], True)]
    assert claim["spec"]["storageClassName"] == "fast"


def test_dev_up_runs_it_and_no_controller_manager_leaves_it_off(tmp_path: Path) -> None:
    def dev(*args: str, home: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "POLICYD_DEV_DIR": str(tmp_path / home)}
        return subprocess.run([sys.executable, "-m", "policyd.cli.dev", *args], env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    for home, flags, expected in (
        ("with", (), ["etcd", "kube-apiserver", "kube-controller-manager"]),
        ("without", ("--no-controller-manager",), ["etcd", "kube-apiserver"]),
    ):
        up = dev("up", *flags, home=home)
        pids: list[int] = []
        try:
            assert up.returncode == 0, up.stderr
            state = json.loads((tmp_path / home / "state.json").read_text())
            pids = [p["pid"] for p in state["processes"]]
            assert [p["name"] for p in state["processes"]] == expected
            status = dev("status", home=home)
            assert status.returncode == 0, status.stdout
            shown = [line.split()[0] for line in status.stdout.splitlines()
                     if line.startswith("  ")]
            assert shown == expected
            assert all(" running " in line for line in status.stdout.splitlines()
                       if line.startswith("  "))
        finally:
            down = dev("down", home=home)
        assert down.returncode == 0, down.stderr
        assert pids and all(proc_start_time(pid) is None for pid in pids)
