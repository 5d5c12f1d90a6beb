"""Fault injection: connections dropped by the loopback fault proxy
(policyd/devcluster/faultproxy.py), and the API server restarted mid-run. Nothing may
be lost: every pod created around the fault is bound once, and the watches recover on
their own."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from policyd.devcluster import ControlPlane
from policyd.devcluster.faultproxy import FaultProxy
from policyd.devcluster.process import ManagedProcess
from policyd.kube.client import ConnectionSettings, KubeClient
from policyd.kube.leaderelection import released_spec
from tests.e2e.helpers import Cluster, DaemonFactory, metric, scrape, scrape_when, write_profile
from tests.polling import wait_for


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    p = FaultProxy.for_control_plane(control_plane)
    try:
        yield p
    finally:
        p.close()


def test_dropped_connections_and_an_outage_lose_nothing(
        control_plane: ControlPlane, cluster: Cluster, proxy: FaultProxy, tmp_path: Path,
        policy_dir: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1")
    cluster.node("n2")
    daemons = DaemonFactory(proxy.kubeconfig(control_plane, tmp_path),
                            tmp_path)
    try:
        # A lease that outlives the outage: losing leadership mid-bind is another test.
        d = daemons.start(write_profile(policy_dir.parent, sched, lease_duration="15s",
                                        renew_deadline="10s"))
        cluster.pod("before", sched)
        cluster.wait_bound("before")
        # Cut everything twice, with pods created in between.
        for round_ in range(2):
            proxy.cut()
            for i in range(5):
                cluster.pod(f"cut{round_}-{i}", sched)
            for i in range(5):
                cluster.wait_bound(f"cut{round_}-{i}", timeout=30)
        # An outage: connections refused for 3 s; pods and a node change meanwhile.
        proxy.refusing = True
        proxy.cut()
        for i in range(5):
            cluster.pod(f"outage-{i}", sched, annotations={
                "myorg.io/require-hw-encrypt": "true"})
        cluster.node("hw", labels={"node.kubernetes.io/hw-encrypt": "true"})
        time.sleep(3)
        proxy.refusing = False
        for i in range(5):
            assert cluster.wait_bound(f"outage-{i}", timeout=40) == "hw"
        # Bound once each, and each bind known as ours (a reply lost in a cut is
        # confirmed, not retried into a second binding or forgotten).
        text = scrape_when(d.http.port, "scheduler_schedule_attempts_total",  # type: ignore[union-attr]
                           16, result="scheduled")
        assert metric(text, "scheduler_schedule_attempts_total", result="scheduled") == 16
        assert metric(text, "policyd_watch_errors_total") >= 1
        names = ["before", *(f"cut{r}-{i}" for r in range(2) for i in range(5)),
                 *(f"outage-{i}" for i in range(5))]
        wait_for(lambda: all(len(cluster.events(pod=n, reason="Scheduled")) == 1
                             for n in names), 15, "one Scheduled event per pod")
    finally:
        daemons.stop_all()


def test_api_server_restart_loses_nothing(tmp_path: Path, policy_dir: Path) -> None:
    # Its own control plane: restarting the shared one would disturb other tests.
    with ControlPlane() as cp:
        client = KubeClient.connect(ConnectionSettings(kubeconfig=str(cp.kubeconfig_path),
                                                       qps=-1))
        cluster = Cluster(client, "restart")
        cluster.create_namespace()
        sched = "policyd-restart"
        cluster.node("n1")
        daemons = DaemonFactory(cp.kubeconfig_path, tmp_path)
        try:
            d = daemons.start(write_profile(policy_dir.parent, sched))
            for i in range(5):
                cluster.pod(f"a-{i}", sched)
            for i in range(5):
                cluster.wait_bound(f"a-{i}")
            relists = (d.pods.relists, d.nodes.relists)
            # Writes the informers do not watch, then an etcd compaction: after the
            # restart, the resourceVersions the watches hold are gone (410 Gone), so
            # they must re-list.
            for i in range(20):
                client.request("POST", "/api/v1/namespaces/restart/configmaps",
                               body={"metadata": {"name": f"cm-{i}"}})
            cp.compact_etcd()
            apiserver = next(p for p in cp.processes if p.name == "kube-apiserver")
            apiserver.stop()
            time.sleep(2)
            restarted = ManagedProcess.start(apiserver.name, apiserver.argv,
                                             apiserver.log_path)
            cp.processes[cp.processes.index(apiserver)] = restarted
            wait_for(cp.safe_ready, 60, "kube-apiserver back")
            for i in range(5):
                cluster.pod(f"b-{i}", sched)
            cluster.node("n2")
            for i in range(5):
                cluster.wait_bound(f"b-{i}", timeout=40)
            _, text = scrape(d.http.port)  # type: ignore[union-attr]
            assert metric(text, "scheduler_schedule_attempts_total",
                          result="scheduled") == 10
            assert d.scheduler.cluster.get("n2") is not None
            assert d.pods.relists > relists[0] and d.nodes.relists > relists[1]
        finally:
            daemons.stop_all()
            client.close()


def test_sigterm_finishes_in_flight_binds(
        control_plane: ControlPlane, cluster: Cluster, proxy: FaultProxy, tmp_path: Path,
        policy_dir: Path) -> None:
    import signal
    import subprocess
    import sys

    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1")
    # A lease that survives slow renewals while the proxy holds every request back.
    profile = write_profile(policy_dir.parent, sched, lease_duration="15s",
                            renew_deadline="10s")
    log_path = tmp_path / "policyd.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "policyd", "run", "--config", str(profile),
             "--kubeconfig", str(proxy.kubeconfig(control_plane, tmp_path)),
             "--secure-port", "0", "-v", "2", "--identity", "graceful",
             "--shutdown-grace-period", "20"], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: b"became leader" in log_path.read_bytes(), 30, "leadership")
        wait_for(lambda: b"listed" in log_path.read_bytes(), 30, "caches")
        proxy.delay = 1.0  # every request now takes >= 1 s to reach the API server
        names = [f"p{i}" for i in range(5)]
        for n in names:
            cluster.pod(n, sched)
        wait_for(lambda: all(f"assumed {cluster.ns}/{n} ".encode() in log_path.read_bytes()
                             for n in names), 30, "every pod assumed (binds in flight)")
        # Under load the first binds may land before the last pod is assumed: what
        # matters is that some are still in flight when the signal comes.
        in_flight = [n for n in names if not cluster.node_of(n)]
        assert in_flight, "every bind landed before SIGTERM: nothing was in flight"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log_path.read_text()
        for n in names:
            assert cluster.node_of(n) == "n1", log_path.read_text()
        lease = cluster.lease(sched) or {}
        assert (lease.get("spec") or {}).get("holderIdentity") == ""
    finally:
        proxy.delay = 0.0
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# Silence bounds shortened for the frozen-proxy test, so it takes seconds: the defaults
# (client.WATCH_SILENCE_TIMEOUT, REQUEST_READ_TIMEOUT) are checked in
# tests/unit/kube/test_silence.py.
FAST_WATCH_SILENCE = 10.0
FAST_READ_TIMEOUT = 5.0


def test_a_frozen_proxy_is_noticed_in_seconds(
        control_plane: ControlPlane, cluster: Cluster, proxy: FaultProxy, tmp_path: Path,
        policy_dir: Path) -> None:
    """Every open connection freezes (half-open: nothing forwarded, nothing closed),
    new ones pass: the pod watch notices within its silence bound and resumes on a new
    connection, the lease renewal and the bind do not wait on frozen pooled
    connections, and the pod created right after the freeze is bound within the
    bound (it took 384 s before)."""
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1")
    daemons = DaemonFactory(proxy.kubeconfig(control_plane, tmp_path),
                            tmp_path)
    try:
        d = daemons.start(write_profile(policy_dir.parent, sched, lease_duration="15s",
                                        renew_deadline="10s"),
                          watch_silence=FAST_WATCH_SILENCE,
                          request_read_timeout=FAST_READ_TIMEOUT)
        # Binds and renewals leave idle connections in the pool: they freeze too.
        for i in range(3):
            cluster.pod(f"before-{i}", sched)
        for i in range(3):
            cluster.wait_bound(f"before-{i}")
        assert d.elector is not None
        frozen = proxy.freeze_open()
        assert frozen >= 3  # the watches at least
        start = time.monotonic()
        cluster.pod("after", sched)
        cluster.wait_bound("after", timeout=FAST_WATCH_SILENCE + FAST_READ_TIMEOUT + 30)
        took = time.monotonic() - start
        print(f"bound {took:.1f}s after the freeze")
        assert took < FAST_WATCH_SILENCE + FAST_READ_TIMEOUT + 5, took
        # The renewals moved to new connections within the renew deadline: this
        # replica never stopped leading (a second term would mean it had).
        assert d.is_leader() and d.elector.term == 1
        assert d.client.dropped_connections >= 1
        port = d.http.port  # type: ignore[union-attr]
        # The binder counts the bind once its reply is in: a moment after the pod shows.
        wait_for(lambda: metric(scrape(port)[1], "scheduler_schedule_attempts_total",
                                result="scheduled") == 4, 10, "4 pods scheduled once each")
        assert metric(scrape(port)[1], "policyd_watch_errors_total", resource="pods") >= 1
    finally:
        daemons.stop_all()


def test_a_new_leader_with_a_frozen_watch_schedules_on_fresh_caches(
        control_plane: ControlPlane, cluster: Cluster, proxy: FaultProxy, tmp_path: Path,
        policy_dir: Path) -> None:
    """A standby whose watches froze takes the lease: before scheduling it lists its
    caches again, so it sees the pod the previous leader bound meanwhile and does not
    put a second one on the full node."""
    from policyd.kube import api

    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1", cpu="4")
    # The previous leader, played by the test: holds the lease until it steps down.
    api.create_lease(cluster.client, "default", sched, {
        "holderIdentity": "old-leader", "leaseDurationSeconds": 3600,
        "acquireTime": api.now_rfc3339(micro=True), "renewTime": api.now_rfc3339(micro=True),
        "leaseTransitions": 0})
    daemons = DaemonFactory(proxy.kubeconfig(control_plane, tmp_path),
                            tmp_path)
    try:
        # Default silence bounds: the frozen watches stay stuck for the whole test.
        d = daemons.start(write_profile(policy_dir.parent, sched, lease_duration="15s",
                                        renew_deadline="10s"), leader=False)
        cluster.pod("waiting", sched, cpu="3")
        wait_for(lambda: any((o.get("metadata") or {}).get("name") == "waiting"
                             for o in d.pods.cache.values()), 15, "the standby sees the pod")
        # Every informer's watch open before the freeze: a watch request frozen before
        # its response began cannot be interrupted for the relist, and would hold the
        # new leader back until its silence bound (the test is about stuck streams).
        # (An optional resource this server does not serve, PodGroups, has none.)
        wait_for(lambda: all(i.watching or i.absent for i in d.informers()), 15,
                 "every watch open")
        proxy.freeze_open()
        # The previous leader binds a pod the standby never hears of, and steps down.
        cluster.pod("placed", "someone-else", cpu="3")
        cluster.bind("placed", "n1")
        lease = cluster.lease(sched)
        assert lease is not None
        api.update_lease(cluster.client, lease,
                         released_spec(lease["spec"], api.now_rfc3339(micro=True)))
        wait_for(d.is_leader, 30, "the standby takes the lease")
        assert d.elector is not None
        wait_for(lambda: d.freshness.confirmed(d.elector.term), 30,  # type: ignore[union-attr]
                 "caches listed again")
        wait_for(lambda: cluster.node_of("waiting")
                 or cluster.events(pod="waiting", reason="FailedScheduling"), 30,
                 "a decision about the waiting pod")
        # Bound to n1 here would be a second 3-cpu pod on a 4-cpu node: a decision
        # made on the cache the frozen watch left behind.
        assert cluster.node_of("waiting") is None
        [failed, *_] = cluster.events(pod="waiting", reason="FailedScheduling")
        assert "Insufficient cpu" in failed["message"], failed
    finally:
        daemons.stop_all()
