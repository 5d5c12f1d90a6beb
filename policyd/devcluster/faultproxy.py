"""The one fault-injection proxy: a loopback HTTPS proxy in front of kube-apiserver
that injects the faults real networks and overloaded API servers produce, for the
chaos soak (`bench/soak.py`) and the fault and overload tests.

Connections: every one cut, refused while `refusing`, frozen (half-open: nothing
forwarded, nothing closed, until a reset later or never), or each request held back by
`delay`. Requests: a random share answered with 429 (with Retry-After), 500, 503, or
never answered; chosen ones answered by a `Throttle` (a status and Retry-After); watch
streams ended, or given extra lines; objects rewritten on their way to the client; and,
with `record`, every request written down when it arrived (to measure the spacing of
retries).

It terminates TLS with the API server's own serving certificate (it names 127.0.0.1,
so a kubeconfig pointing at the proxy verifies with the cluster CA as usual) and opens a
new TLS connection upstream for each client connection. Client certificates therefore
end at the proxy: it forwards bearer tokens (the Authorization header) as they are and,
given `client_cert`, authenticates upstream with that certificate
(`for_control_plane`: the dev control plane's admin). One thread per connection relays
one request and its whole response at a time (HTTP/1.1 clients do not pipeline), so a
TLS socket is never used by two threads.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import random
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from policyd.devcluster.controlplane import ControlPlane
from policyd.devcluster.httpframing import (
    CHUNK,
    Closed,
    chunk,
    error_response,
    headers_of,
    is_chunked,
    read_body,
    read_chunk,
    read_head,
    with_body,
)

LOOPBACK = "127.0.0.1"
FAULTS = ("429", "500", "503", "timeout")
# How long a request chosen to "time out" is kept unanswered at most (the client's own
# timeout normally closes the connection long before).
_MAX_HOLD = 120.0
_INJECTED = "injected by the fault proxy"

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as it reached the proxy."""

    at: float  # time.monotonic()
    method: str
    path: str  # without the query
    watch: bool
    answered: int  # the status the proxy answered itself (429...), 0 if forwarded


@dataclass(slots=True)
class Throttle:
    """Answer requests that `match` with `status` and Retry-After, `times` times in all
    (0: always), or only each distinct path's first `per_path` requests."""

    match: Callable[[str, str, bool], bool]  # (method, path, watch)
    retry_after: str
    status: int = 429
    times: int = 0
    per_path: int = 0
    used: int = 0
    per_path_used: dict[str, int] = field(default_factory=dict)

    def take(self, method: str, path: str, watch: bool) -> bool:
        if not self.match(method, path, watch):
            return False
        if self.per_path:
            n = self.per_path_used.get(path, 0)
            if n >= self.per_path:
                return False
            self.per_path_used[path] = n + 1
            return True
        if self.times and self.used >= self.times:
            return False
        self.used += 1
        return True


class _Conn:
    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.upstream: socket.socket | None = None
        # Frozen: forward nothing until then, then reset (0: not frozen; inf: frozen
        # until the proxy closes).
        self.frozen_until = 0.0
        self.watching = False  # relaying a watch stream now

    @property
    def doomed(self) -> bool:
        return self.frozen_until > 0

    def close(self) -> None:
        for s in (self.client, self.upstream):
            if s is None:
                continue
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()


def _split_target(target: str) -> tuple[str, bool]:
    """The path of a request target without its query, and whether it is a watch."""
    path, _, query = target.partition("?")
    return path, any(p in ("watch=true", "watch=1", "watch=True") for p in query.split("&"))


def _is_bind(method: str, path: str) -> bool:
    return method == "POST" and path.endswith("/binding")


class FaultProxy:
    """Listen on a free loopback port and forward to kube-apiserver on `target_port`.

    `bind_error_share` / `request_error_share`: the share of binding POSTs / of other
    requests (watches included) answered with a fault drawn from `faults` instead of
    being forwarded as they are. A "timeout" is forwarded (the API server acts on it)
    but its response is swallowed: the client sees its own read timeout, the harder
    case of a write that happened without the writer knowing.

    The attributes a test sets while the proxy runs: `refusing` (new connections are
    closed at once), `delay` (seconds each request is held before it is forwarded),
    `throttles` (tried in order before the random faults), `inject` (lines put into the
    newest watch of a path after its next event, then dropped) and `rewrite` (applied
    to every object of a list or watch event on its way to the client).
    """

    def __init__(self, target_port: int, cert_file: Path, key_file: Path, ca_file: Path,
                 *, seed: int = 0, faults: tuple[str, ...] = FAULTS,
                 client_cert: tuple[Path, Path] | None = None, record: bool = False
                 ) -> None:
        self.target_port = target_port
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(str(cert_file), str(key_file))
        self._client_ctx = ssl.create_default_context(cafile=str(ca_file))
        if client_cert is not None:
            self._client_ctx.load_cert_chain(str(client_cert[0]), str(client_cert[1]))
        self.bind_error_share = 0.0
        self.request_error_share = 0.0
        self.faults = faults
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self.refusing = False
        self.delay = 0.0
        self.throttles: list[Throttle] = []
        self.inject: dict[str, list[bytes]] = {}
        self.rewrite: Callable[[Obj], Obj] | None = None
        # Off by default: a soak's hours of requests are not kept.
        self._record = record
        self._seen: list[Seen] = []
        # The newest watch per path: injected lines go there only. A watch the client
        # has given up on (a re-list, a reconnect) lives on until its upstream ends,
        # and must not swallow them.
        self._newest_watch: dict[str, int] = {}
        self._watch_ids = itertools.count(1)
        self._rng = random.Random(seed)
        self._frozen_until = 0.0
        self._conns: set[_Conn] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((LOOPBACK, 0))
        self.listener.listen(128)
        self.listener.settimeout(0.1)
        self.port: int = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="faultproxy").start()

    @classmethod
    def for_control_plane(cls, cp: ControlPlane, *, seed: int = 0,
                          record: bool = True) -> FaultProxy:
        """A proxy in front of the dev control plane's API server that forwards as its
        admin (the client certificate of `cp.kubeconfig_path` ends here), recording."""
        certs = cp.certs
        assert certs is not None and cp.apiserver_port is not None, "not started"
        return cls(cp.apiserver_port, certs.serving_cert, certs.serving_key, certs.ca_cert,
                   seed=seed, client_cert=(certs.admin_cert, certs.admin_key),
                   record=record)

    def kubeconfig(self, cp: ControlPlane, directory: Path) -> Path:
        """`cp`'s kubeconfig with the proxy's port instead of the API server's."""
        text = cp.kubeconfig_path.read_text().replace(f":{cp.apiserver_port}",
                                                      f":{self.port}")
        path = directory / f"proxied-{self.port}.kubeconfig"
        path.write_text(text)
        return path

    def seen(self, method: str | None = None, path_end: str = "",
             watch: bool | None = None) -> list[Seen]:
        """The recorded requests (`record`) with this method, path ending and watch-ness,
        in arrival order."""
        with self._lock:
            return [s for s in self._seen
                    if (method is None or s.method == method) and s.path.endswith(path_end)
                    and (watch is None or s.watch == watch)]

    # -- faults --------------------------------------------------------------------

    def cut(self) -> None:
        """Reset every open connection (watches included)."""
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.close()

    def end_watches(self) -> None:
        """Reset the connections relaying a watch now (the client reconnects them)."""
        with self._lock:
            conns = [c for c in self._conns if c.watching]
        for c in conns:
            c.close()

    def freeze(self, seconds: float) -> None:
        """Stop forwarding on every connection, open or new, without closing any, for
        `seconds`; then reset them (as a load balancer that lost its backend state
        does). New connections after that work again."""
        self._freeze(seconds, new_connections=True)

    def freeze_open(self, seconds: float | None = None) -> int:
        """Stop forwarding on the connections open now, for `seconds` (None: until the
        proxy closes), then reset them; new connections work meanwhile (the NAT that
        lost the state of established flows: a client's watches go silent while its
        new requests succeed). Returns how many connections froze."""
        return self._freeze(seconds, new_connections=False)

    def _freeze(self, seconds: float | None, *, new_connections: bool) -> int:
        until = math.inf if seconds is None else time.monotonic() + seconds
        with self._lock:
            if new_connections:
                self._frozen_until = until
            for c in self._conns:
                c.frozen_until = until
            frozen = len(self._conns)
        if seconds is not None:
            timer = threading.Timer(seconds, self._thaw)
            timer.daemon = True
            timer.start()
        return frozen

    def _thaw(self) -> None:
        now = time.monotonic()
        with self._lock:
            doomed = [c for c in self._conns if c.doomed and c.frozen_until <= now + 0.01]
        for c in doomed:
            c.close()

    def frozen(self) -> bool:
        return time.monotonic() < self._frozen_until

    def close(self) -> None:
        self._stop.set()
        self.cut()
        with contextlib.suppress(OSError):
            self.listener.close()

    # -- relaying ------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self.listener.accept()
            except OSError:
                continue
            if self.refusing:
                raw.close()
                continue
            conn = _Conn(raw)
            with self._lock:
                if self.frozen():
                    conn.frozen_until = self._frozen_until
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: _Conn) -> None:
        try:
            if conn.doomed:
                self._wait_while_doomed(conn)
            conn.client.settimeout(None)
            conn.client = self._server_ctx.wrap_socket(conn.client, server_side=True)
            up = socket.create_connection((LOOPBACK, self.target_port), timeout=5)
            up.settimeout(None)
            conn.upstream = self._client_ctx.wrap_socket(up, server_hostname=LOOPBACK)
            crd = conn.client.makefile("rb")
            urd = conn.upstream.makefile("rb")
            while not self._stop.is_set():
                if not self._relay_one(conn, crd, urd):
                    break
        except (Closed, OSError, ValueError):
            pass
        finally:
            conn.close()
            with self._lock:
                self._conns.discard(conn)

    def _wait_while_doomed(self, conn: _Conn) -> None:
        while not self._stop.is_set():
            time.sleep(0.1)
            if time.monotonic() >= conn.frozen_until:
                raise Closed  # the freeze ended: this connection is reset
        raise Closed

    def _send(self, conn: _Conn, sock: socket.socket | None, data: bytes) -> None:
        if conn.doomed:
            self._wait_while_doomed(conn)
        if sock is None:
            raise Closed
        sock.sendall(data)

    def _answer(self, method: str, path: str, watch: bool) -> tuple[str | None, bytes]:
        """What the proxy does with this request: (a random fault or None, the response
        it gives itself instead of forwarding, b"" to forward)."""
        with self._lock:
            self.requests += 1
            throttle = next((t for t in self.throttles if t.take(method, path, watch)),
                            None)
            fault = None if throttle is not None else self._pick_fault(method, path, watch)
            if throttle is not None:
                own = error_response(throttle.status, "the proxy says: slow down",
                                     throttle.retry_after)
                status = throttle.status
            elif fault in ("429", "500", "503"):
                status = int(fault or 0)
                own = error_response(status, _INJECTED, "1" if status == 429 else None)
            else:
                own, status = b"", 0
            if self._record:
                self._seen.append(Seen(time.monotonic(), method, path, watch, status))
            return fault, own

    def _pick_fault(self, method: str, path: str, watch: bool) -> str | None:
        share = self.bind_error_share if _is_bind(method, path) else self.request_error_share
        if share <= 0 or self._rng.random() >= share:
            return None
        fault = self._rng.choice(self.faults)
        if fault == "timeout" and watch:
            fault = "503"  # a watch is long-lived anyway; silence is freeze()'s job
        self.injected[f"{'bind' if _is_bind(method, path) else 'other'}:{fault}"] += 1
        return fault

    def _relay_one(self, conn: _Conn, crd: BinaryIO, urd: BinaryIO) -> bool:
        """Relay one request and its response; False when the connection is over."""
        head = read_head(crd)
        if head is None:
            return False
        method, target = head[0].decode("latin-1").split(" ")[:2]
        path, watch = _split_target(target)
        body = read_body(crd, headers_of(head), lambda _: None, request=True)
        fault, own = self._answer(method, path, watch)
        if own:
            self._send(conn, conn.client, own)
            return True
        if self.delay:
            time.sleep(self.delay)
        self._send(conn, conn.upstream, b"".join(head) + body)
        swallow = fault == "timeout"

        def forward(data: bytes) -> None:
            if not swallow:
                self._send(conn, conn.client, data)

        resp_head = read_head(urd)
        if resp_head is None:
            return False
        resp_headers = headers_of(resp_head)
        status = int(resp_head[0].split()[1])
        has_body = method != "HEAD" and status not in (204, 304) and status >= 200
        rewrite = self.rewrite
        if watch and status == 200 and is_chunked(resp_headers):
            forward(b"".join(resp_head))
            self._relay_watch(conn, urd, path, forward)
        elif rewrite is not None and method == "GET" and status == 200 and has_body:
            data = bytearray()
            read_body(urd, resp_headers, data.extend, request=False)
            if is_chunked(resp_headers):
                data = bytearray(_dechunk(bytes(data)))
            forward(with_body(resp_head, _rewrite_list(bytes(data), rewrite)))
        else:
            forward(b"".join(resp_head))
            if has_body:
                read_body(urd, resp_headers, forward, request=False)
        if swallow:
            self._hold(conn)
            return False
        return resp_headers.get("connection", "").lower() != "close"

    def _hold(self, conn: _Conn) -> None:
        """Nothing more on this connection: the client gives up on its own timeout."""
        deadline = time.monotonic() + _MAX_HOLD
        conn.client.settimeout(1.0)
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                if not conn.client.recv(CHUNK):
                    break
            except TimeoutError:
                continue

    def _relay_watch(self, conn: _Conn, urd: BinaryIO, path: str,
                     forward: Callable[[bytes], None]) -> None:
        """Relay a watch's chunked body one event line per chunk, each event's object
        rewritten and the path's injected lines put in after an event."""
        with self._lock:
            watch_id = next(self._watch_ids)
            self._newest_watch[path] = watch_id
        conn.watching = True
        pending = b""
        try:
            while True:
                wire, data = read_chunk(urd)
                if not data:
                    if pending:
                        forward(chunk(pending))
                    forward(wire)
                    return
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    forward(chunk(self._rewrite_event(line + b"\n")))
                    with self._lock:
                        newest = self._newest_watch.get(path) == watch_id
                        extra = self.inject.pop(path, []) if newest else []
                    for garbage in extra:
                        forward(chunk(garbage))
        finally:
            conn.watching = False

    def _rewrite_event(self, line: bytes) -> bytes:
        rewrite = self.rewrite
        if rewrite is None:
            return line
        try:
            event = json.loads(line)
        except ValueError:
            return line
        if (isinstance(event, dict) and event.get("type") in ("ADDED", "MODIFIED")
                and isinstance(event.get("object"), dict)):
            event["object"] = rewrite(event["object"])
            return json.dumps(event).encode() + b"\n"
        return line


def _dechunk(wire: bytes) -> bytes:
    """The data of a whole chunked body."""
    out, pos = bytearray(), 0
    while True:
        end = wire.index(b"\r\n", pos)
        size = int(wire[pos:end].split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return bytes(out)
        out += wire[end + 2:end + 2 + size]
        pos = end + 2 + size + 2


def _rewrite_list(data: bytes, rewrite: Callable[[Obj], Obj]) -> bytes:
    """A list response with `rewrite` applied to each item; anything else as it is."""
    try:
        doc = json.loads(data)
    except ValueError:
        return data
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        doc["items"] = [rewrite(o) for o in doc["items"]]
        return json.dumps(doc).encode()
    return data
