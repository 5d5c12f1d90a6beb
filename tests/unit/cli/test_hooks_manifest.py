"""`.pre-commit-hooks.yaml`: which files the hooks take by default, and that their
commands and arguments exist. (tests/integration/test_precommit_hooks.py runs them
through the real pre-commit.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from ruamel.yaml import YAML

from policyd.cli.app import register_commands

ROOT = Path(__file__).resolve().parents[3]


def hooks() -> dict[str, dict[str, Any]]:
    data = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return {h["id"]: h for h in data}


POLICY_FILES = [
    "policies/hw-encrypt.yaml",
    "policies/tests/hw-encrypt.test.yaml",
    "policies/team-a/latency.yml",
    "deploy/scheduler/policies/env-prod.yaml",
    "apps/web/web.policy.yaml",
    "web.policy.yml",
]
OTHER_FILES = [
    "apps/web/deployment.yaml",
    "apps/web/kustomization.yaml",
    "clusters/prod/kustomization.yml",
    ".github/workflows/ci.yaml",
    ".gitlab-ci.yml",
    "docker-compose.yaml",
    "mypolicies/a.yaml",  # a directory whose name only ends in "policies"
    "policies.yaml",
    "policies/README.md",
    "apps/policy.yaml",  # "policy.yaml" is not "*.policy.yaml"
    "charts/x/values.policy.yaml.tmpl",
]


@pytest.mark.parametrize("hook_id", ["policyd-lint", "policyd-test"])
@pytest.mark.parametrize("path", POLICY_FILES)
def test_default_files_take_policies_and_their_tests(hook_id: str, path: str) -> None:
    # pre-commit matches `files` with re.search on the path relative to the repository.
    assert re.search(hooks()[hook_id]["files"], path)


@pytest.mark.parametrize("hook_id", ["policyd-lint", "policyd-test"])
@pytest.mark.parametrize("path", OTHER_FILES)
def test_default_files_leave_other_yaml_alone(hook_id: str, path: str) -> None:
    assert not re.search(hooks()[hook_id]["files"], path)


@pytest.mark.parametrize("hook_id", ["policyd-lint", "policyd-test"])
def test_entries_name_real_commands_and_options(hook_id: str) -> None:
    hook = hooks()[hook_id]
    program, command = hook["entry"].split()
    assert program == "policyd"
    cli: Any = typer.main.get_command(register_commands())
    params = {o for p in cli.commands[command].params for o in p.opts}
    for arg in hook.get("args", []):
        if arg.startswith("-"):
            assert arg in params, f"{hook_id}: {command} has no option {arg}"
    assert hook["types"] == ["yaml"]


def test_lint_hook_skips_other_kinds_and_runs_serially() -> None:
    lint = hooks()["policyd-lint"]
    assert "--skip-non-policies" in lint["args"]
    assert lint["require_serial"] is True
    assert hooks()["policyd-test"]["pass_filenames"] is False
