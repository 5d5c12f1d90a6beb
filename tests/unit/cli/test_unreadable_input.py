"""One contract for input that is there but cannot be read, in `lint`, `check-config`
and `test`: exit 2 (docs/commands.md, policyd/errors.py), the path named, never a silent skip.

"Cannot be read" for real: tests run as root, who reads any file, so the command runs
without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv), where `chmod 000` holds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from policyd.errors import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[3]
POLICY = (ROOT / "policies" / "hw-encrypt.yaml").read_text()
POLICY_TEST = (ROOT / "policies" / "tests" / "hw-encrypt.test.yaml").read_text()
PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
policies: [policies]
profiles:
- schedulerName: policyd
"""


def policyd(*args: str, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    prefix: list[str] = []
    if unprivileged and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: root reads chmod 000 files")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    env = {**os.environ, "GITHUB_ACTIONS": "",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([*prefix, sys.executable, "-m", "policyd", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


def tree(tmp_path: Path) -> Path:
    """tmp/policies/hw-encrypt.yaml, tmp/policies/tests/hw-encrypt.test.yaml,
    tmp/profile.yaml listing the policies directory."""
    d = tmp_path / "policies"
    (d / "tests").mkdir(parents=True)
    (d / "hw-encrypt.yaml").write_text(POLICY)
    (d / "tests" / "hw-encrypt.test.yaml").write_text(POLICY_TEST)
    (tmp_path / "profile.yaml").write_text(PROFILE)
    return d


def _unreadable_file(d: Path) -> tuple[Path, str]:
    bad = d / "locked.yaml"
    bad.write_text(POLICY.replace("HwEncrypt", "Locked").replace("hw-encrypt", "locked"))
    bad.chmod(0)
    return bad, "Permission denied"


def _unreadable_directory(d: Path) -> tuple[Path, str]:
    bad = d / "team"
    bad.mkdir()
    (bad / "team.yaml").write_text(POLICY.replace("HwEncrypt", "Team"))
    bad.chmod(0)
    return bad, "cannot read directory: Permission denied"


def _dangling_symlink(d: Path) -> tuple[Path, str]:
    bad = d / "moved.yaml"
    bad.symlink_to("../elsewhere/moved.yaml")
    return bad, "dangling symlink"


def _symlink_loop(d: Path) -> tuple[Path, str]:
    (d / "b").symlink_to("a")
    bad = d / "a"
    bad.symlink_to("b")
    return bad, "symlink loop"


def _link_to_parent(d: Path) -> tuple[Path, str]:
    bad = d / "tests" / "all"
    bad.symlink_to("..")
    return bad, "symlink loop"


Breaker = Callable[[Path], tuple[Path, str]]
BREAKERS: dict[str, tuple[Breaker, bool]] = {  # name: (make it, needs no DAC override)
    "unreadable file": (_unreadable_file, True),
    "unreadable directory": (_unreadable_directory, True),
    "dangling symlink": (_dangling_symlink, False),
    "symlink loop": (_symlink_loop, False),
    "directory link to its parent": (_link_to_parent, False),
}


@pytest.mark.parametrize("command", ["lint", "check-config", "test"])
@pytest.mark.parametrize("broken", BREAKERS, ids=BREAKERS.keys())
def test_unreadable_input_exits_2_naming_the_path(tmp_path: Path, command: str,
                                                  broken: str) -> None:
    d = tree(tmp_path)
    make, unprivileged = BREAKERS[broken]
    bad, reason = make(d)
    target = {"lint": d, "check-config": tmp_path / "profile.yaml", "test": d}[command]
    proc = policyd(command, str(target), unprivileged=unprivileged)
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_USAGE, out
    assert f"{bad}: " in out and reason in out, out
    assert "internal error" not in out and "Traceback" not in out


@pytest.mark.parametrize("command", ["lint", "check-config", "test"])
def test_the_named_file_itself_unreadable_exits_2(tmp_path: Path, command: str) -> None:
    d = tree(tmp_path)
    named = {"lint": d / "hw-encrypt.yaml", "check-config": tmp_path / "profile.yaml",
             "test": d / "tests" / "hw-encrypt.test.yaml"}[command]
    named.chmod(0)
    proc = policyd(command, str(named), unprivileged=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_USAGE, out
    assert str(named) in out and "Permission denied" in out


@pytest.mark.parametrize("command", ["lint", "check-config", "test"])
def test_the_same_tree_without_the_breakage_passes(tmp_path: Path, command: str) -> None:
    d = tree(tmp_path)
    target = {"lint": d, "check-config": tmp_path / "profile.yaml", "test": d}[command]
    proc = policyd(command, str(target), unprivileged=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
