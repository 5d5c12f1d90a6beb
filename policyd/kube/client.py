"""A raw-JSON connection to the API server: credentials, rate limit, timeouts, errors.

The official client loads kubeconfig or in-cluster credentials (including token
refresh) and holds the urllib3 pool, read through `policyd.kube.official` only;
everything else is ours. Each call is rate-limited by a client-side token bucket
(QPS/burst, as client-go does), carries a timeout, and returns decoded JSON or raises
`ApiError`, whose `failure` says whether a retry can help (TEMPORARY: no response, 429,
5xx) or not (PERMANENT: 404, 409, 422, ...).

Silent connections (a proxy or NAT that lost its backend keeps the socket open and
forwards nothing) are noticed by silence bounds, not by waiting for TCP: a non-watch
reply that sends no byte for `REQUEST_READ_TIMEOUT` fails as transient, a watch that
sends no byte for `WATCH_SILENCE_TIMEOUT` (the server ends every watch sooner, and
sends bookmarks meanwhile) fails as transient, and either failure drops every idle pooled
connection, since a proxy that froze one froze the others opened before it: the retry
then dials a new connection instead of waiting on the next frozen one. TCP keepalive
covers an idle connection whose peer is gone altogether.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from policyd.kube.backoff import Failure, TokenBucket
from policyd.kube.http1 import NoReply
from policyd.kube.keepalive import SharedPool
from policyd.kube.official import (
    Connection,
    host_pool,
    new_api_client,
    tcp_keepalive_options,
)

# KubeConfigError: `connect` raises it, and its callers catch it from here.
from policyd.kube.official import KubeConfigError as KubeConfigError
from policyd.kube.official import load_configuration as load_official_configuration

log = logging.getLogger("policyd.kube.client")

USER_AGENT = "policyd"
# Seconds a non-watch reply may go without a byte before the call is abandoned (and
# retried on a new connection where that is safe). The API server answers in
# milliseconds; even a list of thousands of objects streams without pauses.
REQUEST_READ_TIMEOUT = 15.0
# Seconds a watch may go without a byte, bookmarks included, before it is taken for
# dead. Bookmarks alone do not keep a quiet watch talking (kube-apiserver v1.36.3 sent
# an idle pod watch its first one after 120 s, then every 60 s), so the informer also
# asks the server to end each watch after 50-75% of this (timeoutSeconds): a healthy
# watch always sends a byte, if only its end, well within the bound.
WATCH_SILENCE_TIMEOUT = 60.0
# TCP keepalive on every connection: an idle connection whose peer (or the NAT entry
# on the way) is gone is probed after 30 s and dropped after 3 unanswered probes 10 s
# apart, 60 s in all. A frozen proxy answers the probes itself, so the silence bounds
# above, not keepalive, are what notice it.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 30, 10, 3
# Enough sockets for two watches, the scheduling loop and a full binder pool: urllib3
# otherwise opens and drops connections beyond its pool size on every call.
POOL_SIZE = 32


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How to reach the API server."""

    kubeconfig: str | None = None
    """Path of a kubeconfig; None: $KUBECONFIG, then in-cluster, then ~/.kube/config."""
    context: str | None = None
    qps: float = 50.0
    """Requests per second once the burst is spent (clientConnection.qps)."""
    burst: int = 100
    timeout: float = 30.0
    """Seconds to connect, and the most a non-watch reply may go silent."""
    read_timeout: float = REQUEST_READ_TIMEOUT
    """Seconds a non-watch reply may go without a byte (capped by `timeout`)."""
    watch_silence: float = WATCH_SILENCE_TIMEOUT
    """Seconds a watch may go without a byte before it is closed and resumed."""

    def request_timeout(self, timeout: float | None = None) -> tuple[float, float]:
        """(connect, read) seconds for a non-watch call; `timeout` overrides the
        configured one for this call (the read bound still applies)."""
        total = self.timeout if timeout is None else timeout
        return total, min(total, self.read_timeout)


class ApiError(Exception):
    """A failed API call. `status` 0 means no HTTP response (refused, reset, timeout).
    `failure` says, from the status alone, whether a retry can help: retry loops
    decide on it, never on the message."""

    def __init__(self, status: int, reason: str, message: str = "",
                 body: Mapping[str, Any] | None = None, retry_after: float | None = None
                 ) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = dict(body) if body is not None else None
        self.retry_after = retry_after
        self.failure = failure_of(status)

    @property
    def transient(self) -> bool:
        return self.failure is Failure.TEMPORARY


class BadWatchEvent(ApiError):
    """A watch sent a line that is not an event: the informer counts it as a skipped
    object before it reconnects."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "BadWatchEvent", message)


def failure_of(status: int) -> Failure:
    """Temporary for no response, throttled, or a server-side failure; 4xx answers
    other than 429 are permanent."""
    if status == 0 or status == 429 or status >= 500:
        return Failure.TEMPORARY
    return Failure.PERMANENT


def is_transient(status: int) -> bool:
    """Whether retrying the same request can succeed (`failure_of` is TEMPORARY)."""
    return failure_of(status) is Failure.TEMPORARY


def api_error_from(status: int, reason: str, data: bytes,
                   headers: Mapping[str, str] | None = None) -> ApiError:
    """Build an ApiError from an error response, reading the Status body if any."""
    body: dict[str, Any] | None = None
    message = ""
    try:
        decoded = json.loads(data) if data else None
        if isinstance(decoded, dict):
            body = decoded
            message = str(decoded.get("message") or "")
            reason = str(decoded.get("reason") or reason)
    except ValueError:
        message = data[:200].decode("utf-8", "replace")
    return ApiError(status, reason, message, body, retry_after_of(status, headers, body))


def retry_after_of(status: int, headers: Mapping[str, str] | None,
                   body: Mapping[str, Any] | None) -> float | None:
    """How long the server asked us to wait, in seconds, or None. As client-go's
    `checkWait`, only a 429 or a 5xx carries a meaningful Retry-After; the header
    (seconds or an HTTP date) wins over the Status body's details.retryAfterSeconds
    (what the API server's own throttling also sets). Nonsense is ignored, not
    trusted: a negative, infinite or unparseable value means no advice."""
    if not (status == 429 or 500 <= status <= 599):
        return None
    raw = headers.get("Retry-After") if headers is not None else None
    if raw is not None:
        seconds = _parse_retry_after(str(raw))
        if seconds is not None:
            return seconds
    details = (body or {}).get("details")
    if isinstance(details, dict):
        value = details.get("retryAfterSeconds")
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and math.isfinite(value) and value >= 0:
            return float(value)
    return None


def _parse_retry_after(raw: str) -> float | None:
    text = raw.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def keepalive_socket_options() -> list[tuple[int, int, int]]:
    """urllib3's default socket options plus TCP keepalive tuned as above."""
    return tcp_keepalive_options(KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT)


def load_configuration(settings: ConnectionSettings) -> Any:
    """The client Configuration for `settings` (kubeconfig, else in-cluster), with our
    pool size and socket options; KubeConfigError when there are no usable
    credentials. Reads files only: no request is sent."""
    return load_official_configuration(settings.kubeconfig, settings.context,
                                       pool_size=POOL_SIZE,
                                       socket_options=keepalive_socket_options())


class KubeClient:
    """Raw JSON calls to one API server, rate-limited, each with a timeout."""

    def __init__(self, api_client: Any, settings: ConnectionSettings,
                 keepalive: SharedPool | None = None) -> None:
        # The official ApiClient, read only through `official.Connection`.
        self._conn = Connection(api_client, USER_AGENT)
        self.settings = settings
        self.limiter = TokenBucket(settings.qps, settings.burst)
        self.dropped_connections = 0
        # The pool requests go to directly (see `_direct_pool`), and the manager it
        # was taken from: a client whose manager was replaced looks it up again.
        self._pool_of: Any = None
        self._pool: Any = None
        self._pool_prefix = ""
        # Non-watch calls go through our own keep-alive pool where it can reach the
        # server as urllib3 would (see policyd.kube.keepalive); watches stay on urllib3.
        self._keepalive = keepalive if keepalive is not None else SharedPool(POOL_SIZE)

    def with_own_limiter(self) -> KubeClient:
        """A client on the same connection pool and credentials with a token bucket of
        its own (same qps/burst): for best-effort writes (events) that must not spend
        the tokens of the calls that matter (binds, the lease)."""
        return KubeClient(self._conn.api_client, self.settings, self._keepalive)

    @classmethod
    def connect(cls, settings: ConnectionSettings) -> KubeClient:
        return cls(new_api_client(load_configuration(settings)), settings)

    @property
    def host(self) -> str:
        return self._conn.host

    def close(self) -> None:
        self._keepalive.close()
        self._conn.close()

    def connection_failed(self, exc: ApiError) -> None:
        """A call got no (complete) reply: drop the idle pooled connections so the
        retries do not each wait out another frozen one."""
        dropped = self._conn.drop_idle() + self._keepalive.drop_idle()
        if dropped:
            self.dropped_connections += dropped
            log.info("%s: dropped %d idle connection(s) to the API server", exc, dropped)

    def _send(self, method: str, path: str, query: Mapping[str, Any] | None,
              body: Any, content_type: str | None, timeout: tuple[float, float]) -> Any:
        """Send one request on the client's pooled connections and return the urllib3
        response, its body not read yet.

        The official client's credentials (its auth settings, which refresh an
        expiring token) and connection pool are used, not its request layers: those
        serialize the body through its model sanitizer, match the content type against
        regular expressions and build a Timeout per call, which at a thousand binds
        and events a second was a third of the daemon's CPU spent outside the
        scheduling cycle. The body is plain JSON-ready data, sent as JSON."""
        # urllib3 (~0.1 s) comes with the client; only needed once one is made.
        import urllib3

        headers, payload = self._headers(method, path, body, content_type)
        path = _with_query(path, query)
        manager = self._conn.manager
        pool, prefix = self._direct_pool(manager)
        self.limiter.take()
        try:
            if pool is None:
                return manager.urlopen(
                    method, self._conn.host + path, body=payload, headers=headers,
                    timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
                    preload_content=False)
            # What PoolManager.urlopen does for a request without a proxy, minus
            # parsing the same URL and looking up the same pool on every call (a tenth
            # of each bind's CPU). It never follows a redirect either: with retries off
            # a 3xx came back as it was.
            return pool.urlopen(
                method, prefix + path, body=payload, headers=headers,
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
                preload_content=False, assert_same_host=False, redirect=False)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._no_reply(exc) from exc

    def _headers(self, method: str, path: str, body: Any, content_type: str | None
                 ) -> tuple[dict[str, str], bytes | None]:
        """A request's headers and its body as JSON bytes (None without a body)."""
        headers = self._conn.headers()  # User-Agent
        headers["Accept"] = "application/json"
        payload = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            payload = json.dumps(body).encode()
        self._conn.authorize(headers, method, path)
        return headers, payload

    def _direct_pool(self, manager: Any) -> tuple[Any, str]:
        """`official.host_pool` of `manager`, looked up again only when the client's
        manager was replaced."""
        if self._pool_of is not manager:
            self._pool_of = manager
            self._pool, self._pool_prefix = host_pool(manager, self._conn.host)
        return self._pool, self._pool_prefix

    def _no_reply(self, exc: BaseException) -> ApiError:
        reason = exc.reason if isinstance(exc, NoReply) else type(exc).__name__
        error = ApiError(0, reason, str(exc))
        self.connection_failed(error)
        return error

    def _exchange(self, method: str, path: str, query: Mapping[str, Any] | None,
                  body: Any, content_type: str | None, timeout: float | None) -> bytes:
        """One non-watch call: the whole body of its 2xx reply; ApiError for a failure
        or any other status."""
        connect, read = self.settings.request_timeout(timeout)
        pool, prefix = self._keepalive.get(self._conn)
        if pool is None:
            return self._exchange_urllib3(method, path, query, body, content_type,
                                          (connect, read))
        headers, payload = self._headers(method, path, body, content_type)
        headers["Accept-Encoding"] = "identity"  # what http.client asked for
        target = prefix + _with_query(path, query)
        self.limiter.take()
        try:
            reply = pool.request(method, target, headers.items(), payload,
                                 connect_timeout=connect, read_timeout=read)
        except NoReply as exc:
            raise self._no_reply(exc) from exc
        if not 200 <= reply.status <= 299:
            retry_after = reply.headers.get("retry-after")
            raise api_error_from(reply.status, reply.reason, reply.body,
                                 {"Retry-After": retry_after} if retry_after else None)
        return reply.body

    def _exchange_urllib3(self, method: str, path: str, query: Mapping[str, Any] | None,
                          body: Any, content_type: str | None,
                          timeout: tuple[float, float]) -> bytes:
        # urllib3 (~0.1 s) comes with the client; only needed once one is made.
        import urllib3

        raw = self._send(method, path, query, body, content_type, timeout)
        try:
            data = raw.data
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._no_reply(exc) from exc
        finally:
            raw.release_conn()
        if not 200 <= raw.status <= 299:
            raise api_error_from(raw.status, str(raw.reason or ""), data, raw.headers)
        return bytes(data)

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str | None = None,
                timeout: float | None = None, decode: bool = True) -> dict[str, Any]:
        """One call; the decoded JSON reply, or ApiError. Never decodes into models.
        `decode=False` is for writes whose reply nobody reads (a Binding, an Event):
        the reply is still read whole and its status checked (errors are decoded into
        the ApiError as always), but a success returns {} without parsing the body."""
        data = self._exchange(method, path, query, body, content_type, timeout)
        if not data or not decode:
            return {}
        try:
            decoded = json.loads(data)
        except ValueError as exc:
            raise ApiError(0, "BadResponse", f"reply is not JSON: {exc}") from exc
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    def stream(self, path: str, *, query: Mapping[str, Any] | None = None,
               silence: float | None = None) -> WatchStream:
        """Open a watch: newline-delimited JSON events until the server ends it, or
        until no byte has come for `silence` seconds (default: the settings')."""
        silence = self.settings.watch_silence if silence is None else silence
        raw = self._send("GET", path, query, None, None, (self.settings.timeout, silence))
        if not 200 <= raw.status <= 299:
            try:
                data = raw.data
            finally:
                raw.release_conn()
            raise api_error_from(raw.status, str(raw.reason or ""), data, raw.headers)
        return WatchStream(raw, silence=silence, on_failure=self.connection_failed)


def _with_query(path: str, query: Mapping[str, Any] | None) -> str:
    params = [f"{k}={quote(_query_value(v))}" for k, v in (query or {}).items()
              if v is not None]
    return f"{path}?{'&'.join(params)}" if params else path


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class WatchStream:
    """The lines of an open watch response. `interrupt()` from another thread ends a
    blocked read (so shutdown does not wait for the watch timeout).

    The silence detector is the socket's read timeout, set to `silence` when the watch
    was opened: every read waits at most that long for its next byte, so a stream
    that sends nothing (not even a bookmark) for `silence` seconds ends with
    ApiError(0, "WatchSilent"), and the informer resumes from its resourceVersion on
    a new connection."""

    def __init__(self, raw: Any, *, silence: float | None = None,
                 on_failure: Callable[[ApiError], None] | None = None) -> None:
        self._raw = raw
        self.silence = silence
        self._on_failure = on_failure
        self.closed = False  # ended on purpose: a failing read is not an error
        self._released = False

    def events(self) -> Iterator[dict[str, Any]]:
        """Decoded watch events; ends when the server closes the stream."""
        # urllib3 (~0.1 s) comes with the client; only needed once one is made.
        import urllib3

        buf = b""
        try:
            for chunk in self._raw.stream(65536, decode_content=True):
                buf += chunk
                while True:
                    line, sep, rest = buf.partition(b"\n")
                    if not sep:
                        break
                    buf = rest
                    if line.strip():
                        yield decode_watch_line(line)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if self.closed:
                return
            raise self._failed(exc) from exc
        finally:
            self.close()
        if buf.strip():
            yield decode_watch_line(buf)

    def _failed(self, exc: BaseException) -> ApiError:
        # urllib3 (~0.1 s) comes with the client; only needed once one is made.
        import urllib3

        if isinstance(exc, urllib3.exceptions.ReadTimeoutError | TimeoutError):
            error = ApiError(0, "WatchSilent",
                             f"no byte for {self.silence or 0:.0f}s (bookmarks included); "
                             "taking the connection for dead")
        else:
            error = ApiError(0, type(exc).__name__, str(exc))
        if self._on_failure is not None:
            self._on_failure(error)
        return error

    def interrupt(self) -> None:
        """End the stream from another thread: a blocked read wakes up and ends
        quietly, and the reading thread closes the connection. Only the socket is shut
        down here: releasing the connection to the pool from this thread too raced with
        the reader's own release, and the pool could hand one connection to two
        requests (each then cut the other's replies short)."""
        self.closed = True
        shutdown = getattr(self._raw, "shutdown", None)
        if shutdown is not None:
            # Already released (the server ended the stream) or broken: nothing to wake.
            with contextlib.suppress(Exception):
                shutdown()

    def close(self) -> None:
        """End the stream from the thread that reads it: the connection is closed
        (a watch cut mid-body cannot be reused) and its slot returned to the pool. After
        a clean end urllib3 has already put it back, open and reusable."""
        self.closed = True
        if self._released:
            return
        self._released = True
        with contextlib.suppress(Exception):  # closing a broken socket can fail
            self._raw.close()
        with contextlib.suppress(Exception):
            self._raw.release_conn()


def decode_watch_line(line: bytes) -> dict[str, Any]:
    """One watch event `{"type": ..., "object": {...}}`; BadWatchEvent if malformed."""
    try:
        event = json.loads(line)
    except ValueError as exc:
        raise BadWatchEvent(f"not JSON: {exc}") from exc
    if not isinstance(event, dict) or "type" not in event:
        raise BadWatchEvent("no event type")
    return event
