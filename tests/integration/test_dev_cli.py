"""`policyd dev up/status/down` end to end: detached cluster, usable kubeconfig, clean stop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from policyd.devcluster.process import proc_start_time
from policyd.kube.client import ConnectionSettings, KubeClient
from policyd.kube.official import api_client_from

pytestmark = pytest.mark.integration


def _dev(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "policyd.cli.dev", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_up_status_down(tmp_path: Path) -> None:
    env = {**os.environ, "POLICYD_DEV_DIR": str(tmp_path / "dev")}
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '2', memory: 1Gi, pods: '10'}}\n"
        "---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: team}\n"
        "spec: {nodeName: n1, containers: [{name: c, image: x}]}\n"
    )
    up = _dev("up", "--load", str(snapshot), "--kube-scheduler", env=env)
    pids: list[int] = []
    try:
        assert up.returncode == 0, up.stderr
        state = json.loads((tmp_path / "dev" / "state.json").read_text())
        pids = [p["pid"] for p in state["processes"]]
        # The command returned; the cluster keeps running without it.
        names = [p["name"] for p in state["processes"]]
        assert names == ["etcd", "kube-apiserver", "kube-controller-manager",
                         "kube-scheduler"]
        assert all(proc_start_time(pid) is not None for pid in pids)
        kubeconfig = up.stdout.strip().removeprefix("export KUBECONFIG=")
        assert up.stdout.startswith("export KUBECONFIG=") and Path(kubeconfig).is_file()
        assert "created 1 Namespace, 1 Node, 1 Pod" in up.stderr

        api = api_client_from(Path(kubeconfig))
        try:
            pod: Any = client.CoreV1Api(api).read_namespaced_pod("p1", "team")
            assert pod.spec.node_name == "n1"
        finally:
            api.close()

        status = _dev("status", env=env)
        assert status.returncode == 0 and "ready" in status.stdout
        assert "kube-scheduler" in status.stdout

        again = _dev("up", env=env)
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        down = _dev("down", env=env)
    assert down.returncode == 0, down.stderr
    assert all(proc_start_time(pid) is None for pid in pids)
    assert not (tmp_path / "dev" / "state.json").exists()
    assert _dev("status", env=env).returncode == 1


def test_up_with_feature_gates(tmp_path: Path) -> None:
    """`dev up --feature-gates`: every component gets the gates, the API version they
    need is served, `up` and `status` say which gates are in force."""
    env = {**os.environ, "POLICYD_DEV_DIR": str(tmp_path / "dev")}
    up = _dev("up", "--kube-scheduler", "--feature-gates", "GenericWorkload=true",
              "--feature-gates", "GangScheduling=true", env=env)
    try:
        assert up.returncode == 0, up.stderr
        in_force = ("feature gates: GenericWorkload=true,GangScheduling=true "
                    "(API versions enabled: scheduling.k8s.io/v1alpha2)")
        assert in_force in up.stderr.splitlines()
        state = json.loads((tmp_path / "dev" / "state.json").read_text())
        assert state["feature_gates"] == {"GenericWorkload": True, "GangScheduling": True}
        flag = "--feature-gates=GenericWorkload=true,GangScheduling=true"
        for entry in state["processes"]:
            argv = Path(f"/proc/{entry['pid']}/cmdline").read_bytes().split(b"\0")
            if entry["name"] != "etcd":
                assert flag.encode() in argv, entry["name"]
        kubeconfig = up.stdout.strip().removeprefix("export KUBECONFIG=")
        kube = KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig))
        try:
            served = kube.request("GET", "/apis/scheduling.k8s.io/v1alpha2")
            assert "podgroups" in {r["name"] for r in served["resources"]}
        finally:
            kube.close()
        status = _dev("status", env=env)
        assert status.returncode == 0
        assert in_force in status.stdout.splitlines()
    finally:
        down = _dev("down", env=env)
    assert down.returncode == 0, down.stderr
