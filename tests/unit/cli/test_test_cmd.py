"""`policyd test`: passing and failing expectations, formats (JUnit valid even on
failure), exit codes 0/1/2, and "no tests" as a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import typer
from typer.testing import CliRunner

from policyd.cli import test_cmd

ROOT = Path(__file__).resolve().parents[3]

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: gpu-only}
spec:
  pluginName: GpuOnly
  appliesTo:
    labelSelector: {matchLabels: {gpu: "yes"}}
  filters:
    - id: gpu-node
      message: node(s) had no GPU
      nodeLabels: {matchLabels: {accelerator: gpu}}
  scores:
    - id: cores
      weight: 1
      normalize: max
      numeric: {label: cores}
"""


def suite(tests: str, policies: str = "    - policy.yaml\n", extra_pods: str = "") -> str:
    return f"""\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {{name: t}}
spec:
  policies:
{policies}  nodes:
    - {{name: g1, labels: {{accelerator: gpu, cores: "8"}}}}
    - {{name: g2, labels: {{accelerator: gpu, cores: "2"}}}}
    - {{name: cpu1, labels: {{cores: "64"}}, allocatable: {{cpu: "8"}}}}
  pods:
    - {{name: train, labels: {{gpu: "yes"}}}}
    - {{name: web}}
    - {{name: huge, labels: {{gpu: "yes"}}, requests: {{cpu: "6"}}}}
{extra_pods}  tests:
{tests}"""


PASSING = """\
    - name: gpu pods on gpu nodes, most cores first
      pod: train
      policies:
        GpuOnly:
          applies: true
          pass: [g1, g2]
          fail: {cpu1: node(s) had no GPU}
          scores: {g1: 100, g2: 25}
      scheduledTo: g1
    - name: other pods anywhere
      pod: web
      policies:
        GpuOnly: {applies: false}
      scheduledTo: [g1, g2, cpu1]
      unschedulable: false
    - name: too big
      pod: huge
      unschedulable: >-
        0/3 nodes are available: 1 node(s) had no GPU, 2 Insufficient cpu. no new claims
        to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful
        for scheduling.
"""

FAILING = """\
    - name: wrong pass list
      pod: train
      policies:
        GpuOnly:
          pass: [cpu1]
          fail: {g1: other reason}
          scores: {g1: 1}
    - name: "wrong winner <&> \\"quotes\\" \\x01"
      pod: train
      scheduledTo: g2
    - name: wrong applies
      pod: web
      policies:
        GpuOnly: {applies: true}
    - name: expected unschedulable
      pod: web
      unschedulable: true
"""


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    a.command("test")(test_cmd.test)

    @a.callback()
    def _root() -> None:
        """A group, as in policyd."""

    return a


def write(tmp: Path, text: str, name: str = "t.test.yaml") -> Path:
    (tmp / "policy.yaml").write_text(POLICY)
    p = tmp / name
    p.write_text(text)
    return p


def run(app: typer.Typer, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, ["test", *args])
    return r.exit_code, r.stdout, r.stderr


def test_passing_suite(app: typer.Typer, tmp_path: Path) -> None:
    code, out, err = run(app, str(write(tmp_path, suite(PASSING))))
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "3 passed, 0 failed"
    assert all(line.startswith("PASS ") for line in out.splitlines()[:-1])


def test_failing_suite_reports_every_mismatch(app: typer.Typer, tmp_path: Path) -> None:
    code, out, _ = run(app, str(write(tmp_path, suite(FAILING))))
    assert code == 1
    assert "GpuOnly: expected node cpu1 to pass, but it failed: node(s) had no GPU" in out
    assert "GpuOnly: node g1 failed" not in out
    assert "GpuOnly: expected node g1 to fail with 'other reason', but it passed" in out
    assert "GpuOnly: node g1 scored 100, expected 1" in out
    assert "expected the pod on g2, but it was scheduled to g1" in out
    assert "expected the policy to apply to the pod, but it does not" in out
    assert "expected the pod to be unschedulable, but it was scheduled to" in out
    assert out.splitlines()[-1] == "0 passed, 4 failed"


def test_junit_is_valid_xml_on_failure(app: typer.Typer, tmp_path: Path) -> None:
    code, out, _ = run(app, "--format", "junit", str(write(tmp_path, suite(FAILING))))
    assert code == 1
    root = ET.fromstring(out.encode())
    assert root.tag == "testsuites" and root.get("failures") == "4"
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 4
    assert all(c.find("failure") is not None for c in cases)
    assert cases[1].get("name") == 'wrong winner <&> "quotes" \ufffd'


def test_json_format(app: typer.Typer, tmp_path: Path) -> None:
    code, out, _ = run(app, "-f", "json", str(write(tmp_path, suite(PASSING))))
    doc = json.loads(out)
    assert code == 0
    assert doc["summary"] == {"tests": 3, "failed": 0, "badInput": False,
                              "refused": 0}
    assert doc["tests"][0]["name"] == "gpu pods on gpu nodes, most cores first"


def test_no_tests_is_a_failure(app: typer.Typer, tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    code, out, _ = run(app, str(tmp_path))
    assert code == 1
    assert "no tests found" in out
    code, out, _ = run(app, "--format", "junit", str(tmp_path))
    assert code == 1
    assert ET.fromstring(out.encode()).get("failures") == "1"


def test_inline_policy(app: typer.Typer, tmp_path: Path) -> None:
    inline = "    - " + POLICY.replace("\n", "\n      ").rstrip() + "\n"
    code, out, err = run(app, str(write(tmp_path, suite(PASSING, policies=inline))))
    assert code == 0, out + err


AUDITED = """\
    - name: the rules judged as they will act once enforced
      pod: train
      policies:
        GpuOnly:
          pass: [g1, g2]
          fail: {cpu1: node(s) had no GPU}
          scores: {g1: 100, g2: 25}
    - name: the scheduler runs it in Audit mode, so it rejects nothing
      pod: huge
      scheduledTo: cpu1
"""


def test_an_audit_mode_policy_is_tested_by_its_rules_and_scheduled_in_its_mode(
        app: typer.Typer, tmp_path: Path) -> None:
    path = write(tmp_path, suite(AUDITED))
    (tmp_path / "policy.yaml").write_text(POLICY.replace("spec:\n", "spec:\n  mode: Audit\n"))
    code, out, err = run(app, str(path))
    assert code == 0, out
    assert out.splitlines()[-1] == "2 passed, 0 failed"
    assert "do not count" in err  # lint's audit-scores warning, shown as a warning


BAD_INPUT = [
    ("schema", suite(PASSING).replace("pod: train", "pod: train\n      colour: red", 1),
     "Additional properties"),
    ("unknown pod", suite(PASSING).replace("pod: train", "pod: nobody", 1),
     "no pod named 'nobody'"),
    ("unknown node", suite(PASSING).replace("scheduledTo: g1", "scheduledTo: g9"),
     "no node named 'g9'"),
    ("unknown policy", suite(PASSING).replace("GpuOnly:", "GPUOnly:", 1),
     "no policy with pluginName 'GPUOnly'"),
    ("missing policy file", suite(PASSING, policies="    - missing.yaml\n"),
     "policy path 'missing.yaml'"),
    ("invalid policy", suite(PASSING, policies="    - {kind: SchedulingPolicy, "
                                               "apiVersion: policyd.io/v1alpha1}\n"),
     "missing required field 'metadata'"),
    ("invalid node", suite(PASSING).replace("{name: g1,", "{name: g1, allocatable: {cpu: lots},"),
     "invalid quantity"),
    ("bound to unknown node", suite(PASSING, extra_pods="    - {name: x, nodeName: nowhere}\n"),
     "unknown node 'nowhere'"),
    ("yaml error", "a: [1\n", "YAML syntax error"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_INPUT, ids=[b[0] for b in BAD_INPUT])
def test_bad_input_exits_2(app: typer.Typer, tmp_path: Path, name: str, text: str,
                           message: str) -> None:
    code, _, err = run(app, str(write(tmp_path, text)))
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert f"{tmp_path}" in err  # every problem names its file


def test_missing_path_exits_2(app: typer.Typer, tmp_path: Path) -> None:
    code, _, err = run(app, str(tmp_path / "nope"))
    assert code == 2 and "no such file or directory" in err


def test_examples_through_the_entry_point() -> None:
    policyd = Path(sys.executable).parent / "policyd"
    proc = subprocess.run([str(policyd), "test", "--format", "junit", "policies/"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    root = ET.fromstring(proc.stdout.encode())
    assert root.get("failures") == "0"
    # Every example policy has tests.
    suites = {s.get("name", "").split("::")[-1] for s in root.findall("testsuite")}
    examples = {p.stem for p in (ROOT / "policies").glob("*.yaml")}
    assert examples <= suites


METRIC_SUITE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {name: latency}
spec:
  policies:
    - apiVersion: policyd.io/v1alpha1
      kind: SchedulingPolicy
      metadata: {name: latency}
      spec:
        pluginName: Latency
        weight: 10
        scores:
          - id: latency
            weight: 1
            normalize: minmax
            metric: {name: latency_ms, prefer: lowest, missing: neutral}
  nodes: [{name: near}, {name: far}, {name: unmeasured}]
  pods: [{name: web}]
  metrics:
    latency_ms: {near: 2, far: 40.5}
  tests:
    - name: lowest latency wins, the unmeasured node is neutral
      pod: web
      policies:
        Latency:
          scores: {near: 100, far: 0, unmeasured: 50}
      scheduledTo: near
"""


def test_policy_tests_give_metric_values(app: typer.Typer, tmp_path: Path) -> None:
    code, out, err = run(app, str(write(tmp_path, METRIC_SUITE)))
    assert code == 0, out + err
    bad = METRIC_SUITE.replace("far: 40.5}", "far: 40.5, nowhere: 1}")
    code, _, err = run(app, str(write(tmp_path, bad)))
    assert code == 2 and "no node named 'nowhere'" in err


@pytest.mark.parametrize(("value", "message"), [
    ("9" * 400, "a very long integer is not a finite number (infinite)"),
    ("-" + "9" * 400, "is not a finite number (infinite)"),
    (".inf", "inf is not a finite number (infinite)"),
    (".nan", "nan is not a finite number (nan)"),
])
def test_metric_values_that_are_no_finite_number_exit_2(
        app: typer.Typer, tmp_path: Path, value: str, message: str) -> None:
    bad = METRIC_SUITE.replace("far: 40.5}", f"far: {value}}}")
    code, _, err = run(app, str(write(tmp_path, bad)))
    assert code == 2, err
    assert f"{tmp_path}" in err and "spec.metrics.latency_ms.far" in err
    assert message in err


@pytest.mark.parametrize("policies", [
    "    - policy.yaml\n    - policy.yaml\n",
    "    - policy.yaml\n    - ./policy.yaml\n",
    "    - .\n    - policy.yaml\n",
])
def test_a_policy_file_named_twice_is_loaded_once(app: typer.Typer, tmp_path: Path,
                                                  policies: str) -> None:
    code, out, err = run(app, str(write(tmp_path, suite(PASSING, policies=policies))))
    assert code == 0, out + err
    assert "already used" not in err
