"""A file given to the command that does not take it: every command says what the file
is and which command takes it (`policyd.model.file_kinds`), at the file (and line and
column where the command reports problems), with its documented exit code: lint and
check-config report a problem (exit 1), explain, simulate and audit refuse the input
(exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.cli.app import register_commands
from tests.cli_runs import run_cli

APP = register_commands()
ROOT = Path(__file__).resolve().parents[3]

PROFILE = "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
POLICY = (ROOT / "policies" / "env-prod.yaml").read_text()
POLICY_TEST = (ROOT / "policies" / "tests" / "env-prod.test.yaml").read_text()
SNAPSHOT = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n"
            "  metadata: {name: n1}\n")

WHAT = {
    "profile": ("a PolicydConfiguration (a profile)", "`policyd check-config {path}`"),
    "policy": ("a SchedulingPolicy (a policy)", "`policyd lint {path}`"),
    "policytest": ("a PolicyTest", "`policyd test {path}`"),
    "snapshot": ("a cluster snapshot (Kubernetes objects)", "with --cluster"),
}
CONTENT = {"profile": PROFILE, "policy": POLICY, "policytest": POLICY_TEST,
           "snapshot": SNAPSHOT}


def invoke(*args: str) -> tuple[int, str]:
    """(exit code, what was said on stdout and stderr, or the PolicydError's line)."""
    r = run_cli(APP, args, env={"GITHUB_ACTIONS": ""})
    return r.code, r.output


def write(tmp_path: Path, kind: str) -> str:
    path = tmp_path / f"{kind}.yaml"
    path.write_text(CONTENT[kind])
    return str(path)


def says(out: str, kind: str, path: str, instead: str) -> None:
    what, command = WHAT[kind]
    assert f"{path} is {what}, not {instead}: " in out, out
    assert command.format(path=path) in out, out


@pytest.mark.parametrize("kind", ["profile", "snapshot"])
def test_lint_names_the_file_and_its_command(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path, kind)
    code, out = invoke("lint", path)
    assert code == 1
    says(out, kind, path, "a SchedulingPolicy (a policy)")
    assert f"{path}:2:7:" in out or f"{path}:5:9:" in out  # at the kind


def test_lint_still_skips_policytests_beside_policies(tmp_path: Path) -> None:
    assert invoke("lint", write(tmp_path, "policytest"))[0] == 0


@pytest.mark.parametrize("kind", ["policy", "policytest", "snapshot"])
def test_check_config_names_the_file_and_its_command(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path, kind)
    code, out = invoke("check-config", path)
    assert code == 1
    says(out, kind, path, "a PolicydConfiguration (a profile)")
    # One problem, not one per field a profile does not have.
    assert "1 error(s)" in out and "unknown field" not in out


@pytest.mark.parametrize("kind", ["profile", "policy", "policytest"])
@pytest.mark.parametrize("how", ["--cluster", "--pods", "--pod"])
def test_snapshot_options_name_the_file_and_its_command(tmp_path: Path, kind: str,
                                                        how: str) -> None:
    path = write(tmp_path, kind)
    cluster = str(tmp_path / "c.yaml")
    Path(cluster).write_text(SNAPSHOT)
    args = {"--cluster": ["simulate", "--cluster", path],
            "--pods": ["simulate", "--cluster", cluster, "--pods", path],
            "--pod": ["explain", "--cluster", cluster, "--pod", path]}[how]
    code, out = invoke(*args)
    assert code == 2
    says(out, kind, path, "a cluster snapshot (Kubernetes objects)")


@pytest.mark.parametrize("kind", ["profile", "policy", "policytest"])
def test_audit_cluster_names_the_file(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path, kind)
    code, out = invoke("audit", "--cluster", path, "--policies", str(ROOT / "policies"))
    assert code == 2
    says(out, kind, path, "a cluster snapshot (Kubernetes objects)")


def test_config_and_policies_options_name_the_file(tmp_path: Path) -> None:
    cluster = str(tmp_path / "c.yaml")
    Path(cluster).write_text(SNAPSHOT)
    policy, profile = write(tmp_path, "policy"), write(tmp_path, "profile")
    code, out = invoke("simulate", "--cluster", cluster, "--config", policy)
    assert code == 2
    says(out, "policy", policy, "a PolicydConfiguration (a profile)")
    code, out = invoke("simulate", "--cluster", cluster, "--policies", profile)
    assert code == 2
    says(out, "profile", profile, "a SchedulingPolicy (a policy)")
