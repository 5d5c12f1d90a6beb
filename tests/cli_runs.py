"""A `policyd` command run in-process (typer's CliRunner) as the real error boundary
would end it: a PolicydError is its exit code and its one line, any other exception
but an exit is re-raised for pytest to show."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import typer
from typer.testing import CliRunner

from policyd.errors import PolicydError


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str  # or the PolicydError's line
    output: str  # stdout and stderr as a terminal shows them, or the PolicydError's line


def run_cli(app: typer.Typer, args: Sequence[str | Path],
            env: Mapping[str, str] | None = None) -> Ran:
    r = CliRunner().invoke(app, [str(a) for a in args], env=env)
    if isinstance(r.exception, PolicydError):
        line = str(r.exception)
        return Ran(r.exception.exit_code, r.stdout, line, line)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return Ran(r.exit_code, r.stdout, r.stderr, r.output)
