"""`policyd dev` paths that need no binaries: exit codes and messages of the error cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from policyd.cli.dev import dev_app


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("POLICYD_DEV_DIR", str(tmp_path / "state"))
    return CliRunner()


def test_status_without_cluster_exits_1(runner: CliRunner) -> None:
    result = runner.invoke(dev_app, ["status"])
    assert result.exit_code == 1
    assert "not running" in result.output


def test_down_without_cluster_is_fine(runner: CliRunner) -> None:
    assert runner.invoke(dev_app, ["down"]).exit_code == 0


def test_up_with_missing_snapshot_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(dev_app, ["up", "--load", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "no such file" in result.output
    assert "Traceback" not in result.output


def test_up_with_unsupported_kind_fails_before_starting(runner: CliRunner, tmp_path: Path) -> None:
    snap = tmp_path / "snap.yaml"
    snap.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
    result = runner.invoke(dev_app, ["up", "--load", str(snap)])
    assert result.exit_code == 2
    assert "Secret s: unsupported kind" in result.output
    assert not (tmp_path / "state" / "cluster").exists()


def test_bad_port_is_a_usage_error(runner: CliRunner) -> None:
    assert runner.invoke(dev_app, ["up", "--port", "0"]).exit_code == 2


def test_up_with_wrong_scheduler_config_fails_before_starting(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = tmp_path / "sched.yaml"
    config.write_text("apiVersion: v1\nkind: ConfigMap\n")
    result = runner.invoke(dev_app, ["up", "--scheduler-config", str(config)])
    assert result.exit_code == 2
    assert "expected KubeSchedulerConfiguration" in result.output
    assert not (tmp_path / "state" / "cluster").exists()


@pytest.mark.parametrize(("value", "problem"), [
    ("X=maybe", 'strconv.ParseBool: parsing "maybe": invalid syntax'),
    ("=true", "a feature gate name is missing before '='"),
])
def test_up_with_malformed_feature_gates_fails_before_starting(
    runner: CliRunner, tmp_path: Path, value: str, problem: str
) -> None:
    result = runner.invoke(dev_app, ["up", "--feature-gates", "GenericWorkload=true",
                                     "--feature-gates", value])
    assert result.exit_code == 2
    assert result.output.startswith(
        f"policyd: error: invalid argument 'GenericWorkload=true,{value}' for "
        '"--feature-gates" flag: ')
    assert problem in result.output and "Traceback" not in result.output
    assert not (tmp_path / "state" / "cluster").exists()


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def assets_without_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Control-plane binaries named through envtest's variable, an empty cache, and no
    `go` on PATH: anything `dev build` would build fails instead."""
    for name in ("etcd", "kube-apiserver"):
        _exe(tmp_path / "assets" / name)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path / "assets"))
    monkeypatch.setenv("POLICYD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-go"))
    for tool in ("PROMETHEUS", "PROMTOOL", "KARPENTER", "HELM"):
        monkeypatch.delenv(f"TEST_ASSET_{tool}", raising=False)
    return tmp_path


def test_build_includes_prometheus(runner: CliRunner, assets_without_go: Path) -> None:
    # The control plane comes from the environment; Prometheus still has to be built,
    # so `make test` (which runs `dev build`) needs no other step for it.
    result = runner.invoke(dev_app, ["build"])
    assert result.exit_code == 1, result.output
    assert "`go` not found" in result.output
    assert "to build Prometheus (or set TEST_ASSET_PROMETHEUS" in result.output


def test_build_includes_karpenter(
    runner: CliRunner, assets_without_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prometheus chosen too: Karpenter's kwok provider (the autoscaler test's) is still
    # built by `dev build`, so a fresh CI machine needs no other step for it either.
    monkeypatch.setenv("TEST_ASSET_PROMETHEUS", str(_exe(assets_without_go / "p" / "prom")))
    monkeypatch.setenv("TEST_ASSET_PROMTOOL", str(_exe(assets_without_go / "p" / "tool")))
    result = runner.invoke(dev_app, ["build"])
    assert result.exit_code == 1, result.output
    assert "to build Karpenter (or set TEST_ASSET_KARPENTER" in result.output


def test_build_includes_helm(
    runner: CliRunner, assets_without_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every other tool chosen: the chart tests' helm is still built by `dev build`.
    monkeypatch.setenv("TEST_ASSET_PROMETHEUS", str(_exe(assets_without_go / "p" / "prom")))
    monkeypatch.setenv("TEST_ASSET_PROMTOOL", str(_exe(assets_without_go / "p" / "tool")))
    monkeypatch.setenv("TEST_ASSET_KARPENTER", str(_exe(assets_without_go / "k" / "karp")))
    result = runner.invoke(dev_app, ["build"])
    assert result.exit_code == 1, result.output
    assert "(or set TEST_ASSET_HELM" in result.output


def test_build_with_every_binary_chosen_builds_nothing(
    runner: CliRunner, assets_without_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_ASSET_PROMETHEUS", str(_exe(assets_without_go / "p" / "prom")))
    monkeypatch.setenv("TEST_ASSET_PROMTOOL", str(_exe(assets_without_go / "p" / "tool")))
    monkeypatch.setenv("TEST_ASSET_KARPENTER", str(_exe(assets_without_go / "k" / "karp")))
    monkeypatch.setenv("TEST_ASSET_HELM", str(_exe(assets_without_go / "h" / "helm")))
    result = runner.invoke(dev_app, ["build"])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{assets_without_go / 'assets'}\n"  # still only the dir
