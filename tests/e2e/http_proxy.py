"""An HTTP-level fault proxy between policyd and the real API server.

Unlike the TCP `Proxy` of test_faults.py, this one terminates TLS (with the control
plane's own serving certificate, which names 127.0.0.1, so policyd's kubeconfig only
changes its port) and forwards each request with the admin client certificate. That
lets a test see and change HTTP: answer chosen requests 429/503 with a Retry-After,
put a garbage line into a watch stream, rewrite objects on their way to policyd, and
write down when every request arrived (to measure the spacing of retries).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from policyd.devcluster import ControlPlane

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


class HttpProxy:
    def __init__(self, cp: ControlPlane) -> None:
        certs = cp.certs
        assert certs is not None and cp.apiserver_port is not None
        self.target_port = cp.apiserver_port
        self.upstream_tls = ssl.create_default_context(cafile=str(certs.ca_cert))
        self.upstream_tls.load_cert_chain(str(certs.admin_cert), str(certs.admin_key))
        self.seen: list[Seen] = []
        self.throttles: list[Throttle] = []
        # Lines put into the next watch of a path (after its first event), then dropped.
        self.inject: dict[str, list[bytes]] = {}
        # Applied to every object on its way to policyd (lists and watch events).
        self.rewrite: Callable[[Obj], Obj] | None = None
        self.lock = threading.Lock()
        self._open_watches: set[Any] = set()
        # The newest watch per path: injected lines go there only. A watch the client
        # has given up on (a re-list, a reconnect) lives on here until its upstream ends,
        # and must not swallow them.
        self._newest_watch: dict[str, int] = {}
        self._watch_ids = itertools.count(1)

        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy._handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(str(certs.serving_cert), str(certs.serving_key))
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self, cp: ControlPlane, tmp: Path) -> Path:
        text = cp.kubeconfig_path.read_text().replace(f":{cp.apiserver_port}",
                                                      f":{self.port}")
        path = tmp / f"http-proxied-{self.port}.kubeconfig"
        path.write_text(text)
        return path

    def requests(self, method: str | None = None, path_end: str = "",
                 watch: bool | None = None) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen
                    if (method is None or s.method == method) and s.path.endswith(path_end)
                    and (watch is None or s.watch == watch)]

    def end_watches(self) -> None:
        """Close every open watch (policyd reconnects)."""
        with self.lock:
            socks = list(self._open_watches)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.end_watches()
        self.server.shutdown()
        self.server.server_close()

    # -- one request ----------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        url = urlsplit(h.path)
        query = parse_qs(url.query)
        watch = query.get("watch", ["false"])[0] in ("true", "1")
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else None
        with self.lock:
            throttle = next((t for t in self.throttles
                             if t.take(h.command, url.path, watch)), None)
            self.seen.append(Seen(time.monotonic(), h.command, url.path, watch,
                                  throttle.status if throttle else 0))
        if throttle is not None:
            status = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                 "reason": "TooManyRequests", "code": throttle.status,
                                 "message": "the proxy says: slow down"}).encode()
            h.send_response(throttle.status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Retry-After", throttle.retry_after)
            h.send_header("Content-Length", str(len(status)))
            h.end_headers()
            h.wfile.write(status)
            return
        headers = {k: v for k, v in h.headers.items()
                   if k.lower() not in ("host", "connection", "content-length",
                                        "accept-encoding")}
        up = http.client.HTTPSConnection("127.0.0.1", self.target_port,
                                         context=self.upstream_tls, timeout=600)
        try:
            up.request(h.command, h.path, body=body, headers=headers)
            resp = up.getresponse()
            if watch and resp.status == 200:
                self._stream(h, resp, url.path, [up.sock, h.connection])
                return
            data = resp.read()
            if self.rewrite is not None and resp.status == 200 and h.command == "GET":
                data = self._rewrite_list(data)
            h.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                    h.send_header(k, v)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except OSError:
            h.close_connection = True
        finally:
            up.close()

    def _rewrite_list(self, data: bytes) -> bytes:
        try:
            doc = json.loads(data)
        except ValueError:
            return data
        if isinstance(doc, dict) and isinstance(doc.get("items"), list) \
                and self.rewrite is not None:
            doc["items"] = [self.rewrite(o) for o in doc["items"]]
            return json.dumps(doc).encode()
        return data

    def _stream(self, h: BaseHTTPRequestHandler, resp: http.client.HTTPResponse,
                path: str, socks: list[Any]) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.close_connection = True  # one watch per connection: end_watches closes it

        def chunk(data: bytes) -> None:
            h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            h.wfile.flush()

        with self.lock:
            self._open_watches.update(socks)
            watch_id = next(self._watch_ids)
            self._newest_watch[path] = watch_id
        try:
            while True:
                line = resp.readline()
                if not line:
                    break
                if self.rewrite is not None:
                    try:
                        event = json.loads(line)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            event["object"] = self.rewrite(event["object"])
                        line = json.dumps(event).encode() + b"\n"
                    except ValueError:
                        pass
                chunk(line)
                with self.lock:
                    newest = self._newest_watch.get(path) == watch_id
                    extra = self.inject.pop(path, []) if newest else []
                for garbage in extra:
                    chunk(garbage)
            chunk(b"")
        except (OSError, ValueError, AttributeError):
            pass  # closed under us (end_watches) or by policyd
        finally:
            with self.lock:
                self._open_watches.difference_update(socks)
