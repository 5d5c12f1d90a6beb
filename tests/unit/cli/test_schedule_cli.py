"""`policyd explain` and `policyd simulate` as users run them: exit codes, output, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DEMO = ["--cluster", str(ROOT / "demo/cluster.yaml"), "--pods", str(ROOT / "demo/pods.yaml"),
        "--policies", str(ROOT / "policies"), "--seed", "1"]


def policyd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policyd", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def test_explain_hw_encrypt_pod_shows_the_policy_rejections() -> None:
    r = policyd("explain", *DEMO, "--pod", "data/payments-db", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["node"] in ("node-a1", "node-b1")  # the two nodes with hw-encrypt
    nodes = {n["name"]: n for n in out["nodes"]}
    assert nodes["node-a2"]["filters"]["HwEncrypt"] == \
        "node(s) didn't offer hardware encryption"
    assert nodes["node-a2"]["feasible"] is False
    assert nodes["node-b1"]["filters"]["HwEncrypt"] == "passed"
    chosen = nodes[out["node"]]
    assert chosen["chosen"] and chosen["total"] == max(
        n["total"] for n in out["nodes"] if n["total"] is not None)
    assert chosen["scores"]["TaintToleration"]["weight"] == 3


def test_explain_impossible_pod_gives_the_kube_scheduler_message_and_exit_1() -> None:
    r = policyd("explain", *DEMO, "--pod", "jobs/huge")
    assert r.returncode == 1
    assert ("0/6 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated "
            "taint(s), 1 node(s) were unschedulable, 4 Insufficient cpu.") in r.stdout
    assert "Why nodes were rejected" in r.stdout


def test_simulate_places_pods_in_order_and_counts_each_placement() -> None:
    r = policyd("simulate", *DEMO, "--format", "json")
    assert r.returncode == 1  # the demo's huge pod fits nowhere
    out = json.loads(r.stdout)
    placed = {p["pod"]: p["node"] for p in out["placements"]}
    assert placed["data/payments-db"] in ("node-a1", "node-b1")
    assert placed["shop/orders-api"] in ("node-a1", "node-a2")  # EnvProd: lowercase env
    assert placed["jobs/huge"] is None
    assert out["scheduled"] == 6 and out["unschedulable"] == 1


@pytest.mark.parametrize(("content", "needle"), [
    ("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: lots}}\n",
     "Node n1: status.allocatable.cpu: invalid quantity 'lots'"),
    ("kind: Pod\nmetadata: {name: p}\n", "Pod default/p: spec.containers"),
    ("key: [unclosed\n", "invalid YAML"),
    ("kind: ConfigMap\nmetadata: {name: c}\n", "unexpected kind 'ConfigMap'"),
])
def test_bad_snapshot_is_exit_2_with_location_and_no_traceback(
        tmp_path: Path, content: str, needle: str) -> None:
    bad = tmp_path / "snap.yaml"
    bad.write_text(content)
    r = policyd("simulate", "--cluster", str(bad))
    assert r.returncode == 2
    assert needle in r.stderr
    assert str(bad) in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_unknown_pod_and_missing_file_are_exit_2() -> None:
    r = policyd("explain", *DEMO, "--pod", "nope/nothing")
    assert r.returncode == 2 and "no pod nope/nothing" in r.stderr
    r = policyd("simulate", "--cluster", "/does/not/exist.yaml")
    assert r.returncode == 2 and "no such file" in r.stderr
