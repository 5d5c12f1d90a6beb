"""`policyd test`: a typo in an inline pod or node is an error at its line and column,
as the API server's strict field validation makes it, not a test of another pod."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from policyd.cli import test_cmd

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: gpu-only}
spec:
  pluginName: GpuOnly
  filters:
    - id: gpu-node
      message: node(s) had no GPU
      nodeLabels: {matchLabels: {accelerator: gpu}}
"""
FULL_NODE = """\
    - apiVersion: v1
      kind: Node
      metadata: {name: g2, labels: {accelerator: gpu}}
      status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
"""
FULL_POD = """\
    - apiVersion: v1
      kind: Pod
      metadata: {name: full}
      spec:
        nodeSelector: {accelerator: gpu}
        containers: [{name: c, image: i}]
"""


def suite(node: str, pod: str) -> str:
    return f"""\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {{name: t}}
spec:
  policies: [policy.yaml]
  nodes:
    - {{name: g1, labels: {{accelerator: gpu}}, taints: [{{key: k, effect: NoSchedule}}]}}
{node}  pods:
    - {{name: train, tolerations: [{{key: k, operator: Exists}}]}}
{pod}  tests:
    - name: train goes to a gpu node
      pod: train
      scheduledTo: [g1, g2]
"""


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    a.command("test")(test_cmd.test)

    @a.callback()
    def _root() -> None:
        """A group, as in policyd."""

    return a


def run(app: typer.Typer, tmp: Path, text: str) -> tuple[int, str, str]:
    (tmp / "policy.yaml").write_text(POLICY)
    (tmp / "t.test.yaml").write_text(text)
    r = CliRunner().invoke(app, ["test", str(tmp / "t.test.yaml")])
    return r.exit_code, r.stdout, r.stderr


def test_the_suite_without_typos_passes(app: typer.Typer, tmp_path: Path) -> None:
    code, out, err = run(app, tmp_path, suite(FULL_NODE, FULL_POD))
    assert code == 0, out + err


@pytest.mark.parametrize(("old", "new", "where", "message"), [
    ("taints: [{key: k, effect:", "taints: [{key: k, efect:", "7:",
     'unknown field "efect" (did you mean "effect"?) [unknown-field] '
     "(at spec.nodes[0].taints[0].efect)"),
    ("tolerations: [{key: k, operator:", "tolerations: [{key: k, operater:", "13:",
     'unknown field "operater" (did you mean "operator"?) [unknown-field] '
     "(at spec.pods[0].tolerations[0].operater)"),
    ("metadata: {name: g2, labels:", "metadata: {name: g2, lables:", "10:",
     'unknown field "lables" (did you mean "labels"?) [unknown-field] '
     "(at spec.nodes[1].metadata.lables)"),
    ("nodeSelector: {accelerator", "nodeSelectr: {accelerator", "18:9:",
     'unknown field "nodeSelectr" (did you mean "nodeSelector"?) [unknown-field] '
     "(at spec.pods[1].spec.nodeSelectr)"),
    ("containers: [{name: c, image: i}]", "containers: [{name: c, image: i, resource: {}}]",
     "19:42:", 'unknown field "resource" (did you mean "resources"?) [unknown-field] '
     "(at spec.pods[1].spec.containers[0].resource)"),
])
def test_a_typo_in_an_inline_object_is_exit_2_at_its_position(
        app: typer.Typer, tmp_path: Path, old: str, new: str, where: str,
        message: str) -> None:
    text = suite(FULL_NODE, FULL_POD)
    assert old in text
    code, _, err = run(app, tmp_path, text.replace(old, new, 1))
    assert code == 2
    line = next(ln for ln in err.splitlines() if "unknown-field" in ln)
    assert line.startswith(f"{tmp_path / 't.test.yaml'}:{where}")
    assert line.endswith(message)
