"""Providers: one refresh each (parsing, errors by reason, bearer token, timeouts),
keeping last good values until they age out, backoff, logging once per state change,
and the background thread never blocking its stopper."""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from policyd.config.model import MetricQuery
from policyd.config.profile_schema import METRICS_KINDS, METRICS_PROVIDER_KINDS
from policyd.model.records import Node
from policyd.nodemetrics import MetricsCache
from policyd.nodemetrics.providers import (
    PROVIDERS,
    NodeAnnotationProvider,
    ProbeProvider,
    PrometheusProvider,
    Provider,
    build_providers,
)
from policyd.nodemetrics.telemetry import ProviderTelemetry
from tests.builders import make_node
from tests.clocks import ManualClock
from tests.unit.nodemetrics.helpers import fake_prometheus, provider_config, vector


def telemetry() -> ProviderTelemetry:
    return ProviderTelemetry(CollectorRegistry())


def errors(t: ProviderTelemetry, reason: str, provider: str = "p") -> float:
    value = t.registry.get_sample_value("policyd_node_metrics_errors_total",
                                        {"provider": provider, "reason": reason})
    return value or 0.0


def gauge(t: ProviderTelemetry, name: str, **labels: str) -> float | None:
    value: float | None = t.registry.get_sample_value(name, labels)
    return value


def node(name: str, *, ip: str = "", labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> Node:
    b = make_node(name).exact_labels(labels or {}).annotations(annotations or {})
    b.capacity(cpu="1")
    if ip:
        b.address(ip).address(name, "Hostname")
    return b.obj()


# -- backoff and state ------------------------------------------------------------------


class Scripted(Provider):
    """A provider whose refreshes follow a script: a dict of values or an exception."""

    def __init__(self, script: list[Any], **kw: Any) -> None:
        self.script = script
        super().__init__(provider_config("nodeAnnotation", **kw), MetricsCache(ManualClock()),
                         telemetry())

    def refresh(self) -> dict[str, dict[str, float]]:
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return {"load": step}


def test_backoff_doubles_from_the_refresh_interval_up_to_the_cap() -> None:
    p = Scripted([])
    delays = []
    for failures in range(7):
        p.failures = failures
        delays.append(p.next_delay())
    assert delays == [10.0, 10.0, 20.0, 40.0, 80.0, 80.0, 80.0]
    p.failures = 10_000
    assert p.next_delay() == 80.0


def test_failures_keep_last_values_until_they_age_out_and_log_once_per_change(
        caplog: pytest.LogCaptureFixture) -> None:
    from policyd.nodemetrics.providers import RefreshError

    clock = ManualClock(wall_start=1000.0)
    p = Scripted([{"a": 1.0, "b": 2.0}, RefreshError("timeout", "slow"),
                  RefreshError("timeout", "slow"), ValueError("bug"), {"a": 3.0}])
    p.clock = clock
    p.cache = MetricsCache(clock.wall)
    caplog.set_level(logging.INFO, logger="policyd.nodemetrics")
    assert p.run_once() is True and p.state == "ok"
    assert gauge(p.telemetry, "policyd_node_metrics_values", provider="p", metric="load") == 2
    assert gauge(p.telemetry, "policyd_node_metrics_last_success_timestamp_seconds",
                 provider="p") == 1000.0
    clock.advance(10)
    assert p.run_once() is False and p.state == "failing"
    snap = p.cache.snapshot("load")
    assert snap is not None and snap.get("a", clock.wall()) == 1.0  # kept
    clock.advance(10)
    assert p.run_once() is False
    clock.advance(11)  # 31 s after the last success, maxAge 30 s: aged out
    assert p.run_once() is False  # an unexpected exception is a failure too
    snap = p.cache.snapshot("load")
    assert snap is not None and snap.get("a", clock.wall()) is None
    assert gauge(p.telemetry, "policyd_node_metrics_values", provider="p", metric="load") == 0
    assert errors(p.telemetry, "timeout") == 2 and errors(p.telemetry, "internal") == 1
    assert p.failures == 3 and p.next_delay() == 40.0
    assert p.run_once() is True and p.state == "ok" and p.failures == 0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines  # ok, failing, recovered: not one per attempt
    assert "ok" in lines[0] and "failing (timeout): slow" in lines[1]
    assert "recovered" in lines[2]


def test_the_loop_backs_off_on_the_injected_clock_without_sleeping() -> None:
    from policyd.nodemetrics.providers import RefreshError

    clock = ManualClock(wall_start=1000.0)
    script: list[Any] = [{"a": 1.0}, *[RefreshError("timeout", "slow")] * 5, {"a": 2.0}]
    p = Scripted(script)
    p.clock = clock
    p.cache = MetricsCache(clock.wall)
    refreshed = p.run_once

    def run_once() -> bool:
        ok = refreshed()
        if not p.script:
            p.request_stop()  # the script is played: the next wait ends the loop
        return ok

    p.run_once = run_once  # type: ignore[method-assign]
    t0 = time.monotonic()
    p._loop()
    assert time.monotonic() - t0 < 1.0
    # At once, then refreshInterval; doubling while failing up to maxBackoff (80 s).
    assert clock.waits == [0.0, 10.0, 10.0, 20.0, 40.0, 80.0, 80.0]
    snap = p.cache.snapshot("load")
    assert snap is not None and snap.values["a"] == (2.0, 1000.0 + sum(clock.waits))


def test_the_thread_refreshes_and_stops_promptly() -> None:
    p = Scripted([{"a": 1.0}] * 1000, refresh_interval=0.01, max_backoff=0.01)
    p.start()
    deadline = time.monotonic() + 5
    while p.cache.snapshot("load") is None and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    p.stop()
    assert time.monotonic() - t0 < 1.0
    assert p.cache.snapshot("load") is not None


# -- prometheus ---------------------------------------------------------------------------


def prom(url: str, **kw: Any) -> PrometheusProvider:
    config = provider_config("prometheus", url=url, **kw)
    return PrometheusProvider(config, MetricsCache(), telemetry())


def test_prometheus_queries_each_metric_with_the_bearer_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")

    def respond(query: str, headers: dict[str, str]) -> tuple[int, bytes, float]:
        if query == "lat":
            return 200, vector(({"node": "a"}, "5"), ({"node": "b"}, "NaN"),
                               ({"node": "c"}, "-1")), 0
        return 200, vector(({"node": "a"}, "-0.5"), ({"node": "b"}, "2")), 0

    with fake_prometheus(respond) as (url, seen):
        p = prom(url + "/", bearer_token_file=token, queries=(
            MetricQuery("latency_ms", "lat"), MetricQuery("delta", "d", allow_negative=True)))
        assert p.run_once() is True
    assert [(r["path"], r["query"], r["authorization"]) for r in seen] == [
        ("/api/v1/query", "lat", "Bearer s3cret"), ("/api/v1/query", "d", "Bearer s3cret")]
    now = p.cache.now()
    lat, delta = p.cache.snapshot("latency_ms"), p.cache.snapshot("delta")
    assert lat is not None and lat.fresh(now) == {"a": 5.0}
    assert delta is not None and delta.fresh(now) == {"a": -0.5, "b": 2.0}
    assert errors(p.telemetry, "nan") == 1 and errors(p.telemetry, "negative") == 1


def test_prometheus_missing_token_file_is_a_failure(tmp_path: Path) -> None:
    p = prom("http://127.0.0.1:1", bearer_token_file=tmp_path / "none")
    assert p.run_once() is False
    assert errors(p.telemetry, "token") == 1 and "bearerTokenFile" in p.last_error


@pytest.mark.parametrize(("status", "body", "reason"), [
    (500, b"internal", "http_status"),
    (401, b"unauthorized", "http_status"),
    (200, b"<html>garbage</html>", "bad_response"),
    (200, b'{"status": "error", "error": "bad query"}', "bad_response"),
])
def test_prometheus_bad_answers(status: int, body: bytes, reason: str) -> None:
    with fake_prometheus(lambda q, h: (status, body, 0)) as (url, _):
        p = prom(url)
        assert p.run_once() is False
    assert errors(p.telemetry, reason) == 1
    assert p.cache.snapshot("latency_ms") is None


def test_prometheus_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens
    p = prom(f"http://127.0.0.1:{port}")
    assert p.run_once() is False
    assert errors(p.telemetry, "connection") == 1


def test_prometheus_query_that_hangs_gives_up_at_the_timeout() -> None:
    with fake_prometheus(lambda q, h: (200, vector(({"node": "a"}, "1")), 3.0)) as (url, _):
        p = prom(url, timeout=0.3)
        t0 = time.monotonic()
        assert p.run_once() is False
        elapsed = time.monotonic() - t0
    assert elapsed < 2.0
    assert errors(p.telemetry, "timeout") == 1


# -- probe --------------------------------------------------------------------------------


def test_probe_measures_each_node_address_on_a_bounded_pool() -> None:
    delays = {"10.0.0.1": 0.05, "10.0.0.2": 0.01, "10.0.0.3": 0.03}
    active = [0]
    peak = [0]
    lock = threading.Lock()
    calls: list[tuple[str, int, float]] = []

    def connect(host: str, port: int, timeout: float) -> None:
        with lock:
            calls.append((host, port, timeout))
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            if host == "10.0.0.9":
                raise ConnectionRefusedError("refused")
            if host == "10.0.0.8":
                raise TimeoutError("timed out")
            time.sleep(delays.get(host, 0.0))
        finally:
            with lock:
                active[0] -= 1

    nodes = [node("a", ip="10.0.0.1"), node("b", ip="10.0.0.2"), node("c", ip="10.0.0.3"),
             node("refused", ip="10.0.0.9"), node("hung", ip="10.0.0.8"), node("noaddr")]
    config = provider_config("probe", port=10250, workers=2, timeout=0.5)
    p = ProbeProvider(config, MetricsCache(), telemetry(), lambda: nodes, connect=connect)
    try:
        assert p.run_once() is True
    finally:
        p.close()
    snap = p.cache.snapshot("rtt_ms")
    assert snap is not None
    got = snap.fresh(p.cache.now())
    assert set(got) == {"a", "b", "c"}
    assert got["b"] < got["c"] < got["a"]
    assert 45 <= got["a"] < 500  # milliseconds
    assert peak[0] <= 2
    assert {(h, port, t) for h, port, t in calls} >= {("10.0.0.1", 10250, 0.5)}
    t = p.telemetry
    assert errors(t, "no_address") == 1 and errors(t, "probe_failed") == 1
    assert errors(t, "timeout") == 1


@pytest.mark.parametrize(("address", "expected"), [
    ({"address_from": "label", "address_key": "probe-ip"}, "192.0.2.1"),
    ({"address_from": "annotation", "address_key": "example.com/ip"}, "192.0.2.2"),
    ({}, "10.1.1.1"),
])
def test_probe_address_sources(address: dict[str, Any], expected: str) -> None:
    n = node("a", ip="10.1.1.1", labels={"probe-ip": "192.0.2.1"},
             annotations={"example.com/ip": "192.0.2.2"})
    p = ProbeProvider(replace(provider_config("probe"), **address), MetricsCache(),
                      telemetry(), lambda: [n])
    p.close()
    assert p.address(n) == expected


def test_probe_every_probe_failing_is_a_failed_refresh() -> None:
    def connect(host: str, port: int, timeout: float) -> None:
        raise ConnectionRefusedError("refused")

    p = ProbeProvider(provider_config("probe"), MetricsCache(), telemetry(),
                      lambda: [node("a", ip="10.0.0.1")], connect=connect)
    try:
        assert p.run_once() is False
    finally:
        p.close()
    assert p.state == "failing" and "refused" in p.last_error


# -- nodeAnnotation -------------------------------------------------------------------------


def test_node_annotation_reads_records_and_drops_garbage() -> None:
    key = "example.com/load"
    nodes = [node("a", annotations={key: "0.7"}), node("b", annotations={key: "lots"}),
             node("c", annotations={key: "-1"}), node("d", annotations={key: "NaN"}),
             node("e")]
    p = NodeAnnotationProvider(provider_config("nodeAnnotation"), MetricsCache(),
                               telemetry(), lambda: nodes)
    assert p.run_once() is True
    snap = p.cache.snapshot("load")
    assert snap is not None and snap.fresh(p.cache.now()) == {"a": 0.7}
    assert errors(p.telemetry, "not_a_number") == 1
    assert errors(p.telemetry, "negative") == 1 and errors(p.telemetry, "nan") == 1
    nodes[0] = node("a")  # the agent removed its annotation: no value any more
    assert p.run_once() is True
    snap = p.cache.snapshot("load")
    assert snap is not None and snap.values == {}


@pytest.mark.parametrize("kind", METRICS_KINDS)
def test_every_profile_kind_builds_its_own_provider_class(kind: str) -> None:
    # The profile schema's kinds and the provider classes are one registry: a kind the
    # schema accepts but no class implements (or the reverse) fails here.
    assert set(PROVIDERS) == set(METRICS_KINDS)
    [provider] = build_providers([provider_config(kind)], MetricsCache(), telemetry(),
                                 lambda: [])
    try:
        assert type(provider) is PROVIDERS[kind]
        assert type(provider).kind is METRICS_PROVIDER_KINDS[kind]
        assert provider.metrics == provider_config(kind).metric_names != ()
    finally:
        provider.close()
