"""Which command modules make up the CLI; each adds its commands to the app."""

from __future__ import annotations

import typer

from policyd import KUBERNETES_VERSION, __version__
from policyd.cli import (
    admit_cmd,
    audit_cmd,
    check_config_cmd,
    demo_cmd,
    diff_cmd,
    lint_cmd,
    run_cmd,
    schedule_cmds,
    test_cmd,
    ui_cmd,
    webhook_cmd,
)


def register(app: typer.Typer) -> None:
    """Add every command group. Modules are imported lazily inside their commands."""
    app.command("version")(_version)
    app.command("lint")(lint_cmd.lint)
    app.command("check-config")(check_config_cmd.check_config)
    app.command("test")(test_cmd.test)
    app.command("explain")(schedule_cmds.explain)
    app.command("simulate")(schedule_cmds.simulate)
    app.command("audit")(audit_cmd.audit)
    app.command("diff")(diff_cmd.diff)
    app.command("ui")(ui_cmd.ui)
    app.command("admit")(admit_cmd.admit)
    app.command("webhook")(webhook_cmd.webhook)
    app.command("run")(run_cmd.run)
    app.command("demo")(demo_cmd.demo)


def _version() -> None:
    """Print policyd's version and the Kubernetes version whose scheduler it matches."""
    typer.echo(f"policyd {__version__} (matches kube-scheduler {KUBERNETES_VERSION})")
