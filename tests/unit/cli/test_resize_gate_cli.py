"""The offline commands count a bound pod caught in a pod-level resize by the profile's
gates: with v1.36's defaults (InPlacePodLevelResourcesVerticalScaling on) its 3 CPUs
allocated count and the 1.5-CPU pod does not fit the 4-CPU node; a profile turning the
gate off counts the pod's 2-CPU spec, and the pod fits. explain and simulate (and audit,
through the same `gates_of`) build their cluster with the profile's gates."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.cli.test_declared_features_cli import policyd

SNAPSHOT = """\
apiVersion: v1
kind: List
items:
- kind: Node
  metadata: {name: only}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
- kind: Pod
  metadata: {name: resizing, namespace: default, uid: u-resizing}
  spec:
    nodeName: only
    resources: {requests: {cpu: "2"}}
    containers: [{name: c, image: pause}]
  status:
    phase: Running
    resources: {requests: {cpu: "1"}}
    allocatedResources: {cpu: "3"}
    conditions: [{type: PodResizeInProgress, status: "True"}]
- kind: Pod
  metadata: {name: web, namespace: default, uid: u-web}
  spec:
    containers: [{name: c, image: pause, resources: {requests: {cpu: 1500m}}}]
"""

PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
profiles: [{schedulerName: default-scheduler}]
featureGates: {InPlacePodLevelResourcesVerticalScaling: false}
"""


def _files(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "cluster.yaml").write_text(SNAPSHOT)
    (tmp_path / "profile.yaml").write_text(PROFILE)
    return str(tmp_path / "cluster.yaml"), str(tmp_path / "profile.yaml")


def test_defaults_count_the_allocated_pod_level_resize(tmp_path: Path) -> None:
    cluster, _ = _files(tmp_path)
    explain = policyd("explain", "--cluster", cluster, "default/web", "-o", "json")
    assert explain.returncode == 1, explain.stderr
    assert "Insufficient cpu" in json.dumps(json.loads(explain.stdout))
    assert policyd("simulate", "--cluster", cluster).returncode == 1


def test_a_profile_with_the_gate_off_counts_the_spec(tmp_path: Path) -> None:
    cluster, profile = _files(tmp_path)
    explain = policyd("explain", "--config", profile, "--cluster", cluster, "default/web",
                      "-o", "json")
    assert explain.returncode == 0, explain.stderr
    assert json.loads(explain.stdout)["node"] == "only"
    simulate = policyd("simulate", "--config", profile, "--cluster", cluster)
    assert simulate.returncode == 0, simulate.stdout + simulate.stderr
