"""`policyd run --log-format` offers exactly the daemon's log formatters: the CLI names
them without importing the daemon (start-up time), so this is what ties the two."""

from __future__ import annotations

import io
import json
import logging

import pytest
from typer.testing import CliRunner

from policyd.cli import run_cmd
from policyd.cli.app import register_commands
from policyd.daemon import logs


def test_the_choices_are_the_formatters() -> None:
    assert tuple(logs.FORMATTERS) == run_cmd.LOG_FORMATS


@pytest.mark.parametrize("fmt", run_cmd.LOG_FORMATS)
def test_every_choice_sets_up_a_logger(fmt: str) -> None:
    out = io.StringIO()
    logs.setup(0, fmt, out)
    logging.getLogger(f"{logs.ROOT}.test").info("hello %s", fmt)
    line = out.getvalue().strip()
    assert f"hello {fmt}" in line
    if fmt == "json":
        assert json.loads(line)["msg"] == "hello json"


def test_an_unknown_format_is_a_usage_error() -> None:
    args = ["run", "--config", "p.yaml", "--log-format", "yaml"]
    result = CliRunner().invoke(register_commands(), args)
    assert result.exit_code == 2
    assert "'yaml' is not one of 'text', 'json'" in result.output
