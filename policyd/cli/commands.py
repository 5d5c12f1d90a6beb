"""Which command modules make up the CLI; each adds its commands to the app."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add every command group. Modules are imported lazily inside their commands."""
    app.command("version")(_version)
    from policyd.cli import check_config_cmd, lint_cmd, test_cmd

    app.command("lint")(lint_cmd.lint)
    app.command("check-config")(check_config_cmd.check_config)
    app.command("test")(test_cmd.test)
    from policyd.cli import schedule_cmds

    app.command("explain")(schedule_cmds.explain)
    app.command("simulate")(schedule_cmds.simulate)
    from policyd.cli import run_cmd

    app.command("run")(run_cmd.run)
    from policyd.cli import demo_cmd

    app.command("demo")(demo_cmd.demo)


def _version() -> None:
    """Print policyd's version and the Kubernetes version whose scheduler it matches."""
    from policyd import KUBERNETES_VERSION, __version__

    typer.echo(f"policyd {__version__} (matches kube-scheduler {KUBERNETES_VERSION})")
