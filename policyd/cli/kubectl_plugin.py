"""`kubectl policyd`: the live commands as a kubectl plugin.

kubectl runs `kubectl-policyd` from PATH for `kubectl policyd ...`, with the words
after `policyd` as arguments and its environment, but none of its own flags: kubectl
parses none of them for a plugin and passes no kubeconfig (k8s.io/kubectl
pkg/cmd/plugin.go, HandlePluginCommand). So the plugin reads `--kubeconfig`,
`--context`, `-n` and `-o`, and $KUBECONFIG, itself, which the commands already do.

It is the same typer commands as `policyd`, restricted to those that read a live
cluster; a new one is one line in LIVE_COMMANDS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from policyd.cli import audit_cmd, commands, diff_cmd, schedule_cmds, ui_cmd
from policyd.cli.app import new_app, run_with_boundary

PROG_NAME = "kubectl policyd"
# The commands that answer about the cluster kubectl points at.
LIVE_COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("explain", schedule_cmds.explain),
    ("simulate", schedule_cmds.simulate),
    ("audit", audit_cmd.audit),
    ("diff", diff_cmd.diff),
    ("ui", ui_cmd.ui),
)


def build_app() -> typer.Typer:
    """The plugin's typer app: `version` and the live commands."""
    app = new_app(PROG_NAME)

    @app.callback()
    def _root() -> None:
        """policyd's scheduling answers about the cluster kubectl points at: why a pod
        is pending (explain), where pending pods would go (simulate), which running pods
        break a policy (audit) or would under a change (diff), and their pages served
        live with a what-if editor (ui). Flags as kubectl: --kubeconfig, --context, -n,
        -o json|yaml."""

    app.command("version")(commands._version)
    for name, command in LIVE_COMMANDS:
        app.command(name)(command)
    return app


def main() -> None:
    run_with_boundary(build_app(), prog_name=PROG_NAME)


if __name__ == "__main__":
    main()
