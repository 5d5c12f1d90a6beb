"""Metrics providers: background refreshers that fill the `MetricsCache`.

Each provider runs on its own daemon thread: refresh, publish into the cache, sleep
`refreshInterval`; while failing, the sleep doubles up to `maxBackoff`. Every network
operation carries the provider's `timeout`, so a hung Prometheus or a black-holed node
delays only that provider's next refresh. A provider never raises out of its thread: an
exception is a failed refresh. Failed refreshes publish nothing, so the last good values
stay until they are `maxAge` old and then count as missing. The log gets one line per
state change (first success, ok -> failing with the reason, failing -> ok), not one per
attempt.

Kinds:
- `prometheus`: one instant query (GET /api/v1/query) per metric; the node is named by
  a series label (`nodeLabel`, default `node`).
- `probe`: the TCP connect round-trip time in milliseconds to each node's address (a
  label, an annotation or its InternalIP) and `port`, on a bounded thread pool.
- `nodeAnnotation`: a number in a Node annotation, read from the Node records the
  daemon's informer already holds (no I/O at all).
"""

from __future__ import annotations

import concurrent.futures
import logging
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar

from policyd.clock import REAL_CLOCK, Clock
from policyd.config.model import MetricsProviderConfig
from policyd.config.profile_schema import NODE_ANNOTATION, PROBE, PROMETHEUS, MetricsKind
from policyd.errors import InputFileError
from policyd.model.bounded_read import read_bounded
from policyd.model.node_metrics import MetricsCache
from policyd.nodemetrics import values as v
from policyd.nodemetrics.telemetry import ProviderTelemetry

if TYPE_CHECKING:
    from policyd.model.records import Node

log = logging.getLogger("policyd.nodemetrics")

NodeSource = Callable[[], Sequence["Node"]]
Connect = Callable[[str, int, float], None]

TIMEOUT = "timeout"
CONNECTION = "connection"
HTTP_STATUS = "http_status"
TOKEN = "token"
NO_ADDRESS = "no_address"
PROBE_FAILED = "probe_failed"
INTERNAL = "internal"

# A service account token is about a kilobyte; anything far larger is not one.
_MAX_TOKEN_BYTES = 64 * 1024


class RefreshError(Exception):
    """A failed refresh: `reason` is the errors_total label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


Values = dict[str, dict[str, float]]  # metric -> node -> value


class Provider:
    """Base: the thread, backoff, state logging and telemetry; kinds implement
    `refresh()` returning fresh values per metric (or raising RefreshError)."""

    kind: ClassVar[MetricsKind]  # its entry in profile_schema.METRICS_PROVIDER_KINDS
    # Whether a refresh's values replace the metric's (nodes left out lose their value
    # at once) instead of merging (nodes left out keep theirs until they age out).
    replace = False

    def __init__(self, config: MetricsProviderConfig, cache: MetricsCache,
                 telemetry: ProviderTelemetry, *, clock: Clock = REAL_CLOCK) -> None:
        self.config = config
        self.name = config.name
        self.cache = cache
        self.telemetry = telemetry
        self.clock = clock
        self.failures = 0  # consecutive failed refreshes
        self.state = "starting"  # starting | ok | failing
        self.last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def build(cls, config: MetricsProviderConfig, cache: MetricsCache,
              telemetry: ProviderTelemetry, nodes: NodeSource, *, clock: Clock,
              connect: Connect) -> Provider:
        """`build_providers`' one way to make any kind: each takes what it needs."""
        return cls(config, cache, telemetry, clock=clock)

    @property
    def metrics(self) -> tuple[str, ...]:
        return self.config.metric_names

    # -- one attempt ------------------------------------------------------------------
    def refresh(self) -> Values:
        raise NotImplementedError

    def count(self, reason: str, n: int = 1) -> None:
        if n:
            self.telemetry.errors.labels(self.name, reason).inc(n)

    def run_once(self) -> bool:
        """One refresh, published into the cache; never raises. True on success."""
        try:
            fresh = self.refresh()
        except RefreshError as exc:
            self._failed(exc.reason, str(exc))
            return False
        except Exception as exc:  # a bug must not kill the thread or reach Score
            log.debug("provider %s: unexpected error", self.name, exc_info=True)
            self._failed(INTERNAL, f"{type(exc).__name__}: {exc}")
            return False
        now = self.clock.wall()
        snaps = {metric: self.cache.update(metric, fresh.get(metric, {}),
                                           max_age=self.config.max_age, provider=self.name,
                                           timestamp=now, replace=self.replace)
                 for metric in self.metrics}
        before = self.state
        self.state = "ok"
        self.last_error = ""
        self.failures = 0
        # Telemetry after the state, as in `_failed`: a scrape never shows a success the
        # provider's state does not.
        for metric, snap in snaps.items():
            self.telemetry.values.labels(self.name, metric).set(len(snap.fresh(now)))
        self.telemetry.last_success.labels(self.name).set(now)
        if before != "ok":
            log.info("metrics provider %s %s: %s", self.name,
                     "recovered" if before == "failing" else "ok", self._summary(fresh))
        return True

    def _summary(self, fresh: Values) -> str:
        return ", ".join(f"{m} on {len(fresh.get(m, {}))} node(s)" for m in self.metrics)

    def _failed(self, reason: str, message: str) -> None:
        first = self.state != "failing"
        self.state = "failing"
        self.last_error = message
        self.failures += 1
        # Counted after the state is set: whoever sees the error count (a scrape, a
        # test) sees the provider failing too.
        self.count(reason)
        if first:
            log.warning("metrics provider %s failing (%s): %s; keeping its last values "
                        "until they are %gs old, retrying with backoff", self.name, reason,
                        message, self.config.max_age)
        now = self.clock.wall()
        self.cache.expire(now)
        for metric in self.metrics:
            snap = self.cache.snapshot(metric)
            self.telemetry.values.labels(self.name, metric).set(
                len(snap.fresh(now)) if snap is not None else 0)

    def next_delay(self) -> float:
        """refreshInterval while healthy; while failing it doubles per consecutive
        failure (1x, 2x, 4x ...) up to maxBackoff."""
        interval = self.config.refresh_interval
        if self.failures == 0:
            return interval
        return float(min(self.config.max_backoff,
                         interval * 2 ** min(self.failures - 1, 32)))

    # -- thread -----------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name=f"policyd-metrics-{self.name}",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        delay = 0.0  # first refresh at once: a fresh daemon should have values soon
        while not self.clock.wait(self._stop, delay):
            self.run_once()
            delay = self.next_delay()

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the thread; waits at most `timeout` (default: the provider's own
        timeout plus a second) for a refresh in flight."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.config.timeout + 1.0 if timeout is None else timeout)
        self.close()

    def close(self) -> None:
        """Release resources (thread pools)."""


class PrometheusProvider(Provider):
    """Instant queries against a Prometheus server; one series per node."""

    kind = PROMETHEUS

    def _token(self) -> str | None:
        path = self.config.bearer_token_file
        if path is None:
            return None
        try:
            # Bounded as every file policyd reads: a FIFO there must not stall refreshes.
            data = read_bounded(path, _MAX_TOKEN_BYTES, idle_timeout=self.config.timeout)
            return data.decode("utf-8").strip()
        except (InputFileError, UnicodeDecodeError) as exc:
            reason = exc.message if isinstance(exc, InputFileError) else "not UTF-8"
            raise RefreshError(TOKEN, f"cannot read bearerTokenFile {str(path)!r}: "
                                      f"{reason}") from None

    def _get(self, query: str, token: str | None) -> bytes:
        url = (self.config.url.rstrip("/") + "/api/v1/query?"
               + urllib.parse.urlencode({"query": query}))
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        deadline = self.clock.now() + self.config.timeout
        try:
            with urllib.request.urlopen(req, timeout=self.config.timeout) as resp:
                chunks = []
                # The socket timeout bounds each read; the deadline bounds the whole
                # body, so a server trickling bytes cannot hold the provider either.
                while chunk := resp.read(65536):
                    chunks.append(chunk)
                    if self.clock.now() > deadline:
                        raise RefreshError(TIMEOUT, f"query took over "
                                                    f"{self.config.timeout:g}s")
                return b"".join(chunks)
        except urllib.error.HTTPError as exc:
            body = exc.read(500).decode("utf-8", "replace").strip()
            raise RefreshError(HTTP_STATUS, f"HTTP {exc.code} from {self.config.url}: "
                                            f"{body}") from None
        except TimeoutError:
            raise RefreshError(TIMEOUT, f"no answer from {self.config.url} within "
                                        f"{self.config.timeout:g}s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise RefreshError(TIMEOUT, f"no answer from {self.config.url} within "
                                            f"{self.config.timeout:g}s") from None
            raise RefreshError(CONNECTION, f"{self.config.url}: {exc.reason}") from None
        except OSError as exc:
            raise RefreshError(CONNECTION, f"{self.config.url}: {exc}") from None

    def refresh(self) -> Values:
        token = self._token()
        out: Values = {}
        for q in self.config.queries:
            body = self._get(q.query, token)
            try:
                found, dropped = v.parse_vector(body, self.config.node_label,
                                                allow_negative=q.allow_negative)
            except ValueError as exc:
                raise RefreshError(v.BAD_RESPONSE,
                                   f"query for {q.name}: {exc}") from None
            for reason in dropped:
                self.count(reason)
            out[q.name] = found
        return out


def tcp_connect(host: str, port: int, timeout: float) -> None:
    with socket.create_connection((host, port), timeout=timeout):
        pass


class ProbeProvider(Provider):
    """TCP connect round-trip time (ms) to every node, `workers` probes at a time."""

    kind = PROBE

    def __init__(self, config: MetricsProviderConfig, cache: MetricsCache,
                 telemetry: ProviderTelemetry, nodes: NodeSource, *,
                 clock: Clock = REAL_CLOCK, connect: Connect = tcp_connect
                 ) -> None:
        super().__init__(config, cache, telemetry, clock=clock)
        self.nodes = nodes
        self.connect = connect
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=config.workers, thread_name_prefix=f"policyd-probe-{config.name}")

    @classmethod
    def build(cls, config: MetricsProviderConfig, cache: MetricsCache,
              telemetry: ProviderTelemetry, nodes: NodeSource, *, clock: Clock,
              connect: Connect) -> Provider:
        return cls(config, cache, telemetry, nodes, clock=clock, connect=connect)

    def address(self, node: Node) -> str | None:
        c = self.config
        if c.address_from == "label":
            return node.labels.get(c.address_key) or None
        if c.address_from == "annotation":
            return node.annotations.get(c.address_key) or None
        return node.addresses.get("InternalIP") or None

    def _probe(self, host: str) -> float:
        # The round trip measured, not a wait: the real high-resolution counter.
        t0 = time.perf_counter()
        self.connect(host, self.config.port, self.config.timeout)
        return (time.perf_counter() - t0) * 1000.0

    def refresh(self) -> Values:
        targets: list[tuple[str, str]] = []
        missing = 0
        for node in self.nodes():
            host = self.address(node)
            if host is None:
                missing += 1
            else:
                targets.append((node.name, host))
        self.count(NO_ADDRESS, missing)
        if not targets:
            if missing:
                raise RefreshError(NO_ADDRESS, f"no node has an address ({missing} without)")
            return {self.config.metric: {}}
        futures = {self.pool.submit(self._probe, host): name for name, host in targets}
        results: dict[str, float] = {}
        failed: dict[str, int] = {}
        last = ""
        for fut, name in futures.items():
            try:
                rtt = fut.result()
            except TimeoutError:
                failed[TIMEOUT] = failed.get(TIMEOUT, 0) + 1
                last = f"{name}: timed out after {self.config.timeout:g}s"
                continue
            except Exception as exc:
                failed[PROBE_FAILED] = failed.get(PROBE_FAILED, 0) + 1
                last = f"{name}: {exc}"
                continue
            value, reason = v.clean_value(rtt)
            if reason is not None:
                self.count(reason)
                continue
            assert value is not None
            results[name] = value
        for reason, n in failed.items():
            self.count(reason, n)
        if not results:
            raise RefreshError(PROBE_FAILED, f"every probe failed ({len(targets)}); last: "
                                             f"{last}")
        return {self.config.metric: results}

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class NodeAnnotationProvider(Provider):
    """A number another agent writes into a Node annotation."""

    kind = NODE_ANNOTATION
    # The Node record is the truth: an annotation that was removed means no value.
    replace = True

    def __init__(self, config: MetricsProviderConfig, cache: MetricsCache,
                 telemetry: ProviderTelemetry, nodes: NodeSource, *,
                 clock: Clock = REAL_CLOCK) -> None:
        super().__init__(config, cache, telemetry, clock=clock)
        self.nodes = nodes

    @classmethod
    def build(cls, config: MetricsProviderConfig, cache: MetricsCache,
              telemetry: ProviderTelemetry, nodes: NodeSource, *, clock: Clock,
              connect: Connect) -> Provider:
        return cls(config, cache, telemetry, nodes, clock=clock)

    def refresh(self) -> Values:
        key = self.config.annotation
        out: dict[str, float] = {}
        for node in list(self.nodes()):
            raw = node.annotations.get(key)
            if raw is None:
                continue  # not written yet: missing, not an error
            value, reason = v.clean_value(raw, allow_negative=self.config.allow_negative)
            if reason is not None:
                self.count(reason)
                continue
            assert value is not None
            out[node.name] = value
        return {self.config.metric: out}


# Each kind's class, by the kind's name (a profile's `kind:`).
PROVIDERS: dict[str, type[Provider]] = {cls.kind.name: cls for cls in (
    PrometheusProvider, ProbeProvider, NodeAnnotationProvider)}


def build_providers(configs: Iterable[MetricsProviderConfig], cache: MetricsCache,
                    telemetry: ProviderTelemetry, nodes: NodeSource, *,
                    clock: Clock = REAL_CLOCK,
                    connect: Connect = tcp_connect) -> list[Provider]:
    return [PROVIDERS[c.kind].build(c, cache, telemetry, nodes, clock=clock, connect=connect)
            for c in configs]
