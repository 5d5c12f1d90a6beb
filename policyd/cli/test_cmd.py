"""`policyd test PATH...`: run PolicyTest files (placeholder until the runner lands)."""

from __future__ import annotations

import typer


def test(
    paths: list[str] = typer.Argument(..., metavar="PATH..."),  # noqa: B008
) -> None:
    """Run PolicyTest files."""
    raise typer.Exit(2)
