"""`policyd admit`: the webhook's code path on a Pod file, offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from policyd.cli import admit_cmd
from tests.cli_runs import run_cli

ROOT = Path(__file__).resolve().parents[3]
HW_POLICY = ROOT / "policies" / "hw-encrypt.yaml"

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: payments
  namespace: shop
  annotations: {myorg.io/require-hw-encrypt: "true"}
spec:
  containers: [{name: c, image: i}]
"""
PROFILES = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
policies: [{policy}]
profiles:
  - schedulerName: secure
  - schedulerName: plain
    plugins: {{multiPoint: {{disabled: [{{name: HwEncrypt}}]}}}}
"""


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    a.command("admit")(admit_cmd.admit)
    a.command("unused")(lambda: None)
    return a


def run(app: typer.Typer, *args: str | Path) -> tuple[int, str, str]:
    r = run_cli(app, ["admit", *args])
    return r.code, r.stdout, r.stderr


def test_the_example_policy_becomes_node_affinity(app: typer.Typer, tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    code, out, err = run(app, "--pod", pod, "--policies", HW_POLICY, "-o", "json")
    assert code == 0, err
    admitted = json.loads(out)
    assert admitted["spec"]["schedulerName"] == "policyd"
    [term] = admitted["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": "node.kubernetes.io/hw-encrypt", "operator": "In", "values": ["true"]}]
    assert admitted["metadata"]["annotations"]["policyd.io/autoscaler-visible-rules"] \
        .startswith("hw-encrypt/")
    assert "Warning: policyd: spec.schedulerName set to policyd" in err
    # The printed pod admitted again: the same pod, nothing said.
    again = tmp_path / "again.json"
    again.write_text(out)
    code, out2, err2 = run(app, "--pod", again, "--policies", HW_POLICY, "-o", "json")
    assert code == 0 and json.loads(out2) == admitted and "Warning" not in err2


def test_the_profile_decides(app: typer.Typer, tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    config = tmp_path / "profile.yaml"
    config.write_text(PROFILES.format(policy=HW_POLICY))
    code, out, _ = run(app, "--pod", pod, "--config", config, "--scheduler-name", "plain",
                       "-o", "json")
    assert code == 0
    plain = json.loads(out)
    assert plain["spec"]["schedulerName"] == "plain" and "affinity" not in plain["spec"]
    code, out, _ = run(app, "--pod", pod, "--config", config, "--scheduler-name", "secure",
                       "-o", "json")
    assert "affinity" in json.loads(out)["spec"]
    code, _, err = run(app, "--pod", pod, "--config", config, "--scheduler-name", "nope")
    assert code == 2 and err == ("--scheduler-name nope: no such profile (profiles: "
                                 "plain, secure)")
    # Two profiles and none is the default: which one must be said.
    code, _, err = run(app, "--pod", pod, "--config", config)
    assert code == 2 and "--scheduler-name" in err


def test_one_pod_only_and_no_traceback(tmp_path: Path) -> None:
    two = tmp_path / "two.yaml"
    two.write_text(POD + "---\n" + POD.replace("payments", "other"))
    r = subprocess.run([sys.executable, "-m", "policyd", "admit", "--pod", str(two),
                        "--policies", str(HW_POLICY)], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 2 and r.stdout == ""
    assert "holds 2 pods; policyd admit takes one" in r.stderr
    assert "Traceback" not in r.stderr
