"""`policyd explain` and `simulate` on snapshots with volumes (issue 16): explain shows
each claim's verdict on each node, simulate keeps what Reserve took, and broken storage
objects give a reason naming them, never a crash."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _pv(name: str, size: str, host: str, extra: str = "") -> str:
    return f"""\
- kind: PersistentVolume
  apiVersion: v1
  metadata: {{name: {name}}}
  spec:
    capacity: {{storage: {size}}}
    accessModes: [ReadWriteOnce]
    storageClassName: local
    local: {{path: /mnt/{name}}}
    nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [
      {{key: kubernetes.io/hostname, operator: In, values: [{host}]}}]}}]}}}}
{extra}  status: {{phase: Available}}
"""


def _claim(name: str, size: str, storage_class: str = "local") -> str:
    return f"""\
- kind: PersistentVolumeClaim
  apiVersion: v1
  metadata: {{name: {name}, namespace: shop}}
  spec:
    accessModes: [ReadWriteOnce]
    storageClassName: {storage_class}
    resources: {{requests: {{storage: {size}}}}}
  status: {{phase: Pending}}
"""


def _node(name: str) -> str:
    return f"""\
- kind: Node
  metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
  status: {{allocatable: {{cpu: "4", memory: 8Gi, pods: "110"}}}}
"""


def _pod(name: str, claim: str) -> str:
    return f"""\
- kind: Pod
  metadata: {{name: {name}, namespace: shop}}
  spec:
    containers: [{{name: main}}]
    volumes: [{{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}]
"""


LOCAL_CLASS = """\
- kind: StorageClass
  apiVersion: storage.k8s.io/v1
  metadata: {name: local}
  provisioner: kubernetes.io/no-provisioner
  volumeBindingMode: WaitForFirstConsumer
"""


def _list(*items: str) -> str:
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(items)


def policyd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policyd", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def _write(tmp_path: Path, cluster: str, pods: str) -> tuple[str, str]:
    (tmp_path / "cluster.yaml").write_text(cluster)
    (tmp_path / "pods.yaml").write_text(pods)
    return str(tmp_path / "cluster.yaml"), str(tmp_path / "pods.yaml")


def test_explain_names_the_pv_each_claim_takes_and_why_others_fail(tmp_path: Path) -> None:
    cluster, pods = _write(
        tmp_path,
        _list(_node("n1"), _node("n2"), LOCAL_CLASS, _pv("pv-small", "5Gi", "n2"),
              _pv("pv-big", "50Gi", "n2"), _claim("data-db-0", "4Gi")),
        _list(_pod("db-0", "data-db-0")))
    r = policyd("explain", "--cluster", cluster, "--pods", pods, "--pod", "shop/db-0")
    assert r.returncode == 0, r.stderr
    assert "Pod shop/db-0 -> n2" in r.stdout
    # The smallest PV that fits, as upstream's matcher picks.
    assert "n2  shop/data-db-0: ok, binds PersistentVolume pv-small" in r.stdout
    assert "n1  shop/data-db-0: no, no available PersistentVolume fits the claim and " \
        "the node, and StorageClass local does not provision" in r.stdout
    r = policyd("explain", "--cluster", cluster, "--pods", pods, "--pod", "shop/db-0",
                "--format", "json")
    nodes = {n["name"]: n for n in json.loads(r.stdout)["nodes"]}
    assert nodes["n2"]["verdicts"]["VolumeBinding"] == [
        {"subject": "shop/data-db-0", "fits": True,
         "verdict": "binds PersistentVolume pv-small"}]
    assert nodes["n1"]["verdicts"]["VolumeBinding"][0]["fits"] is False


def test_simulate_does_not_give_one_pv_to_two_claims(tmp_path: Path) -> None:
    cluster, pods = _write(
        tmp_path,
        _list(_node("n1"), _node("n2"), LOCAL_CLASS, _pv("pv-a", "5Gi", "n1"),
              _pv("pv-b", "5Gi", "n2"), _claim("data-db-0", "4Gi"),
              _claim("data-db-1", "4Gi"), _claim("data-db-2", "4Gi")),
        _list(_pod("db-0", "data-db-0"), _pod("db-1", "data-db-1"),
              _pod("db-2", "data-db-2")))
    r = policyd("simulate", "--cluster", cluster, "--pods", pods, "--format", "json")
    assert r.returncode == 1, r.stderr  # one pod cannot be placed
    placements = {p["pod"]: p for p in json.loads(r.stdout)["placements"]}
    placed = sorted(p["node"] for p in placements.values() if p["node"])
    assert placed == ["n1", "n2"]  # each PV taken once
    [left] = [p for p in placements.values() if not p["node"]]
    assert left["message"] == ("0/2 nodes are available: 2 node(s) didn't find "
                               "available persistent volumes to bind. "
                               "no new claims to deallocate, preemption: 0/2 "
                               "nodes are available: 2 Preemption is not helpful for "
                               "scheduling.")


def test_broken_storage_objects_are_named_in_the_reason(tmp_path: Path) -> None:
    bad_affinity = "    nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: " \
        "[{key: k, operator: Sideways}]}]}}\n"
    cluster, pods = _write(
        tmp_path,
        _list(_node("n1"), LOCAL_CLASS,
              _pv("pv-bad", "5Gi", "n1").replace(
                  "    nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [\n"
                  "      {key: kubernetes.io/hostname, operator: In, values: [n1]}]}]}}\n",
                  bad_affinity),
              _claim("data", "4Gi"), _claim("orphan", "1Gi", storage_class="missing")),
        _list(_pod("uses-bad", "data"), _pod("no-class", "orphan")))
    r = policyd("explain", "--cluster", cluster, "--pods", pods, "--pod", "shop/uses-bad")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert "PersistentVolume pv-bad" in r.stdout
    r = policyd("explain", "--cluster", cluster, "--pods", pods, "--pod", "shop/no-class")
    assert r.returncode == 1, r.stderr
    assert "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims." \
        in r.stdout
