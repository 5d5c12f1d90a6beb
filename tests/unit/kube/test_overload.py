"""Overload and bad neighbours (issue 13, section 3), without a cluster: Retry-After
parsing and the waits built on it, the QPS token bucket under a burst from several
callers, and an informer fed garbage, undecodable objects and hostile label sets
through a fake transport (the raw HTTP response under a real WatchStream)."""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any, cast

import pytest

from policyd.kube.backoff import RETRY_AFTER_MAX, Backoff, TokenBucket
from policyd.kube.client import (
    ApiError,
    ConnectionSettings,
    KubeClient,
    WatchStream,
    api_error_from,
)
from policyd.kube.informer import MAX_LABELS, Informer, object_problem
from policyd.kube.leaderelection import LeaderElectionSettings, LeaderElector
from tests.builders import make_pod

Obj = dict[str, Any]


# -- Retry-After ------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "headers", "body", "expected"), [
    (429, {"Retry-After": "3"}, None, 3.0),
    (429, {"Retry-After": " 0 "}, None, 0.0),
    (503, {"Retry-After": "7"}, None, 7.0),
    (500, {"Retry-After": "1.5"}, None, 1.5),
    # The Status body's details.retryAfterSeconds, when there is no header.
    (429, {}, {"details": {"retryAfterSeconds": 4}}, 4.0),
    (429, {"Retry-After": "2"}, {"details": {"retryAfterSeconds": 9}}, 2.0),
    # Nonsense is no advice.
    (429, {"Retry-After": "-5"}, None, None),
    (429, {"Retry-After": "soon"}, None, None),
    (429, {"Retry-After": "inf"}, None, None),
    (429, {"Retry-After": "nan"}, None, None),
    (429, {}, {"details": {"retryAfterSeconds": "4"}}, None),
    (429, {}, {"details": {"retryAfterSeconds": True}}, None),
    (429, {}, {"details": "x"}, None),
    # Only a 429 or a 5xx: elsewhere the header means nothing to a retry.
    (409, {"Retry-After": "3"}, None, None),
    (404, {}, {"details": {"retryAfterSeconds": 4}}, None),
    (200, {"Retry-After": "3"}, None, None),
])
def test_retry_after_is_read_from_429_and_5xx_only(
        status: int, headers: dict[str, str], body: Obj | None,
        expected: float | None) -> None:
    data = json.dumps(body).encode() if body is not None else b""
    assert api_error_from(status, "x", data, headers).retry_after == expected


def test_retry_after_as_an_http_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    err = api_error_from(429, "x", b"", {"Retry-After": format_datetime(when, usegmt=True)})
    assert err.retry_after is not None and 25 <= err.retry_after <= 31
    past = datetime.now(UTC) - timedelta(seconds=30)
    err = api_error_from(503, "x", b"", {"Retry-After": format_datetime(past, usegmt=True)})
    assert err.retry_after == 0.0


def test_backoff_waits_at_least_retry_after_with_jitter_on_top() -> None:
    b = Backoff(initial=0.2, maximum=5.0, jitter=0.2, rng=random.Random(3))
    for _ in range(20):
        d = b.next_delay(7.0)
        assert 7.0 <= d <= 7.0 * 1.2
    # The exponential delay wins when it is longer.
    b = Backoff(initial=10.0, maximum=30.0, jitter=0.0)
    assert b.next_delay(2.0) == 10.0
    # No ask, a zero ask: the backoff alone.
    b = Backoff(initial=0.5, maximum=4.0, jitter=0.0)
    assert [b.next_delay(None), b.next_delay(0.0)] == [0.5, 1.0]


def test_an_absurd_retry_after_is_capped() -> None:
    b = Backoff(initial=0.2, maximum=5.0, jitter=0.0)
    assert b.next_delay(86400.0) == RETRY_AFTER_MAX
    b = Backoff(initial=0.2, maximum=5.0, jitter=0.5, rng=random.Random(1))
    assert b.next_delay(1e9) <= RETRY_AFTER_MAX * 1.5


# -- QPS --------------------------------------------------------------------------------

def test_a_burst_from_several_threads_beyond_burst_is_spread_at_qps() -> None:
    """One bucket shared by every caller: 40 requests from 4 threads at qps 10, burst
    5 — the first 5 go at once, the rest one every 0.1 s, in one line (no two callers
    get the same slot)."""
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=5, clock=lambda: now[0])
    waits: list[float] = []
    lock = threading.Lock()

    def caller() -> None:
        for _ in range(10):
            w = bucket.reserve()
            with lock:
                waits.append(w)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    waits.sort()
    assert waits[:5] == [0.0] * 5
    expected = [0.1 * i for i in range(1, 36)]
    assert waits[5:] == pytest.approx(expected)
    # 40 requests take 3.5 s: (40 - burst) / qps.
    assert max(waits) == pytest.approx((40 - 5) / 10)


def test_take_sleeps_the_reserved_wait() -> None:
    now = [0.0]
    slept: list[float] = []
    bucket = TokenBucket(qps=2, burst=1, clock=lambda: now[0], sleep=slept.append)
    for _ in range(3):
        bucket.take()
    assert slept == pytest.approx([0.5, 1.0])


def test_an_own_limiter_shares_the_connection_but_not_the_tokens() -> None:
    from kubernetes import client as k8s

    from policyd.kube.client import ConnectionSettings

    main = KubeClient(k8s.ApiClient(k8s.Configuration()), ConnectionSettings(qps=1, burst=1))
    try:
        events = main.with_own_limiter()
        assert events._conn.api_client is main._conn.api_client
        assert events.limiter is not main.limiter
        assert (events.limiter.qps, events.limiter.burst) == (1, 1)
        events.limiter.reserve()
        events.limiter.reserve()  # the event bucket is empty...
        assert main.limiter.reserve() == 0.0  # ...the main one is not
    finally:
        main.close()


# -- the informer against a fake transport -----------------------------------------------

class FakeRaw:
    """The urllib3 response under a WatchStream: yields `chunks`, then ends."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.chunks

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        pass


def _line(etype: str, obj: Obj) -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode() + b"\n"


def _pod(name: str, rv: str, labels: Obj | None = None) -> Obj:
    b = make_pod(name).uid(f"uid-{name}").resource_version(rv)
    if labels is not None:
        b.labels(labels)
    return b.raw()


class FakeTransport:
    """A client whose list returns `items` and whose watches play `watches` in turn
    (the last one again when they run out); a watch may also be an ApiError."""

    def __init__(self, items: list[Obj], watches: list[list[bytes] | ApiError]) -> None:
        self.items = items
        self.watches = watches
        self.opened = 0
        self.lists = 0
        self.settings = ConnectionSettings()

    def request(self, method: str, path: str, query: Obj | None = None) -> Obj:
        self.lists += 1
        return {"items": [dict(o) if isinstance(o, dict) else o for o in self.items],
                "metadata": {"resourceVersion": "1"}}

    def stream(self, path: str, *, query: Obj | None = None) -> WatchStream:
        w = self.watches[min(self.opened, len(self.watches) - 1)]
        self.opened += 1
        if isinstance(w, ApiError):
            raise w
        return WatchStream(FakeRaw(w))


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def on_add(self, obj: Obj) -> None:
        self.seen.append(("add", obj["metadata"]["name"]))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.seen.append(("update", new["metadata"]["name"]))

    def on_delete(self, obj: Obj) -> None:
        self.seen.append(("delete", obj["metadata"]["name"]))


class CountingStop(threading.Event):
    """A stop event whose waits return at once, recording the delays asked for; it
    sets itself after `rounds` waits."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.rounds = rounds
        self.delays: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None:
            self.delays.append(timeout)
        if len(self.delays) >= self.rounds:
            self.set()
        return self.is_set()


def _run(transport: FakeTransport, rounds: int, backoff: Backoff | None = None
         ) -> tuple[Informer, Recorder, CountingStop, list[str]]:
    seen, skips = Recorder(), list[str]()
    inf = Informer(cast(KubeClient, transport), "/api/v1/pods", seen, name="pods",
                   backoff=backoff or Backoff(initial=1.0, maximum=30.0, jitter=0.0),
                   on_skip=skips.append)
    stop = CountingStop(rounds)
    inf.run(stop)
    return inf, seen, stop, skips


@pytest.mark.parametrize("garbage", [
    b"this is not json\n",
    b'{"type": "ADDED", "object": {"metadata": {"name": "p"\n',  # truncated
    b"[1, 2, 3]\n",
    b'{"object": {}}\n',  # no type
    b"\xff\xfe\x00garbage\n",
])
def test_a_garbage_line_reconnects_from_the_last_good_version_with_growing_backoff(
        garbage: bytes, caplog: pytest.LogCaptureFixture) -> None:
    good = _line("ADDED", _pod("a", "5"))
    transport = FakeTransport([], [[good, garbage, _line("ADDED", _pod("never", "6"))],
                                   [garbage]])
    inf, seen, stop, skips = _run(transport, rounds=4)
    assert seen.seen == [("add", "a")]  # what came after the garbage was not applied
    assert inf.resource_version == "5"  # resumed from the last good event
    assert transport.lists == 1  # a reconnect, not a re-list
    # The first stream had a good event (backoff restarts); the rest only garbage:
    # the delays grow instead of reconnecting at the initial delay forever.
    assert stop.delays == [1.0, 2.0, 4.0, 8.0]
    assert skips == ["bad_watch_line"] * 4
    assert any("BadWatchEvent" in r.getMessage() for r in caplog.records)


def test_a_watch_that_ends_at_once_backs_off_instead_of_spinning() -> None:
    transport = FakeTransport([], [[]])
    _, _, stop, skips = _run(transport, rounds=3)
    assert stop.delays == [1.0, 2.0, 4.0]
    assert skips == []


@pytest.mark.parametrize("status", [429, 503])
def test_the_informer_waits_the_servers_retry_after(status: int) -> None:
    throttled = ApiError(status, "TooManyRequests", "slow down", retry_after=12.0)
    transport = FakeTransport([], [throttled])
    _, _, stop, _ = _run(transport, rounds=3,
                         backoff=Backoff(initial=0.8, maximum=30.0, jitter=0.0))
    assert stop.delays == [12.0, 12.0, 12.0]


def test_a_retry_after_on_a_final_error_is_ignored() -> None:
    transport = FakeTransport([], [ApiError(403, "Forbidden", retry_after=50.0)])
    _, _, stop, _ = _run(transport, rounds=2,
                         backoff=Backoff(initial=0.8, maximum=30.0, jitter=0.0))
    assert stop.delays == [0.8, 1.6]


def _bad_objects() -> list[tuple[str, Obj, str]]:
    many = {f"example.com/l{i}": "v" for i in range(MAX_LABELS + 1)}
    return [
        ("metadata-string", {"kind": "Pod", "metadata": "nope"}, "invalid"),
        ("no-name", {"kind": "Pod", "metadata": {"uid": "u1"}}, "invalid"),
        ("name-number", {"kind": "Pod", "metadata": {"name": 7, "uid": "u2"}}, "invalid"),
        ("uid-list", {"kind": "Pod", "metadata": {"name": "x", "uid": ["u"]}}, "invalid"),
        ("labels-list", _pod("labels-list", "7") | {"metadata": {
            "name": "labels-list", "uid": "u3", "labels": ["a"]}}, "invalid"),
        ("label-int", _pod("label-int", "7", {"a": 1}), "invalid"),
        ("thousands", _pod("thousands", "7", many), "hostile_labels"),
        ("long-value", _pod("long-value", "7", {"a": "x" * 100_000}), "hostile_labels"),
        ("long-key", _pod("long-key", "7", {"k" * 400: "v"}), "hostile_labels"),
    ]


@pytest.mark.parametrize(("case", "obj", "reason"), _bad_objects(),
                         ids=[c for c, _, _ in _bad_objects()])
def test_an_unusable_object_is_skipped_and_the_watch_goes_on(
        case: str, obj: Obj, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, "policyd.kube.informer")
    stream = [_line("ADDED", _pod("before", "5")), _line("ADDED", obj),
              _line("ADDED", _pod("after", "8"))]
    transport = FakeTransport([], [stream, []])
    inf, seen, _, skips = _run(transport, rounds=1)
    assert seen.seen == [("add", "before"), ("add", "after")]
    assert skips == [reason]
    assert inf.resource_version == "8"
    lines = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert len(lines) == 1 and len(lines[0]) < 400, lines  # one short, clear line
    assert lines[0].startswith("pods: skipping watch ADDED")


def test_an_object_turning_hostile_keeps_its_last_good_version() -> None:
    good = _pod("p", "5", {"app": "web"})
    hostile = _pod("p", "6", {f"l{i}": "v" for i in range(5000)})
    later = _pod("p", "7", {"app": "web", "tier": "front"})
    transport = FakeTransport([], [[_line("ADDED", good), _line("MODIFIED", hostile),
                                    _line("MODIFIED", hostile), _line("MODIFIED", later),
                                    _line("DELETED", hostile)], []])
    inf, seen, _, skips = _run(transport, rounds=1)
    # The hostile versions are not delivered; the next good one is an update from the
    # last good one; a delete needs only the identity, whatever the labels.
    assert seen.seen == [("add", "p"), ("update", "p"), ("delete", "p")]
    assert skips == ["hostile_labels", "hostile_labels"]
    assert inf.cache == {}


def test_one_log_line_per_object_however_often_it_comes(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, "policyd.kube.informer")
    hostile = [_line("MODIFIED" if i else "ADDED",
                     _pod("n", str(10 + i), {f"l{j}": "v" for j in range(2000)}))
               for i in range(10)]
    transport = FakeTransport([], [hostile, []])
    _, seen, _, skips = _run(transport, rounds=1)
    assert seen.seen == [] and len(skips) == 10
    assert len([r for r in caplog.records if "skipping" in r.getMessage()]) == 1


def test_a_list_skips_unusable_items_and_keeps_known_good_versions() -> None:
    transport = FakeTransport([_pod("a", "1"), _pod("b", "2")], [[]])
    seen = Recorder()
    skips: list[str] = []
    inf = Informer(cast(KubeClient, transport), "/api/v1/pods", seen, on_skip=skips.append)
    inf._list()
    assert sorted(seen.seen) == [("add", "a"), ("add", "b")]
    seen.seen.clear()
    # Now b is hostile and a third item is garbage: b keeps its last good version
    # (not reported deleted), the garbage is skipped.
    transport.items = [_pod("a", "1"), _pod("b", "3", {"x": "y" * 64}),
                       {"metadata": None}, "not an object"]  # type: ignore[list-item]
    inf._list()
    assert seen.seen == []
    assert sorted(o["metadata"]["name"] for o in inf.cache.values()) == ["a", "b"]
    assert sorted(skips) == ["hostile_labels", "invalid", "invalid"]


def test_unknown_event_types_are_skipped() -> None:
    transport = FakeTransport([], [[_line("EXPLODED", _pod("x", "4")),
                                    _line("ADDED", _pod("y", "5"))], []])
    _, seen, _, skips = _run(transport, rounds=1)
    assert seen.seen == [("add", "y")] and skips == ["invalid"]


def test_object_problem_accepts_ordinary_objects() -> None:
    assert object_problem(_pod("p", "1", {"app": "web", "a" * 253 + "/" + "b" * 63:
                                          "c" * 63})) is None
    assert object_problem({"metadata": {"name": "n"}}) is None
    assert object_problem(_pod("p", "1", {f"l{i}": "v" for i in range(MAX_LABELS)})) is None


# -- the lease ---------------------------------------------------------------------------

class ThrottledLease:
    """A lease API that answers 429 with Retry-After from `throttle_from` on."""

    def __init__(self, now: list[float], retry_after: float, throttle_from: int) -> None:
        self.now = now
        self.retry_after = retry_after
        self.throttle_from = throttle_from
        self.calls: list[float] = []
        self.lease: Obj | None = None
        self.rv = 0
        self.settings = ConnectionSettings()

    def request(self, method: str, path: str, **kw: Any) -> Obj:
        self.calls.append(self.now[0])
        if len(self.calls) >= self.throttle_from:
            raise ApiError(429, "TooManyRequests", "slow down", retry_after=self.retry_after)
        if method == "GET":
            if self.lease is None:
                raise ApiError(404, "NotFound")
            return self.lease
        self.rv += 1
        body = dict(kw["body"])
        body["metadata"] = dict(body.get("metadata") or {}, resourceVersion=str(self.rv))
        self.lease = body
        return body


class ClockStop(threading.Event):
    """Waits move a fake clock instead of sleeping; set after `until`."""

    def __init__(self, now: list[float], until: float) -> None:
        super().__init__()
        self.now = now
        self.until = until
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        self.now[0] += timeout
        if self.now[0] >= self.until:
            self.set()
        return self.is_set()


def _elector(api: ThrottledLease, now: list[float], stopped: list[float]
             ) -> LeaderElector:
    settings = LeaderElectionSettings(namespace="ns", name="l", lease_duration=15,
                                      renew_deadline=10, retry_period=2, identity="me")
    return LeaderElector(cast(KubeClient, api), settings, clock=lambda: now[0],
                         on_stopped=lambda: stopped.append(now[0]))


def test_a_standby_waits_the_leases_retry_after() -> None:
    now = [0.0]
    api = ThrottledLease(now, retry_after=9.0, throttle_from=1)
    stop = ClockStop(now, until=40)
    _elector(api, now, []).run(stop)
    gaps = [b - a for a, b in zip(api.calls, api.calls[1:], strict=False)]
    assert gaps and all(g >= 9.0 for g in gaps), api.calls


def test_a_leader_told_to_wait_past_its_renew_deadline_steps_down_on_time() -> None:
    now = [0.0]
    stopped: list[float] = []
    # Acquire (GET 404, POST), renew once (GET, PUT), then 429 with Retry-After 30.
    api = ThrottledLease(now, retry_after=30.0, throttle_from=5)
    stop = ClockStop(now, until=60)
    el = _elector(api, now, stopped)
    el.run(stop)
    last_renew = 2.0
    # No attempt inside the Retry-After window...
    throttled_at = api.calls[4]
    assert all(c == throttled_at or c >= throttled_at + 30.0 for c in api.calls[4:])
    # ...but the leader stepped down at its renew deadline, not 30 s later.
    assert stopped and stopped[0] == pytest.approx(last_renew + 10.0, abs=0.05)


def test_a_throttled_watch_error_event_carries_its_retry_after() -> None:
    status = {"kind": "Status", "code": 429, "reason": "TooManyRequests",
              "details": {"retryAfterSeconds": 6}}
    transport = FakeTransport([], [[json.dumps({"type": "ERROR", "object": status})
                                    .encode() + b"\n"]])
    _, _, stop, _ = _run(transport, rounds=2,
                         backoff=Backoff(initial=0.8, maximum=30.0, jitter=0.0))
    assert stop.delays == [6.0, 6.0]
