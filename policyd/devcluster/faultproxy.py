"""A loopback HTTPS proxy in front of kube-apiserver that injects the faults real
networks and overloaded API servers produce: every connection cut, every connection
frozen (half-open: nothing forwarded, nothing closed, until a reset much later), and a
share of requests answered with 429 (with Retry-After), 500, 503, or never answered.

It terminates TLS with the API server's own serving certificate (it names 127.0.0.1,
so a kubeconfig pointing at the proxy verifies with the cluster CA as usual) and opens a
new TLS connection upstream for each client connection. Credentials must therefore be
bearer tokens (forwarded in the Authorization header); client certificates end at the
proxy. One thread per connection relays one request and its whole response at a time
(HTTP/1.1 clients do not pipeline), so a TLS socket is never used by two threads.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

LOOPBACK = "127.0.0.1"
FAULTS = ("429", "500", "503", "timeout")
_CHUNK = 65536
# How long a request chosen to "time out" is kept unanswered at most (the client's own
# timeout normally closes the connection long before).
_MAX_HOLD = 120.0


class _Conn:
    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.upstream: socket.socket | None = None
        # Frozen: forward nothing until then, then reset (0: not frozen).
        self.frozen_until = 0.0

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


class _Closed(Exception):
    """The connection is over (EOF, reset, frozen and reset)."""


def _is_watch(target: str) -> bool:
    query = target.partition("?")[2]
    return any(p in ("watch=true", "watch=1", "watch=True") for p in query.split("&"))


def _is_bind(method: str, target: str) -> bool:
    return method == "POST" and target.partition("?")[0].endswith("/binding")


class FaultProxy:
    """Listen on a free loopback port and forward to kube-apiserver on `target_port`.

    `bind_error_share` / `request_error_share`: the share of binding POSTs / of other
    requests (watches included) answered with a fault drawn from `faults` instead of
    being forwarded as they are. A "timeout" is forwarded (the API server acts on it)
    but its response is swallowed: the client sees its own read timeout, the harder
    case of a write that happened without the writer knowing.
    """

    def __init__(self, target_port: int, cert_file: Path, key_file: Path, ca_file: Path,
                 *, seed: int = 0, faults: tuple[str, ...] = FAULTS) -> None:
        self.target_port = target_port
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(str(cert_file), str(key_file))
        self._client_ctx = ssl.create_default_context(cafile=str(ca_file))
        self.bind_error_share = 0.0
        self.request_error_share = 0.0
        self.faults = faults
        self.injected: Counter[str] = Counter()
        self.requests = 0
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

    # -- faults --------------------------------------------------------------------

    def cut(self) -> None:
        """Reset every open connection (watches included)."""
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.close()

    def freeze(self, seconds: float) -> None:
        """Stop forwarding on every connection, open or new, without closing any, for
        `seconds`; then reset them (as a load balancer that lost its backend state
        does). New connections after that work again."""
        self._freeze(seconds, new_connections=True)

    def freeze_open(self, seconds: float) -> None:
        """Stop forwarding on the connections open now, for `seconds`, then reset them;
        new connections work meanwhile (the NAT that lost the state of established
        flows: a client's watches go silent while its new requests succeed)."""
        self._freeze(seconds, new_connections=False)

    def _freeze(self, seconds: float, *, new_connections: bool) -> None:
        until = time.monotonic() + seconds
        with self._lock:
            if new_connections:
                self._frozen_until = until
            for c in self._conns:
                c.frozen_until = until
        timer = threading.Timer(seconds, self._thaw)
        timer.daemon = True
        timer.start()

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
        except (_Closed, OSError, ValueError):
            pass
        finally:
            conn.close()
            with self._lock:
                self._conns.discard(conn)

    def _wait_while_doomed(self, conn: _Conn) -> None:
        while not self._stop.is_set():
            time.sleep(0.1)
            if time.monotonic() >= conn.frozen_until:
                raise _Closed  # the freeze ended: this connection is reset
        raise _Closed

    def _send(self, conn: _Conn, sock: socket.socket | None, data: bytes) -> None:
        if conn.doomed:
            self._wait_while_doomed(conn)
        if sock is None:
            raise _Closed
        sock.sendall(data)

    def _pick_fault(self, method: str, target: str) -> str | None:
        with self._lock:
            self.requests += 1
            share = (self.bind_error_share if _is_bind(method, target)
                     else self.request_error_share)
            if share <= 0 or self._rng.random() >= share:
                return None
            fault = self._rng.choice(self.faults)
            if fault == "timeout" and _is_watch(target):
                fault = "503"  # a watch is long-lived anyway; silence is freeze()'s job
            self.injected[f"{'bind' if _is_bind(method, target) else 'other'}:{fault}"] += 1
            return fault

    def _relay_one(self, conn: _Conn, crd: BinaryIO, urd: BinaryIO) -> bool:
        """Relay one request and its response; False when the connection is over."""
        head = _read_head(crd)
        if head is None:
            return False
        method, target = head[0].decode("latin-1").split(" ")[:2]
        headers = _headers(head)
        body = _read_body(crd, headers, lambda _: None, request=True)
        fault = self._pick_fault(method, target)
        if fault in ("429", "500", "503"):
            self._send(conn, conn.client, _error_response(int(fault or 0)))
            return True
        self._send(conn, conn.upstream, b"".join(head) + body)
        swallow = fault == "timeout"

        def forward(data: bytes) -> None:
            if not swallow:
                self._send(conn, conn.client, data)

        resp_head = _read_head(urd)
        if resp_head is None:
            return False
        forward(b"".join(resp_head))
        resp_headers = _headers(resp_head)
        status = int(resp_head[0].split()[1])
        if method != "HEAD" and status not in (204, 304) and status >= 200:
            _read_body(urd, resp_headers, forward, request=False)
        if swallow:
            # Nothing more on this connection: the client gives up on its own timeout.
            deadline = time.monotonic() + _MAX_HOLD
            conn.client.settimeout(1.0)
            while time.monotonic() < deadline and not self._stop.is_set():
                try:
                    if not conn.client.recv(_CHUNK):
                        break
                except TimeoutError:
                    continue
            return False
        return resp_headers.get("connection", "").lower() != "close"


def _read_head(rd: BinaryIO) -> list[bytes] | None:
    lines: list[bytes] = []
    while True:
        line = rd.readline(_CHUNK)
        if not line:
            return None if not lines else _raise_closed()
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            if len(lines) == 1:  # stray blank line between messages
                lines.clear()
                continue
            return lines


def _raise_closed() -> list[bytes]:
    raise _Closed


def _headers(head: list[bytes]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in head[1:]:
        name, sep, value = line.decode("latin-1").partition(":")
        if sep:
            out[name.strip().lower()] = value.strip()
    return out


def _read_body(rd: BinaryIO, headers: dict[str, str], forward: Callable[[bytes], None],
               *, request: bool) -> bytes:
    """Read a message body by its framing. Requests are returned whole; responses are
    passed to `forward` piece by piece (a watch is an endless chunked body)."""
    out: list[bytes] = []
    emit = out.append if request else forward
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = rd.readline(_CHUNK)
            if not size_line:
                raise _Closed
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            data = size_line
            if size == 0:
                while True:  # trailers, up to the blank line
                    trailer = rd.readline(_CHUNK)
                    if not trailer:
                        raise _Closed
                    data += trailer
                    if trailer in (b"\r\n", b"\n"):
                        break
                emit(data)
                break
            data += _read_exact(rd, size + 2)
            emit(data)
    elif "content-length" in headers:
        remaining = int(headers["content-length"])
        while remaining > 0:
            data = rd.read(min(remaining, _CHUNK))
            if not data:
                raise _Closed
            remaining -= len(data)
            emit(data)
    elif not request:
        while True:  # no framing: the body ends with the connection
            data = rd.read1(_CHUNK) if hasattr(rd, "read1") else rd.read(_CHUNK)
            if not data:
                raise _Closed
            emit(data)
    return b"".join(out)


def _read_exact(rd: BinaryIO, n: int) -> bytes:
    data = rd.read(n)
    if len(data) < n:
        raise _Closed
    return data


_REASONS = {429: ("Too Many Requests", "TooManyRequests"),
            500: ("Internal Server Error", "InternalError"),
            503: ("Service Unavailable", "ServiceUnavailable")}


def _error_response(status: int) -> bytes:
    phrase, reason = _REASONS[status]
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                       "status": "Failure", "message": f"injected by the fault proxy: {phrase}",
                       "reason": reason, "code": status}).encode()
    extra = "Retry-After: 1\r\n" if status == 429 else ""
    return (f"HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body
