"""`policyd lint` as CI uses it: formats, GITHUB_ACTIONS, --strict, exit codes, speed,
and no traceback for any bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from policyd.cli import lint_cmd
from policyd.lint.reporters import REPORTERS

ROOT = Path(__file__).resolve().parents[3]
POLICYD = Path(sys.executable).parent / "policyd"

GOOD = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: good}
spec:
  pluginName: Good
  filters:
    - {id: r, message: m, nodeLabels: {matchLabels: {env: prod}}}
"""
WARN = GOOD.replace("env: prod", "Kubernetes.io/hostname: x").replace(
    "Kubernetes.io", "kubernetes.io").replace("hostname", "HostName")
BAD = GOOD.replace("pluginName: Good", "pluginName: good")


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    a.command("lint")(lint_cmd.lint)

    @a.callback()
    def _root() -> None:
        """A group, so that the command is invoked by name as in policyd."""

    return a


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in (("good", GOOD), ("warn", WARN), ("bad", BAD)):
        out[name] = tmp_path / f"{name}.yaml"
        out[name].write_text(text)
    return out


def run(app: typer.Typer, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["lint", *args], env=env or {"GITHUB_ACTIONS": ""})
    return result.exit_code, result.stdout


def test_clean_exits_0(app: typer.Typer, files: dict[str, Path]) -> None:
    code, out = run(app, str(files["good"]))
    assert code == 0
    assert out == "1 file checked, no problems\n"


def test_errors_exit_1(app: typer.Typer, files: dict[str, Path]) -> None:
    code, out = run(app, str(files["bad"]), str(files["good"]))
    assert code == 1
    assert f"{files['bad']}:5:15: error:" in out and "[schema] (at spec.pluginName)" in out


def test_warnings_pass_unless_strict(app: typer.Typer, files: dict[str, Path]) -> None:
    assert run(app, str(files["warn"]))[0] == 0
    code, out = run(app, "--strict", str(files["warn"]))
    assert code == 1 and "--strict: warnings fail" in out


def test_missing_path_exits_2(app: typer.Typer, files: dict[str, Path], tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["lint", str(files["good"]), str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "no such file or directory" in result.stderr


def test_no_path_and_bad_format_are_usage_errors(app: typer.Typer,
                                                 files: dict[str, Path]) -> None:
    assert CliRunner().invoke(app, ["lint"]).exit_code == 2
    assert run(app, "--format", "xml", str(files["good"]))[0] == 2


@pytest.mark.parametrize("fmt", sorted(REPORTERS))
def test_every_format(app: typer.Typer, files: dict[str, Path], fmt: str) -> None:
    code, out = run(app, "--format", fmt, str(files["bad"]))
    assert code == 1
    if fmt in ("json", "sarif"):
        json.loads(out)
    if fmt == "github":
        assert out.startswith("::error file=")
        assert ",title=policyd lint (schema)::" in out
    if fmt == "sarif":
        assert json.loads(out)["runs"][0]["tool"]["driver"]["name"] == "policyd lint"


def test_github_format_is_automatic_on_actions(app: typer.Typer, files: dict[str, Path]) -> None:
    _, out = run(app, str(files["bad"]), env={"GITHUB_ACTIONS": "true"})
    assert out.startswith("::error file=")
    _, out = run(app, "--format", "json", str(files["bad"]), env={"GITHUB_ACTIONS": "true"})
    assert json.loads(out)["summary"]["errors"] == 1


BAD_FILES: list[tuple[str, bytes, str]] = [
    ("syntax", b"a: [1\n", "yaml-syntax"),
    ("tabs", b"a:\n\tb: 1\n", "yaml-tab"),
    ("duplicate", GOOD.encode() + b"kind: SchedulingPolicy\n", "yaml-duplicate-key"),
    ("bomb", b'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n' + b"".join(
        b"%s: &%s [%s]\n" % (chr(98 + i).encode(), chr(98 + i).encode(),
                             b",".join([b"*" + chr(97 + i).encode()] * 10)) for i in range(9)),
     "yaml-too-big"),
    ("deep", b"[" * 20000, "yaml-depth"),
    ("binary", bytes(range(256)), "file-binary"),
    ("latin1", b"a: \xe9t\xe9\n", "file-encoding"),
    ("empty", b"", "file-empty"),
    ("huge", b"a: b\n" * 100_000, "file-too-large"),
]


@pytest.mark.parametrize(("name", "data", "rule"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_files_are_one_problem_exit_1(app: typer.Typer, tmp_path: Path, name: str,
                                          data: bytes, rule: str) -> None:
    p = tmp_path / f"{name}.yaml"
    p.write_bytes(data)
    start = time.perf_counter()
    code, out = run(app, "--format", "json", str(p))
    assert time.perf_counter() - start < 2.0
    assert code == 1
    problems = json.loads(out)["problems"]
    assert [(x["rule"], x["level"]) for x in problems] == [(rule, "error")]
    assert problems[0]["line"] >= 1


# --- the real entry point -------------------------------------------------------


def _policyd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "GITHUB_ACTIONS": "", **(env or {})}
    return subprocess.run([str(POLICYD), *args], capture_output=True, text=True, cwd=ROOT,
                          env=full_env, timeout=60)


def test_entry_point_on_examples() -> None:
    proc = _policyd("lint", "--strict", "policies/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no problems" in proc.stdout


def test_entry_point_bomb_no_traceback(tmp_path: Path) -> None:
    p = tmp_path / "bomb.yaml"
    p.write_bytes(BAD_FILES[3][1])
    proc = _policyd("lint", str(p))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "yaml-too-big" in proc.stdout


def test_lint_does_not_import_the_kubernetes_client() -> None:
    code = ("import sys; from policyd.lint.runner import lint_paths; "
            "r = lint_paths(['policies/']); "
            "assert r.exit_code == 0; "
            "bad = sorted(m for m in sys.modules if m == 'kubernetes' or "
            "m.startswith('kubernetes.') or m.startswith('policyd.engine') or "
            "m.startswith('numpy')); print(bad)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
