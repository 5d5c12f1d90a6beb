"""The README's quick path for the offline tools: right after the two set-up commands,
a local `pip install .`, then commands that work on the repository's own files."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```sh\n(.*?)```", README, re.DOTALL)


def test_the_first_two_commands_are_the_make_targets() -> None:
    first = [ln.split("#")[0].strip() for ln in BLOCKS[0].splitlines()]
    assert first == ["make demo", "make test"]


def test_the_quick_path_comes_next_and_installs_from_the_checkout() -> None:
    quick = BLOCKS[1].splitlines()
    assert 2 <= len(quick) <= 5
    assert quick[0] == "pip install ."
    assert all(ln.startswith("policyd ") for ln in quick[1:])
    assert "policyd explain" in BLOCKS[1]
    # Nothing else (such as the long introduction) comes between the two blocks.
    between = README.split(BLOCKS[0], 1)[1].split(BLOCKS[1], 1)[0]
    assert len(between) < 800 and "PyPI" in between


@pytest.mark.parametrize("line", [ln for ln in BLOCKS[1].splitlines()
                                  if ln.startswith("policyd ")])
def test_quick_path_commands_run_on_the_repositorys_files(line: str) -> None:
    args = shlex.split(line)[1:]
    for i, arg in enumerate(args[:-1]):
        if arg in ("--cluster", "--pods", "--policies"):
            assert (ROOT / args[i + 1]).exists()
    r = subprocess.run([sys.executable, "-m", "policyd", *args], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert "Traceback" not in r.stderr
    if args[0] == "simulate":  # the README says why: jobs/huge fits nowhere
        assert r.returncode == 1 and "jobs/huge" in r.stdout and "exits 1" in README
    else:
        assert r.returncode == 0, r.stderr
        assert "->" in r.stdout
