"""`policyd explain` and `simulate` give DRA claim pods the daemon's reason (issue 12,
item 4; issue 28): one engine, one message. The snapshot has no ResourceClaims, so
each pod's claim is missing, in upstream's words: simulate holds such pods out of the
queue as the daemon's PreEnqueue does; explain explains them as if let in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# DynamicResources' PostFilter, then DefaultPreemption's, after the refusal.
POST_FILTER = ("no new claims to deallocate, preemption: 0/2 nodes are available: "
               "2 Preemption is not helpful for scheduling.")

CLUSTER = """\
apiVersion: v1
kind: List
items:
- kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
- kind: Node
  metadata: {name: n2}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""

PODS = """\
apiVersion: v1
kind: List
items:
- kind: Pod
  metadata: {name: gpu-job, namespace: ml}
  spec:
    resourceClaims: [{name: gpu, resourceClaimTemplateName: single-gpu}]
    containers: [{name: main, resources: {claims: [{name: gpu}]}}]
- kind: Pod
  metadata: {name: shared, namespace: ml}
  spec:
    resourceClaims: [{name: acc, resourceClaimName: shared-accelerator}]
    containers: [{name: main}]
- kind: Pod
  metadata: {name: plain, namespace: ml}
  spec:
    containers: [{name: main}]
"""


def policyd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policyd", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "pods.yaml").write_text(PODS)
    return ["--cluster", str(tmp_path / "cluster.yaml"), "--pods", str(tmp_path / "pods.yaml")]


def test_explain_names_the_claim_and_the_plugin(files: list[str]) -> None:
    r = policyd("explain", *files, "--pod", "ml/shared")
    assert r.returncode == 1, r.stderr
    assert ('0/2 nodes are available: could not find ResourceClaim '
            f'"ml/shared-accelerator". {POST_FILTER}') in r.stdout
    assert "rejected by DynamicResources" in r.stdout


def test_explain_json_shows_the_reason_per_node(files: list[str]) -> None:
    r = policyd("explain", *files, "--pod", "ml/gpu-job", "--format", "json")
    out = json.loads(r.stdout)
    reason = 'pod "ml/gpu-job": ResourceClaim not created yet'
    assert out["node"] is None
    assert out["message"] == f"0/2 nodes are available: {reason}. {POST_FILTER}"
    assert [n["filters"] for n in out["nodes"]] == [{"DynamicResources": reason}] * 2


def test_simulate_holds_claim_pods_out_of_the_queue_and_places_the_rest(
        files: list[str]) -> None:
    """DynamicResources' PreEnqueue: pods whose claims do not exist are never tried
    (listed as held, with upstream's reason); asked about with --pods: exit 1."""
    r = policyd("simulate", *files, "--format", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    placed = {p["pod"]: p["node"] for p in out["placements"]}
    assert list(placed) == ["ml/plain"] and placed["ml/plain"] in ("n1", "n2")
    assert out["gated"] == [
        {"pod": "ml/gpu-job", "plugin": "DynamicResources",
         "reason": 'pod "ml/gpu-job": ResourceClaim not created yet'},
        {"pod": "ml/shared", "plugin": "DynamicResources",
         "reason": 'could not find ResourceClaim "ml/shared-accelerator"'}]
    assert out["scheduled"] == 1 and out["unschedulable"] == 0
    r = policyd("simulate", *files)
    assert ('ml/shared: DynamicResources: could not find ResourceClaim '
            '"ml/shared-accelerator"') in r.stdout


def test_a_malformed_claim_is_exit_2_naming_the_field(tmp_path: Path,
                                                      files: list[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n"
                   "  resourceClaims: [{name: gpu}]\n  containers: [{name: main}]\n")
    r = policyd("explain", files[0], files[1], "--pods", str(bad), "--pod", "ml/p")
    assert r.returncode == 2
    assert "Pod ml/p: spec.resourceClaims[0]" in r.stderr
    assert "exactly one of resourceClaimName and resourceClaimTemplateName" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


DEVICES = """\
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: gpu}
  spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {name: n2-gpus}
  spec:
    driver: gpu.example.com
    nodeName: n2
    pool: {name: n2, generation: 1, resourceSliceCount: 1}
    devices: [{name: g0}]
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata: {name: shared-accelerator, namespace: ml, uid: u1}
  spec: {devices: {requests: [{name: acc, exactly: {deviceClassName: gpu}}]}}
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata: {name: other, namespace: ml, uid: u2}
  spec: {devices: {requests: [{name: acc, exactly: {deviceClassName: gpu}}]}}
"""

CLAIM_PODS = """\
apiVersion: v1
kind: List
items:
- kind: Pod
  metadata: {name: first, namespace: ml}
  spec: {resourceClaims: [{name: acc, resourceClaimName: shared-accelerator}],
         containers: [{name: main}]}
- kind: Pod
  metadata: {name: second, namespace: ml}
  spec: {resourceClaims: [{name: acc, resourceClaimName: other}],
         containers: [{name: main}]}
"""


def test_simulate_allocates_the_device_once(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(CLUSTER + DEVICES)
    (tmp_path / "pods.yaml").write_text(CLAIM_PODS)
    files = ["--cluster", str(tmp_path / "cluster.yaml"), "--pods", str(tmp_path / "pods.yaml")]
    r = policyd("simulate", *files, "--format", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    placed = {p["pod"]: p["node"] for p in out["placements"]}
    # The only device is on n2; the second pod finds it taken by the first's allocation.
    assert placed == {"ml/first": "n2", "ml/second": None}
    r = policyd("explain", *files, "--pod", "ml/first")
    assert "ml/shared-accelerator: ok, gets gpu.example.com/n2/g0 (request acc)" in r.stdout
