"""explain/simulate's kubectl-style arguments and the kubectl plugin, without a cluster:
the pod forms, -o yaml, the one-input rule, a missing kubeconfig. (Against a real API
server: tests/e2e/test_kubectl_plugin.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from policyd.cli.kubectl_plugin import LIVE_COMMANDS, build_app
from policyd.cli.schedule_cmds import pod_key
from policyd.errors import PolicydError

ROOT = Path(__file__).resolve().parents[3]
DEMO = ["--cluster", str(ROOT / "demo/cluster.yaml"), "--pods", str(ROOT / "demo/pods.yaml"),
        "--policies", str(ROOT / "policies"), "--seed", "1"]


def run(*args: str, module: str = "policyd", env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)


@pytest.mark.parametrize(("ref", "namespace", "key"), [
    ("web-0", None, "default/web-0"),
    ("web-0", "shop", "shop/web-0"),
    ("pod/web-0", "shop", "shop/web-0"),
    ("pods/web-0", None, "default/web-0"),
    ("po/web-0", "shop", "shop/web-0"),
    ("Pod/web-0", "shop", "shop/web-0"),
    ("shop/web-0", None, "shop/web-0"),
    ("shop/web-0", "shop", "shop/web-0"),
])
def test_pod_forms(ref: str, namespace: str | None, key: str) -> None:
    assert pod_key(ref, namespace) == key


@pytest.mark.parametrize(("ref", "namespace", "needle"), [
    ("shop/web-0", "jobs", "in namespace 'shop', but -n says 'jobs'"),
    ("a/b/c", None, "is not a pod"),
    ("pod/", None, "is not a pod"),
    ("/web-0", None, "is not a pod"),
    ("", None, "is not a pod"),
])
def test_bad_pod_forms_are_usage_errors(ref: str, namespace: str | None, needle: str) -> None:
    with pytest.raises(PolicydError) as caught:
        pod_key(ref, namespace)
    assert needle in str(caught.value) and caught.value.exit_code == 2


def test_positional_pod_and_dash_n_pick_the_same_pod_as_dash_dash_pod() -> None:
    by_option = run("explain", *DEMO, "--pod", "jobs/huge", "-o", "json")
    by_arg = run("explain", *DEMO, "pod/huge", "-n", "jobs", "-o", "json")
    assert by_option.returncode == by_arg.returncode == 1, by_arg.stderr
    assert json.loads(by_arg.stdout) == json.loads(by_option.stdout)
    assert json.loads(by_arg.stdout)["pod"] == "jobs/huge"


def test_yaml_output_is_the_json_document() -> None:
    as_json = run("explain", *DEMO, "data/payments-db", "-o", "json")
    as_yaml = run("explain", *DEMO, "data/payments-db", "-o", "yaml")
    assert as_json.returncode == as_yaml.returncode == 0, as_yaml.stderr
    assert YAML(typ="safe").load(as_yaml.stdout) == json.loads(as_json.stdout)
    sim_json = run("simulate", *DEMO, "--format", "json")
    sim_yaml = run("simulate", *DEMO, "-o", "yaml")
    assert sim_json.returncode == sim_yaml.returncode == 1
    assert YAML(typ="safe").load(sim_yaml.stdout) == json.loads(sim_json.stdout)


@pytest.mark.parametrize("args", [
    ["explain", *DEMO, "jobs/huge", "--kubeconfig", "/nowhere/config"],
    ["simulate", *DEMO, "--context", "prod"],
])
def test_a_snapshot_and_a_live_cluster_at_once_is_exit_2(args: list[str]) -> None:
    r = run(*args)
    assert r.returncode == 2
    assert "give one or the other, not both" in r.stderr


def test_explain_needs_exactly_one_pod() -> None:
    assert "POD or --pod" in run("explain", *DEMO).stderr
    r = run("explain", *DEMO, "jobs/huge", "--pod", "jobs/huge")
    assert r.returncode == 2 and "POD or --pod" in r.stderr


def test_live_without_any_kubeconfig_is_a_clear_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config
    for module in ("policyd", "policyd.cli.kubectl_plugin"):
        for args in (("explain", "web-0"), ("ui",)):  # ui: refused before it serves
            r = run(*args, module=module, env=env)
            assert r.returncode == 2, r.stderr
            assert r.stderr.startswith("policyd: error: no kubeconfig")
            assert "--cluster FILE" in r.stderr and "Traceback" not in r.stderr
    r = run("simulate", "--kubeconfig", str(tmp_path / "missing"), env=env)
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_plugin_has_exactly_the_live_commands_and_version() -> None:
    import typer

    group: Any = typer.main.get_command(build_app())  # a group: it has subcommands
    assert sorted(group.commands) == sorted(["version", *(n for n, _ in LIVE_COMMANDS)])
    r = run("--help", module="policyd.cli.kubectl_plugin")
    assert r.returncode == 0 and r.stdout.startswith("Usage: kubectl policyd ")
    assert "explain" in r.stdout and "simulate" in r.stdout and "run" not in r.stdout.split()
    r = run("version", module="policyd.cli.kubectl_plugin")
    assert r.returncode == 0 and r.stdout.startswith("policyd ")
    r = run("explain", "--help", module="policyd.cli.kubectl_plugin")
    assert "Usage: kubectl policyd explain [OPTIONS] [POD]" in r.stdout
