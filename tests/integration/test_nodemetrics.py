"""Node metrics end to end: a real Prometheus server (built from its Go module)
scrapes a small exporter on loopback, the prometheus provider reads it in the
background, and a policy `metric` score places pods on the lowest-latency nodes through
the engine's `schedule_one`. Also the probe provider against loopback listeners, and
faults: Prometheus stopped mid-run, a query that hangs past its timeout, garbage
responses, NaN and negative values. In every fault scheduling goes on at full speed and
values age out as documented.

The Prometheus binary: `TEST_ASSET_PROMETHEUS`, else the one `policyd dev build` put in
~/.cache/policyd/prometheus/, else the fixture builds it there (with progress) like the
control plane. Never the one on PATH, and never a skip: without Go or the variable the
tests fail, saying which.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from policyd.config.model import MetricQuery, MetricsProviderConfig
from policyd.config.plugins import default_framework
from policyd.devcluster.assets import PROMETHEUS
from policyd.devcluster.build import resolve_tool
from policyd.devcluster.ports import free_ports
from policyd.engine.cycle import schedule_one
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, Pod
from policyd.nodemetrics import MetricsCache, attach_metrics
from policyd.nodemetrics.manager import MetricsManager
from policyd.nodemetrics.providers import ProbeProvider, PrometheusProvider, tcp_connect
from policyd.nodemetrics.telemetry import ProviderTelemetry
from tests.builders import make_node, make_pod
from tests.polling import wait_for
from tests.prometheus_server import Prometheus
from tests.unit.nodemetrics.helpers import loopback_server
from tests.unit.policy.conftest import check_docs, make_policy

NODES = ["n1", "n2", "n3", "n4", "n5"]
# A generous bound for one scheduling cycle on five nodes: the point is that no cycle
# ever waits for a provider (whose requests take up to seconds here).
CYCLE_BUDGET_S = 0.5


# -- Prometheus and the exporter --------------------------------------------------------


@dataclass
class Exporter:
    latency: Gauge
    port: int

    def set(self, values: dict[str, float]) -> None:
        for node, v in values.items():
            self.latency.labels(node).set(v)


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    registry = CollectorRegistry()
    gauge = Gauge("test_node_latency_ms", "Measured latency to each node.", ["node"],
                  registry=registry)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield Exporter(gauge, int(server.server_port))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def prometheus(tmp_path: Path, exporter: Exporter) -> Iterator[Prometheus]:
    server = Prometheus(str(resolve_tool(PROMETHEUS)), tmp_path, exporter.port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# -- the scheduling side ------------------------------------------------------------------


def node(name: str, ip: str = "") -> Node:
    b = make_node(name).uid(name).exact_labels().capacity(cpu="32", memory="64Gi", pods="110")
    if ip:
        b.address(ip)
    return b.obj()


def pod(name: str) -> Pod:
    return make_pod(name).uid(name).scheduler("policyd").req(cpu="100m", memory="64Mi").obj()


def latency_framework(metric: str, missing: str = "worst") -> Framework:
    result = check_docs(make_policy(weight=100, scores=[{
        "id": "latency", "weight": 1, "normalize": "minmax",
        "metric": {"name": metric, "prefer": "lowest", "missing": missing}}]))
    assert result.compiled, result.problems
    return default_framework(result.compiled, seed=1)


class Placer:
    """Schedules pods one at a time (each assumed before the next), timing each cycle."""

    def __init__(self, fw: Framework, nodes: list[Node]) -> None:
        self.fw = fw
        self.cluster = ClusterState(nodes)
        self.n = 0
        self.slowest = 0.0

    def place(self, assume: bool = True) -> str:
        self.n += 1
        p = pod(f"p{self.n}")
        t0 = time.perf_counter()
        result = schedule_one(self.fw, p, self.cluster)
        self.slowest = max(self.slowest, time.perf_counter() - t0)
        assert result.node is not None, result.message
        if assume:
            self.cluster.assume(p, result.node)
        return result.node

    def policy_scores(self) -> dict[str, int]:
        """The policy plugin's normalized score per node for a new pod (explain path)."""
        result = schedule_one(self.fw, pod("probe-pod"), self.cluster, explain=True)
        assert result.scores is not None
        [scores] = [ps for ps in result.scores.plugins if ps.plugin == "P"]
        return {n.name: s for n, s in zip(result.scores.nodes, scores.normalized,
                                          strict=True)}


def prom_config(url: str, **kw: Any) -> MetricsProviderConfig:
    return replace(MetricsProviderConfig(
        name="prom", kind="prometheus", url=url, refresh_interval=0.5, timeout=2.0,
        max_age=4.0, max_backoff=1.0,
        queries=(MetricQuery("latency_ms", "test_node_latency_ms"),)), **kw)


def errors(t: ProviderTelemetry, reason: str) -> float:
    value = t.registry.get_sample_value("policyd_node_metrics_errors_total",
                                        {"provider": "prom", "reason": reason})
    return value or 0.0


def fresh(cache: MetricsCache, metric: str = "latency_ms") -> dict[str, float]:
    snap = cache.snapshot(metric)
    return snap.fresh(cache.now()) if snap is not None else {}


# -- tests ------------------------------------------------------------------------------------


def test_prometheus_latency_places_pods_on_the_lowest_latency_nodes(
        prometheus: Prometheus, exporter: Exporter) -> None:
    exporter.set({"n1": 40, "n2": 8, "n3": 25, "n4": 3, "n5": 60})
    manager = MetricsManager(lambda: [], registry=CollectorRegistry())
    fw = latency_framework("latency_ms")
    assert attach_metrics([fw], manager.cache) == 1
    placer = Placer(fw, [node(n) for n in NODES])
    try:
        manager.apply([prom_config(prometheus.url)])
        wait_for(lambda: len(fresh(manager.cache)) == 5, 30,
                 "the provider to read every node's latency from Prometheus")
        assert fresh(manager.cache) == {"n1": 40, "n2": 8, "n3": 25, "n4": 3, "n5": 60}
        assert [placer.place() for _ in range(5)] == ["n4"] * 5
        # Latencies change: after Prometheus scrapes and the provider refreshes, new
        # pods follow.
        exporter.set({"n2": 1})
        wait_for(lambda: fresh(manager.cache).get("n2") == 1, 30, "the new n2 latency")
        assert [placer.place() for _ in range(3)] == ["n2"] * 3
        provider = manager.providers["prom"]
        assert provider.state == "ok" and provider.failures == 0
        assert placer.slowest < CYCLE_BUDGET_S
        t = manager.telemetry
        assert t.registry.get_sample_value(
            "policyd_node_metrics_values", {"provider": "prom", "metric": "latency_ms"}) == 5
        assert (t.registry.get_sample_value(
            "policyd_node_metrics_last_success_timestamp_seconds", {"provider": "prom"})
            or 0) > time.time() - 10
    finally:
        manager.stop()


def test_nan_and_negative_values_from_prometheus_are_dropped_and_counted(
        prometheus: Prometheus, exporter: Exporter) -> None:
    exporter.set({"n1": 10, "n2": float("nan"), "n3": -5, "n4": 20, "n5": float("inf")})
    cache = MetricsCache()
    telemetry = ProviderTelemetry(CollectorRegistry())
    provider = PrometheusProvider(prom_config(prometheus.url), cache, telemetry)

    def refreshed() -> bool:
        provider.run_once()
        return set(fresh(cache)) == {"n1", "n4"} and errors(telemetry, "nan") > 0
    wait_for(refreshed, 30, "a refresh with all five series")
    assert fresh(cache) == {"n1": 10, "n4": 20}
    assert errors(telemetry, "negative") > 0 and errors(telemetry, "infinite") > 0
    assert provider.state == "ok"
    # Nodes without a value score worst: the policy sends pods to n1 (10 ms).
    fw = latency_framework("latency_ms")
    attach_metrics([fw], cache)
    placer = Placer(fw, [node(n) for n in NODES])
    assert placer.place() == "n1"


def test_prometheus_stopped_mid_run_values_age_out_and_scheduling_goes_on(
        prometheus: Prometheus, exporter: Exporter, caplog: pytest.LogCaptureFixture
        ) -> None:
    caplog.set_level(logging.INFO, logger="policyd.nodemetrics")
    exporter.set({"n1": 40, "n2": 8, "n3": 25, "n4": 3, "n5": 60})
    manager = MetricsManager(lambda: [], registry=CollectorRegistry())
    fw = latency_framework("latency_ms")
    attach_metrics([fw], manager.cache)
    placer = Placer(fw, [node(n) for n in NODES])
    try:
        manager.apply([prom_config(prometheus.url, max_age=3.0)])
        wait_for(lambda: len(fresh(manager.cache)) == 5, 30, "first values")
        assert placer.place() == "n4"
        provider = manager.providers["prom"]
        last_good = provider.cache.snapshot("latency_ms")
        assert last_good is not None
        prometheus.stop()
        wait_for(lambda: provider.state == "failing", 10, "the provider to notice")
        # Within maxAge the last good values still steer placement.
        if fresh(manager.cache):
            assert placer.place() == "n4"
        wait_for(lambda: fresh(manager.cache) == {}, 10, "the values to age out")
        # Every value missing: the policy scores every node 0 (missing: worst), so the
        # built-in plugins alone decide; cycles still succeed.
        assert placer.policy_scores() == dict.fromkeys(NODES, 0)
        for _ in range(4):
            placer.place()
        assert placer.slowest < CYCLE_BUDGET_S
        assert errors(manager.telemetry, "connection") >= 2
        failing_logs = [r for r in caplog.records if "failing" in r.getMessage()]
        assert len(failing_logs) == 1, [r.getMessage() for r in caplog.records]
        # Prometheus comes back: the provider recovers (backoff is capped at 1 s here).
        prometheus.start()
        wait_for(lambda: len(fresh(manager.cache)) == 5, 30, "recovery")
        assert provider.state == "ok"
        assert any("recovered" in r.getMessage() for r in caplog.records)
        assert placer.place() == "n4"
    finally:
        manager.stop()


class _Slow(BaseHTTPRequestHandler):
    """A Prometheus that never answers in time, or answers garbage."""

    mode = "hang"

    def do_GET(self) -> None:
        if self.mode == "hang":
            time.sleep(5)
            body = b'{"status":"success"}'
        elif self.mode == "garbage":
            body = b"<html><body>502 Bad Gateway</body></html>"
        else:
            body = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[tuple[str, type[_Slow]]]:
    handler = type("Handler", (_Slow,), {})
    with loopback_server(handler) as url:
        yield url, handler


def test_a_hanging_query_times_out_and_never_blocks_scheduling(
        slow_server: tuple[str, type[_Slow]]) -> None:
    url, _ = slow_server
    manager = MetricsManager(lambda: [], registry=CollectorRegistry())
    # Old values (as if from before the hang) that age out meanwhile.
    manager.cache.update("latency_ms", {"n1": 30, "n2": 2}, max_age=1.5, provider="prom")
    fw = latency_framework("latency_ms")
    attach_metrics([fw], manager.cache)
    placer = Placer(fw, [node(n) for n in NODES])
    try:
        manager.apply([prom_config(url, timeout=0.5, max_age=1.5)])
        provider = manager.providers["prom"]
        assert placer.place() == "n2"  # the cached value, while the query hangs
        t0 = time.monotonic()
        wait_for(lambda: errors(manager.telemetry, "timeout") >= 1, 5, "a timeout")
        assert time.monotonic() - t0 < 2.0  # gave up at ~0.5 s, not after 5 s
        assert provider.state == "failing"
        # Cycles keep running at full speed while requests hang.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            placer.place(assume=False)
        assert placer.slowest < CYCLE_BUDGET_S
        assert fresh(manager.cache) == {}  # aged out after 1.5 s
        t0 = time.monotonic()
    finally:
        manager.stop()
    assert time.monotonic() - t0 < 3.0  # stopping waits at most timeout + 1 s


@pytest.mark.parametrize("mode", ["garbage", "matrix"])
def test_garbage_responses_are_failures_that_keep_the_last_values(
        slow_server: tuple[str, type[_Slow]], mode: str) -> None:
    url, handler = slow_server
    handler.mode = mode
    cache = MetricsCache()
    cache.update("latency_ms", {"n1": 5}, max_age=60, provider="prom")
    telemetry = ProviderTelemetry(CollectorRegistry())
    provider = PrometheusProvider(prom_config(url), cache, telemetry)
    assert provider.run_once() is False
    assert errors(telemetry, "bad_response") == 1
    assert fresh(cache) == {"n1": 5}


# -- probe ----------------------------------------------------------------------------------


@pytest.fixture
def listeners() -> Iterator[tuple[int, socket.socket]]:
    """One port listened on at 127.0.0.1-4 (each node its own loopback address), plus
    127.0.0.5 listening with a full backlog and never accepting: connects there hang."""
    port = free_ports(1)[0]
    socks: list[socket.socket] = []
    stop = threading.Event()
    for i in range(1, 5):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((f"127.0.0.{i}", port))
        s.listen(64)
        socks.append(s)

    def accept_all() -> None:
        import selectors

        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        while not stop.is_set():
            for key, _ in sel.select(0.1):
                conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                conn.close()
        sel.close()

    thread = threading.Thread(target=accept_all, daemon=True)
    thread.start()
    black = socket.socket()
    black.bind(("127.0.0.5", port))
    black.listen(0)
    fillers: list[socket.socket] = []
    for _ in range(16):  # fill the accept queue until SYNs are dropped (connects hang)
        f = socket.socket()
        f.setblocking(False)
        f.connect_ex(("127.0.0.5", port))
        fillers.append(f)
        time.sleep(0.05)
        try:
            with socket.create_connection(("127.0.0.5", port), timeout=0.2) as c:
                fillers.append(c.dup())
        except TimeoutError:
            break
    else:
        pytest.skip("could not make a loopback listener that never completes a connect")
    try:
        yield port, black
    finally:
        stop.set()
        thread.join(2)
        for s in [*socks, black, *fillers]:
            s.close()


def test_probe_rtt_steers_pods_and_a_black_hole_times_out(
        listeners: tuple[int, socket.socket]) -> None:
    port, _ = listeners
    # Injected delays on top of the real loopback connect (which takes microseconds).
    delays = {"127.0.0.1": 0.08, "127.0.0.2": 0.03, "127.0.0.3": 0.0, "127.0.0.4": 0.05}

    def connect(host: str, p: int, timeout: float) -> None:
        time.sleep(delays.get(host, 0.0))
        tcp_connect(host, p, timeout)

    nodes = [node("n1", "127.0.0.1"), node("n2", "127.0.0.2"), node("n3", "127.0.0.3"),
             node("n4", "127.0.0.4"), node("n5", "127.0.0.5"), node("n6")]
    config = MetricsProviderConfig(name="rtt", kind="probe", metric="rtt_ms", port=port,
                                   refresh_interval=30.0, timeout=0.4, max_age=60.0,
                                   workers=3)
    cache = MetricsCache()
    telemetry = ProviderTelemetry(CollectorRegistry())
    provider = ProbeProvider(config, cache, telemetry, lambda: nodes, connect=connect)
    try:
        t0 = time.monotonic()
        assert provider.run_once() is True
        elapsed = time.monotonic() - t0
    finally:
        provider.close()
    rtt = fresh(cache, "rtt_ms")
    assert set(rtt) == {"n1", "n2", "n3", "n4"}, rtt
    assert rtt["n3"] < rtt["n2"] < rtt["n4"] < rtt["n1"]
    assert rtt["n1"] >= 80
    assert elapsed < 2.0  # the black hole cost one timeout (0.4 s), in parallel

    def count(reason: str) -> float:
        return telemetry.registry.get_sample_value(
            "policyd_node_metrics_errors_total", {"provider": "rtt", "reason": reason}) or 0
    assert count("timeout") == 1 and count("no_address") == 1

    fw = latency_framework("rtt_ms", missing="worst")
    attach_metrics([fw], cache)
    placer = Placer(fw, nodes)
    assert [placer.place() for _ in range(3)] == ["n3"] * 3


# -- the daemon against the local control plane ---------------------------------------------

DAEMON_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: prom-latency
spec:
  pluginName: PromLatency
  weight: 100
  scores:
    - id: latency
      weight: 1
      normalize: minmax
      metric: {name: latency_ms, prefer: lowest, missing: worst}
"""


def test_daemon_prometheus_provider_places_pods_and_serves_debug_pages(
        control_plane: Any, tmp_path: Path, prometheus: Prometheus,
        exporter: Exporter) -> None:
    import json
    import uuid

    from policyd.kube.client import ConnectionSettings, KubeClient
    from tests.e2e.helpers import Cluster, DaemonFactory, metric, scrape, write_profile

    client = KubeClient.connect(ConnectionSettings(
        kubeconfig=str(control_plane.kubeconfig_path), qps=-1))
    cluster = Cluster(client, f"nm-{uuid.uuid4().hex[:8]}")
    cluster.delete_all_nodes()
    cluster.create_namespace()
    daemons = DaemonFactory(control_plane.kubeconfig_path, tmp_path)
    sched = f"policyd-nm-{uuid.uuid4().hex[:6]}"
    try:
        exporter.set({"dm-a": 30, "dm-b": 4, "dm-c": 12})
        (tmp_path / "pol").mkdir()
        (tmp_path / "pol" / "latency.yaml").write_text(DAEMON_POLICY)
        profile = write_profile(tmp_path, sched, policies="pol", extra=(
            "metricsProviders:\n- name: prom\n  kind: prometheus\n"
            f"  url: {prometheus.url}\n  refreshInterval: 500ms\n  timeout: 1s\n"
            "  maxAge: 3s\n  maxBackoff: 1s\n"
            "  metrics:\n  - {name: latency_ms, query: test_node_latency_ms}\n"))
        for name in ("dm-a", "dm-b", "dm-c"):
            cluster.node(name)
        d = daemons.start(profile)
        assert d.node_metrics is not None
        wait_for(lambda: len(fresh(d.node_metrics.cache)) == 3, 30,
                 "the daemon's provider to read all three nodes")
        for i in range(3):
            cluster.pod(f"p{i}", sched)
        assert [cluster.wait_bound(f"p{i}") for i in range(3)] == ["dm-b"] * 3

        assert d.http is not None
        port = d.http.port
        status, body = scrape(port, "/debug/metrics-cache")
        assert status == 200
        view = json.loads(body)
        nodes = view["metrics"]["latency_ms"]["nodes"]
        assert {n: v["value"] for n, v in nodes.items()} == {"dm-a": 30, "dm-b": 4,
                                                             "dm-c": 12}
        assert all(not v["stale"] and v["ageSeconds"] < 5 for v in nodes.values())
        assert view["providers"]["prom"]["state"] == "ok"
        status, text = scrape(d.http.port)
        assert metric(text, "policyd_node_metrics_values", provider="prom",
                      metric="latency_ms") == 3

        # A pod no node fits shows up in /debug/queue with its failure message.
        cluster.pod("huge", sched, cpu="64")

        def queued() -> Any:
            _, body = scrape(port, "/debug/queue")
            pods = [p for p in json.loads(body)["pods"] if p["pod"].endswith("/huge")]
            return pods and pods[0]["lastFailure"] and pods[0]
        entry = wait_for(queued, 15, "the unschedulable pod in /debug/queue")
        # 64 cpus on 4-cpu nodes: no eviction can make room.
        assert entry["lastFailure"] == (
            "0/3 nodes are available: 3 Insufficient cpu. no new claims to deallocate, "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for "
            "scheduling.")
        assert entry["queue"] in ("unschedulable", "backoff", "active")
        assert entry["attempts"] >= 1

        # Prometheus stops: scheduling goes on, the values age out, pods still bind.
        prometheus.stop()
        wait_for(lambda: fresh(d.node_metrics.cache) == {}, 15, "values to age out")
        for i in range(3, 6):
            cluster.pod(f"p{i}", sched)
        for i in range(3, 6):
            cluster.wait_bound(f"p{i}")
        _, body = scrape(d.http.port, "/debug/metrics-cache")
        assert json.loads(body)["providers"]["prom"]["state"] == "failing"
    finally:
        daemons.stop_all()
        cluster.cleanup()
        client.close()
