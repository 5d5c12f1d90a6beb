"""`policyd run`: the scheduler daemon, in a cluster or against any kubeconfig.

Parsing only; the daemon is `policyd.daemon.run`. Exit codes: 0 after a graceful stop
(SIGTERM/SIGINT), 1 when the profile or its policies are invalid (before any request
to the API server) or the daemon cannot run here (its serving address is in use), 2
for usage errors (a bad flag, --feature-gates naming a gate policyd refuses, an
unreadable serving certificate).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from policyd.cli.options import FeatureGatesOpt, choice_enum, feature_gate_settings

# The keys of policyd.daemon.logs.FORMATTERS, named here rather than imported: the
# commands that never run the daemon must not import it (test_startup_imports), and
# tests/unit/cli/test_run_log_formats.py fails when the two lists differ.
LOG_FORMATS = ("text", "json")
if TYPE_CHECKING:
    LogFormat = str
else:
    LogFormat = choice_enum("LogFormat", LOG_FORMATS)
TEXT = LogFormat("text")
LOG_FORMAT_HELP = ("Log line format: text, or json as klog's JSON format writes it (what "
                   "kube-scheduler writes with logging format json: ts, caller, msg, v, "
                   "err, key/value pairs).")


CLUSTER_POLICIES_HELP = (
    "Also run the cluster's SchedulingPolicy objects, watched, as `clusterPolicies: "
    "true` in the profile does: the way to have them with a KubeSchedulerConfiguration "
    "file, which cannot say it.")


def run(
    config: Annotated[Path, typer.Option(
        # Checked by the profile's validation (one line, exit 2), not by click's
        # multi-line usage error, like check-config's argument.
        "--config", help="PolicydConfiguration profile (its `policies` are loaded with "
                         "it), or kube-scheduler's KubeSchedulerConfiguration v1 file.")],
    kubeconfig: Annotated[str | None, typer.Option(
        "--kubeconfig", envvar="KUBECONFIG",
        help="kubeconfig file; default: $KUBECONFIG, in-cluster, ~/.kube/config.")] = None,
    context: Annotated[str | None, typer.Option("--context",
                                                help="kubeconfig context.")] = None,
    bind_address: Annotated[str, typer.Option(
        "--bind-address",
        help="IP address of secure serving (0.0.0.0 or :: for every address).")
    ] = "0.0.0.0",
    secure_port: Annotated[int, typer.Option(
        "--secure-port", min=0, max=65535,
        help="HTTPS port of /metrics, /debug/* (bearer token checked with a TokenReview, "
             "access with a SubjectAccessReview) and /healthz, /readyz, /livez; 0 "
             "disables.")] = 10259,
    always_allow_paths: Annotated[str, typer.Option(
        "--authorization-always-allow-paths",
        help="Comma-separated paths served on the secure port without authentication "
             "or authorization (a trailing * makes a prefix).")
    ] = "/healthz,/readyz,/livez",
    tls_cert_file: Annotated[Path | None, typer.Option(
        "--tls-cert-file", help="PEM serving certificate (with its chain) of the secure "
                                "port; default: self-signed, generated at start.")] = None,
    tls_private_key_file: Annotated[Path | None, typer.Option(
        "--tls-private-key-file", help="PEM private key of --tls-cert-file.")] = None,
    metrics_bind_address: Annotated[str, typer.Option(
        "--metrics-bind-address",
        help="Also serve everything over plain HTTP WITHOUT authentication on HOST:PORT "
             "(no host: 127.0.0.1; [::1]:PORT for IPv6); default: not at all.")
    ] = "",
    verbosity: Annotated[int, typer.Option(
        "-v", "--v", min=0, max=10,
        help="Log verbosity: 0 operations, 1 binds, 2 every decision, 4 debug (watch "
             "events, API retries).")] = 0,
    log_format: Annotated[LogFormat, typer.Option("--log-format",
                                                  help=LOG_FORMAT_HELP)] = TEXT,
    leader_elect: Annotated[bool | None, typer.Option(
        "--leader-elect/--no-leader-elect",
        help="Lease-based leader election (default: the profile's "
             "leaderElection.leaderElect, true).")] = None,
    lease_namespace: Annotated[str | None, typer.Option(
        "--lease-namespace", help="Namespace of the Lease (default: the profile's "
                                  "leaderElection.resourceNamespace, kube-system).")] = None,
    lease_name: Annotated[str | None, typer.Option(
        "--lease-name", help="Name of the Lease (default: the profile's "
                             "leaderElection.resourceName, policyd).")] = None,
    identity: Annotated[str | None, typer.Option(
        "--identity", help="Leader election identity (default: HOSTNAME_uuid).")] = None,
    policies: Annotated[list[Path] | None, typer.Option(
        "--policies", help="Extra policy file or directory (repeatable).")
    ] = None,
    cluster_policies: Annotated[bool, typer.Option(
        "--cluster-policies", help=CLUSTER_POLICIES_HELP)] = False,
    reload_interval: Annotated[float, typer.Option(
        "--reload-interval", min=0.1, help="Seconds between checks of the profile and "
                                           "policy files for changes.")] = 2.0,
    shutdown_grace: Annotated[float, typer.Option(
        "--shutdown-grace-period", min=0.0,
        help="Seconds in-flight binds may take to finish after SIGTERM.")] = 30.0,
    binders: Annotated[int | None, typer.Option(
        "--parallel-binds", min=1, max=256,
        help="Concurrent bind calls (default: the profile's parallelism, 16).")] = None,
    qps: Annotated[float | None, typer.Option(
        "--kube-api-qps", help="Override clientConnection.qps.")] = None,
    burst: Annotated[int | None, typer.Option(
        "--kube-api-burst", min=1, help="Override clientConnection.burst.")] = None,
    feature_gates: FeatureGatesOpt = None,
    reports_interval: Annotated[float, typer.Option(
        "--reports-interval", min=0.0, help="Seconds between rounds of the audit kept as "
        "OpenReports (one Report per namespace, a ClusterReport), written by the leader "
        "when the openreports.io CRDs are served; 0 turns them off.")] = 10.0,
    reports_max_results: Annotated[int, typer.Option(
        "--reports-max-results", min=1, help="The most results one report holds (failures "
        "first, then warnings, then passes; the rest counted in an annotation).")] = 1000,
) -> None:
    """Run the scheduler: take the pods whose spec.schedulerName names one of the
    profile's profiles, bind them, and explain failures in events.

    Exit 0 after SIGTERM/SIGINT, 1 when the configuration is invalid (no request is
    sent to the API server) or a serving address is in use, 2 for usage errors."""
    # Before anything slow (the daemon's imports, loading the profile and policies): a
    # stop asked for while starting is a graceful stop too, not death by SIGTERM.
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    gates = feature_gate_settings(feature_gates)
    from policyd.daemon import logs
    from policyd.daemon.run import (
        Daemon,
        RunOptions,
        connect,
        freeze_startup_heap,
        load_config,
    )

    logs.setup(verbosity, log_format)
    options = RunOptions(
        config=config, kubeconfig=kubeconfig, context=context,
        bind_address=bind_address, secure_port=secure_port,
        always_allow_paths=tuple(p.strip() for p in always_allow_paths.split(",")
                                 if p.strip()),
        tls_cert_file=tls_cert_file, tls_private_key_file=tls_private_key_file,
        metrics_bind_address=metrics_bind_address, leader_elect=leader_elect,
        lease_namespace=lease_namespace, lease_name=lease_name, identity=identity,
        policies=list(policies or []), cluster_policies=cluster_policies,
        verbosity=verbosity,
        reload_interval=reload_interval, shutdown_grace=shutdown_grace, binders=binders,
        qps=qps, burst=burst, feature_gates=gates, reports_interval=reports_interval,
        reports_max_results=reports_max_results)
    loaded = load_config(options)  # InvalidConfig -> exit 1, before any connection
    daemon = Daemon(options, loaded, connect(options, loaded.settings),
                    on_first_sync=freeze_startup_heap)
    if stop.is_set():
        raise typer.Exit(0)  # stopped before it started: nothing to finish
    daemon.start()
    while not stop.wait(1.0):
        pass
    raise typer.Exit(daemon.shutdown())
