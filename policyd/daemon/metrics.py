"""Prometheus metrics and the /metrics, /healthz, /readyz (and /debug/...) endpoints.

A metric kube-scheduler v1.36 serves that policyd means the same by has kube-scheduler's
name, type, labels and buckets (`scheduler_schedule_attempts_total{result,profile}`), so
dashboards and alerts written for kube-scheduler work unchanged; the rest keep the
`policyd_` prefix. /metrics/resources is `pod_resources`. Each daemon has its own
registry: several daemons can run in one process (tests).
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
from policyd.framework.status import Code, Status

log = logging.getLogger("policyd.daemon.metrics")

# A TLS client must finish its handshake (and send its request) within this long:
# a connection that says nothing holds one thread, not the server.
CONNECTION_TIMEOUT = 10.0

# (path, Authorization header) -> None to serve it, else the refusal to send
# (policyd.daemon.serving.DelegatedAuth.check).
Guard = Callable[[str, str | None], Refusal | None]

def _exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus client_golang's ExponentialBuckets: `count` upper bounds from `start`.
    Each is the one before times `factor`, multiplied in turn as Go does, not
    `start * factor**i`: the two round differently (2.2500000000000005e-05 against
    2.25e-05), and a `le` label that differs in its last digit is another series to a
    dashboard summing both schedulers' buckets."""
    bounds = []
    for _ in range(count):
        bounds.append(start)
        start *= factor
    return tuple(bounds)


# kube-scheduler v1.36's buckets (pkg/scheduler/metrics/metrics.go), metric by metric:
# dashboards' histogram_quantile over the same `le` values then reads both alike.
_ATTEMPT_BUCKETS = _exponential(0.001, 2, 15)  # scheduling_attempt, algorithm: 1 ms .. 16 s
_EXTENSION_POINT_BUCKETS = _exponential(0.0001, 2, 12)  # 0.1 ms .. ~200 ms
_PLUGIN_BUCKETS = _exponential(0.00001, 1.5, 20)  # 0.01 ms .. ~22 ms
_SLI_BUCKETS = _exponential(0.01, 2, 20)  # 10 ms .. ~88 min
_EVENT_HANDLING_BUCKETS = _exponential(0.0001, 2, 12)
_ATTEMPTS_BUCKETS = _exponential(1, 2, 5)  # 1 .. 16 attempts
_VICTIMS_BUCKETS = _exponential(1, 2, 7)  # 1 .. 64 victims
# policyd's own binding-call histogram keeps the attempt buckets (no upstream twin).
_LATENCY_BUCKETS = _ATTEMPT_BUCKETS

# The queues of `scheduler_pending_pods{queue}`, as kube-scheduler names them; policyd's
# fifth place, in flight (being scheduled or bound), is not pending upstream.
PENDING_QUEUES = ("active", "backoff", "unschedulable", "gated")

# `policyd_config_reloads_total{result}`: in force; in force except for fields that
# need a restart (named in a Warning event); rejected, the previous one still runs.
RELOAD_APPLIED = "applied"
RELOAD_RESTART_REQUIRED = "applied_restart_required"
RELOAD_REJECTED = "rejected"


class Metrics:
    """Every metric one daemon serves on /metrics. `scheduler_*` and
    `leader_election_master_status` are kube-scheduler v1.36's (same name, type, labels
    and buckets; docs/running.md lists which of its metrics policyd serves and why not
    the others); `policyd_*` have no upstream twin."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        # -- kube-scheduler's (pkg/scheduler/metrics) ---------------------------------
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Scheduling attempts by result (scheduled; unschedulable: no node fits; error: "
            "the cycle or the bind failed) and profile.",
            ["result", "profile"], registry=r)
        self.attempt_latency = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "One scheduling attempt, from its pop to its bind (or failure), by result.",
            ["result", "profile"], buckets=_ATTEMPT_BUCKETS, registry=r)
        self.algorithm_latency = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "CPU time of one cycle's plugins, from PreFilter to host selection.",
            buckets=_ATTEMPT_BUCKETS, registry=r)
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "From a pod's first scheduling attempt to its successful bind, by how many "
            "attempts it took (15+ for fifteen or more).",
            ["attempts"], buckets=_SLI_BUCKETS, registry=r)
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Attempts a bound pod took.",
            buckets=_ATTEMPTS_BUCKETS, registry=r)
        self.extension_point_latency = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Time spent in all plugins of one extension point, by the status it ended "
            "with, per profile.",
            ["extension_point", "status", "profile"], buckets=_EXTENSION_POINT_BUCKETS,
            registry=r)
        self.plugin_latency = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Time one plugin took at one extension point, by its status, in a sample of "
            "the cycles (which plugin makes scheduling slow).",
            ["plugin", "extension_point", "status"], buckets=_PLUGIN_BUCKETS, registry=r)
        self.plugin_evaluations = Counter(
            "scheduler_plugin_evaluation_total",
            "Cycles in which a plugin ran at PreFilter, Filter, PreScore or Score (not "
            "counted when its PreFilter or PreScore skipped).",
            ["plugin", "extension_point", "profile"], registry=r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Pods waiting to be scheduled, by queue: active, backoff, unschedulable "
            "(tried, no node fit), gated (scheduling gates or a PreEnqueue refusal).",
            ["queue"], registry=r)
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "Unschedulable pods each plugin rejected; a pod counts once for every plugin "
            "that rejected it, so only per-plugin values mean something.",
            ["plugin", "profile"], registry=r)
        self.queue_incoming = Counter(
            "scheduler_queue_incoming_pods_total",
            "Pods entering each queue, by the event that moved them.",
            ["queue", "event"], registry=r)
        self.inflight_events = Gauge(
            "scheduler_inflight_events",
            "Cluster events kept for the pods being scheduled, by event; PodPopped is "
            "those pods.", ["event"], registry=r)
        self.event_handling = Histogram(
            "scheduler_event_handling_duration_seconds",
            "Time to handle one node or pod watch event, by event.",
            ["event"], buckets=_EVENT_HANDLING_BUCKETS, registry=r)
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Nodes, pods counted on nodes, and pods assumed while their bind is in flight.",
            ["type"], registry=r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Preemption attempts: cycles in which DefaultPreemption's PostFilter ran, "
            "whatever it found.", registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", "Victims chosen by one preemption.",
            buckets=_VICTIMS_BUCKETS, registry=r)
        # -- component-base's (client-go leader election) -----------------------------
        self.leader = Gauge(
            "leader_election_master_status",
            "1 while this replica holds the lease `name`, 0 while it stands by (only "
            "with leader election).",
            ["name"], registry=r)
        # -- policyd's own -------------------------------------------------------------
        self.bind_errors = Counter(
            "policyd_bind_errors_total",
            "Failed binding attempts, by reason (HTTP status or error class).",
            ["reason"], registry=r)
        self.binding_latency = Histogram(
            "policyd_binding_duration_seconds", "Binding calls, retries included.",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.events_emitted = Counter(
            "policyd_events_total", "Events posted, by reason.", ["reason"], registry=r)
        self.config_reloads = Counter(
            "policyd_config_reloads_total",
            "Profile/policy reloads by result: applied, applied_restart_required (some "
            "changed fields wait for a restart), rejected.", ["result"], registry=r)
        for result in (RELOAD_APPLIED, RELOAD_RESTART_REQUIRED, RELOAD_REJECTED):
            # Exported at 0 from the start: increase() over a series that first appears
            # at 1 sees no increase, and the reload alert would miss the first rejection.
            self.config_reloads.labels(result)
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
        self.policy_violations = Counter(
            "policyd_policy_violations_total",
            "Would-be rejections by policies in Audit mode, by policy (metadata.name) and "
            "rule (its id): counted once per pod and rule, however often the pod is "
            "retried, when the rule would have rejected at least one of the nodes the "
            "enforced filters left feasible.", ["policy", "rule"], registry=r)

    def set_gauge(self, gauge: Gauge, values: Mapping[tuple[str, ...], float]) -> None:
        """Replace every child of `gauge` with `values` (label values -> value): a label
        set that is gone (a plugin no longer rejecting anyone) disappears, as upstream's
        gauges drop to zero; here it is removed instead of left at a stale value."""
        gauge.clear()
        for labels, value in values.items():
            gauge.labels(*labels).set(value)

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
    """Serves /metrics, /metrics/resources (`resources`, when given), /healthz and
    /livez (`health()` lists no problem), /readyz (caches synced) and the /debug pages;
    over HTTPS with `tls`, and each request first past `guard` when one is given
    (secure serving). `post` routes POSTs by path
    prefix (the admission webhook's reviews), past the guard too."""

    def __init__(self, address: str, metrics: Metrics, ready: Callable[[], bool],
                 before_scrape: Callable[[], None] = lambda: None,
                 debug: Mapping[str, Callable[[], Any]] | None = None,
                 health: Callable[[], list[str]] = list,
                 tls: ssl.SSLContext | None = None, guard: Guard | None = None,
                 post: Mapping[str, PostHandler] | None = None,
                 resources: Callable[[], bytes] | None = None) -> None:
        host, port, family = parse_bind_address(address)
        metrics_ref, ready_ref, scrape_ref, health_ref = metrics, ready, before_scrape, health
        # /debug/<name> -> a callable giving JSON-ready data (queue, metrics cache).
        debug_ref = dict(debug or {})
        guard_ref = guard
        post_ref = dict(post or {})
        resources_ref = resources

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
                elif path == "/metrics/resources" and resources_ref is not None:
                    self._send(200, resources_ref(), CONTENT_TYPE_LATEST)
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
    Framework.run_post_filter: "PostFilter",
    Framework.run_pre_score: "PreScore", Framework.run_score: "Score",
    Framework.run_score_fast: "Score", Framework.run_audits_fast: "Audit",
    Framework.run_reserve: "Reserve", Framework.run_permit: "Permit",
    Framework.run_unreserve: "Unreserve", Framework.run_pre_bind: "PreBind",
    Framework.run_pre_bind_pre_flight: "PreBindPreFlight",
}

# The runner methods after which `scheduler_plugin_evaluation_total` counts the plugins
# that ran, as upstream counts them once per cycle (never run_filter_diagnosis, which
# runs the same Filter plugins again for the FailedScheduling message).
_EVALUATED: dict[Callable[..., Any], str] = {
    Framework.run_pre_filter: "PreFilter", Framework.run_filters: "Filter",
    Framework.run_filters_fast: "Filter", Framework.run_pre_score: "PreScore",
    Framework.run_score: "Score", Framework.run_score_fast: "Score",
}


# The share of scheduling cycles whose plugins are each timed, as kube-scheduler's
# pluginMetricsSamplePercent (10): two histogram observations per plugin per cycle cost
# more than some plugins themselves. Extension points are timed in every cycle.
PLUGIN_METRICS_SAMPLE = 0.1


def status_label(result: object) -> str:
    """The `status` label of a runner method's result: the code of the first Status in
    it (a Status, or a tuple holding one) as kube-scheduler writes Code.String(), and
    Success when there is none (None means success in policyd's runner)."""
    items = result if isinstance(result, tuple) else (result,)
    for item in items:
        if isinstance(item, Status):
            return str(item.code)
    return str(Code.SUCCESS)


def instrument(fw: Framework, metrics: Metrics, *,
               plugin_sample: float = PLUGIN_METRICS_SAMPLE,
               rng: random.Random | None = None) -> None:
    """Time each extension point of `fw` into `metrics` by shadowing the runner's
    methods on this instance (the Framework class itself is untouched), count the
    plugins each cycle evaluates, and time each plugin in a `plugin_sample` share of
    the cycles (decided as PreFilter, the first extension point of every cycle,
    begins)."""
    if fw.__dict__.get("_policyd_timed") is metrics:
        return
    profile = fw.profile_name
    timer = _plugin_timer(metrics)
    draw = (rng or random.Random()).random
    point_child = label_children(metrics.extension_point_latency)
    evaluated = _evaluation_counter(fw, metrics)

    def sampled(run: Callable[..., Any]) -> Callable[..., Any]:
        def run_pre_filter(*args: Any, **kwargs: Any) -> Any:
            fw.plugin_timer = timer if draw() < plugin_sample else None
            return run(*args, **kwargs)

        return run_pre_filter

    for method, point in _TIMED_METHODS.items():
        counted = _EVALUATED.get(method)
        timed = _timed(method.__get__(fw), point, profile, point_child,
                       None if counted is None else evaluated)
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


def _plugin_timer(metrics: Metrics) -> Callable[[str, str, float, str], None]:
    """The Framework's per-plugin callback (upstream's plugin metric has no profile)."""
    child = label_children(metrics.plugin_latency)

    def observe(point: str, plugin: str, seconds: float, status: str) -> None:
        child(plugin, point, status).observe(seconds)

    return observe


def _evaluation_counter(fw: Framework, metrics: Metrics
                        ) -> Callable[[str, Any], None]:
    """(extension point, the cycle's state) -> count each of `fw`'s plugins at that
    point that ran for the pod: PreFilter and Filter plugins whose PreFilter did not
    Skip, PreScore and Score plugins whose PreScore did not."""
    child = label_children(metrics.plugin_evaluations)
    profile = fw.profile_name

    def count(point: str, state: Any) -> None:
        if point in ("PreFilter", "Filter"):
            skipped: set[str] = getattr(state, "skip_filter", set())
            names = ([pl.name for pl in fw.pre_filter_plugins] if point == "PreFilter"
                     else [bf.name for bf in fw.filters])
        else:
            skipped = getattr(state, "skip_score", set())
            names = ([pl.name for pl in fw.pre_score_plugins] if point == "PreScore"
                     else [bs.name for bs in fw.scores])
        for name in names:
            if name not in skipped:
                child(name, point, profile).inc()

    return count


def _timed(fn: Callable[..., Any], point: str, profile: str,
           child: Callable[..., Any],
           evaluated: Callable[[str, Any], None] | None) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        # An exception is the runner's bug, not a status: it propagates unmeasured.
        child(point, status_label(result), profile).observe(time.perf_counter() - t0)
        if evaluated is not None and args:
            evaluated(point, args[0])
        return result

    return wrapper
