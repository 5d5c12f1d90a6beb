"""What each verbosity shows: "no fit" decisions from -v 2 (errors always), and at
-v 4 (debug) the watch events received and every retried API call (which call,
which attempt, why)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from policyd.config.plugins import default_framework
from policyd.daemon import scheduling_loop
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.engine.cycle import ScheduleResult
from policyd.framework.status import Status
from policyd.kube import api
from policyd.kube.backoff import Backoff
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient
from policyd.kube.informer import Informer
from tests.builders import make_node, make_pod
from tests.polling import wait_for

Obj = dict[str, Any]


@pytest.fixture
def scheduler() -> Iterator[Callable[[int], Scheduler]]:
    made: list[tuple[Scheduler, KubeClient]] = []

    def make(verbosity: int) -> Scheduler:
        kube = KubeClient(k8s.ApiClient(k8s.Configuration()), ConnectionSettings())
        metrics = Metrics()
        s = Scheduler(kube, {"policyd": default_framework([])}, metrics=metrics,
                      events=EventSink(kube, metrics, "test"), verbosity=verbosity)
        made.append((s, kube))
        return s

    yield make
    for s, kube in made:
        s.shutdown(0)
        kube.close()


def _fail_once(s: Scheduler) -> None:
    s.on_node_add(make_node("small").capacity(cpu="1", memory="1Gi", pods="10").raw())
    s.on_pod_add(make_pod("big").uid("uid-big").scheduler("policyd").req(cpu="2").raw())
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    s.schedule(qp)


def _lines(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


@pytest.mark.parametrize(("verbosity", "shown"), [(0, False), (1, False), (2, True),
                                                  (4, True)])
def test_a_pod_that_fits_nowhere_is_logged_from_v2(
        scheduler: Callable[[int], Scheduler], caplog: pytest.LogCaptureFixture,
        verbosity: int, shown: bool) -> None:
    caplog.set_level(logging.DEBUG, "policyd")
    _fail_once(scheduler(verbosity))
    lines = [m for m in _lines(caplog, "policyd.daemon.scheduler") if "Insufficient" in m]
    expected = ["default/big: 0/1 nodes are available: 1 Insufficient cpu. "
                "no new claims to deallocate, preemption: "
                "0/1 nodes are available: 1 Preemption is not helpful for scheduling. "
                "(-> unschedulable queue)"]
    assert lines == (expected if shown else [])


def test_a_scheduling_error_is_logged_at_v0(
        scheduler: Callable[[int], Scheduler], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(fw: Any, pod: Any, cluster: Any) -> ScheduleResult:
        status = Status.error("score out of range")
        return ScheduleResult(pod=pod, node=None, num_nodes=1,
                              message="score out of range", error=status)

    monkeypatch.setattr(scheduling_loop, "schedule_one", broken)
    caplog.set_level(logging.INFO, "policyd")
    _fail_once(scheduler(0))
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["error scheduling default/big: score out of range; retrying "
                      "(-> backoff queue)"]


# -- -v 4: watch events ----------------------------------------------------------------

class Handler:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_add(self, obj: Obj) -> None:
        self.seen.append("add")

    def on_update(self, old: Obj, new: Obj) -> None:
        self.seen.append("update")

    def on_delete(self, obj: Obj) -> None:
        self.seen.append("delete")


def _pod_event(etype: str, name: str, rv: str) -> Obj:
    return {"type": etype, "object": {"kind": "Pod", "metadata": {
        "name": name, "namespace": "shop", "uid": f"uid-{name}", "resourceVersion": rv}}}


def test_watch_events_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    inf = Informer(None, "/api/v1/pods", Handler(), name="pods")  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG, "policyd.kube.informer")
    inf._apply(_pod_event("ADDED", "web-0", "10"))
    inf._apply(_pod_event("MODIFIED", "web-0", "11"))
    inf._apply(_pod_event("DELETED", "web-0", "12"))
    inf._apply({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}})
    assert _lines(caplog, "policyd.kube.informer") == [
        "pods: watch event ADDED Pod shop/web-0 (resourceVersion 10)",
        "pods: watch event MODIFIED Pod shop/web-0 (resourceVersion 11)",
        "pods: watch event DELETED Pod shop/web-0 (resourceVersion 12)"]


def test_watch_events_are_not_logged_below_debug(caplog: pytest.LogCaptureFixture) -> None:
    handler = Handler()
    inf = Informer(None, "/api/v1/nodes", handler, name="nodes")  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, "policyd.kube.informer")
    inf._apply({"type": "ADDED", "object": {"metadata": {"name": "n1",
                                                          "resourceVersion": "1"}}})
    assert handler.seen == ["add"] and _lines(caplog, "policyd.kube.informer") == []


# -- retries: which call, which attempt, why ---------------------------------------------

class FlakyClient:
    """Fails the first `failures` calls with `status`, then answers {}; sets `stop`
    (if given) at call number `stop_at`."""

    def __init__(self, failures: int, status: int = 503,
                 stop: threading.Event | None = None, stop_at: int = 0) -> None:
        self.failures = failures
        self.status = status
        self.calls: list[tuple[str, str]] = []
        self.stop = stop
        self.stop_at = stop_at

    def request(self, method: str, path: str, **_: Any) -> Obj:
        self.calls.append((method, path))
        if self.stop is not None and len(self.calls) == self.stop_at:
            self.stop.set()
        if len(self.calls) <= self.failures:
            raise ApiError(self.status, "ServiceUnavailable", "etcd leader changed")
        return {}


def test_event_write_retries_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "policyd.daemon.event_recorder")
    kube = FlakyClient(failures=2)
    sink = EventSink(kube, Metrics(), "test", workers=1)  # type: ignore[arg-type]
    sink.start()
    sink.event(api.pod_ref("shop", "web-0", "u"), "Warning", "FailedScheduling", "m",
               "Scheduling", "policyd")
    wait_for(lambda: len(kube.calls) == 3, 10, "the third attempt")
    sink.stop(10)
    retries = [r for r in caplog.records if "attempt" in r.getMessage()]
    assert [r.levelno for r in retries] == [logging.DEBUG, logging.DEBUG]
    first = retries[0].getMessage()
    assert first.startswith("writing the FailedScheduling event on Pod shop/web-0: "
                            "attempt 1 failed: 503 ServiceUnavailable: etcd leader changed;")
    assert retries[1].getMessage().startswith(
        "writing the FailedScheduling event on Pod shop/web-0: attempt 2 failed")


def test_a_failed_list_names_the_call_and_the_attempt(
        caplog: pytest.LogCaptureFixture) -> None:
    stop = threading.Event()
    kube = FlakyClient(failures=2, status=500, stop=stop, stop_at=2)
    inf = Informer(kube, "/api/v1/pods", Handler(), name="pods",  # type: ignore[arg-type]
                   backoff=Backoff(initial=0.01, maximum=0.01))
    caplog.set_level(logging.INFO, "policyd.kube.informer")
    inf.run(stop)
    [line] = [m for m in _lines(caplog, "policyd.kube.informer") if "attempt" in m]
    assert line.startswith("pods: list /api/v1/pods failed (attempt 1): 500 "
                           "ServiceUnavailable: etcd leader changed; retrying in")
