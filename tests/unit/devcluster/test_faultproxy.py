"""The soak's fault proxy against a small local HTTPS server: requests and streamed
(chunked) responses pass through untouched; injected faults answer as the API server
would (Status body, Retry-After on 429); cut and freeze reset connections."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from policyd.devcluster.certs import CertFiles, generate_certs
from policyd.devcluster.faultproxy import FaultProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        type(self).seen.append(f"GET {self.path}")
        if "watch=true" in self.path:  # a short chunked stream, one event per chunk
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(3):
                line = json.dumps({"type": "ADDED", "i": i}).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append(f"POST {self.path} {data.decode()}")
        self.send_response(201)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return generate_certs(Path(tmp_path_factory.mktemp("pki")))


@pytest.fixture
def proxy(certs: CertFiles) -> Iterator[FaultProxy]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(certs.serving_cert), str(certs.serving_key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Handler.seen = []
    p = FaultProxy(server.server_address[1], certs.serving_cert, certs.serving_key,
                   certs.ca_cert)
    try:
        yield p
    finally:
        p.close()
        server.shutdown()


def _conn(proxy: FaultProxy, certs: CertFiles, timeout: float = 5) -> http.client.HTTPSConnection:
    ctx = ssl.create_default_context(cafile=str(certs.ca_cert))
    return http.client.HTTPSConnection("127.0.0.1", proxy.port, context=ctx, timeout=timeout)


def test_requests_and_streams_pass_through_on_one_connection(
        proxy: FaultProxy, certs: CertFiles) -> None:
    c = _conn(proxy, certs)
    c.request("POST", "/api/v1/namespaces/a/pods/p/binding", body=b'{"x": 1}')
    r = c.getresponse()
    assert (r.status, r.read()) == (201, b'{"x": 1}')
    c.request("GET", "/api/v1/pods?watch=true")
    r = c.getresponse()
    lines = r.read().splitlines()
    assert [json.loads(x)["i"] for x in lines] == [0, 1, 2]
    c.request("GET", "/api/v1/nodes")  # the same connection, kept alive
    r = c.getresponse()
    assert json.loads(r.read()) == {"path": "/api/v1/nodes"}
    assert proxy.requests == 3 and not proxy.injected


@pytest.mark.parametrize("fault,status", [("429", 429), ("500", 500), ("503", 503)])
def test_injected_errors_answer_like_the_api_server_and_are_not_forwarded(
        proxy: FaultProxy, certs: CertFiles, fault: str, status: int) -> None:
    proxy.faults = (fault,)
    proxy.bind_error_share = 1.0
    c = _conn(proxy, certs)
    c.request("POST", "/api/v1/namespaces/a/pods/p/binding", body=b"{}")
    r = c.getresponse()
    body = json.loads(r.read())
    assert r.status == status and body["kind"] == "Status" and body["code"] == status
    assert (r.getheader("Retry-After") == "1") == (status == 429)
    assert not any("binding" in s for s in _Handler.seen)
    # Other requests are not affected by the bind share, on the same connection.
    c.request("GET", "/api/v1/nodes")
    assert c.getresponse().status == 200
    assert proxy.injected == {f"bind:{fault}": 1}


def test_a_timeout_is_forwarded_but_never_answered(proxy: FaultProxy, certs: CertFiles) -> None:
    proxy.faults = ("timeout",)
    proxy.request_error_share = 1.0
    c = _conn(proxy, certs, timeout=1)
    c.request("POST", "/api/v1/namespaces/a/configmaps", body=b"{}")
    with pytest.raises(TimeoutError):
        c.getresponse()
    assert _Handler.seen == ["POST /api/v1/namespaces/a/configmaps {}"]


def test_cut_resets_open_connections(proxy: FaultProxy, certs: CertFiles) -> None:
    c = _conn(proxy, certs)
    c.request("GET", "/a")
    c.getresponse().read()
    proxy.cut()
    time.sleep(0.2)
    c.request("GET", "/b")
    with pytest.raises((http.client.HTTPException, OSError)):
        c.getresponse()


def test_freeze_stalls_without_closing_then_resets(proxy: FaultProxy, certs: CertFiles
                                                   ) -> None:
    c = _conn(proxy, certs, timeout=0.5)
    c.request("GET", "/a")
    c.getresponse().read()
    proxy.freeze(1.5)
    c.request("GET", "/frozen")
    with pytest.raises(TimeoutError):  # silence, not a reset
        c.getresponse()
    assert "GET /frozen" not in _Handler.seen
    time.sleep(1.5)
    # After the freeze, new connections work again.
    c2 = _conn(proxy, certs)
    c2.request("GET", "/after")
    assert c2.getresponse().status == 200


def test_freeze_open_silences_established_connections_only(
        proxy: FaultProxy, certs: CertFiles) -> None:
    old = _conn(proxy, certs, timeout=0.5)
    old.request("GET", "/a")
    old.getresponse().read()
    proxy.freeze_open(1.5)
    new = _conn(proxy, certs)  # a new flow gets through at once
    new.request("GET", "/new")
    assert new.getresponse().status == 200
    old.request("GET", "/stalled")
    with pytest.raises(TimeoutError):
        old.getresponse()
    assert "GET /stalled" not in _Handler.seen
    # The frozen connection is reset when the freeze ends, not resumed.
    sock = old.sock
    assert sock is not None
    sock.settimeout(3)
    t0 = time.monotonic()
    try:
        closed = sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        closed = True
    assert closed and time.monotonic() - t0 < 2.5
