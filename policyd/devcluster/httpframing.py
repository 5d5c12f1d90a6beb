"""HTTP/1.1 message framing for the fault proxy: read a head, its headers and a body by
its framing (chunked, Content-Length, or until close), and write the answers the proxy
gives itself (a Kubernetes Status with the API server's reason)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import BinaryIO

CHUNK = 65536


class Closed(Exception):
    """The connection is over (EOF, reset, frozen and reset)."""


def read_head(rd: BinaryIO) -> list[bytes] | None:
    """The start line and header lines up to the blank line; None at a clean EOF
    between messages."""
    lines: list[bytes] = []
    while True:
        line = rd.readline(CHUNK)
        if not line:
            if lines:
                raise Closed
            return None
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            if len(lines) == 1:  # stray blank line between messages
                lines.clear()
                continue
            return lines


def headers_of(head: list[bytes]) -> dict[str, str]:
    """The head's headers, names lowercased."""
    out: dict[str, str] = {}
    for line in head[1:]:
        name, sep, value = line.decode("latin-1").partition(":")
        if sep:
            out[name.strip().lower()] = value.strip()
    return out


def is_chunked(headers: dict[str, str]) -> bool:
    return "chunked" in headers.get("transfer-encoding", "").lower()


def read_chunk(rd: BinaryIO) -> tuple[bytes, bytes]:
    """One chunk of a chunked body: (its bytes on the wire, its data). The last chunk
    (empty data) comes with its trailers up to the blank line."""
    size_line = rd.readline(CHUNK)
    if not size_line:
        raise Closed
    size = int(size_line.split(b";")[0].strip() or b"0", 16)
    if size == 0:
        wire = size_line
        while True:  # trailers, up to the blank line
            trailer = rd.readline(CHUNK)
            if not trailer:
                raise Closed
            wire += trailer
            if trailer in (b"\r\n", b"\n"):
                return wire, b""
    data = read_exact(rd, size + 2)
    return size_line + data, data[:-2]


def read_body(rd: BinaryIO, headers: dict[str, str], forward: Callable[[bytes], None],
              *, request: bool) -> bytes:
    """Read a message body by its framing. Requests are returned whole; responses are
    passed to `forward` piece by piece, as on the wire (a watch is an endless chunked
    body)."""
    out: list[bytes] = []
    emit = out.append if request else forward
    if is_chunked(headers):
        while True:
            wire, data = read_chunk(rd)
            emit(wire)
            if not data:
                break
    elif "content-length" in headers:
        remaining = int(headers["content-length"])
        while remaining > 0:
            piece = rd.read(min(remaining, CHUNK))
            if not piece:
                raise Closed
            remaining -= len(piece)
            emit(piece)
    elif not request:
        while True:  # no framing: the body ends with the connection
            piece = rd.read1(CHUNK) if hasattr(rd, "read1") else rd.read(CHUNK)
            if not piece:
                raise Closed
            emit(piece)
    return b"".join(out)


def read_exact(rd: BinaryIO, n: int) -> bytes:
    data = rd.read(n)
    if len(data) < n:
        raise Closed
    return data


def chunk(data: bytes) -> bytes:
    """`data` as one chunk of a chunked body (b"" is the last chunk)."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def with_body(head: list[bytes], body: bytes) -> bytes:
    """A response head and a whole body, framed by Content-Length (the body was
    rewritten, so its old length or chunking no longer holds)."""
    kept = [line for line in head[1:-1]
            if line.split(b":")[0].strip().lower() not in (b"content-length",
                                                           b"transfer-encoding")]
    return b"".join([head[0], *kept, f"Content-Length: {len(body)}\r\n\r\n".encode(),
                     body])


_REASONS = {429: ("Too Many Requests", "TooManyRequests"),
            500: ("Internal Server Error", "InternalError"),
            503: ("Service Unavailable", "ServiceUnavailable")}


def error_response(status: int, message: str, retry_after: str | None = None) -> bytes:
    """A whole response as the API server answers a failure: a Status body with the
    reason of `status`, and a Retry-After when given."""
    phrase, reason = _REASONS[status]
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                       "status": "Failure", "message": f"{message}: {phrase}",
                       "reason": reason, "code": status}).encode()
    extra = f"Retry-After: {retry_after}\r\n" if retry_after is not None else ""
    return (f"HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body
