"""A minimal HTTP/1.1 keep-alive client for the API server's short calls.

Every bound pod costs two POSTs (its Binding and its Scheduled event). Through urllib3
and http.client each one built a request object, parsed the reply's headers with the
email package and wrapped the reply in two response objects: at a thousand pods a
second that was a sixth of the daemon's CPU, for replies nobody reads. Here a request
is one bytes string written to a pooled socket, and the reply is read with a few
`bytes.find` calls: status line, headers up to the blank line, then a body delimited by
Content-Length or chunked encoding (or by the end of the connection).

Only what the API server's non-watch replies need is supported; watches, proxies and
anything else unusual stay on urllib3 (`KubeClient` decides). Failures without a reply
raise `NoReply` with the cause's name, which the client turns into ApiError(0, ...).

What keeps a pooled connection honest:
- an idle connection the server closed (or wrote to) is noticed before reuse by
  polling it for readability without waiting, as urllib3 does, and dropped;
- an idempotent request whose send fails, or whose reused connection ends before the
  first byte of a reply, is sent once more on a new connection; any other request is
  never resent: a POST whose reply was lost may have been applied (a Binding then
  answers 409 on the caller's own retry, which is how the binder learns it);
- every read waits at most the read timeout for its next byte (a silence bound, not a
  deadline for the whole reply), like urllib3's read timeout.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from collections.abc import Iterable
from dataclasses import dataclass

_RECV = 65536
# How a write to, or the first read from, a connection the server closed fails.
_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
# Reply heads are a few hundred bytes; more than this without a blank line is not HTTP.
_MAX_HEAD = 65536
# Methods that can be repeated without changing the outcome (RFC 9110, 9.2.2).
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class NoReply(Exception):
    """No complete reply: the connection failed, timed out, or spoke no HTTP. `reason`
    names the cause (the name an ApiError(0, ...) carries)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _EndedEarly(Exception):
    """The connection ended before the first byte of the reply."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where requests go and how the connection is made."""

    host: str
    port: int
    tls: ssl.SSLContext | None = None
    """None: plain TCP."""
    server_hostname: str | None = None
    """The name sent for SNI and checked against the certificate (default: host)."""
    socket_options: tuple[tuple[int, int, int], ...] = ()
    """setsockopt(level, option, value) for every new socket (TCP keepalive...)."""

    @property
    def host_header(self) -> str:
        default = 443 if self.tls is not None else 80
        name = f"[{self.host}]" if ":" in self.host else self.host
        return name if self.port == default else f"{name}:{self.port}"


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    reason: str
    headers: dict[str, str]
    """Header names in lower case; a repeated header keeps its last value."""
    body: bytes


class Connection:
    """One socket and the bytes read from it but not consumed yet."""

    __slots__ = ("buf", "sock", "timeout", "used")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.timeout: float | None = sock.gettimeout()
        self.used = False  # served a request before: it may have been closed since

    def close(self) -> None:
        # Closing a broken socket can fail; nothing is left to do then.
        with contextlib.suppress(OSError):
            self.sock.close()

    def dropped(self) -> bool:
        """Whether an idle connection was closed (or written to) by the server: an
        idle HTTP/1.1 connection has nothing to read. Checked without waiting."""
        sock = self.sock
        if self.buf:
            return True  # bytes after the last reply: the stream is out of step
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False
        if not isinstance(sock, ssl.SSLSocket):
            return True
        # TLS records that carry no data (a TLS 1.3 session ticket arriving late)
        # also make the socket readable: read without waiting to tell them apart.
        try:
            sock.setblocking(False)
            try:
                sock.recv(1)  # data or the end: either way out of step
                return True
            finally:
                sock.settimeout(self.timeout)
        except ssl.SSLWantReadError:
            return False
        except OSError:
            return True

    def send(self, data: bytes, timeout: float) -> None:
        if self.timeout != timeout:
            self.sock.settimeout(timeout)
            self.timeout = timeout
        try:
            self.sock.sendall(data)
        except _GONE as exc:
            # Nothing was answered yet: the server closed it before our request.
            raise _EndedEarly from exc

    def _more(self) -> bytes:
        data = self.sock.recv(_RECV)
        if not data:
            raise NoReply("RemoteDisconnected", "the connection ended in the middle of a "
                                                "reply")
        return data

    def read_reply(self, head_only: bool) -> tuple[Reply, bool]:
        """The next reply and whether the connection can carry another request.
        `head_only`: the request was HEAD (a reply without a body)."""
        while True:
            status, reason, headers, keep = self._read_head()
            if not 100 <= status <= 199 or status == 101:
                break
            # An interim reply (100 Continue, 103 Early Hints): the real one follows.
        if head_only or status in (204, 304) or 100 <= status <= 199:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = self._read_chunked()
        elif "content-length" in headers:
            body = self._read_exact(_content_length(headers["content-length"]))
        else:
            body = self._read_to_end()
            keep = False
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding != "identity":
            raise NoReply("BadResponse", f"unasked-for content encoding {encoding!r}")
        return Reply(status, reason, headers, body), keep and not self.buf

    def _read_head(self) -> tuple[int, str, dict[str, str], bool]:
        buf = self.buf
        first = True
        while (end := buf.find(b"\r\n\r\n")) < 0:
            if len(buf) > _MAX_HEAD:
                raise NoReply("BadResponse", "reply head too long")
            try:
                data = self.sock.recv(_RECV)
            except _GONE as exc:
                if first and not buf:
                    raise _EndedEarly from exc
                raise
            if not data:
                if first and not buf:
                    raise _EndedEarly
                raise NoReply("RemoteDisconnected", "the connection ended in the "
                                                    "middle of a reply")
            first = False
            buf += data
        self.buf = buf[end + 4:]
        lines = buf[:end].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise NoReply("BadResponse", f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise NoReply("BadResponse", f"malformed header line {line[:80]!r}")
            headers[name.lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        keep = "keep-alive" in connection if version == "HTTP/1.0" else "close" not in connection
        return int(code), reason, headers, keep

    def _read_exact(self, n: int) -> bytes:
        buf = self.buf
        parts = [buf]
        have = len(buf)
        while have < n:
            data = self._more()
            parts.append(data)
            have += len(data)
        buf = b"".join(parts)
        self.buf = buf[n:]
        return buf[:n]

    def _read_line(self) -> bytes:
        while (end := self.buf.find(b"\r\n")) < 0:
            if len(self.buf) > _MAX_HEAD:
                raise NoReply("BadResponse", "chunk line too long")
            self.buf += self._more()
        line = self.buf[:end]
        self.buf = self.buf[end + 2:]
        return line

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_text = self._read_line().split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise NoReply("BadResponse", f"bad chunk size {size_text[:20]!r}") from None
            if size < 0:
                raise NoReply("BadResponse", f"bad chunk size {size_text[:20]!r}")
            if size == 0:
                while self._read_line():  # trailers, up to the blank line
                    pass
                return b"".join(parts)
            parts.append(self._read_exact(size))
            if self._read_exact(2) != b"\r\n":
                raise NoReply("BadResponse", "chunk not followed by CRLF")

    def _read_to_end(self) -> bytes:
        parts = [self.buf]
        self.buf = b""
        while data := self.sock.recv(_RECV):
            parts.append(data)
        return b"".join(parts)


def _content_length(text: str) -> int:
    # Repeated identical values are folded into one by some servers ("12, 12").
    values = {v.strip() for v in text.split(",")}
    if len(values) != 1 or not (value := values.pop()).isdigit():
        raise NoReply("BadResponse", f"bad Content-Length {text[:40]!r}")
    return int(value)


def encode_request(method: str, target: str, headers: Iterable[tuple[str, str]],
                   body: bytes | None) -> bytes:
    """The request's bytes: request line, headers, Content-Length, blank line, body.
    A body-less POST/PUT/PATCH still says Content-Length: 0, as servers expect."""
    lines = [f"{method} {target} HTTP/1.1"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body) if body else 0}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head


class Pool:
    """Keep-alive connections to one endpoint, for any number of threads: each request
    takes an idle connection (or dials one) and puts it back after a complete reply."""

    def __init__(self, endpoint: Endpoint, maxsize: int) -> None:
        self.endpoint = endpoint
        self.maxsize = maxsize
        self.host_header = endpoint.host_header
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self.dialled = 0  # connections opened, for tests and debugging

    def request(self, method: str, target: str, headers: Iterable[tuple[str, str]],
                body: bytes | None, *, connect_timeout: float,
                read_timeout: float) -> Reply:
        """Send one request and read its whole reply; NoReply if none came."""
        data = encode_request(method, target,
                              [("Host", self.host_header), *headers], body)
        retry = method in IDEMPOTENT
        while True:
            conn = self._take(connect_timeout)
            try:
                conn.send(data, read_timeout)
                reply, keep = conn.read_reply(method == "HEAD")
            except _EndedEarly:
                conn.close()
                # A reused connection the server closed just as it was taken: the
                # request never reached it, but only an idempotent one is repeated.
                if conn.used and retry:
                    retry = False
                    continue
                raise NoReply("RemoteDisconnected",
                              "the connection ended without a reply") from None
            except BaseException as exc:
                conn.close()
                if isinstance(exc, NoReply):
                    raise
                if isinstance(exc, TimeoutError):
                    raise NoReply("ReadTimeoutError",
                                  f"no byte for {read_timeout:g}s (read timeout)") from exc
                if isinstance(exc, OSError):
                    raise NoReply(type(exc).__name__, str(exc) or repr(exc)) from exc
                raise
            conn.used = True
            if keep:
                self._put(conn)
            else:
                conn.close()
            return reply

    def _take(self, connect_timeout: float) -> Connection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._dial(connect_timeout)
            if conn.dropped():
                conn.close()
                continue
            return conn

    def _put(self, conn: Connection) -> None:
        with self._lock:
            if len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def _dial(self, timeout: float) -> Connection:
        ep = self.endpoint
        try:
            sock = socket.create_connection((ep.host, ep.port), timeout)
        except TimeoutError as exc:
            raise NoReply("ConnectTimeoutError",
                          f"connecting to {self.host_header} took over {timeout:g}s") from exc
        except OSError as exc:
            raise NoReply("NewConnectionError",
                          f"cannot connect to {self.host_header}: {exc}") from exc
        try:
            for level, option, value in ep.socket_options:
                sock.setsockopt(level, option, value)
            if ep.tls is not None:
                # The handshake counts against the connect timeout, as in urllib3.
                sock = ep.tls.wrap_socket(sock, server_hostname=ep.server_hostname or ep.host)
        except TimeoutError as exc:
            sock.close()
            raise NoReply("ConnectTimeoutError",
                          f"TLS handshake with {self.host_header} took over "
                          f"{timeout:g}s") from exc
        except OSError as exc:  # ssl.SSLError included
            sock.close()
            raise NoReply(type(exc).__name__, str(exc) or repr(exc)) from exc
        self.dialled += 1
        return Connection(sock)

    def drop_idle(self) -> int:
        """Close every idle connection and return how many (connections in use are
        left to their own timeouts and closed when they fail)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        return len(idle)

    def close(self) -> None:
        self.drop_idle()

