"""deploy/webhook/ says what the code does: the container runs `policyd webhook` with
flags it has, on the port and path the code serves, selecting namespaces by the label
the docs name, and can never stop pods from being created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from ruamel.yaml import YAML
from typer.testing import CliRunner

from policyd.cli import webhook_cmd
from policyd.daemon.webhook import MUTATE_PREFIX, OPT_IN_LABEL
from policyd.daemon.webhook_server import DEFAULT_SECURE_PORT

BASE = Path(__file__).resolve().parents[3] / "deploy" / "webhook"


def _docs(name: str) -> list[dict[str, Any]]:
    return list(YAML(typ="safe").load_all((BASE / name).read_text()))


def test_the_container_runs_policyd_webhook_with_flags_it_has() -> None:
    [deployment] = _docs("deployment.yaml")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["policyd", "webhook"]
    app = typer.Typer()
    app.command("webhook")(webhook_cmd.webhook)
    app.command("unused")(lambda: None)  # two commands: the command name is an argument
    help_text = CliRunner().invoke(app, ["webhook", "--help"], terminal_width=200).stdout
    for arg in container["args"]:
        assert arg.split("=")[0] in help_text, arg
    assert f"--secure-port={DEFAULT_SECURE_PORT}" in container["args"]
    assert container["ports"][0]["containerPort"] == DEFAULT_SECURE_PORT


def test_the_configuration_is_safe_and_matches_the_code() -> None:
    [config] = _docs("webhook.yaml")
    [hook] = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    assert hook["reinvocationPolicy"] == "IfNeeded" and hook["timeoutSeconds"] <= 10
    assert hook["clientConfig"]["service"]["path"] == f"{MUTATE_PREFIX}policyd"
    exprs = {e["key"]: e for e in hook["namespaceSelector"]["matchExpressions"]}
    assert exprs[OPT_IN_LABEL]["values"] == ["policyd"]
    assert "kube-system" in exprs["kubernetes.io/metadata.name"]["values"]
    assert hook["rules"][0]["operations"] == ["CREATE"]
