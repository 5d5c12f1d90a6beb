"""The typer app and its one error boundary.

Known errors (`PolicydError`) print one line with their location and exit with their
documented code; Ctrl-C exits 130; anything unexpected prints a short message and the
path of a file holding the traceback, never the traceback itself.
"""

from __future__ import annotations

import sys
import tempfile
import traceback

import typer

from policyd.cli.helpformat import PolicydGroup
from policyd.errors import EXIT_INTERRUPTED, PolicydError
from policyd.model.k8snames import printable


def new_app(name: str, help: str | None = None) -> typer.Typer:
    """A typer app as every policyd entry point makes one (policyd, kubectl-policyd)."""
    return typer.Typer(
        name=name,
        help=help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        cls=PolicydGroup,
        # Plain help: see policyd.cli.helpformat for what the rich panels get wrong.
        rich_markup_mode=None,
    )


app = new_app("policyd", "A Kubernetes scheduler whose rules are declarative YAML policies.")


@app.callback()
def _root() -> None:
    """A Kubernetes scheduler whose rules are declarative YAML policies."""


def register_commands() -> typer.Typer:
    """The app with every command added (once; tests and `main` both call this)."""
    if app.registered_commands:
        return app
    # Imported here so that `policyd lint` does not pay for modules it never uses.
    from policyd.cli import commands

    commands.register(app)
    from policyd.cli.dev import dev_app

    app.add_typer(dev_app, name="dev")
    return app


def main() -> None:
    run_with_boundary(register_commands())


def run_with_boundary(typer_app: typer.Typer, prog_name: str | None = None) -> None:
    """Run a typer app behind the error boundary (`policyd`, and `kubectl policyd`,
    whose errors are said the same way)."""
    try:
        typer_app(standalone_mode=True, prog_name=prog_name)
    except PolicydError as exc:
        # A message may quote a name or value from a file: its ESC never reaches the tty.
        print(f"policyd: error: {printable(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("policyd: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except Exception:  # the boundary: a bug, reported without dumping a traceback
        with tempfile.NamedTemporaryFile(
            "w", prefix="policyd-crash-", suffix=".txt", delete=False
        ) as f:
            traceback.print_exc(file=f)
        print(
            f"policyd: internal error: {sys.exc_info()[1]!r}; traceback written to {f.name}",
            file=sys.stderr,
        )
        sys.exit(70)
