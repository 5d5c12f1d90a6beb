"""The admission webhook's process: HTTPS on --bind-address:--secure-port with the
certificate of --tls-cert-file/--tls-private-key-file (reloaded when the files change,
as `policyd run`'s), AdmissionReviews at /mutate/<schedulerName>, /healthz, /livez,
/readyz and /metrics for the kubelet's probes and Prometheus.

No delegated authentication: the API server calls admission webhooks without a
bearer token unless configured to, and a review reveals nothing the caller did not
send. Binding and certificate problems are reported before anything is served.
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

from policyd.clock import REAL_CLOCK, Clock
from policyd.daemon.endpoints import secure_address, serve_metrics
from policyd.daemon.metrics import Metrics
from policyd.daemon.serving import server_tls_context
from policyd.daemon.serving_cert import ServingCertificate
from policyd.daemon.webhook import MUTATE_PREFIX, Reviewer

log = logging.getLogger("policyd.webhook")

DEFAULT_SECURE_PORT = 9443  # controller-runtime's webhook port, what charts expect


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    bind_address: str = "0.0.0.0"
    secure_port: int = DEFAULT_SECURE_PORT
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None


class WebhookServer:
    """Bound at construction (usage errors and a port in use raise PolicydError);
    `start` serves, `stop` stops."""

    def __init__(self, options: WebhookOptions, reviewer: Reviewer, *,
                 clock: Clock = REAL_CLOCK) -> None:
        address = secure_address(options.bind_address, options.secure_port)
        host = address.rpartition(":")[0].strip("[]")
        extra = () if ipaddress.ip_address(host).is_unspecified else (host,)
        self.cert: ServingCertificate | None = None
        if options.tls_cert_file is not None and options.tls_private_key_file is not None:
            self.cert = ServingCertificate(options.tls_cert_file,
                                           options.tls_private_key_file, self._serve_with,
                                           clock=clock)
        tls = server_tls_context(options.tls_cert_file, options.tls_private_key_file,
                                 extra)
        self.reviewer = reviewer
        self.metrics = Metrics()
        self.https = serve_metrics(address, self.metrics, lambda: True, tls=tls,
                                   post={MUTATE_PREFIX: reviewer.review_route})
        self._stop = threading.Event()
        self._cert_thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.https.port

    def _serve_with(self, tls: ssl.SSLContext) -> None:
        self.https.server.tls = tls

    def start(self) -> None:
        self.https.start()
        if self.cert is not None:
            self._cert_thread = threading.Thread(
                target=self.cert.run, args=(self._stop,), name="policyd-serving-cert",
                daemon=True)
            self._cert_thread.start()
        log.info("admission webhook serving %s<profile> for %s over HTTPS on %s (%s "
                 "certificate)", MUTATE_PREFIX, ", ".join(sorted(self.reviewer.profiles)),
                 self.https.address, "given" if self.cert is not None else "self-signed")

    def stop(self) -> None:
        self._stop.set()
        self.https.stop()
