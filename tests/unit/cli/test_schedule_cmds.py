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


NOMINATED = """\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1},
   status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2},
   status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: nom, namespace: default, uid: nom}
  spec:
    priority: 100
    containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]
  status: {phase: Pending, nominatedNodeName: n1}
- apiVersion: v1
  kind: Pod
  metadata: {name: busy, namespace: default, uid: busy}
  spec:
    nodeName: n2
    containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-c, namespace: storefront, uid: web}
  spec:
    containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]
  status: {phase: Pending}
"""


def test_explain_shows_the_node_held_for_a_nominated_pod(tmp_path: Path) -> None:
    # issue 26, class 6: the message counted n1, the answer left it out.
    (tmp_path / "c.yaml").write_text(NOMINATED)
    r = policyd("explain", "storefront/web-c", "--cluster", str(tmp_path / "c.yaml"),
                "-o", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert [n["name"] for n in out["nodes"]] == ["n1", "n2"]
    assert out["nodes"][0]["nominatedPods"] == ["default/nom"]
    text = policyd("explain", "storefront/web-c", "--cluster", str(tmp_path / "c.yaml"))
    assert ("  n1  NodeResourcesFit: Insufficient cpu (requests 2, free 1 of 4 allocatable); "
            "counting default/nom, nominated here by preemption") in text.stdout


def test_explain_top_cuts_the_table_and_says_how_many_are_left() -> None:
    r = policyd("explain", *DEMO, "--pod", "jobs/huge", "--top", "2")
    assert r.returncode == 1
    assert "... 4 more node(s) (--top 0 shows all; -o json lists every node)" \
        in r.stdout
    assert "  and of the nodes not shown: " in r.stdout
    bad = policyd("explain", *DEMO, "--pod", "jobs/huge", "--top", "-1")
    assert bad.returncode == 2 and "--top" in bad.stderr


@pytest.mark.parametrize(("ref", "hint"), [
    ("web-c", "no pod default/web-c in the snapshot; did you mean storefront/web-c?"),
    ("storefront/web-x", "did you mean storefront/web-c?"),
    ("storfront/web-c", "(no pod is in namespace storfront; did you mean namespace "
                        "storefront?)"),
    ("default/noms", "did you mean default/nom?"),
    ("zzz/qqqq", "no pod zzz/qqqq in the snapshot (no pod is in namespace zzz)"),
])
def test_explain_suggests_the_pod_meant(tmp_path: Path, ref: str, hint: str) -> None:
    (tmp_path / "c.yaml").write_text(NOMINATED)
    r = policyd("explain", ref, "--cluster", str(tmp_path / "c.yaml"))
    assert r.returncode == 2
    assert hint in r.stderr, r.stderr


def test_explain_points_out_a_node_label_that_differs_only_by_case() -> None:
    # demo node-b1 says `Env: prod`; EnvProd reads `env`.
    r = policyd("explain", *DEMO, "--pod", "shop/orders-api")
    assert r.returncode == 0, r.stderr
    assert ('  node-b1  EnvProd: node(s) are not production nodes (label env=prod); '
            'node has label "Env", policy wants "env"') in r.stdout
    out = json.loads(policyd("explain", *DEMO, "--pod", "shop/orders-api", "-o",
                             "json").stdout)
    nodes = {n["name"]: n for n in out["nodes"]}
    assert nodes["node-b1"]["hints"] == ['node has label "Env", policy wants "env"']
    assert nodes["node-b2"]["hints"] == []
