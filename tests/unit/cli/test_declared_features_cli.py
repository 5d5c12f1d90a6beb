"""`policyd explain` and `simulate` on issue 27's snapshot: the pod with a
RestartAllContainers rule goes to the node that declares the feature, as
kube-scheduler v1.36.3 binds it, in both commands and JSON; a declaredFeatures list
the API server would refuse is exit 2 naming the node and the field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
REASON = "node(s) didn't match Pod's required features"

SNAPSHOT = """\
apiVersion: v1
kind: List
items:
- kind: Node
  metadata: {name: new-node}
  status:
    declaredFeatures: [DECLARED]
    allocatable: {cpu: "2", memory: 4Gi, pods: "110"}
- kind: Node
  metadata: {name: old-node}
  status: {allocatable: {cpu: "4", memory: 4Gi, pods: "110"}}
- kind: Pod
  metadata: {name: web, namespace: default}
  spec:
    containers:
    - name: c
      restartPolicy: Never
      restartPolicyRules:
      - {action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}
      resources: {requests: {cpu: 500m}}
"""


def policyd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policyd", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def _snapshot(tmp_path: Path, declared: str) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(SNAPSHOT.replace("DECLARED", declared))
    return str(path)


def test_explain_and_simulate_choose_the_declaring_node(tmp_path: Path) -> None:
    cluster = _snapshot(tmp_path, "RestartAllContainersOnContainerExits")
    explain = policyd("explain", "--cluster", cluster, "default/web", "-o", "json")
    assert explain.returncode == 0, explain.stderr
    answer = json.loads(explain.stdout)
    assert answer["node"] == "new-node"
    assert REASON in json.dumps(answer)  # old-node's rejection is in the answer
    simulate = policyd("simulate", "--cluster", cluster)
    assert simulate.returncode == 0, simulate.stderr
    assert "new-node" in simulate.stdout


def test_no_declaring_node(tmp_path: Path) -> None:
    cluster = _snapshot(tmp_path, "ExtendWebSocketsToKubelet")
    explain = policyd("explain", "--cluster", cluster, "default/web")
    assert explain.returncode == 1, explain.stderr
    assert f"0/2 nodes are available: 2 {REASON}." in explain.stdout


@pytest.mark.parametrize(("declared", "fragment"), [
    ("Zeta, RestartAllContainersOnContainerExits",
     "status.declaredFeatures[1]: 'RestartAllContainersOnContainerExits' is out of order"),
    ("Alpha, Alpha", "status.declaredFeatures[1]: duplicate 'Alpha'"),
    ("restartAll", "status.declaredFeatures[0]: invalid feature name 'restartAll'"),
])
def test_refused_lists(tmp_path: Path, declared: str, fragment: str) -> None:
    for command in (["explain", "default/web"], ["simulate"]):
        out = policyd(command[0], "--cluster", _snapshot(tmp_path, declared), *command[1:])
        assert out.returncode == 2, out.stderr
        assert "Node new-node" in out.stderr and fragment in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_a_profile_with_the_gate_off_sends_it_where_the_scores_do(tmp_path: Path) -> None:
    """`--config` with featureGates turning NodeDeclaredFeatures off: explain,
    simulate and check-config all run the profile's gates."""
    from policyd.features import turning_off

    profile = tmp_path / "profile.yaml"
    profile.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
                       "profiles: [{schedulerName: default-scheduler}]\n"
                       "featureGates:\n" + "".join(
                           f"  {n}: false\n" for n, _ in turning_off("NodeDeclaredFeatures")))
    cluster = _snapshot(tmp_path, "RestartAllContainersOnContainerExits")
    explain = policyd("explain", "--config", str(profile), "--cluster", cluster,
                      "default/web", "-o", "json")
    assert explain.returncode == 0, explain.stderr
    answer = json.loads(explain.stdout)
    assert answer["node"] == "old-node"
    assert REASON not in json.dumps(answer)
    simulate = policyd("simulate", "--config", str(profile), "--cluster", cluster)
    assert simulate.returncode == 0, simulate.stderr
    assert "old-node" in simulate.stdout and "new-node" not in simulate.stdout
    check = policyd("check-config", str(profile), "-o", "json")
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["effective"]["featureGates"][
        "NodeDeclaredFeatures"] is False
