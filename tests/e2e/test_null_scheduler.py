"""The benchmark's null scheduler against the real API server: it binds every pending
pod of its scheduler name round-robin and, with events, posts each pod's Scheduled event
the way policyd does (the "null-events" ceiling of bench/e2e)."""

from __future__ import annotations

import threading
import time

import pytest

from bench.e2e.null_scheduler import serve
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from tests.e2e.helpers import Cluster


@pytest.mark.parametrize("with_events", [False, True])
def test_null_scheduler_binds_round_robin(cluster: Cluster, with_events: bool) -> None:
    name = f"null-{cluster.ns}"
    for i in range(3):
        cluster.node(f"{cluster.ns}-n{i}")
    for i in range(6):
        cluster.pod(f"p{i}", name)
    events = EventSink(cluster.client.with_own_limiter(), Metrics(), "null-test") \
        if with_events else None
    if events is not None:
        events.start()
    stop = threading.Event()
    runner = threading.Thread(target=serve, args=(cluster.client, name, 4, events, stop),
                              daemon=True)
    runner.start()
    path = f"/api/v1/namespaces/{cluster.ns}/pods"
    deadline = time.monotonic() + 30
    nodes: list[str] = []
    while time.monotonic() < deadline:
        nodes = [p["spec"].get("nodeName", "")
                 for p in cluster.client.request("GET", path)["items"]]
        if all(nodes):
            break
        time.sleep(0.1)
    stop.set()
    runner.join(30)
    if events is not None:
        events.stop(5.0)
    assert sorted(nodes) == sorted(f"{cluster.ns}-n{i}" for i in range(3) for _ in range(2))
    scheduled = [e for e in cluster.client.request(
        "GET", f"/apis/events.k8s.io/v1/namespaces/{cluster.ns}/events")["items"]
        if e.get("reason") == "Scheduled"]
    assert len(scheduled) == (6 if with_events else 0)
    if with_events:
        assert all(e["note"].startswith(f"Successfully assigned {cluster.ns}/p")
                   for e in scheduled)
