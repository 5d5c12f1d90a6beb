"""How `policyd --help` lists its commands: each one's whole first paragraph, wrapped.

click shortens a command's description to what fits on one line and cuts it
mid-sentence ("...") when it does not fit; policyd's descriptions wrap instead, so what
a command does stays readable at 80 columns. Help is plain text (typer's rich panels
cut long option names to fit their columns and show flags as taking a `<bool>`).
"""

from __future__ import annotations

import inspect
from typing import Any

from typer.core import TyperGroup


def summary(help_text: str | None) -> str:
    """The first paragraph of a command's help, on one line."""
    first = inspect.cleandoc(help_text or "").partition("\n\n")[0]
    return " ".join(first.split())


class PolicydGroup(TyperGroup):
    """A command group whose command list shows every description in full."""

    # ctx and formatter are click's Context and HelpFormatter, which typer vendors
    # privately; Any keeps this override compatible without importing them.
    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            rows.append((name, summary(cmd.short_help or cmd.help)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
