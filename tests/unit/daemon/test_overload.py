"""Overload (issue 13, section 3) in the daemon, with plain fake clients: the binder
waits the server's Retry-After, event posting drops (counted) instead of ever making a
bind wait, and undecodable objects are counted as skipped."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest

from policyd.config.plugins import default_framework
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.kube import api
from policyd.kube.backoff import RetryPolicy
from policyd.kube.client import ApiError, KubeClient
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock
from tests.polling import wait_for

Obj = dict[str, Any]


def _sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value or 0.0


class BindAPI:
    """Answers binds: the first `throttled` with `status` + Retry-After, then 201.
    Records each call's time."""

    def __init__(self, throttled: int, retry_after: float | None, status: int = 429
                 ) -> None:
        self.throttled = throttled
        self.retry_after = retry_after
        self.status = status
        self.calls: list[float] = []
        self.lock = threading.Lock()

    def request(self, method: str, path: str, **_: Any) -> Obj:
        with self.lock:
            self.calls.append(time.monotonic())
            n = len(self.calls)
        if path.endswith("/binding") and n <= self.throttled:
            raise ApiError(self.status, "TooManyRequests", "slow down",
                           retry_after=self.retry_after)
        return {}


class SilentSink:
    """Events go nowhere (the binder's tests look at binds only)."""

    def request(self, method: str, path: str, **_: Any) -> Obj:
        return {}


def _scheduler(client: Any, events_client: Any | None = None,
               metrics: Metrics | None = None, **kw: Any) -> Scheduler:
    metrics = metrics or Metrics()
    sink = EventSink(cast(KubeClient, events_client or SilentSink()), metrics, "test",
                     **kw)
    sink.start()
    sched = Scheduler(cast(KubeClient, client), {"policyd": default_framework([])},
                      metrics=metrics, events=sink)
    sched.on_node_add(make_node("n1").capacity(cpu="100", pods="500").raw())
    return sched


@pytest.fixture
def stop_all() -> Iterator[list[Scheduler]]:
    made: list[Scheduler] = []
    yield made
    for s in made:
        s.shutdown(0)
        s.events.stop(0.5)


def _schedule(sched: Scheduler, name: str) -> None:
    sched.on_pod_add(make_pod(name).uid(f"uid-{name}").scheduler("policyd").raw())
    qp = sched.queue.pop(timeout=0)
    assert qp is not None
    sched.schedule(qp)


@pytest.mark.parametrize(("status", "retry_after"), [(429, 0.6), (503, 0.4), (429, 1.0)])
def test_the_binder_waits_at_least_retry_after(
        stop_all: list[Scheduler], status: int, retry_after: float) -> None:
    bind_api = BindAPI(throttled=2, retry_after=retry_after, status=status)
    sched = _scheduler(bind_api)
    stop_all.append(sched)
    _schedule(sched, "p")
    wait_for(lambda: sched.bound_total == 1, 10, "the bind")
    gaps = [b - a for a, b in zip(bind_api.calls, bind_api.calls[1:], strict=False)]
    assert len(bind_api.calls) == 3
    # The binder's own backoff starts at 0.2 s: only the Retry-After explains these.
    assert all(g >= retry_after for g in gaps), gaps


def test_a_retry_after_past_the_bind_deadline_requeues_at_once(
        stop_all: list[Scheduler]) -> None:
    bind_api = BindAPI(throttled=100, retry_after=30.0)
    sched = _scheduler(bind_api)
    sched.binder.retries = RetryPolicy(initial=0.2, maximum=5.0, deadline=2.0)
    stop_all.append(sched)
    t0 = time.monotonic()
    _schedule(sched, "p")
    wait_for(lambda: "uid-p" not in sched.assumed, 10, "the assumption dropped")
    # Given up after the first answer, without retrying inside the 30 s asked for.
    assert len(bind_api.calls) == 1
    assert time.monotonic() - t0 < 2.0
    assert sched.queue.get("uid-p") is not None  # requeued


class SlowEvents:
    """An event API that takes `delay` per call (an overloaded server)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0

    def request(self, method: str, path: str, **_: Any) -> Obj:
        self.calls += 1
        time.sleep(self.delay)
        return {}


def test_an_event_flood_neither_delays_binds_nor_blocks_and_drops_are_counted(
        stop_all: list[Scheduler]) -> None:
    metrics = Metrics()
    bind_api = BindAPI(throttled=0, retry_after=None)
    events = SlowEvents(delay=0.5)
    sched = _scheduler(bind_api, events, metrics, maxsize=5, workers=1)
    stop_all.append(sched)
    # Flood the sink: 200 FailedScheduling events for other pods.
    t0 = time.monotonic()
    for i in range(200):
        sched.events.event(api.pod_ref("ns", f"x{i}", f"u{i}"), "Warning",
                           "FailedScheduling", "no", "Scheduling", "policyd")
    assert time.monotonic() - t0 < 0.5  # enqueuing never waits
    for i in range(20):
        _schedule(sched, f"p{i}")
    wait_for(lambda: sched.bound_total == 20, 5, "20 binds")
    assert time.monotonic() - t0 < 3.0  # not behind 200 x 0.5 s of events
    dropped = _sample(metrics, "policyd_events_dropped_total", reason="queue_full")
    assert dropped >= 190  # the queue holds 5, one in flight
    assert events.calls < 10


class ThrottledEvents:
    def __init__(self, status: int, retry_after: float | None) -> None:
        self.status = status
        self.retry_after = retry_after
        self.calls: list[float] = []

    def request(self, method: str, path: str, **_: Any) -> Obj:
        self.calls.append(time.monotonic())
        raise ApiError(self.status, "x", "no", retry_after=self.retry_after)


@pytest.mark.parametrize(("status", "retry_after", "reason", "calls"), [
    (429, 3600.0, "retries_exhausted", 1),  # the ask is beyond the retry window
    (403, None, "rejected", 1),
    (422, 5.0, "rejected", 1),  # a final error: its Retry-After means nothing
])
def test_event_writes_given_up_are_counted(
        status: int, retry_after: float | None, reason: str, calls: int) -> None:
    metrics = Metrics()
    client = ThrottledEvents(status, retry_after)
    sink = EventSink(cast(KubeClient, client), metrics, "test", workers=1,
                     retries=RetryPolicy(initial=0.2, maximum=5.0, deadline=2.0))
    sink.start()
    try:
        sink.event(api.pod_ref("ns", "p", "u"), "Normal", "Scheduled", "m", "Binding",
                   "policyd")
        wait_for(lambda: _sample(metrics, "policyd_events_dropped_total",
                                 reason=reason) == 1, 5, f"a {reason} drop")
        assert len(client.calls) == calls
    finally:
        sink.stop(0.5)


def test_event_retries_wait_the_retry_after() -> None:
    metrics = Metrics()

    class Twice:
        def __init__(self) -> None:
            self.calls: list[float] = []

        def request(self, method: str, path: str, **_: Any) -> Obj:
            self.calls.append(time.monotonic())
            if len(self.calls) <= 2:
                raise ApiError(429, "TooManyRequests", retry_after=0.5)
            return {}

    client = Twice()
    sink = EventSink(cast(KubeClient, client), metrics, "test", workers=1)
    sink.start()
    try:
        sink.event(api.pod_ref("ns", "p", "u"), "Normal", "Scheduled", "m", "Binding",
                   "policyd")
        wait_for(lambda: _sample(metrics, "policyd_events_total", reason="Scheduled") == 1,
                 5, "the event")
        gaps = [b - a for a, b in zip(client.calls, client.calls[1:], strict=False)]
        assert len(gaps) == 2 and all(g >= 0.5 for g in gaps), gaps
    finally:
        sink.stop(0.5)


def test_event_retries_wait_on_the_injected_clock() -> None:
    clock = ManualClock()
    metrics = Metrics()
    client = ThrottledEvents(429, retry_after=20.0)
    sink = EventSink(cast(KubeClient, client), metrics, "test", workers=1, clock=clock)
    sink.start()
    try:
        t0 = time.monotonic()
        sink.event(api.pod_ref("ns", "p", "u"), "Normal", "Scheduled", "m", "Binding",
                   "policyd")
        wait_for(lambda: _sample(metrics, "policyd_events_dropped_total",
                                 reason="retries_exhausted") == 1, 5, "the drop")
        assert time.monotonic() - t0 < 2.0
        # Each wait at least the Retry-After; the write window (30 s) holds one.
        assert len(client.calls) == 2 and len(clock.waits) == 1
        assert 20.0 <= clock.waits[0] <= 24.0
    finally:
        sink.stop(0.5)


@pytest.mark.parametrize("mutate", [
    lambda p: p["spec"].update(containers="nope"),
    lambda p: p["spec"].update(priority="high"),
    lambda p: p.update(spec=[]),
])
def test_an_undecodable_pod_is_counted_and_others_still_schedule(
        stop_all: list[Scheduler], mutate: Any) -> None:
    metrics = Metrics()
    sched = _scheduler(BindAPI(0, None), metrics=metrics)
    stop_all.append(sched)
    bad = make_pod("bad").uid("uid-bad").scheduler("policyd").raw()
    mutate(bad)
    sched.on_pod_add(bad)
    assert _sample(metrics, "policyd_objects_skipped_total", resource="pods",
                   reason="invalid") == 1
    _schedule(sched, "good")
    wait_for(lambda: sched.bound_total == 1, 5, "the good pod bound")


def test_an_undecodable_node_is_counted(stop_all: list[Scheduler]) -> None:
    metrics = Metrics()
    sched = _scheduler(BindAPI(0, None), metrics=metrics)
    stop_all.append(sched)
    bad = make_node("n2").raw()
    bad["status"] = {"allocatable": "lots"}
    sched.on_node_add(bad)
    assert _sample(metrics, "policyd_objects_skipped_total", resource="nodes",
                   reason="invalid") == 1
