"""`policyd --help` and every command's help at 80 columns: descriptions whole, option
names whole, and flags not shown as taking a value."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from policyd.cli.app import register_commands
from policyd.cli.helpformat import summary


def _flat(text: str) -> str:
    return " ".join(text.split())


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(argv prefix, click command) for the root and every command under it."""
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


APP = register_commands()
COMMANDS = list(_commands(typer.main.get_command(APP)))
IDS = [" ".join(p) or "policyd" for p, _ in COMMANDS]


def _help(path: tuple[str, ...], **how: Any) -> str:
    result = CliRunner().invoke(APP, [*path, "--help"], **how)
    assert result.exit_code == 0, result.output
    return result.output


WAYS_TO_BE_80_WIDE = [
    pytest.param({"terminal_width": 80}, id="terminal_width"),
    pytest.param({"env": {"COLUMNS": "80"}}, id="COLUMNS"),
]


def test_every_command_is_covered() -> None:
    names = {p for p, _ in COMMANDS}
    for expected in [(), ("lint",), ("explain",), ("run",), ("dev",), ("dev", "up")]:
        assert expected in names


@pytest.mark.parametrize("how", WAYS_TO_BE_80_WIDE)
@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=IDS)
def test_help_fits_80_columns_without_cutting_anything(
    path: tuple[str, ...], cmd: Any, how: dict[str, Any]
) -> None:
    out = _help(path, **how)
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "<bool>" not in out
    assert "…" not in out
    # Every option and its negative form, whole.
    for param in cmd.params:
        for opt in (*param.opts, *param.secondary_opts):
            if opt.startswith("-"):
                assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", out), (opt, out)
    # The command's own description, every paragraph, whole.
    for paragraph in (cmd.help or "").split("\n\n"):
        assert _flat(paragraph) in _flat(out)


@pytest.mark.parametrize(
    ("path", "cmd"), [(p, c) for p, c in COMMANDS if hasattr(c, "commands")],
    ids=[i for i, (_, c) in zip(IDS, COMMANDS, strict=True) if hasattr(c, "commands")])
def test_command_lists_show_whole_descriptions(path: tuple[str, ...], cmd: Any) -> None:
    out = _flat(_help(path, terminal_width=80))
    for name, sub in cmd.commands.items():
        described = summary(sub.help)
        assert described, f"{name} has no description"
        assert f"{name} {described}" in out
        assert not described.endswith("...")


def test_help_flags_take_no_value() -> None:
    out = _help(("run",), terminal_width=80)
    line = next(ln for ln in out.splitlines() if "--leader-elect" in ln)
    assert "--leader-elect / --no-leader-elect" in line
    assert re.search(r"^\s*--help\s+Show this message", out, re.MULTILINE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One line.", "One line."),
        ("Broken\n    over lines.\n\n    Second paragraph.", "Broken over lines."),
        ("\n    Indented first.\n", "Indented first."),
        (None, ""),
    ],
)
def test_summary_is_the_first_paragraph_on_one_line(text: str | None, expected: str) -> None:
    assert summary(text) == expected
