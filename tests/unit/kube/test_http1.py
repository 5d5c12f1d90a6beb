"""The keep-alive HTTP/1.1 path of `KubeClient` (policyd.kube.http1) against a scripted
peer on loopback: each accepted connection is served by the next script, which reads
requests and writes exactly the bytes the test chose. What is tested is our parser and
pool (framing, keep-alive, silence, dropped connections, error replies), not an API
server."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from policyd.kube.client import ApiError, ConnectionSettings, KubeClient
from policyd.kube.http1 import encode_request
from policyd.kube.official import endpoint_from

Script = Callable[["PeerConn"], None]


class PeerConn:
    """One accepted connection, as a script sees it."""

    def __init__(self, sock: socket.socket, peer: Peer) -> None:
        self.sock = sock
        self.peer = peer
        self.buf = b""

    def read_request(self) -> bytes:
        """One whole request (head and Content-Length body); b"" if the client closed."""
        while b"\r\n\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                return b""
            self.buf += data
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            rest += self.sock.recv(65536)
        self.buf = rest[length:]
        request = head + b"\r\n\r\n" + rest[:length]
        self.peer.requests.append(request)
        return request

    def send(self, *pieces: bytes, pause: float = 0.0) -> None:
        """Each piece in its own write (the client sees split reads)."""
        for piece in pieces:
            self.sock.sendall(piece)
            if pause:
                time.sleep(pause)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """Whether the client closed its end within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (TimeoutError, ConnectionResetError):
            return False


class Peer:
    def __init__(self, scripts: list[Script]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.scripts = scripts
        self.requests: list[bytes] = []
        self.accepted = 0
        self.finished = threading.Event()
        self.closed_after: list[threading.Event] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        for script in self.scripts:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            done = threading.Event()
            self.closed_after.append(done)
            threading.Thread(target=self._run, args=(script, sock, done), daemon=True).start()

    def _run(self, script: Script, sock: socket.socket, done: threading.Event) -> None:
        try:
            script(PeerConn(sock, self))
        except OSError:
            pass
        finally:
            sock.close()
            done.set()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def peer_factory() -> Iterator[Callable[..., Peer]]:
    peers: list[Peer] = []

    def make(*scripts: Script) -> Peer:
        peers.append(Peer(list(scripts)))
        return peers[-1]

    yield make
    for p in peers:
        p.close()


def _client(peer: Peer, read_timeout: float = 2.0) -> KubeClient:
    from kubernetes import client as k8s

    cfg = k8s.Configuration(host=f"http://127.0.0.1:{peer.port}")
    cfg.api_key = {"authorization": "t0k"}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return KubeClient(k8s.ApiClient(cfg), ConnectionSettings(
        qps=-1, timeout=5.0, read_timeout=read_timeout))


def _reply(status: str, body: bytes, *extra: str) -> bytes:
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json",
            f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _serve(*replies: bytes, then: Callable[[PeerConn], None] | None = None) -> Script:
    """Answer one request with each reply in turn (on one connection), then `then`."""
    def script(conn: PeerConn) -> None:
        for reply in replies:
            if not conn.read_request():
                return
            conn.send(reply)
        if then is not None:
            then(conn)
        else:
            conn.wait_closed()
    return script


OK = b'{"kind":"Status","status":"Success","code":201}'


# -- framing ---------------------------------------------------------------------------

def test_a_content_length_reply_read_in_many_small_pieces(peer_factory: Any) -> None:
    reply = _reply("201 Created", OK)

    def script(conn: PeerConn) -> None:
        conn.read_request()
        conn.send(*[reply[i:i + 7] for i in range(0, len(reply), 7)], pause=0.001)
        conn.wait_closed()

    peer = peer_factory(script)
    client = _client(peer)
    body = {"kind": "Binding", "metadata": {"name": "p", "uid": "ü"}}
    assert client.request("POST", "/api/v1/namespaces/ns/pods/p/binding", body=body) == \
        json.loads(OK)
    [raw] = peer.requests
    head, _, sent = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /api/v1/namespaces/ns/pods/p/binding HTTP/1.1"
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert headers["host"] == f"127.0.0.1:{peer.port}"
    assert headers["authorization"] == "Bearer t0k"
    assert headers["user-agent"] == "policyd"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "application/json"
    assert int(headers["content-length"]) == len(sent) and json.loads(sent) == body
    client.close()


def test_a_chunked_reply_with_extensions_and_trailers(peer_factory: Any) -> None:
    body = b'{"items": [1, 2, 3], "metadata": {"resourceVersion": "7"}}'
    chunks = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
              b"5;ext=1\r\n" + body[:5] + b"\r\n", b"%x\r\n" % (len(body) - 5),
              body[5:20], body[20:] + b"\r\n", b"0\r\nX-Trailer: t\r\n\r\n")

    def script(conn: PeerConn) -> None:
        conn.read_request()
        conn.send(*chunks, pause=0.002)
        # The same connection serves the next request: the chunked end was found.
        conn.read_request()
        conn.send(_reply("200 OK", b'{"n": 2}'))
        conn.wait_closed()

    peer = peer_factory(script)
    client = _client(peer)
    assert client.request("GET", "/api/v1/pods", query={"limit": 3}) == json.loads(body)
    assert client.request("GET", "/api/v1/pods") == {"n": 2}
    assert peer.accepted == 1
    assert peer.requests[0].startswith(b"GET /api/v1/pods?limit=3 HTTP/1.1\r\n")
    assert b"content-length" not in peer.requests[0].lower()  # a GET sends no body
    client.close()


def test_connection_close_is_honoured(peer_factory: Any) -> None:
    first = _serve(_reply("201 Created", OK, "Connection: close"), then=lambda c: None)
    peer = peer_factory(first, _serve(_reply("201 Created", OK)))
    client = _client(peer)
    assert client.request("POST", "/api/v1/namespaces/ns/events", body={}, decode=False) == {}
    assert client.request("POST", "/api/v1/namespaces/ns/events", body={}, decode=False) == {}
    assert peer.accepted == 2 and len(peer.requests) == 2
    client.close()


def test_a_reply_without_length_ends_with_the_connection(peer_factory: Any) -> None:
    def script(conn: PeerConn) -> None:
        conn.read_request()
        conn.send(b"HTTP/1.1 200 OK\r\n\r\n", b'{"a": ', b"1}")

    peer = peer_factory(script)
    client = _client(peer)
    assert client.request("GET", "/x") == {"a": 1}
    client.close()


def test_a_reply_not_decoded_still_has_its_status_checked(peer_factory: Any) -> None:
    peer = peer_factory(_serve(_reply("201 Created", b"not json"),
                               _reply("201 Created", b"not json")))
    client = _client(peer)
    assert client.request("POST", "/api/v1/namespaces/ns/events", body={"a": 1},
                          decode=False) == {}
    with pytest.raises(ApiError, match="BadResponse"):
        client.request("POST", "/api/v1/namespaces/ns/events", body={"a": 1})
    client.close()


# -- errors ----------------------------------------------------------------------------

def test_error_status_bodies_become_api_errors(peer_factory: Any) -> None:
    conflict = json.dumps({"kind": "Status", "reason": "AlreadyExists",
                           "message": "pod p is already assigned to node n1"}).encode()
    throttled = json.dumps({"kind": "Status", "reason": "TooManyRequests",
                            "message": "slow down"}).encode()
    unavailable = json.dumps({"kind": "Status", "reason": "ServiceUnavailable",
                              "details": {"retryAfterSeconds": 4}}).encode()
    peer = peer_factory(_serve(_reply("409 Conflict", conflict),
                               _reply("429 Too Many Requests", throttled, "Retry-After: 3"),
                               _reply("503 Service Unavailable", unavailable)))
    client = _client(peer)
    errors = []
    for _ in range(3):
        with pytest.raises(ApiError) as caught:
            client.request("POST", "/api/v1/namespaces/ns/pods/p/binding", body={}, decode=False)
        errors.append(caught.value)
    assert [(e.status, e.reason, e.retry_after, e.transient) for e in errors] == [
        (409, "AlreadyExists", None, False), (429, "TooManyRequests", 3.0, True),
        (503, "ServiceUnavailable", 4.0, True)]
    assert errors[0].message == "pod p is already assigned to node n1"
    assert peer.accepted == 1  # an error reply leaves the connection usable
    client.close()


def test_a_peer_that_goes_silent_is_a_call_without_a_reply(peer_factory: Any) -> None:
    def silent(conn: PeerConn) -> None:
        conn.read_request()
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")  # then nothing
        conn.wait_closed(10.0)

    peer = peer_factory(_serve(_reply("200 OK", b"{}")), silent)
    client = _client(peer, read_timeout=0.3)
    client.request("GET", "/a")
    client.connection_failed(ApiError(0, "test"))  # the first connection idles no more
    assert client.dropped_connections == 1
    started = time.monotonic()
    with pytest.raises(ApiError) as caught:
        client.request("GET", "/b")
    assert 0.25 <= time.monotonic() - started < 3.0
    assert (caught.value.status, caught.value.reason) == (0, "ReadTimeoutError")
    assert caught.value.transient
    assert peer.closed_after[1].wait(5.0)  # the silent connection was closed, not pooled
    client.close()


def test_a_silent_call_drops_the_other_idle_connections(peer_factory: Any) -> None:
    hold = threading.Event()

    def slow_then_silent(conn: PeerConn) -> None:
        conn.read_request()
        hold.wait(5.0)  # until the other connection is idle in the pool
        conn.send(_reply("200 OK", b"{}"))
        conn.read_request()  # and the next request on it is never answered
        conn.wait_closed(10.0)

    peer = peer_factory(slow_then_silent, _serve(_reply("200 OK", b"{}")))
    client = _client(peer, read_timeout=0.5)
    slow = threading.Thread(target=client.request, args=("GET", "/slow"))
    slow.start()
    while peer.accepted < 1:
        time.sleep(0.01)
    client.request("GET", "/fast")  # a second connection, idle from now on
    hold.set()
    slow.join()
    # Both idle now; the pool hands out the last returned one: the slow one.
    with pytest.raises(ApiError):
        client.request("GET", "/frozen")
    assert client.dropped_connections == 1  # the other idle connection went too
    assert peer.closed_after[1].wait(5.0)
    client.close()


def test_a_refused_connection_is_a_call_without_a_reply() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    from kubernetes import client as k8s

    client = KubeClient(k8s.ApiClient(k8s.Configuration(host=f"http://127.0.0.1:{port}")),
                        ConnectionSettings(qps=-1, timeout=2.0))
    with pytest.raises(ApiError) as caught:
        client.request("GET", "/api/v1/nodes")
    assert (caught.value.status, caught.value.reason) == (0, "NewConnectionError")


# -- pooled connections the server closed -------------------------------------------------

def test_an_idle_connection_the_server_closed_is_not_reused(peer_factory: Any) -> None:
    peer = peer_factory(_serve(_reply("200 OK", b"{}"), then=lambda c: None),
                        _serve(_reply("201 Created", OK)))
    client = _client(peer)
    client.request("GET", "/a")
    assert peer.closed_after[0].wait(5.0)
    time.sleep(0.05)  # the FIN reaches our socket
    # A POST is never resent, so this only succeeds if the closed connection was
    # noticed before the request was written to it.
    assert client.request("POST", "/api/v1/namespaces/ns/events", body={}, decode=False) == {}
    assert peer.accepted == 2 and len(peer.requests) == 2
    client.close()


def _reused_then_lost(conn: PeerConn) -> None:
    """Answer one request, then read the next and close without a reply (as a server
    closing an idle connection at the moment a request arrives)."""
    conn.read_request()
    conn.send(_reply("200 OK", b"{}"))
    conn.read_request()


def test_a_post_whose_reply_was_lost_is_not_resent(peer_factory: Any) -> None:
    peer = peer_factory(_reused_then_lost, _serve(_reply("201 Created", OK)))
    client = _client(peer)
    client.request("GET", "/a")
    with pytest.raises(ApiError) as caught:
        client.request("POST", "/api/v1/namespaces/ns/pods/p/binding", body={}, decode=False)
    assert caught.value.status == 0 and caught.value.transient
    assert [r.split(b" ", 1)[0] for r in peer.requests] == [b"GET", b"POST"]
    assert peer.accepted == 1
    client.close()


def test_a_get_whose_reused_connection_ended_is_sent_once_more(peer_factory: Any) -> None:
    peer = peer_factory(_reused_then_lost, _serve(_reply("200 OK", b'{"again": true}')))
    client = _client(peer)
    client.request("GET", "/a")
    assert client.request("GET", "/b") == {"again": True}
    assert [r.split(b"\r\n", 1)[0] for r in peer.requests] == [
        b"GET /a HTTP/1.1", b"GET /b HTTP/1.1", b"GET /b HTTP/1.1"]
    assert peer.accepted == 2
    client.close()


def test_a_get_is_not_resent_on_a_new_connection(peer_factory: Any) -> None:
    def lost(conn: PeerConn) -> None:
        conn.read_request()

    peer = peer_factory(lost, _serve(_reply("200 OK", b"{}")))
    client = _client(peer)
    with pytest.raises(ApiError) as caught:
        client.request("GET", "/a")  # a fresh connection: no stale one to blame
    assert caught.value.reason == "RemoteDisconnected"
    assert len(peer.requests) == 1
    client.close()


# -- setup -----------------------------------------------------------------------------

def test_the_request_bytes() -> None:
    assert encode_request("POST", "/p", [("Host", "h")], b"{}") == \
        b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}"
    assert encode_request("GET", "/p?a=1", [("Host", "h")], None) == \
        b"GET /p?a=1 HTTP/1.1\r\nHost: h\r\n\r\n"


def test_what_stays_on_urllib3() -> None:
    import urllib3
    from kubernetes import client as k8s

    cfg = k8s.Configuration(host="https://10.0.0.1:6443")
    cfg.tls_server_name = "kubernetes.default"
    cfg.verify_ssl = False
    found = endpoint_from(cfg, urllib3.PoolManager())
    assert found is not None
    endpoint, prefix = found
    assert (endpoint.host, endpoint.port, endpoint.server_hostname, prefix) == (
        "10.0.0.1", 6443, "kubernetes.default", "")
    assert endpoint.tls is not None and endpoint.host_header == "10.0.0.1:6443"
    rancher = k8s.Configuration(host="https://rancher.example/k8s/c-1")
    rancher.verify_ssl = False
    found = endpoint_from(rancher, urllib3.PoolManager())
    assert found is not None and found[0].host_header == "rancher.example"
    assert found[1] == "/k8s/c-1"
    assert endpoint_from(cfg, urllib3.ProxyManager("http://proxy:3128")) is None
    cfg.assert_hostname = False
    assert endpoint_from(cfg, urllib3.PoolManager()) is None
