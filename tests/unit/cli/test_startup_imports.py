"""The commands that work on files alone never import the Kubernetes client (about
0.6 s of start-up): run through `python -m policyd`, exactly as a user or a pre-commit
hook runs them, in a fresh interpreter so nothing imported by other tests counts.

Function-level imports in `policyd/cli/` and `policyd/kube/client.py` exist for this;
the layer contracts (`lint-imports`) keep the client itself inside `policyd.kube`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Runs `python -m policyd ARGS...` in-process, then prints what it imported.
RUNNER = """
import json, runpy, sys
sys.argv = ["policyd", *sys.argv[1:]]
try:
    runpy.run_module("policyd", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}))
"""


def _imported(*args: str) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "GITHUB_ACTIONS": ""})
    last = proc.stdout.strip().splitlines()[-1]
    result = json.loads(last)
    return result["exit"], result["modules"]


@pytest.mark.parametrize(("args", "exit_code"), [
    (("lint", "policies"), 0),
    (("--help",), 0),
    (("version",), 0),
    (("check-config", "examples/profiles/policyd.yaml"), 0),
    (("test", "policies/tests"), 0),
])
def test_file_commands_never_import_the_kubernetes_client(
        args: tuple[str, ...], exit_code: int) -> None:
    code, modules = _imported(*args)
    assert code == exit_code
    assert [m for m in modules if m.split(".")[0] in ("kubernetes", "urllib3")] == []
    assert not any(m.startswith(("policyd.kube", "policyd.daemon", "policyd.devcluster"))
                   for m in modules)


def test_lint_and_help_stay_off_the_engine_and_numpy() -> None:
    for args in (("lint", "policies"), ("--help",)):
        _, modules = _imported(*args)
        assert [m for m in modules if m.split(".")[0] == "numpy"
                or m.startswith(("policyd.engine", "policyd.framework"))] == [], args
