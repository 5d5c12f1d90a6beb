"""Overload and bad neighbours against the real API server (issue 13, section 3).

The faults sit between policyd and the real kube-apiserver in the loopback fault
proxy (policyd/devcluster/faultproxy.py): 429s with Retry-After on chosen requests, a garbage
line in a watch, a pod rewritten so it does not decode. The hostile node is real: the
API server accepts 5000 valid labels."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.daemon.run import Daemon
from policyd.devcluster import ControlPlane
from policyd.devcluster.faultproxy import FaultProxy, Seen, Throttle
from tests.e2e.helpers import Cluster, DaemonFactory, metric, scrape, write_profile
from tests.polling import wait_for

Obj = dict[str, Any]


@pytest.fixture
def fault_proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    p = FaultProxy.for_control_plane(control_plane)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def proxied(control_plane: ControlPlane, fault_proxy: FaultProxy, tmp_path: Path
            ) -> Iterator[DaemonFactory]:
    factory = DaemonFactory(fault_proxy.kubeconfig(control_plane, tmp_path), tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()


def _metrics(d: Daemon) -> str:
    assert d.http is not None
    return scrape(d.http.port)[1]


def _gaps_after_throttles(seen: list[Seen]) -> list[float]:
    """For each request the proxy answered itself, the time until the next one."""
    return [b.at - a.at for a, b in itertools.pairwise(seen) if a.answered]


def test_binds_and_events_wait_the_retry_after_of_429s(
        cluster: Cluster, fault_proxy: FaultProxy, proxied: DaemonFactory,
        policy_dir: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1")
    d = proxied.start(write_profile(policy_dir.parent, sched))
    # Every pod's first bind is told to come back in 1 s; so is the first event.
    fault_proxy.throttles += [
        Throttle(lambda m, p, w: m == "POST" and p.endswith("/binding"), "1", per_path=1),
        Throttle(lambda m, p, w: m == "POST" and p.endswith("/events"), "1", times=1)]
    names = [f"p{i}" for i in range(5)]
    for n in names:
        cluster.pod(n, sched)
    for n in names:
        assert cluster.wait_bound(n, timeout=20) == "n1"
    for n in names:
        binds = fault_proxy.seen("POST", f"/pods/{n}/binding")
        assert [s.answered for s in binds] == [429, 0]
        assert binds[1].at - binds[0].at >= 1.0, binds
    wait_for(lambda: all(len(cluster.events(pod=n, reason="Scheduled")) == 1
                         for n in names), 15, "one Scheduled event per pod")
    posts = fault_proxy.seen("POST", "/events")
    throttled = [s for s in posts if s.answered]
    assert len(throttled) == 1 and len(posts) == len(names) + 1
    # The retried event came last, not before the Retry-After was over.
    assert max(s.at for s in posts) - throttled[0].at >= 1.0
    text = _metrics(d)
    assert metric(text, "policyd_bind_errors_total", reason="429") == len(names)
    assert metric(text, "scheduler_schedule_attempts_total", result="scheduled") == len(names)


def test_watches_and_the_lease_wait_the_retry_after_of_429s(
        cluster: Cluster, fault_proxy: FaultProxy, proxied: DaemonFactory,
        policy_dir: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1")
    d = proxied.start(write_profile(policy_dir.parent, sched, lease_duration="15s",
                                    renew_deadline="10s"))
    assert d.elector is not None
    # The node watch is throttled twice for 2 s, the lease (renewed every 0.5 s) twice
    # for 2 s; then every watch is cut so the nodes informer must reconnect.
    fault_proxy.throttles += [
        Throttle(lambda m, p, w: w and p == "/api/v1/nodes", "2", times=2),
        Throttle(lambda m, p, w: "/leases/" in p, "2", times=2)]
    fault_proxy.end_watches()
    cluster.node("n2")
    wait_for(lambda: d.scheduler.cluster.get("n2") is not None, 30, "n2 seen")
    node_watches = fault_proxy.seen("GET", "/api/v1/nodes", watch=True)
    gaps = _gaps_after_throttles(node_watches)
    assert len(gaps) == 2 and all(g >= 2.0 for g in gaps), node_watches
    wait_for(lambda: len(fault_proxy.seen(path_end=f"/leases/{sched}")) > 8, 20,
             "renewals after the throttling")
    lease_gaps = _gaps_after_throttles(fault_proxy.seen(path_end=f"/leases/{sched}"))
    assert len(lease_gaps) == 2 and all(g >= 2.0 for g in lease_gaps), lease_gaps
    # 4 s of throttling is inside the 10 s renew deadline: still the leader.
    assert d.elector.is_leader()
    cluster.pod("after", sched)
    cluster.wait_bound("after", timeout=20)


def test_a_garbage_watch_line_and_an_undecodable_pod_leave_the_daemon_scheduling(
        cluster: Cluster, fault_proxy: FaultProxy, proxied: DaemonFactory,
        policy_dir: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1")

    def spoil(obj: Obj) -> Obj:
        # The pod named "bad" reaches policyd with containers that are not a list.
        if (obj.get("metadata") or {}).get("name") == "bad":
            obj = dict(obj, spec=dict(obj.get("spec") or {}, containers="garbage"))
        return obj

    fault_proxy.rewrite = spoil
    d = proxied.start(write_profile(policy_dir.parent, sched))
    relists = d.pods.relists
    fault_proxy.inject["/api/v1/pods"] = [b"this is not json\n",
                                         b'{"type":"ADDED","object":{"metadata":\n']
    cluster.pod("bad", sched)
    names = [f"good{i}" for i in range(5)]
    for n in names:
        cluster.pod(n, sched)
    for n in names:
        assert cluster.wait_bound(n, timeout=30) == "n1"
    assert cluster.node_of("bad") is None
    text = _metrics(d)
    assert metric(text, "policyd_objects_skipped_total", resource="pods",
                  reason="bad_watch_line") >= 1
    assert metric(text, "policyd_objects_skipped_total", resource="pods",
                  reason="invalid") >= 1
    # The garbage made the watch reconnect from where it was, not re-list.
    assert d.pods.relists == relists
    assert len(fault_proxy.seen("GET", "/api/v1/pods", watch=True)) >= 2


def test_a_node_with_5000_labels_is_skipped_and_others_still_schedule(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    d = daemons.start(write_profile(policy_dir.parent, sched))
    cluster.node("hostile", labels={f"example.com/l{i}": f"v{i}" for i in range(5000)})
    cluster.node("n1")
    wait_for(lambda: d.scheduler.cluster.get("n1") is not None, 15, "n1 seen")
    names = [f"p{i}" for i in range(6)]
    for n in names:
        cluster.pod(n, sched)
    for n in names:
        assert cluster.wait_bound(n, timeout=20) == "n1"
    assert d.scheduler.cluster.get("hostile") is None
    assert metric(_metrics(d), "policyd_objects_skipped_total", resource="nodes",
                  reason="hostile_labels") >= 1
    lines = [r.getMessage() for r in caplog.records if "'hostile'" in r.getMessage()]
    assert len(lines) == 1 and "5001 labels" in lines[0]  # and its hostname label, lines


def test_an_event_flood_does_not_slow_binds_and_binds_are_spread_at_qps(
        cluster: Cluster, fault_proxy: FaultProxy, proxied: DaemonFactory,
        policy_dir: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1", cpu="4")
    qps, burst = 20.0, 5
    d = proxied.start(write_profile(policy_dir.parent, sched, lease_duration="15s",
                                    renew_deadline="10s"), qps=qps, burst=burst)
    # Events draw on a bucket of their own (kube-scheduler's separate event client).
    assert d.events.client.limiter is not d.client.limiter
    assert (d.client.limiter.qps, d.client.limiter.burst) == (qps, burst)
    # 60 pods that do not fit: 60 FailedScheduling events and 60 condition patches,
    # 6 s of tokens at qps 20 if events drew on the binds' bucket.
    for i in range(60):
        cluster.pod(f"huge{i}", sched, cpu="64")
    names = [f"p{i}" for i in range(20)]
    start = time.monotonic()
    for n in names:
        cluster.pod(n, sched)
    for n in names:
        assert cluster.wait_bound(n, timeout=30) == "n1"
    took = time.monotonic() - start
    binds = fault_proxy.seen("POST", "/binding")
    assert len(binds) == len(names)
    assert took < 6.0, f"binds took {took:.1f}s behind the event flood"
    # The main client's requests (not the events') never beat its token bucket: in
    # any window of T seconds at most burst + qps*T of them.
    main = [s.at for s in fault_proxy.seen()
            if not s.watch and not s.path.endswith("/events")
            and not s.path.endswith("/status")]
    for i, t0 in enumerate(main):
        for j in range(i, len(main)):
            count = j - i + 1
            assert count <= burst + qps * (main[j] - t0) + 1, (count, main[j] - t0)
    wait_for(lambda: metric(_metrics(d), "policyd_events_total",
                            reason="FailedScheduling") >= 60, 30, "the flood posted")


def test_events_throttled_beyond_their_retry_window_are_dropped_counted_binds_go_on(
        cluster: Cluster, fault_proxy: FaultProxy, proxied: DaemonFactory,
        policy_dir: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1", cpu="4")
    d = proxied.start(write_profile(policy_dir.parent, sched))
    # Every event and PodScheduled patch: come back in two minutes (longer than the
    # writers' 30 s window, so they give up at once instead of retrying early).
    fault_proxy.throttles.append(Throttle(
        lambda m, p, w: (m == "POST" and p.endswith("/events"))
        or (m == "PATCH" and p.endswith("/status")), "120"))
    for i in range(10):
        cluster.pod(f"huge{i}", sched, cpu="64")
    names = [f"p{i}" for i in range(10)]
    start = time.monotonic()
    for n in names:
        cluster.pod(n, sched)
    for n in names:
        assert cluster.wait_bound(n, timeout=20) == "n1"
    assert time.monotonic() - start < 8.0
    # 10 FailedScheduling events, 10 condition patches, 10 Scheduled events at least.
    wait_for(lambda: metric(_metrics(d), "policyd_events_dropped_total",
                            reason="retries_exhausted") >= 30, 15, "30 drops counted")
    writes = [s for s in fault_proxy.seen()
              if s.path.endswith("/events") or s.path.endswith("/status")]
    assert all(s.answered == 429 for s in writes)
    # Each write tried once: none came back before its Retry-After.
    assert len(writes) == metric(_metrics(d), "policyd_events_dropped_total")
