"""docs/getting-started.md runs as a newcomer copies it: every ```sh block, in order, in
one shell, in an empty directory, with this checkout's `policyd` on PATH. The files the
page has the user create are made by the page's own heredocs, so what runs here is the
page, word for word. The README's first-policy blocks are the page's own, so they are
run too."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "getting-started.md"
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.DOTALL | re.MULTILINE)

# Per block of the page, in order: its last command's exit code and what its output
# must hold. A block added to the page without an entry here fails the count check.
EXPECTED: list[tuple[int, tuple[str, ...]]] = [
    (0, ("1 file checked, no problems",)),
    (0, ("PASS", "ml pods only pass ml nodes", "2 passed, 0 failed")),
    (0, ("Pod default/trainer -> ml-1", "general-1  MlPool: node(s) are not in the ml pool")),
    (1, ("Pod default/trainer-xl is unschedulable:",
         "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) are not in the ml pool.")),
    (1, ("default/trainer  ", "ml-1", "1 scheduled, 1 unschedulable")),
]


def blocks(text: str) -> list[str]:
    return SH_BLOCK.findall(text)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, str]]:
    """Each block's exit code and output, the blocks run one after another in one bash."""
    work = tmp_path_factory.mktemp("getting-started")
    bin_dir = work.parent / f"{work.name}-bin"
    bin_dir.mkdir()
    shim = bin_dir / "policyd"  # this checkout's policyd, as `pip install .` would put it
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m policyd "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    script = "".join(f"{block}echo \"@@block {i} exit $?@@\"\n"
                     for i, block in enumerate(blocks(PAGE.read_text())))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "GITHUB_ACTIONS": ""}
    bash = shutil.which("bash")
    assert bash is not None
    r = subprocess.run([bash, "-c", script], cwd=work, env=env, capture_output=True,
                       text=True, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    parts = re.split(r"@@block (\d+) exit (\d+)@@\n", r.stdout)
    # re.split gives [out0, i0, rc0, out1, i1, rc1, ..., tail]
    return [(int(parts[k + 2]), parts[k]) for k in range(0, len(parts) - 1, 3)]


def test_every_block_has_an_expectation() -> None:
    assert len(blocks(PAGE.read_text())) == len(EXPECTED)


def test_the_page_uses_only_offline_commands() -> None:
    commands = [ln for b in blocks(PAGE.read_text()) for ln in b.splitlines()
                if ln.startswith("policyd ")]
    assert commands
    for line in commands:
        assert "--cluster" in line or line.split()[1] in ("lint", "test"), line


@pytest.mark.parametrize("index", range(len(EXPECTED)))
def test_each_block_runs_as_the_page_says(
        outputs: list[tuple[int, str]], index: int) -> None:
    assert len(outputs) == len(EXPECTED), outputs
    code, out = outputs[index]
    want_code, want_text = EXPECTED[index]
    assert code == want_code, out
    for text in want_text:
        assert text in out, out


def test_the_readmes_first_policy_is_the_pages() -> None:
    # The README's first-policy section shows the start of this page: each of its blocks
    # must be one of the page's, so the test above runs it too.
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Your first policy", 1)[1].split("\n## ", 1)[0]
    shown = blocks(section)
    assert len(shown) >= 3, "the README lost its first policy, its test or its explain"
    page = blocks(PAGE.read_text())
    assert shown == page[:len(shown)]
