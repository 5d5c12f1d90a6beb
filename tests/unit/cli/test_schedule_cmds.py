"""`policyd explain` and `policyd simulate` as users run them: exit codes, output, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.cli.fuzz_support import METRIC_POLICY

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
    ("kind: Nodes\nmetadata: {name: c}\n", "unexpected kind 'Nodes' (did you mean 'Node'?)"),
    ("kind: Node\nmetadata: {name: web/0}\n", "Node web/0: metadata.name: 'web/0': must be"),
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


METRIC_CLUSTER = """\
apiVersion: v1
kind: List
items:
- {kind: Node, metadata: {name: a}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
- {kind: Node, metadata: {name: b}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
- {kind: Node, metadata: {name: c}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
- kind: Pod
  metadata: {name: web, namespace: default}
  spec: {schedulerName: policyd, containers: [{name: c, image: i}]}
- kind: Pod
  metadata: {name: web2, namespace: default}
  spec: {schedulerName: policyd, containers: [{name: c, image: i}]}
"""
METRIC_PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
policies: [latency.yaml]
metricsProviders:
  - name: prom
    kind: prometheus
    url: http://prometheus.invalid:9090
    metrics: [{name: latency_ms, query: node_latency_ms}]
"""


@pytest.fixture
def metric_setup(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(METRIC_CLUSTER)
    (tmp_path / "profile.yaml").write_text(METRIC_PROFILE)
    (tmp_path / "latency.yaml").write_text(METRIC_POLICY)
    (tmp_path / "metrics.yaml").write_text("latency_ms: {a: 30, b: 12.5, c: 5}\n")
    return tmp_path


def test_explain_and_simulate_read_metric_values_from_a_file(metric_setup: Path) -> None:
    d = metric_setup
    base = ["--cluster", str(d / "cluster.yaml"), "--config", str(d / "profile.yaml"),
            "--seed", "1"]
    r = policyd("explain", *base, "--pod", "default/web", "--metrics",
                str(d / "metrics.yaml"), "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["node"] == "c"  # lowest latency
    scores = {n["name"]: n["scores"]["Latency"] for n in out["nodes"]}
    assert {k: v["normalized"] for k, v in scores.items()} == {"a": 0, "b": 70, "c": 100}
    r = policyd("simulate", *base, "--metrics", str(d / "metrics.yaml"), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert {p["node"] for p in json.loads(r.stdout)["placements"]} == {"c"}
    # Without --metrics every value is missing: the policy scores every node 0.
    r = policyd("explain", *base, "--pod", "default/web", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert {n["scores"]["Latency"]["normalized"] for n in json.loads(r.stdout)["nodes"]} == {0}


@pytest.mark.parametrize(("content", "needle"), [
    ("latency_ms: {a: .nan}\n", "metrics.yaml:1:17: value of latency_ms/a is not a finite"),
    ("latency_ms: [1, 2]\n", "must map node names to numbers"),
    ("latency_ms: {a: [\n", "metrics.yaml:"),
])
def test_bad_metrics_file_is_exit_2(metric_setup: Path, content: str, needle: str) -> None:
    d = metric_setup
    (d / "metrics.yaml").write_text(content)
    r = policyd("explain", "--cluster", str(d / "cluster.yaml"), "--config",
                str(d / "profile.yaml"), "--pod", "default/web", "--metrics",
                str(d / "metrics.yaml"))
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr
