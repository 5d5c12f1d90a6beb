"""explain, simulate and audit on what `kubectl get all -A -o yaml` prints: the kinds
the scheduler does not read are skipped with one note, `--strict` refuses them, and a
name read from a file never reaches the terminal with its control characters raw."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from policyd.cli import audit_cmd, kubectl_plugin, schedule_cmds
from tests.unit.cli.test_schedule_cmds_inputs import run

ROOT = Path(__file__).resolve().parents[3]
GET_ALL = str(ROOT / "tests" / "unit" / "model" / "fixtures" / "kubectl_get_all.yaml")
NOTE = ("skipped 2 Deployment, 2 Job, 1 CronJob, 1 DaemonSet, 1 Endpoints, "
        "1 HorizontalPodAutoscaler object(s): kinds the scheduler does "
        "not read (--strict refuses them)")
STRICT = "items[4]: unexpected kind 'DaemonSet': --strict refuses kinds the scheduler"
POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: linux-only}
spec:
  pluginName: LinuxOnly
  filters:
    - id: linux
      message: node(s) are not linux
      nodeLabels:
        matchExpressions: [{key: kubernetes.io/os, operator: In, values: [linux]}]
"""


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    a.command("explain")(schedule_cmds.explain)
    a.command("simulate")(schedule_cmds.simulate)
    a.command("audit")(audit_cmd.audit)
    return a


def test_simulate_schedules_the_pending_pod_and_notes_the_skipped_kinds(
        app: typer.Typer) -> None:
    code, out, err = run(app, "simulate", "--cluster", GET_ALL)
    assert code == 0, err
    assert "shop/web-pending  worker-1" in out
    assert out.count("skipped ") == 1 and f"note: {NOTE}" in out
    code, out, err = run(app, "simulate", "--cluster", GET_ALL, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["notes"] == [NOTE]


def test_explain_notes_the_skipped_kinds(app: typer.Typer) -> None:
    code, out, err = run(app, "explain", "shop/web-pending", "--cluster", GET_ALL)
    assert code == 0, err
    assert f"note: {NOTE}" in out
    code, out, _ = run(app, "explain", "shop/web-pending", "--cluster", GET_ALL, "-o", "json")
    assert json.loads(out)["notes"] == [NOTE]


def test_audit_says_the_note_on_stderr(app: typer.Typer, tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    code, out, err = run(app, "audit", "--cluster", GET_ALL, "--policies",
                         str(tmp_path / "p.yaml"))
    assert code == 0, out
    assert err == f"policyd: note: {NOTE}\n"
    assert "skipped 2 Deployment" not in out


@pytest.mark.parametrize("command", [
    ["simulate"], ["explain", "shop/web-pending"], ["audit", "--policies", "POLICY"]])
def test_strict_keeps_the_refusal(app: typer.Typer, tmp_path: Path,
                                  command: list[str]) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    args = [str(tmp_path / "p.yaml") if a == "POLICY" else a for a in command]
    code, out, err = run(app, *args, "--cluster", GET_ALL, "--strict")
    assert code == 2 and out == ""
    assert f"{GET_ALL} (document 1) {STRICT}" in err


def test_kubectl_policyd_takes_strict_too() -> None:
    for name in ("explain", "simulate", "audit"):
        r = CliRunner().invoke(kubectl_plugin.build_app(), [name, "--help"])
        assert "--strict" in r.stdout, name


def policyd(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policyd", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_an_escape_sequence_in_a_name_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    cluster = tmp_path / "c.json"
    cluster.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "n1\x1b[2J\x1b]0;pwned\x07"}}]}))
    r = policyd("simulate", "--cluster", cluster)
    assert r.returncode == 2
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "Node n1\\x1b[2J\\x1b]0;pwned\\x07: metadata.name:" in r.stderr
    # An unknown field's name is quoted as read: the error boundary escapes it.
    cluster.write_text(json.dumps({"kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c"}], "nodeSelector\x1b[8m": {}}}))
    r = policyd("simulate", "--cluster", cluster)
    assert r.returncode == 2
    assert 'unknown field "nodeSelector\\x1b[8m"' in r.stderr and "\x1b" not in r.stderr
    # A skipped kind's name is printed in the note: escaped too.
    cluster.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "n1"}},
        {"kind": "Widget\x1b[31m", "metadata": {"name": "w"}}]}))
    r = policyd("simulate", "--cluster", cluster)
    assert r.returncode == 0, r.stderr
    assert "skipped 1 Widget\\x1b[31m object(s)" in r.stdout and "\x1b" not in r.stdout
