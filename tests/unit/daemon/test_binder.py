"""The binder on a hand-driven clock: it waits the server's Retry-After and gives up at
its deadline without sleeping for real, and why it gave up (a typed reason) decides
whether the pod is told."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, cast

import pytest

from policyd.config.plugins import default_framework
from policyd.daemon.binder import BIND_RETRIES
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.kube.client import ApiError, KubeClient
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock
from tests.polling import wait_for

Obj = dict[str, Any]


class BindAPI:
    """Fails the first `failures` binds with `status` (and a Retry-After), then 201."""

    def __init__(self, failures: int, status: int = 429, retry_after: float | None = None
                 ) -> None:
        self.failures = failures
        self.status = status
        self.retry_after = retry_after
        self.binds = 0

    def request(self, method: str, path: str, **_: Any) -> Obj:
        if path.endswith("/binding"):
            self.binds += 1
            if self.binds <= self.failures:
                raise ApiError(self.status, "Nope", "refused", retry_after=self.retry_after)
        return {}


class Recorder:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.scheduled: list[str] = []


@pytest.fixture
def make() -> Iterator[Any]:
    made: list[Scheduler] = []

    def build(api: BindAPI, clock: ManualClock, leader: bool = True
              ) -> tuple[Scheduler, Recorder]:
        metrics = Metrics()
        sink = EventSink(cast(KubeClient, api), metrics, "test")  # never started
        seen = Recorder()
        sink.failed = lambda ns, name, uid, message, *a, **kw: (  # type: ignore[method-assign]
            seen.failed.append(message))
        sink.scheduled = lambda ns, name, uid, node, *a: (  # type: ignore[method-assign]
            seen.scheduled.append(node))
        s = Scheduler(cast(KubeClient, api), {"policyd": default_framework([])},
                      metrics=metrics, events=sink, clock=clock, is_leader=lambda: leader)
        made.append(s)
        s.on_node_add(make_node("n1").capacity(cpu="8", pods="10").raw())
        return s, seen

    yield build
    for s in made:
        s.shutdown(0)


def _schedule(s: Scheduler) -> None:
    s.on_pod_add(make_pod("p").uid("uid-p").scheduler("policyd").raw())
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    s.schedule(qp)


def test_retry_after_is_waited_on_the_clock_not_for_real(make: Any) -> None:
    clock = ManualClock()
    api = BindAPI(failures=2, retry_after=20.0)
    s, seen = make(api, clock)
    t0 = time.monotonic()
    _schedule(s)
    wait_for(lambda: s.bound_total == 1, 5, "the bind")
    assert time.monotonic() - t0 < 2.0
    assert api.binds == 3 and seen.scheduled == ["n1"] and seen.failed == []
    assert len(clock.waits) == 2 and all(20.0 <= w <= 24.0 for w in clock.waits)


def test_a_retry_that_would_start_past_the_deadline_requeues(make: Any) -> None:
    clock = ManualClock()
    api = BindAPI(failures=100, retry_after=BIND_RETRIES.deadline * 0.6)
    s, seen = make(api, clock)
    _schedule(s)
    # The pod is told last, after the assumption is undone and the pod requeued.
    wait_for(lambda: seen.failed != [], 5, "the pod told")
    assert "uid-p" not in s.assumed
    # The first wait fits in the window, the second would end past it.
    assert api.binds == 2 and len(clock.waits) == 1
    assert s.queue.get("uid-p") is not None
    assert seen.failed == ["binding rejected: 429 Nope: refused"]


def test_a_permanent_failure_is_not_retried_and_the_pod_is_told(make: Any) -> None:
    clock = ManualClock()
    api = BindAPI(failures=1, status=403)
    s, seen = make(api, clock)
    _schedule(s)
    wait_for(lambda: seen.failed != [], 5, "the failure")
    assert api.binds == 1 and clock.waits == []
    assert seen.failed == ["binding rejected: 403 Nope: refused"]
    assert s.queue.get("uid-p") is not None


def test_losing_leadership_requeues_without_telling_the_pod(make: Any) -> None:
    clock = ManualClock()
    api = BindAPI(failures=0)
    s, seen = make(api, clock, leader=False)
    _schedule(s)
    wait_for(lambda: "uid-p" not in s.assumed, 5, "the assumption undone")
    assert api.binds == 0 and seen.failed == [] and seen.scheduled == []
    assert s.queue.get("uid-p") is not None
