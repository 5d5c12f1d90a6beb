"""`policyd webhook`: the mutating admission webhook (policyd.daemon.webhook), a
process of its own beside `policyd run` (its own Deployment in deploy/).

Parsing only. Exit codes: 0 after SIGTERM/SIGINT, 1 when the serving address is in
use, 2 for usage errors and an invalid profile or policy (nothing is served).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from policyd.cli.run_cmd import LOG_FORMAT_HELP, TEXT, LogFormat
from policyd.cli.schedule_cmds import ConfigOpt, PoliciesOpt, frameworks_for


def webhook(
    config: ConfigOpt = None,
    policies: PoliciesOpt = None,
    bind_address: Annotated[str, typer.Option(
        "--bind-address", help="IP address to serve on (0.0.0.0 or :: for every "
                               "address).")] = "0.0.0.0",
    secure_port: Annotated[int, typer.Option(
        "--secure-port", min=1, max=65535,
        help="HTTPS port of /mutate/<schedulerName>, /healthz, /readyz, /livez and "
             "/metrics.")] = 9443,
    tls_cert_file: Annotated[Path | None, typer.Option(
        "--tls-cert-file", help="PEM serving certificate (reloaded when the file "
                                "changes); default: self-signed, generated at start "
                                "(the API server will not trust it).")] = None,
    tls_private_key_file: Annotated[Path | None, typer.Option(
        "--tls-private-key-file", help="PEM private key of --tls-cert-file.")] = None,
    override_scheduler: Annotated[bool, typer.Option(
        "--override-scheduler", help="Also take pods that name another scheduler (left "
                                     "alone by default).")] = False,
    verbosity: Annotated[int, typer.Option(
        "-v", "--v", min=0, max=10, help="Log verbosity (4: every review).")] = 0,
    log_format: Annotated[LogFormat, typer.Option("--log-format",
                                                  help=LOG_FORMAT_HELP)] = TEXT,
) -> None:
    """Serve the admission webhook that makes policies visible to autoscalers.

    Each pod created in a namespace labelled `policyd.io/scheduler: <schedulerName>` gets
    that profile's scheduler name and every policy filter rule kube-scheduler can
    express in its required node affinity, as `policyd admit` prints it (see
    docs/autoscalers.md). One path per profile: /mutate/<schedulerName>.

    Exit 0 after SIGTERM/SIGINT, 1 when the address is in use, 2 for usage errors
    and an invalid profile or policy."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    from policyd.daemon import logs
    from policyd.daemon.webhook import AdmissionProfile, Reviewer
    from policyd.daemon.webhook_server import WebhookOptions, WebhookServer

    logs.setup(verbosity, log_format)
    frameworks = frameworks_for(config, policies or [], None)
    from policyd.policy.compiler import profile_policies

    reviewer = Reviewer({name: AdmissionProfile(name, profile_policies(fw))
                         for name, fw in frameworks.items()},
                        override_scheduler=override_scheduler)
    server = WebhookServer(WebhookOptions(bind_address, secure_port, tls_cert_file,
                                          tls_private_key_file), reviewer)
    server.start()
    try:
        stop.wait()
    finally:
        server.stop()
    raise typer.Exit(0)
