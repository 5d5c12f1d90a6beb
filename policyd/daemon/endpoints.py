"""The daemon's HTTP(S) endpoints (/metrics, /healthz, /readyz, /livez, /debug/*):
secure serving unless --secure-port 0, plain HTTP only when asked for, every flag
checked (exit 2) and every address bound (exit 1) before either starts."""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from policyd.clock import Clock
from policyd.daemon.metrics import HealthServer, Metrics
from policyd.daemon.serving import REVIEW_TIMEOUT, DelegatedAuth, PathMatcher, server_tls_context
from policyd.daemon.serving_cert import ServingCertificate
from policyd.errors import PolicydError, RuntimeFailure
from policyd.kube.client import KubeClient

log = logging.getLogger("policyd.daemon")


class ServingFlags(Protocol):
    """The flags (`run.RunOptions`) that say what is served where."""

    bind_address: str
    secure_port: int
    always_allow_paths: tuple[str, ...]
    tls_cert_file: Path | None
    tls_private_key_file: Path | None
    metrics_bind_address: str


@dataclass(slots=True)
class Endpoints:
    """The servers, bound; `start_serving` starts them."""

    http: HealthServer | None = None  # plain HTTP (--metrics-bind-address)
    https: HealthServer | None = None  # secure serving (--secure-port)
    # Token and access reviews' own connection (closed by the daemon's shutdown).
    auth_client: KubeClient | None = None
    serving_cert: ServingCertificate | None = None  # --tls-cert-file's reloader


def bind_endpoints(o: ServingFlags, metrics: Metrics, ready: Callable[[], bool],
                   pages: dict[str, Any], client: KubeClient, clock: Clock,
                   new_tls: Callable[[ssl.SSLContext], None]) -> Endpoints:
    """Bind what the flags ask for; `pages` are HealthServer's page arguments, and
    `new_tls` is told each certificate the reloader loads after this first one."""
    out = Endpoints()
    secure: tuple[str, PathMatcher, ssl.SSLContext] | None = None
    if o.secure_port:  # every flag checked before anything is bound
        address = secure_address(o.bind_address, o.secure_port)
        if o.tls_cert_file is not None and o.tls_private_key_file is not None:
            # Stamped before the first load: a rotation during start-up is seen.
            out.serving_cert = ServingCertificate(
                o.tls_cert_file, o.tls_private_key_file, new_tls, clock=clock)
        # A specific bind address is also named in a self-signed certificate.
        bind_host = address.rpartition(":")[0].strip("[]")
        secure = (address, PathMatcher(o.always_allow_paths), server_tls_context(
            o.tls_cert_file, o.tls_private_key_file,
            () if ipaddress.ip_address(bind_host).is_unspecified else (bind_host,)))
    if o.metrics_bind_address:
        out.http = serve_metrics(o.metrics_bind_address, metrics, ready, **pages)
    if secure is not None:
        address, always, tls = secure
        # Its own connection: reviews spend neither the scheduler's QPS nor its pool.
        auth_client = out.auth_client = KubeClient.connect(
            replace(client.settings, timeout=REVIEW_TIMEOUT))

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            return auth_client.request("POST", path, body=body)

        auth = DelegatedAuth(post, always_allow=always)
        try:
            out.https = serve_metrics(address, metrics, ready, tls=tls, guard=auth.check,
                                      **pages)
        except PolicydError:
            if out.http is not None:  # bound, not started: release the port
                out.http.server.server_close()
            auth_client.close()
            raise
    return out


def start_serving(e: Endpoints, o: ServingFlags, endpoints: str) -> None:
    """Start the bound servers, saying what each serves (`endpoints`) and how."""
    if e.https is not None:
        e.https.start()
        log.info("serving %s over HTTPS on %s (%s certificate); all but %s need a "
                 "bearer token the API server authorizes", endpoints,
                 e.https.address, "given" if o.tls_cert_file else "self-signed",
                 ", ".join(o.always_allow_paths) or "nothing")
    if e.http is not None:
        e.http.start()
        log.warning("serving %s over plain HTTP without authentication on %s",
                    endpoints, e.http.address)


def secure_address(bind_address: str, port: int) -> str:
    """HOST:PORT of secure serving from --bind-address (an IP address; empty: every
    IPv4 address) and --secure-port; a bad value is a usage error naming the flag."""
    host = bind_address.strip() or "0.0.0.0"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise PolicydError(f"--bind-address {bind_address!r}: not an IP address "
                           "(0.0.0.0 or :: for every address)") from None
    if not 0 < port <= 65535:
        raise PolicydError(f"--secure-port {port}: not a port (1-65535, or 0 to disable "
                           "secure serving)")
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def serve_metrics(address: str, metrics: Metrics, ready: Callable[[], bool],
                  **kw: Any) -> HealthServer:
    """The HealthServer on `address`. A malformed address is a usage error (exit 2);
    an address this host refuses (in use, not ours, no permission) is a runtime
    failure (exit 1), and the message says which and names the address."""
    where = f"cannot serve {'HTTPS' if kw.get('tls') else 'metrics'} on {address!r}"
    try:
        return HealthServer(address, metrics, ready, **kw)
    except (ValueError, socket.gaierror) as exc:
        raise PolicydError(f"{where}: {exc}") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            reason = "the address is already in use (another process listens on it)"
        else:
            reason = exc.strerror or str(exc)
        raise RuntimeFailure(f"{where}: {reason}") from None
