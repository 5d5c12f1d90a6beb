"""`policyd ui`: explain's and simulate's pages served live, with a what-if editor."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from policyd.cli.schedule_cmds import (
    ClusterInput,
    ClusterOpt,
    ClusterPoliciesOpt,
    ConfigOpt,
    ContextOpt,
    FieldValidation,
    KubeconfigOpt,
    PoliciesOpt,
    SeedOpt,
    add_pod_files,
    check_cluster_policies_flag,
    frameworks_for,
    load_input,
    require_paths,
)
from policyd.errors import EXIT_OK, EXIT_PROBLEMS, PolicydError

DEFAULT_LISTEN = "127.0.0.1:8377"


def parse_listen(value: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets); port 0 picks a free one."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise PolicydError(f"--listen {value!r}: give HOST:PORT, e.g. {DEFAULT_LISTEN}")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def ui(
    cluster: ClusterOpt = None,
    pods: Annotated[list[Path] | None, typer.Option(
        "--pods", help="Extra pods, as simulate's (repeatable).")] = None,
    config: ConfigOpt = None,
    policies: PoliciesOpt = None,
    seed: SeedOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    cluster_policies: ClusterPoliciesOpt = False,
    listen: Annotated[str, typer.Option(
        "--listen", help="HOST:PORT to serve on. The pages show what your credentials "
        "read, without asking who looks: keep it on loopback.")] = DEFAULT_LISTEN,
) -> None:
    """Serve simulate's and explain's pages (`-o html`), made from the cluster as it is
    at each request, with a what-if editor: change the policies' YAML, Apply, and the
    same page shows the grid with the edited policies (nothing is written anywhere).

    / is simulate (each pod links to its explain page), /explain?pod=NAMESPACE/NAME
    explain. Reads the live cluster like explain (--kubeconfig, --context) or the
    snapshot --cluster FILE (plus the --pods files); --config, --policies,
    --cluster-policies and --seed as explain's. The input is checked once at start:
    exit 2 when it cannot be read or a policy or profile is invalid. Runs until
    interrupted (exit 0)."""
    check_cluster_policies_flag(cluster_policies, cluster)
    require_paths(config, *(policies or []), *(pods or []))
    host, port = parse_listen(listen)

    def read() -> ClusterInput:
        source = load_input(cluster, kubeconfig, context, FieldValidation.strict)
        add_pod_files(source, list(pods or []), FieldValidation.strict)
        return source

    # Fail now, not at the first request: the cluster, the profile and the policies.
    frameworks_for(config, policies or [], seed, read().policies,
                   cluster_policies_flag=cluster_policies)
    from policyd.cli.ui_server import LOOPBACK_HOSTS, UiPages, UiSettings, serve

    pages = UiPages(UiSettings(read, config, list(policies or []), seed, cluster_policies))
    try:
        server = serve(pages, host, port)
    except OSError as exc:
        typer.echo(f"policyd: error: --listen {listen}: {exc.strerror or exc}", err=True)
        raise typer.Exit(EXIT_PROBLEMS) from None
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"policyd ui: serving http://{shown}:{server.server_address[1]}/ "
               "(Ctrl-C to stop)", err=True)
    if host not in LOOPBACK_HOSTS:
        typer.echo(f"policyd ui: warning: {host} is not loopback: anyone who reaches it "
                   "sees the cluster as your credentials show it", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    raise typer.Exit(EXIT_OK)
