"""The fault proxy against a small local HTTPS server: requests and streamed (chunked)
responses pass through untouched; injected faults answer as the API server would
(Status body, Retry-After on 429); cut and freeze reset connections; throttles,
refused connections, ended watches, injected watch lines and rewritten objects do what
the fault and overload tests rely on."""

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
from policyd.devcluster.faultproxy import FaultProxy, Throttle


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[str]] = []
    # Set at teardown: ends the endless watch of /hang.
    done: ClassVar[threading.Event] = threading.Event()

    def log_message(self, *args: object) -> None:
        pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self) -> None:
        type(self).seen.append(f"GET {self.path}")
        if self.path.startswith("/hang"):  # a watch that sends one event, then waits
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._chunk(json.dumps(_event("ADDED", "first")).encode() + b"\n")
            type(self).done.wait(10)
            return
        if self.path.startswith("/split"):  # two events cut across three chunks
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            wire = b"".join(json.dumps(_event("ADDED", n)).encode() + b"\n"
                            for n in ("a", "b"))
            for piece in (wire[:10], wire[10:-5], wire[-5:]):
                self._chunk(piece)
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path.startswith("/list"):  # a list, chunked as big lists are
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._chunk(json.dumps({"kind": "PodList", "items": [
                {"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}).encode())
            self.wfile.write(b"0\r\n\r\n")
            return
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


def _event(kind: str, name: str) -> dict[str, object]:
    return {"type": kind, "object": {"metadata": {"name": name}}}


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
    _Handler.done = threading.Event()
    p = FaultProxy(server.server_address[1], certs.serving_cert, certs.serving_key,
                   certs.ca_cert, record=True)
    try:
        yield p
    finally:
        _Handler.done.set()
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


def test_a_refusing_proxy_closes_new_connections_until_it_stops(
        proxy: FaultProxy, certs: CertFiles) -> None:
    proxy.refusing = True
    c = _conn(proxy, certs)
    with pytest.raises((http.client.HTTPException, OSError)):
        c.request("GET", "/refused")
        c.getresponse()
    assert "GET /refused" not in _Handler.seen
    proxy.refusing = False
    c = _conn(proxy, certs)
    c.request("GET", "/served")
    assert c.getresponse().status == 200


def test_throttles_answer_with_their_retry_after_and_every_request_is_recorded(
        proxy: FaultProxy, certs: CertFiles) -> None:
    proxy.throttles.append(Throttle(lambda m, p, w: m == "POST", "7", per_path=1))
    c = _conn(proxy, certs)
    for _ in range(2):
        c.request("POST", "/x/binding", body=b"{}")
        r = c.getresponse()
        r.read()
    assert (r.status, r.getheader("Retry-After")) == (201, None)
    c.request("GET", "/api/v1/pods?watch=true")
    c.getresponse().read()
    assert [(s.method, s.path, s.watch, s.answered) for s in proxy.seen()] == [
        ("POST", "/x/binding", False, 429), ("POST", "/x/binding", False, 0),
        ("GET", "/api/v1/pods", True, 0)]
    assert [s.path for s in proxy.seen("POST", "binding")] == ["/x/binding"] * 2
    assert [s.method for s in proxy.seen(watch=True)] == ["GET"]
    assert _Handler.seen.count("POST /x/binding {}") == 1  # the 429 was not forwarded


def test_a_throttled_request_says_when_to_come_back(proxy: FaultProxy, certs: CertFiles
                                                    ) -> None:
    proxy.throttles.append(Throttle(lambda m, p, w: True, "120", status=503, times=1))
    c = _conn(proxy, certs)
    c.request("GET", "/a")
    r = c.getresponse()
    body = json.loads(r.read())
    assert (r.status, r.getheader("Retry-After"), body["code"]) == (503, "120", 503)
    c.request("GET", "/a")  # `times` used up
    assert c.getresponse().status == 200


def test_rewrite_reaches_list_items_and_watch_events(proxy: FaultProxy, certs: CertFiles
                                                     ) -> None:
    proxy.rewrite = lambda o: {**o, "spoiled": True}
    c = _conn(proxy, certs)
    c.request("GET", "/list")
    r = c.getresponse()
    assert r.getheader("Content-Length") is not None  # re-framed, no longer chunked
    assert [o.get("spoiled") for o in json.loads(r.read())["items"]] == [True, True]
    c.request("GET", "/split?watch=true")
    events = [json.loads(x) for x in c.getresponse().read().splitlines()]
    # Events cut across chunks are whole again, one per line, each object rewritten.
    assert [(e["object"]["metadata"]["name"], e["object"]["spoiled"]) for e in events] \
        == [("a", True), ("b", True)]


def test_injected_lines_follow_the_next_event_of_the_newest_watch(
        proxy: FaultProxy, certs: CertFiles) -> None:
    proxy.inject["/split"] = [b"not json\n"]
    c = _conn(proxy, certs)
    c.request("GET", "/split?watch=true")
    assert c.getresponse().read().splitlines()[1] == b"not json"
    assert proxy.inject == {}  # used once, then dropped


def test_end_watches_resets_the_watches_only(proxy: FaultProxy, certs: CertFiles) -> None:
    watch = _conn(proxy, certs)
    watch.request("GET", "/hang?watch=true")
    stream = watch.getresponse()
    assert json.loads(stream.readline())["object"]["metadata"]["name"] == "first"
    other = _conn(proxy, certs)
    other.request("GET", "/a")
    other.getresponse().read()
    proxy.end_watches()
    # Ended, not silent: without end_watches this read times out (TimeoutError is not
    # caught here), the server holds the watch open for 10 s.
    try:
        rest = stream.read()
    except (http.client.HTTPException, ConnectionError, ssl.SSLError):
        rest = b""
    assert rest == b""
    other.request("GET", "/b")  # the plain connection lives on
    assert other.getresponse().status == 200


def test_freeze_open_without_an_end_holds_until_close_and_counts(
        proxy: FaultProxy, certs: CertFiles) -> None:
    conns = [_conn(proxy, certs, timeout=0.5) for _ in range(2)]
    for c in conns:
        c.request("GET", "/a")
        c.getresponse().read()
    assert proxy.freeze_open() == 2
    conns[0].request("GET", "/stalled")
    with pytest.raises(TimeoutError):
        conns[0].getresponse()
    assert "GET /stalled" not in _Handler.seen
