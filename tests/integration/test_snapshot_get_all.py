"""A real `kubectl get nodes,all,... -o yaml` from a real API server is a snapshot
explain and simulate take: the kinds the scheduler does not read (Deployments,
DaemonSets, Jobs, CronJobs...) are skipped with one note, `--strict` refuses them, and
the kinds it reads (DRA's ResourceClaims among them) are read, not noted."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from policyd.devcluster import ControlPlane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _objects(ns: str, node: str) -> str:
    pod_spec = ("spec: {containers: [{name: main, image: registry.k8s.io/pause:3.10, "
                "resources: {requests: {cpu: 100m}}}]}")
    template = f"template: {{metadata: {{labels: {{app: web}}}}, {pod_spec}}}"
    job_template = ("template: {spec: {restartPolicy: Never, containers: [{name: main, "
                    "image: registry.k8s.io/pause:3.10}]}}")
    return f"""\
apiVersion: v1
kind: Node
metadata: {{name: {node}, labels: {{kubernetes.io/hostname: {node}}}}}
status: {{capacity: {{cpu: "4", memory: 8Gi, pods: "110"}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: pending, namespace: {ns}, labels: {{app: web}}}}
{pod_spec}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec: {{selector: {{app: web}}, ports: [{{port: 80}}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec: {{replicas: 0, selector: {{matchLabels: {{app: web}}}}, {template}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: {ns}}}
spec: {{selector: {{matchLabels: {{app: web}}}}, {template}}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, namespace: {ns}}}
spec: {{replicas: 0, serviceName: db, selector: {{matchLabels: {{app: web}}}}, {template}}}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: migrate, namespace: {ns}}}
spec: {{suspend: true, {job_template}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {{name: report, namespace: {ns}}}
spec: {{schedule: "0 * * * *", suspend: true, jobTemplate: {{spec: {{{job_template}}}}}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: gpu, namespace: {ns}}}
spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu.example.com}}}}]}}}}
"""


def test_kubectl_get_all_output_is_a_snapshot(control_plane: ControlPlane,
                                              tmp_path: Path) -> None:
    from policyd.devcluster.build import resolve_binaries

    kubectl_bin = resolve_binaries(build_if_missing=False).kubectl
    assert kubectl_bin is not None, "no kubectl in the control plane's build"
    suffix = uuid.uuid4().hex[:8]
    ns, node = f"getall-{suffix}", f"getall-{suffix}"

    def kubectl(*args: str) -> str:
        r = subprocess.run([str(kubectl_bin), "--kubeconfig",
                            str(control_plane.kubeconfig_path), *args],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout

    kubectl("create", "namespace", ns)
    try:
        (tmp_path / "objects.yaml").write_text(_objects(ns, node))
        kubectl("apply", "-f", str(tmp_path / "objects.yaml"))
        snapshot = tmp_path / "snapshot.yaml"
        snapshot.write_text(kubectl("get", "-n", ns, "nodes,all,resourceclaims", "-o", "yaml"))

        def policyd(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "policyd", "simulate",
                                   "--cluster", str(snapshot), *args],
                                  capture_output=True, text=True, timeout=120, cwd=ROOT)

        text = snapshot.read_text()
        for kind in ("Deployment", "DaemonSet", "CronJob", "Job", "ResourceClaim"):
            assert f"kind: {kind}\n" in text, kind
        r = policyd()
        assert r.returncode == 0, r.stderr
        note = [line for line in r.stdout.splitlines() if line.startswith("note: skipped")]
        assert len(note) == 1, r.stdout
        for part in ("1 CronJob", "1 DaemonSet", "1 Deployment", "1 Job"):
            assert part in note[0]
        assert "ResourceClaim" not in note[0]  # DynamicResources reads them
        assert "(--strict refuses them)" in note[0]
        assert any(line.startswith(f"{ns}/pending ") and line.split()[1] != "-"
                   for line in r.stdout.splitlines()), r.stdout
        r = policyd("--strict")
        assert r.returncode == 2 and r.stdout == ""
        assert "--strict refuses kinds the scheduler does not read" in r.stderr
    finally:
        kubectl("delete", "namespace", ns, "--wait=false")
        kubectl("delete", "node", node, "--wait=false")
