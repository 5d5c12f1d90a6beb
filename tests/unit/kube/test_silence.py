"""Silent connections: the watch silence detector, resuming after it, the pooled
connections dropped after a silent reply, and the default bounds docs/running.md states."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
import urllib3

from policyd.daemon.run import RunOptions
from policyd.kube.backoff import Backoff
from policyd.kube.client import (
    KEEPALIVE_COUNT,
    KEEPALIVE_IDLE,
    KEEPALIVE_INTERVAL,
    REQUEST_READ_TIMEOUT,
    WATCH_SILENCE_TIMEOUT,
    ApiError,
    ConnectionSettings,
    KubeClient,
    WatchStream,
    keepalive_socket_options,
)
from policyd.kube.informer import Informer, server_watch_timeout
from policyd.kube.leaderelection import LeaderElectionSettings, LeaderElector
from policyd.kube.official import drop_idle_connections

Obj = dict[str, Any]


def _silent() -> urllib3.exceptions.ReadTimeoutError:
    return urllib3.exceptions.ReadTimeoutError(cast(Any, None), "/api/v1/pods",
                                               "Read timed out.")


class SilentRaw:
    """A watch response: some chunks, then a read that times out (no byte came)."""

    def __init__(self, chunks: list[bytes], then: BaseException | None = None) -> None:
        self.chunks = chunks
        self.then = then if then is not None else _silent()
        self.closed = False

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.chunks
        raise self.then

    def shutdown(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


# -- the detector ---------------------------------------------------------------------

def test_a_watch_that_goes_silent_ends_as_a_transient_failure() -> None:
    failures: list[ApiError] = []
    raw = SilentRaw([b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}\n',
                     b'{"type":"ADDED","object":{"metadata":{"name":"a",',
                     b'"resourceVersion":"10"}}}\n'])
    stream = WatchStream(raw, silence=60.0, on_failure=failures.append)
    seen: list[Obj] = []
    with pytest.raises(ApiError) as caught:
        for event in stream.events():
            seen.append(event)
    assert [e["type"] for e in seen] == ["BOOKMARK", "ADDED"]  # nothing lost before it
    err = caught.value
    assert err.status == 0 and err.transient and err.reason == "WatchSilent"
    assert "no byte for 60s" in str(err)
    assert failures == [err]  # the client drops its idle connections
    assert raw.closed and stream.closed


@pytest.mark.parametrize("exc", [TimeoutError("timed out"), _silent()])
def test_both_forms_of_a_read_timeout_are_silence(exc: BaseException) -> None:
    stream = WatchStream(SilentRaw([], then=exc), silence=5.0)
    with pytest.raises(ApiError, match="WatchSilent"):
        list(stream.events())


def test_a_reset_is_not_called_silence_but_still_drops_idle_connections() -> None:
    failures: list[ApiError] = []
    reset = urllib3.exceptions.ProtocolError("Connection broken", ConnectionResetError())
    stream = WatchStream(SilentRaw([], then=reset), silence=5.0, on_failure=failures.append)
    with pytest.raises(ApiError) as caught:
        list(stream.events())
    assert caught.value.reason == "ProtocolError" and failures == [caught.value]


def test_a_stream_closed_on_purpose_ends_quietly() -> None:
    failures: list[ApiError] = []
    raw = SilentRaw([b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"3"}}}\n'])
    stream = WatchStream(raw, silence=5.0, on_failure=failures.append)
    events = stream.events()
    next(events)
    stream.interrupt()  # shutdown or a relist: the read fails because we ended it
    assert list(events) == [] and failures == []
    assert raw.closed  # by the reading thread, once its read failed


class ReleaseCounting(SilentRaw):
    def __init__(self) -> None:
        super().__init__([])
        self.released = 0
        self.shut = 0

    def shutdown(self) -> None:
        self.shut += 1

    def release_conn(self) -> None:
        self.released += 1


def test_only_the_reading_thread_returns_the_connection_to_the_pool() -> None:
    raw = ReleaseCounting()
    stream = WatchStream(raw, silence=5.0)
    stream.interrupt()  # another thread: wakes the reader, nothing more
    assert (raw.shut, raw.released, raw.closed) == (1, 0, False)
    stream.close()  # the reader
    stream.close()
    assert (raw.released, raw.closed) == (1, True)  # once, however often closed


# -- resuming after it ------------------------------------------------------------------

class ScriptedStream:
    def __init__(self, events: list[Obj], fail: ApiError | None,
                 during: Callable[[], None] | None = None) -> None:
        self._events = events
        self._fail = fail
        self._during = during
        self.closed = False

    def interrupt(self) -> None:
        self.closed = True

    def events(self) -> Iterator[Obj]:
        yield from self._events
        if self._during is not None:
            self._during()
        if self.closed:
            return
        if self._fail is not None:
            raise self._fail

    def close(self) -> None:
        self.closed = True


class ScriptedClient:
    """Lists `items` at `rv`; each watch opens the next scripted stream (the last one
    also stops the informer)."""

    def __init__(self, streams: list[ScriptedStream], stop: threading.Event) -> None:
        self.settings = ConnectionSettings(watch_silence=60.0)
        self.streams = streams
        self.stop = stop
        self.rv = "5"
        self.lists = 0
        self.watch_queries: list[Obj] = []

    def request(self, method: str, path: str, query: Obj | None = None) -> Obj:
        self.lists += 1
        return {"items": [{"metadata": {"name": "a", "uid": "ua", "resourceVersion": "4"}}],
                "metadata": {"resourceVersion": self.rv}}

    def stream(self, path: str, *, query: Obj) -> ScriptedStream:
        self.watch_queries.append(dict(query))
        stream = self.streams.pop(0)
        if not self.streams:
            self.stop.set()
        return stream


class Recorder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_add(self, obj: Obj) -> None:
        self.seen.append("add " + obj["metadata"]["name"])

    def on_update(self, old: Obj, new: Obj) -> None:
        self.seen.append("update " + new["metadata"]["name"])

    def on_delete(self, obj: Obj) -> None:
        self.seen.append("delete " + obj["metadata"]["name"])


def _run(streams: list[ScriptedStream]) -> tuple[Informer, ScriptedClient, Recorder]:
    stop = threading.Event()
    client, handler = ScriptedClient(streams, stop), Recorder()
    inf = Informer(cast(KubeClient, client), "/api/v1/pods", handler,
                   backoff=Backoff(initial=0.0, maximum=0.0))
    inf.run(stop)
    return inf, client, handler


def silent() -> ApiError:
    return ApiError(0, "WatchSilent", "no byte for 60s")


def test_a_silent_watch_resumes_from_its_last_bookmark_without_a_list() -> None:
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}
    added = {"type": "ADDED", "object": {"metadata": {"name": "b", "uid": "ub",
                                                      "resourceVersion": "12"}}}
    inf, client, handler = _run([ScriptedStream([bookmark], silent()),
                                 ScriptedStream([added], silent()),
                                 ScriptedStream([], None)])
    assert [q["resourceVersion"] for q in client.watch_queries] == ["5", "9", "12"]
    assert client.lists == 1 and inf.relists == 1  # resumed, never listed again
    assert handler.seen == ["add a", "add b"]
    assert all(q["allowWatchBookmarks"] is True for q in client.watch_queries)


def test_a_silent_watch_whose_version_expired_lists_again() -> None:
    gone = ApiError(410, "Expired", "too old resource version")
    inf, client, _ = _run([ScriptedStream([], silent()), ScriptedStream([], gone),
                           ScriptedStream([], None)])
    assert client.lists == 2 and inf.relists == 2


def test_each_watch_asks_the_server_to_end_it_within_the_silence_bound() -> None:
    _, client, _ = _run([ScriptedStream([], silent()), ScriptedStream([], None)])
    for q in client.watch_queries:
        assert 30 <= q["timeoutSeconds"] <= 45  # 50-75% of the 60 s bound


# -- relist on request (a new leader) --------------------------------------------------

def test_request_relist_closes_the_watch_and_lists_again() -> None:
    tokens: list[int] = []
    holder: dict[str, Informer] = {}

    def new_term() -> None:
        tokens.append(holder["inf"].request_relist())
        assert not holder["inf"].listed_since(tokens[0])

    stop = threading.Event()
    first = ScriptedStream([], silent(), during=new_term)
    client = ScriptedClient([first, ScriptedStream([], None)], stop)
    inf = Informer(cast(KubeClient, client), "/api/v1/pods", Recorder(),
                   backoff=Backoff(initial=0.0, maximum=0.0))
    holder["inf"] = inf
    inf.run(stop)
    assert first.closed  # the request closed it: no failure, no backoff
    assert client.lists == 2 and inf.listed_since(tokens[0])
    assert not inf.listed_since(tokens[0] + 1)


# -- server-side watch timeout ---------------------------------------------------------

@pytest.mark.parametrize("r", [0.0, 0.3, 0.999])
@pytest.mark.parametrize(("preferred", "silence"), [(300, 60), (300, 10), (5, 60),
                                                    (300, 1)])
def test_server_watch_timeout_stays_inside_the_silence_bound(
        preferred: float, silence: float, r: float) -> None:
    t = server_watch_timeout(preferred, silence, r)
    assert t >= 1
    assert t <= max(1.0, silence * 0.75)
    assert t <= preferred * 2


# -- dropping idle pooled connections --------------------------------------------------

class FakeConn:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _pool_with(manager: urllib3.PoolManager, conns: list[FakeConn]) -> Any:
    pool = manager.connection_from_url("https://127.0.0.1:6443")
    assert pool.pool is not None
    for _ in conns:  # free slots taken, as requests in flight take them
        assert pool.pool.get(block=False) is None
    for c in conns:  # and their connections returned after the replies
        pool._put_conn(c)  # type: ignore[arg-type]  # a fake connection
    return pool


def test_drop_idle_connections_closes_them_and_keeps_the_pool_usable() -> None:
    manager = urllib3.PoolManager(maxsize=4)
    conns = [FakeConn(), FakeConn(), FakeConn()]
    pool = _pool_with(manager, conns)
    other = _pool_with(manager.__class__(maxsize=2), [FakeConn()])  # another manager
    assert drop_idle_connections(manager) == 3
    assert all(c.closed for c in conns)
    assert pool.pool.qsize() == 4  # every slot free again: the next call dials anew
    fresh = pool._get_conn()
    assert fresh not in conns
    assert other.pool.qsize() == 2 and drop_idle_connections(manager) == 0
    assert drop_idle_connections(None) == 0


class FailingManager:
    """A PoolManager whose every request gets no reply; its pools are a real one's."""

    def __init__(self, fail: BaseException, manager: urllib3.PoolManager) -> None:
        self.pools = manager.pools
        self._fail = fail

    def urlopen(self, *_: Any, **__: Any) -> Any:
        raise self._fail


def _fake_api(fail: BaseException, manager: urllib3.PoolManager) -> Any:
    """The official client (its credentials, headers and host) over a failing pool."""
    from kubernetes import client as k8s

    api = k8s.ApiClient(k8s.Configuration(host="https://x"))
    api.rest_client.pool_manager = FailingManager(fail, manager)  # type: ignore[assignment]
    return api


@pytest.mark.parametrize("fail", [_silent(), ConnectionResetError("reset")])
def test_a_call_without_a_reply_drops_the_idle_connections(fail: BaseException) -> None:
    manager = urllib3.PoolManager(maxsize=4)
    conns = [FakeConn(), FakeConn()]
    _pool_with(manager, conns)
    client = KubeClient(_fake_api(fail, manager), ConnectionSettings(qps=-1))
    with pytest.raises(ApiError) as caught:
        client.request("GET", "/api/v1/pods")
    assert caught.value.status == 0 and caught.value.transient
    assert all(c.closed for c in conns) and client.dropped_connections == 2


# -- the defaults docs/running.md states ----------------------------------------------

def test_the_default_silence_bounds() -> None:
    # A frozen watch is noticed within 60-90 s, a frozen reply within 15 s.
    assert 60 <= WATCH_SILENCE_TIMEOUT <= 90
    assert REQUEST_READ_TIMEOUT <= 15
    s = ConnectionSettings()
    assert (s.watch_silence, s.read_timeout) == (WATCH_SILENCE_TIMEOUT, REQUEST_READ_TIMEOUT)
    assert s.request_timeout() == (30.0, REQUEST_READ_TIMEOUT)
    assert s.request_timeout(5.0) == (5.0, 5.0)  # an explicit shorter bound wins
    o = RunOptions(config=cast(Any, None))
    assert (o.watch_silence, o.request_read_timeout) == (WATCH_SILENCE_TIMEOUT,
                                                         REQUEST_READ_TIMEOUT)
    # The server ends a healthy watch well before the client would call it dead.
    assert max(server_watch_timeout(300, WATCH_SILENCE_TIMEOUT, r / 100)
               for r in range(100)) <= WATCH_SILENCE_TIMEOUT - 15


def test_the_default_keepalive_options() -> None:
    opts = keepalive_socket_options()
    assert (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1) in opts
    assert (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1) in opts  # urllib3's default kept
    if hasattr(socket, "TCP_KEEPIDLE"):
        assert (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE) in opts
        assert (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL) in opts
        assert (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_COUNT) in opts
    # A vanished peer is noticed on an idle connection within a minute.
    assert KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT <= 60


def test_the_configuration_carries_the_keepalive_options(tmp_path: Any) -> None:
    from policyd.kube.client import load_configuration

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    cfg = load_configuration(ConnectionSettings(kubeconfig=str(kubeconfig)))
    assert cfg.socket_options == keepalive_socket_options()


class LeaseCalls:
    def __init__(self, read_timeout: float) -> None:
        self.settings = ConnectionSettings(read_timeout=read_timeout)
        self.timeouts: list[float | None] = []

    def request(self, method: str, path: str, *, timeout: float | None = None,
                **_: Any) -> Obj:
        self.timeouts.append(timeout)
        if method == "GET":
            raise ApiError(404, "NotFound")
        return {"metadata": {"resourceVersion": "1", "uid": "u"}, "spec": {}}


@pytest.mark.parametrize(("renew_deadline", "retry_period", "read_timeout", "expected"),
                         [(10.0, 2.0, 15.0, 3.0), (10.0, 0.5, 15.0, 4.5),
                          (60.0, 2.0, 15.0, 15.0), (10.0, 2.0, 1.0, 1.0),
                          (1.0, 0.5, 15.0, 0.5)])
def test_every_lease_request_is_bounded_to_leave_room_for_a_retry(
        renew_deadline: float, retry_period: float, read_timeout: float,
        expected: float) -> None:
    client = LeaseCalls(read_timeout)
    settings = LeaderElectionSettings(lease_duration=renew_deadline * 1.5,
                                      renew_deadline=renew_deadline,
                                      retry_period=retry_period, identity="me")
    elector = LeaderElector(cast(KubeClient, client), settings)
    assert elector.request_timeout == expected
    assert elector.try_acquire_or_renew()
    assert client.timeouts == [expected, expected]  # the GET and the create


def test_with_the_defaults_a_frozen_renewal_and_its_retry_fit_the_renew_deadline() -> None:
    settings = LeaderElectionSettings()
    elector = LeaderElector(cast(KubeClient, LeaseCalls(REQUEST_READ_TIMEOUT)), settings)
    # A retry period, the frozen attempt, a retry period, then the retry on a new
    # connection (as long again at most): all within the renew deadline.
    assert (2 * settings.retry_period + 2 * elector.request_timeout
            <= settings.renew_deadline)
