"""Prometheus metrics and the /metrics, /healthz, /readyz (and /debug/...) endpoints.

Names follow kube-scheduler's where one exists (`scheduler_schedule_attempts_total`
becomes `policyd_schedule_attempts_total`, same labels), so dashboards carry over.
Each daemon has its own registry: several daemons can run in one process (tests).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from policyd.daemon.serving import Refusal
from policyd.framework.runtime import Framework

log = logging.getLogger("policyd.daemon.metrics")

# A TLS client must finish its handshake (and send its request) within this long:
# a connection that says nothing holds one thread, not the server.
CONNECTION_TIMEOUT = 10.0

# (path, Authorization header) -> None to serve it, else the refusal to send
# (policyd.daemon.serving.DelegatedAuth.check).
Guard = Callable[[str, str | None], Refusal | None]

# kube-scheduler's buckets for scheduling latency: 1 ms .. ~16 s (exponential).
_LATENCY_BUCKETS = tuple(0.001 * 2**i for i in range(15))
_ALGO_BUCKETS = tuple(0.0001 * 2**i for i in range(16))

# `policyd_config_reloads_total{result}`: in force; in force except for fields that
# need a restart (named in a Warning event); rejected, the previous one still runs.
RELOAD_APPLIED = "applied"
RELOAD_RESTART_REQUIRED = "applied_restart_required"
RELOAD_REJECTED = "rejected"


class Metrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.schedule_attempts = Counter(
            "policyd_schedule_attempts_total",
            "Scheduling attempts by result (scheduled, unschedulable, error) and profile.",
            ["result", "profile"], registry=r)
        self.e2e_latency = Histogram(
            "policyd_e2e_scheduling_duration_seconds",
            "From a pod's first entry in the queue to its successful binding.",
            ["profile"], buckets=_LATENCY_BUCKETS, registry=r)
        self.attempt_latency = Histogram(
            "policyd_scheduling_attempt_duration_seconds",
            "One scheduling attempt, by result and profile.",
            ["result", "profile"], buckets=_LATENCY_BUCKETS, registry=r)
        self.algorithm_latency = Histogram(
            "policyd_scheduling_algorithm_duration_seconds",
            "Plugin evaluation time of one cycle (PreFilter to host selection).",
            ["profile"], buckets=_ALGO_BUCKETS, registry=r)
        self.extension_point_latency = Histogram(
            "policyd_framework_extension_point_duration_seconds",
            "Time spent in each extension point's plugins, per profile.",
            ["extension_point", "profile"], buckets=_ALGO_BUCKETS, registry=r)
        self.plugin_latency = Histogram(
            "policyd_plugin_execution_duration_seconds",
            "Time one plugin took at one extension point, per profile (plugin evaluation "
            "time: which plugin makes scheduling slow).",
            ["plugin", "extension_point", "profile"], buckets=_ALGO_BUCKETS, registry=r)
        self.pending_pods = Gauge(
            "policyd_pending_pods", "Pods in each scheduling queue.", ["queue"], registry=r)
        self.bind_errors = Counter(
            "policyd_bind_errors_total",
            "Failed binding attempts, by reason (HTTP status or error class).",
            ["reason"], registry=r)
        self.binding_latency = Histogram(
            "policyd_binding_duration_seconds", "Binding calls, retries included.",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.events_emitted = Counter(
            "policyd_events_total", "Events posted, by reason.", ["reason"], registry=r)
        self.leader = Gauge("policyd_leader", "1 while this replica holds the lease.",
                            registry=r)
        self.config_reloads = Counter(
            "policyd_config_reloads_total",
            "Profile/policy reloads by result: applied, applied_restart_required (some "
            "changed fields wait for a restart), rejected.", ["result"], registry=r)
        self.watch_errors = Counter(
            "policyd_watch_errors_total", "Watch/list failures by resource.", ["resource"],
            registry=r)
        self.events_dropped = Counter(
            "policyd_events_dropped_total",
            "Event and condition writes given up, by reason: queue_full (posting fell "
            "behind; binds never wait for it), retries_exhausted (transient failures "
            "or a Retry-After beyond the retry window), rejected (a final API error).",
            ["reason"], registry=r)
        self.objects_skipped = Counter(
            "policyd_objects_skipped_total",
            "Watched objects or watch lines ignored, by resource and reason: "
            "bad_watch_line (not a watch event: the watch reconnects), invalid (does "
            "not decode), hostile_labels (too many labels, or keys/values the API "
            "server would never accept).", ["resource", "reason"], registry=r)

        # kube-scheduler's scheduler_preemption_attempts_total and
        # scheduler_preemption_victims (pkg/scheduler/metrics), same meaning and buckets.
        self.preemption_attempts = Counter(
            "policyd_preemption_attempts_total",
            "Preemption attempts: cycles in which DefaultPreemption's PostFilter ran, "
            "whatever it found.", registry=r)
        self.preemption_victims = Histogram(
            "policyd_preemption_victims", "Number of selected preemption victims.",
            buckets=tuple(float(2**i) for i in range(7)), registry=r)
        self.policy_violations = Counter(
            "policyd_policy_violations_total",
            "Would-be rejections by policies in Audit mode, by policy (metadata.name) and "
            "rule (its id): counted once per pod and rule, however often the pod is "
            "retried, when the rule would have rejected at least one of the nodes the "
            "enforced filters left feasible.", ["policy", "rule"], registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def parse_bind_address(address: str) -> tuple[str, int, socket.AddressFamily]:
    """`HOST:PORT` as kube-scheduler reads its bind addresses: an IPv6 address in
    brackets (`[::1]:10251`, `[::]:10251` for every address), an IPv4 address or a
    host name, and an empty host for loopback: this address serves in plain HTTP, so
    only an explicit host exposes it beyond this machine. (host, port, family), or
    ValueError saying what is wrong."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError("expected HOST:PORT with a port from 0 to 65535 "
                         "(an IPv6 address in brackets: [::1]:10251)")
    port = int(port_text)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{host!r} in brackets is not an IPv6 address") from None
        return host, port, socket.AF_INET6
    if ":" in host or "[" in host or "]" in host:
        raise ValueError("an IPv6 address goes in brackets: [ADDRESS]:PORT")
    return host or "127.0.0.1", port, socket.AF_INET


class _Server(ThreadingHTTPServer):
    """The HTTP server on the address family of its address; `[::]` also takes IPv4
    connections, as Go's listener (and so kube-scheduler) does. With `tls`, each
    connection's handshake happens in its own thread, so a client that stalls it
    cannot hold up the others."""

    daemon_threads = True

    def __init__(self, host: str, port: int, family: socket.AddressFamily,
                 handler: type[BaseHTTPRequestHandler],
                 tls: ssl.SSLContext | None = None) -> None:
        self.address_family = family
        self.tls = tls
        super().__init__((host, port), handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(CONNECTION_TIMEOUT)
        try:
            conn = self.tls.wrap_socket(request, server_side=True)
        except OSError as exc:  # ssl.SSLError included: plain HTTP, bad client, timeout
            log.debug("TLS handshake with %s failed: %s", client_address, exc)
            return
        try:
            super().finish_request(conn, client_address)
        finally:
            conn.close()

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6 and self.server_address[0] == "::":
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


# A POST route: (path, body) -> (status, body, content type).
PostHandler = Callable[[str, bytes], tuple[int, bytes, str]]
MAX_POST_BYTES = 8 << 20  # an AdmissionReview of the largest pod the API server stores


class HealthServer:
    """Serves /metrics, /healthz and /livez (`health()` lists no problem), /readyz
    (caches synced) and the /debug pages; over HTTPS with `tls`, and each request
    first past `guard` when one is given (secure serving). `post` routes POSTs by path
    prefix (the admission webhook's reviews), past the guard too."""

    def __init__(self, address: str, metrics: Metrics, ready: Callable[[], bool],
                 before_scrape: Callable[[], None] = lambda: None,
                 debug: Mapping[str, Callable[[], Any]] | None = None,
                 health: Callable[[], list[str]] = list,
                 tls: ssl.SSLContext | None = None, guard: Guard | None = None,
                 post: Mapping[str, PostHandler] | None = None) -> None:
        host, port, family = parse_bind_address(address)
        metrics_ref, ready_ref, scrape_ref, health_ref = metrics, ready, before_scrape, health
        # /debug/<name> -> a callable giving JSON-ready data (queue, metrics cache).
        debug_ref = dict(debug or {})
        guard_ref = guard
        post_ref = dict(post or {})

        class Handler(BaseHTTPRequestHandler):
            def _refused(self, path: str) -> bool:
                if guard_ref is None:
                    return False
                refusal = guard_ref(path, self.headers.get("Authorization"))
                if refusal is None:
                    return False
                self._send(refusal.status, f"{refusal.message}\n".encode(), "text/plain")
                return True

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0]
                route = next((h for prefix, h in post_ref.items()
                              if path.startswith(prefix)), None)
                if route is None:
                    self._send(404, b"not found", "text/plain")
                    return
                if self._refused(path):
                    return
                try:
                    length = int(self.headers.get("Content-Length") or "0")
                except ValueError:
                    length = -1
                if not 0 <= length <= MAX_POST_BYTES:
                    self._send(413 if length > 0 else 411, b"bad Content-Length",
                               "text/plain")
                    return
                try:
                    code, body, ctype = route(path, self.rfile.read(length))
                except Exception as exc:  # a handler's bug must not take the server down
                    log.exception("POST %s failed", path)
                    code, body, ctype = 500, f"{type(exc).__name__}".encode(), "text/plain"
                self._send(code, body, ctype)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if self._refused(path):
                    return
                if path == "/metrics":
                    scrape_ref()
                    self._send(200, metrics_ref.render(), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/livez"):
                    try:
                        problems = health_ref()
                    except Exception as exc:  # a broken check is no proof of health
                        problems = [f"health check: {type(exc).__name__}: {exc}"]
                    if problems:
                        # The apiserver healthz format: one [-] line per failed check.
                        failed = "".join(f"[-]{p}\n" for p in problems)
                        self._send(500, f"{failed}healthz check failed\n".encode(),
                                   "text/plain")
                    else:
                        self._send(200, b"ok", "text/plain")
                elif path == "/readyz":
                    ok = ready_ref()
                    self._send(200 if ok else 503, b"ok" if ok else b"caches not synced",
                               "text/plain")
                elif path in debug_ref:
                    try:
                        body = json.dumps(debug_ref[path](), indent=1, default=str).encode()
                    except Exception as exc:  # a debug page must never take the server down
                        log.warning("%s failed: %r", path, exc)
                        self._send(500, f"{type(exc).__name__}: {exc}".encode(),
                                   "text/plain")
                        return
                    self._send(200, body, "application/json")
                else:
                    self._send(404, b"not found", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http: " + format, *args)

        self.server = _Server(host, port, family, Handler, tls)
        self.secure = tls is not None
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        name="policyd-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def address(self) -> str:
        """Where it listens, as HOST:PORT ([HOST]:PORT for IPv6)."""
        host = str(self.server.server_address[0])
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# Framework methods that run one extension point's plugins, and that point's name. Named
# by reference, not by string, so a renamed runner method fails type checking here.
_TIMED_METHODS: dict[Callable[..., Any], str] = {
    Framework.run_pre_filter: "PreFilter", Framework.run_filters: "Filter",
    Framework.run_filters_fast: "Filter", Framework.run_filter_diagnosis: "Filter",
    Framework.run_pre_score: "PreScore", Framework.run_score: "Score",
    Framework.run_score_fast: "Score", Framework.run_audits_fast: "Audit",
    Framework.run_reserve: "Reserve",
    Framework.run_unreserve: "Unreserve", Framework.run_pre_bind: "PreBind",
    Framework.run_pre_bind_pre_flight: "PreBindPreFlight",
}


# The share of scheduling cycles whose plugins are each timed, as kube-scheduler's
# pluginMetricsSamplePercent (10): two histogram observations per plugin per cycle cost
# more than some plugins themselves. Extension points are timed in every cycle.
PLUGIN_METRICS_SAMPLE = 0.1


def instrument(fw: Framework, metrics: Metrics, *,
               plugin_sample: float = PLUGIN_METRICS_SAMPLE,
               rng: random.Random | None = None) -> None:
    """Time each extension point of `fw` into `metrics` by shadowing the runner's
    methods on this instance (the Framework class itself is untouched), and each
    plugin in a `plugin_sample` share of the cycles (decided as PreFilter, the first
    extension point of every cycle, begins)."""
    if fw.__dict__.get("_policyd_timed") is metrics:
        return
    profile = fw.profile_name
    timer = _plugin_timer(metrics, profile)
    draw = (rng or random.Random()).random

    def sampled(run: Callable[..., Any]) -> Callable[..., Any]:
        def run_pre_filter(*args: Any, **kwargs: Any) -> Any:
            fw.plugin_timer = timer if draw() < plugin_sample else None
            return run(*args, **kwargs)

        return run_pre_filter

    for method, point in _TIMED_METHODS.items():
        observe = metrics.extension_point_latency.labels(point, profile).observe
        timed = _timed(method.__get__(fw), observe)
        if method is Framework.run_pre_filter:
            timed = sampled(timed)
        setattr(fw, method.__name__, timed)
    fw.plugin_timer = None
    fw.__dict__["_policyd_timed"] = metrics


def label_children(metric: Any) -> Callable[..., Any]:
    """`metric.labels(*values)`, each child looked up once: `labels()` takes the metric's
    lock and builds a key on every call, which on a per-pod or per-plugin path adds up.
    Children live as long as the metric, so caching them changes nothing exported."""
    children: dict[tuple[str, ...], Any] = {}

    def child(*values: str) -> Any:
        found = children.get(values)
        if found is None:
            found = children[values] = metric.labels(*values)
        return found

    return child


def _plugin_timer(metrics: Metrics, profile: str) -> Callable[[str, str, float], None]:
    """The Framework's per-plugin callback."""
    child = label_children(metrics.plugin_latency)

    def observe(point: str, plugin: str, seconds: float) -> None:
        child(plugin, point, profile).observe(seconds)

    return observe


def _timed(fn: Callable[..., Any], observe: Callable[[float], None]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            observe(time.perf_counter() - t0)

    return wrapper
