"""Every command's --format offers exactly the formats its registry renders: the names
in --help and the ones accepted come from the registry, and a name outside it is a
usage error (exit 2)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from typer.testing import CliRunner

from policyd.cli.app import register_commands
from policyd.cli.audit_cmd import AUDIT_FORMATS
from policyd.cli.options import one_of
from policyd.cli.schedule_cmds import DOCUMENT_FORMATS
from policyd.lint.reporters import REPORTERS
from policyd.policytest.render import RENDERERS as TEST_RENDERERS

APP = register_commands()

# command -> its formats' registry, and whether typer lists them as a choice
# (`<a|b>`) or the help text names them (`a, b or c`).
COMMANDS: dict[str, tuple[Sequence[str], bool]] = {
    "lint": (list(REPORTERS), False),
    "check-config": (list(REPORTERS), False),
    "test": (list(TEST_RENDERERS), False),
    "audit": (list(AUDIT_FORMATS), True),
    "explain": (["text", *DOCUMENT_FORMATS], True),
    "simulate": (["text", *DOCUMENT_FORMATS], True),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_names_the_registered_formats(command: str) -> None:
    names, is_choice = COMMANDS[command]
    out = CliRunner().invoke(APP, [command, "--help"], terminal_width=200).output
    line = next(x for x in out.splitlines() if "--format" in x)
    assert (f"<{'|'.join(names)}>" if is_choice else one_of(names)) in line, line


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_format_outside_the_registry_is_a_usage_error(command: str) -> None:
    result = CliRunner().invoke(APP, [command, "--format", "xml", "x"])
    assert result.exit_code == 2, result.output
    assert "'xml' is not one of" in result.output
