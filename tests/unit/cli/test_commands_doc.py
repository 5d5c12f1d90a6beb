"""docs/commands.md is what the real command tree renders: a flag, a default or a help
text changed without regenerating the page fails here, and so does a command without
documented exit codes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from policyd.cli import commands_doc

ROOT = Path(__file__).resolve().parents[3]


def test_the_page_matches_the_command_tree() -> None:
    assert commands_doc.PAGE == ROOT / "docs" / "commands.md"
    assert commands_doc.render() == commands_doc.PAGE.read_text(), (
        "docs/commands.md differs from the CLI: run python -m policyd.cli.commands_doc")


@pytest.mark.parametrize("command", ["run", "explain", "audit", "dev up"])
def test_every_flag_of_the_real_help_is_in_its_section(command: str) -> None:
    # The real `--help`, as a user's terminal prints it, against the page's section.
    r = subprocess.run([sys.executable, "-m", "policyd", *command.split(), "--help"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", r.stdout)) - {"--help"}
    assert len(flags) >= 5
    page = commands_doc.PAGE.read_text()
    heading = f"`policyd {command}`\n"
    section = page.split(heading, 1)[1].split("\n#", 1)[0]
    table = [ln for ln in section.splitlines() if ln.startswith("| `")]
    missing = [f for f in sorted(flags) if not any(f in row.split(" | ")[0] for row in table)]
    assert missing == []


def test_a_command_without_exit_codes_is_an_error() -> None:
    codes = dict(commands_doc.EXIT_CODES)
    del codes["policyd simulate"]
    with pytest.raises(ValueError, match="policyd simulate"):
        commands_doc.render(codes)


def test_exit_codes_of_a_command_that_does_not_exist_are_an_error() -> None:
    codes = {**commands_doc.EXIT_CODES, "policyd frobnicate": ((0, "never"),)}
    with pytest.raises(ValueError, match="frobnicate"):
        commands_doc.render(codes)


def test_check_mode_exits_1_on_a_stale_page_and_never_writes(tmp_path: Path) -> None:
    stale = commands_doc.PAGE.read_text().replace("[default: 10259", "[default: 10250")
    assert stale != commands_doc.PAGE.read_text()
    page = tmp_path / "commands.md"
    page.write_text(stale)
    assert commands_doc.main(["--check", "--page", str(page)]) == 1
    assert page.read_text() == stale
    assert commands_doc.main(["--page", str(page)]) == 0
    assert commands_doc.main(["--check", "--page", str(page)]) == 0


def test_the_kubectl_plugin_commands_are_on_the_page() -> None:
    page = commands_doc.PAGE.read_text()
    for name in ("version", "explain", "simulate", "audit"):
        assert f"### `kubectl policyd {name}`" in page
