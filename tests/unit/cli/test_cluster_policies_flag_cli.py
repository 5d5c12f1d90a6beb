"""`--cluster-policies` on the commands: check-config validates as `policyd run
--cluster-policies` would (with `--policies`, a kube-scheduler file is checked with
the policies `run` would load), and the commands that read SchedulingPolicy objects
from a live cluster refuse it with a snapshot file, which has none (exit 2, one line,
before the snapshot is read)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyd.cli.app import register_commands
from policyd.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from tests.cli_runs import run_cli

ROOT = Path(__file__).resolve().parents[3]
KSC = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: migrating
    plugins:
      filter:
        disabled: [{name: HwEncrypt}]
"""


def _check_config(*args: str | Path) -> tuple[int, str]:
    r = run_cli(register_commands(), ["check-config", *args], env={"GITHUB_ACTIONS": ""})
    return r.code, r.stdout


def test_check_config_takes_the_flag_and_the_policies_of_run(tmp_path: Path) -> None:
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text(KSC)
    # HwEncrypt comes from a policy file: without --policies the file names a plugin
    # nobody provides.
    code, out = _check_config(path)
    assert code == EXIT_PROBLEMS and "HwEncrypt" in out
    code, out = _check_config(path, "--policies", ROOT / "policies", "-o", "json")
    assert code == EXIT_OK, out
    assert json.loads(out)["effective"]["clusterPolicies"] is False
    code, out = _check_config(path, "--policies", ROOT / "policies", "--cluster-policies",
                              "-o", "json")
    assert code == EXIT_OK, out
    assert json.loads(out)["effective"]["clusterPolicies"] is True


@pytest.mark.parametrize("command", [
    ["explain", "default/web-0"], ["simulate"], ["audit", "--policies", "policies"]])
def test_the_flag_is_refused_with_a_snapshot(command: list[str]) -> None:
    r = run_cli(register_commands(), [*command, "--cluster", ROOT / "demo/cluster.yaml",
                      "--cluster-policies"])
    assert r.code == EXIT_USAGE
    assert r.stderr.startswith("--cluster-policies runs the live cluster's "
                               "SchedulingPolicy objects, and --cluster FILE reads a "
                               "snapshot, which has none")
