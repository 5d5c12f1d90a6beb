"""Secure serving's decisions with plain objects: the token and access caches and
their TTLs, failing closed when the API server cannot answer, the always-allowed
paths, the TLS context; and HealthServer over HTTPS with a guard."""

from __future__ import annotations

import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.daemon.endpoints import secure_address
from policyd.daemon.metrics import HealthServer, Metrics
from policyd.daemon.run import RunOptions
from policyd.daemon.serving import (
    ACCESS_REVIEW_PATH,
    ALLOW_CACHE_TTL,
    DEFAULT_ALWAYS_ALLOW_PATHS,
    DEFAULT_SECURE_PORT,
    DENY_CACHE_TTL,
    TOKEN_CACHE_TTL,
    TOKEN_REVIEW_PATH,
    DelegatedAuth,
    PathMatcher,
    TTLCache,
    bearer_token,
    server_tls_context,
)
from policyd.errors import PolicydError
from policyd.kube.client import ApiError
from policyd.pki import self_signed_serving_cert
from tests.clocks import ManualClock


class FakeApiServer:
    """Answers TokenReviews from `tokens` (token -> user) and SubjectAccessReviews from
    `grants` ((user, path) pairs); `down` makes every call fail as unreachable."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, Any]] = {}
        self.grants: set[tuple[str, str]] = set()
        self.down = False
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.sar_status: dict[str, Any] | None = None  # overrides the computed status

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((path, body))
        if self.down:
            raise ApiError(0, "ConnectionRefusedError", "connection refused")
        if path == TOKEN_REVIEW_PATH:
            user = self.tokens.get(body["spec"]["token"])
            return {"status": {"authenticated": True, "user": user} if user else {}}
        assert path == ACCESS_REVIEW_PATH
        if self.sar_status is not None:
            return {"status": self.sar_status}
        spec = body["spec"]
        key = (spec["user"], spec["nonResourceAttributes"]["path"])
        return {"status": {"allowed": key in self.grants}}

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.calls if p == path)


@pytest.fixture
def api() -> FakeApiServer:
    a = FakeApiServer()
    a.tokens = {"good": {"username": "system:serviceaccount:mon:prom", "uid": "u1",
                         "groups": ["system:serviceaccounts"],
                         "extra": {"authentication.kubernetes.io/pod-name": ["p"]}},
                "nobody": {"username": "system:serviceaccount:mon:other"}}
    a.grants = {("system:serviceaccount:mon:prom", "/metrics"),
                ("system:serviceaccount:mon:prom", "/debug/queue")}
    return a


def auth_for(api: FakeApiServer, clock: ManualClock, **kw: Any) -> DelegatedAuth:
    return DelegatedAuth(api.post, clock=clock, **kw)


def test_defaults_are_kube_schedulers() -> None:
    assert DEFAULT_SECURE_PORT == 10259
    assert DEFAULT_ALWAYS_ALLOW_PATHS == ("/healthz", "/readyz", "/livez")
    # k8s.io/apiserver's delegating authentication/authorization cache TTLs.
    assert (TOKEN_CACHE_TTL, ALLOW_CACHE_TTL, DENY_CACHE_TTL) == (10.0, 10.0, 10.0)
    options = RunOptions(config=Path("p.yaml"))
    assert (options.secure_port, options.bind_address, options.metrics_bind_address) \
        == (10259, "0.0.0.0", "")


@pytest.mark.parametrize(("header", "status"), [
    (None, 401), ("", 401), ("Bearer", 401), ("Bearer ", 401), ("Basic Z29vZA==", 401),
    ("Bearer wrong", 401), ("Bearer nobody", 403), ("Bearer good", None),
    ("bearer good", None), ("Bearer  good ", None),
])
def test_who_may_get_metrics(api: FakeApiServer, header: str | None,
                             status: int | None) -> None:
    refusal = auth_for(api, ManualClock()).check("/metrics", header)
    assert (refusal.status if refusal else None) == status


def test_the_access_review_names_the_user_and_the_non_resource_url(
        api: FakeApiServer) -> None:
    assert auth_for(api, ManualClock()).check("/debug/queue", "Bearer good") is None
    (_, sar), = [c for c in api.calls if c[0] == ACCESS_REVIEW_PATH]
    assert sar["spec"] == {
        "user": "system:serviceaccount:mon:prom", "uid": "u1",
        "groups": ["system:serviceaccounts"],
        "extra": {"authentication.kubernetes.io/pod-name": ["p"]},
        "nonResourceAttributes": {"path": "/debug/queue", "verb": "get"}}
    assert sar["kind"] == "SubjectAccessReview"


def test_permission_is_per_path(api: FakeApiServer) -> None:
    auth = auth_for(api, ManualClock())
    assert auth.check("/metrics", "Bearer good") is None
    refusal = auth.check("/debug/metrics-cache", "Bearer good")
    assert refusal is not None and refusal.status == 403
    assert 'cannot get path "/debug/metrics-cache"' in refusal.message


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/livez"])
@pytest.mark.parametrize("header", [None, "Bearer wrong", "Bearer good"])
def test_health_paths_need_nothing_and_ask_nothing(api: FakeApiServer, path: str,
                                                   header: str | None) -> None:
    api.down = True  # not even reachable: health must not depend on it
    assert auth_for(api, ManualClock()).check(path, header) is None
    assert api.calls == []


def test_decisions_are_cached_for_their_ttl(api: FakeApiServer) -> None:
    clock = ManualClock()
    auth = auth_for(api, clock)
    for _ in range(5):
        assert auth.check("/metrics", "Bearer good") is None
        assert auth.check("/metrics", "Bearer nobody").status == 403  # type: ignore[union-attr]
        assert auth.check("/metrics", "Bearer wrong").status == 401  # type: ignore[union-attr]
    # One TokenReview per token, one SubjectAccessReview per authenticated user.
    assert api.count(TOKEN_REVIEW_PATH) == 3
    assert api.count(ACCESS_REVIEW_PATH) == 2
    clock.advance(9.9)
    auth.check("/metrics", "Bearer good")
    assert api.count(TOKEN_REVIEW_PATH) == 3
    clock.advance(0.2)  # past 10 s: asked again
    auth.check("/metrics", "Bearer good")
    assert api.count(TOKEN_REVIEW_PATH) == 4
    assert api.count(ACCESS_REVIEW_PATH) == 3


def test_a_revoked_permission_stops_working_after_the_allow_ttl(
        api: FakeApiServer) -> None:
    clock = ManualClock()
    auth = auth_for(api, clock)
    assert auth.check("/metrics", "Bearer good") is None
    api.grants.clear()
    clock.advance(ALLOW_CACHE_TTL - 1)
    assert auth.check("/metrics", "Bearer good") is None  # still cached
    clock.advance(2)
    assert auth.check("/metrics", "Bearer good").status == 403  # type: ignore[union-attr]


def test_a_new_grant_works_after_the_deny_ttl(api: FakeApiServer) -> None:
    clock = ManualClock()
    auth = auth_for(api, clock, deny_ttl=3.0, allow_ttl=30.0)
    assert auth.check("/metrics", "Bearer nobody").status == 403  # type: ignore[union-attr]
    api.grants.add(("system:serviceaccount:mon:other", "/metrics"))
    clock.advance(2.9)
    assert auth.check("/metrics", "Bearer nobody").status == 403  # type: ignore[union-attr]
    clock.advance(0.2)
    assert auth.check("/metrics", "Bearer nobody") is None


def test_unreachable_api_server_honours_the_cache_then_fails_closed(
        api: FakeApiServer) -> None:
    clock = ManualClock()
    auth = auth_for(api, clock)
    assert auth.check("/metrics", "Bearer good") is None
    assert auth.check("/metrics", "Bearer nobody").status == 403  # type: ignore[union-attr]
    api.down = True
    clock.advance(5)
    assert auth.check("/metrics", "Bearer good") is None  # cached allow honoured
    assert auth.check("/metrics", "Bearer nobody").status == 403  # type: ignore[union-attr]
    unknown = auth.check("/metrics", "Bearer never-seen")
    assert unknown is not None and unknown.status == 401
    clock.advance(6)  # both caches expired, nothing to go by: denied, never allowed
    for header in ("Bearer good", "Bearer nobody", "Bearer never-seen"):
        refusal = auth.check("/metrics", header)
        assert refusal is not None and refusal.status == 401
    # Failures are not cached: the API server back, the next request is answered.
    api.down = False
    assert auth.check("/metrics", "Bearer good") is None


def test_an_authorization_outage_after_authentication_is_403(api: FakeApiServer) -> None:
    clock = ManualClock()
    auth = auth_for(api, clock, token_ttl=60.0)
    auth.check("/metrics", "Bearer good")
    api.down = True
    clock.advance(11)  # access answer expired, token answer not
    refusal = auth.check("/metrics", "Bearer good")
    assert refusal is not None and refusal.status == 403
    assert "could not be checked" in refusal.message


@pytest.mark.parametrize("status", [
    {"allowed": False, "evaluationError": "webhook down"},
    {"allowed": True, "denied": True},
    {},
])
def test_unclear_access_answers_deny(api: FakeApiServer, status: dict[str, Any]) -> None:
    api.sar_status = status
    refusal = auth_for(api, ManualClock()).check("/metrics", "Bearer good")
    assert refusal is not None and refusal.status == 403


def test_an_evaluation_error_is_not_remembered(api: FakeApiServer) -> None:
    auth = auth_for(api, ManualClock())
    api.sar_status = {"allowed": False, "evaluationError": "webhook down"}
    assert auth.check("/metrics", "Bearer good") is not None
    api.sar_status = None
    assert auth.check("/metrics", "Bearer good") is None


def test_an_authenticated_reply_without_a_name_is_no_identity(api: FakeApiServer) -> None:
    api.tokens["anon"] = {"username": ""}
    assert auth_for(api, ManualClock()).check("/metrics", "Bearer anon").status == 401  # type: ignore[union-attr]


def test_the_token_cache_does_not_keep_tokens() -> None:
    api = FakeApiServer()
    auth = auth_for(api, ManualClock())
    auth.check("/metrics", "Bearer s3cret-token")
    assert "s3cret-token" not in repr(auth._tokens._entries)


def test_ttl_cache_expires_and_stays_bounded() -> None:
    clock = ManualClock()
    cache: TTLCache[str, int] = TTLCache(size=3, clock=clock)
    cache.put("a", 1, 5)
    cache.put("b", 2, 1)
    cache.put("zero", 9, 0)  # a zero TTL caches nothing
    assert (cache.get("a"), cache.get("b"), cache.get("zero")) == (1, 2, None)
    clock.advance(1)
    assert (cache.get("a"), cache.get("b")) == (1, None)
    for k in "cdef":
        cache.put(k, 0, 10)
    assert len(cache) == 3 and cache.get("a") is None and cache.get("f") == 0


@pytest.mark.parametrize(("paths", "path", "allowed"), [
    (("/healthz",), "/healthz", True),
    (("/healthz",), "/healthz/ping", False),
    (("/healthz*",), "/healthz/ping", True),
    (("/debug/*",), "/debug/queue", True),
    (("/debug/*",), "/debugger", False),
    ((), "/healthz", False),
    (("", " /metrics "), "/metrics", True),
])
def test_always_allow_paths(paths: tuple[str, ...], path: str, allowed: bool) -> None:
    assert PathMatcher(paths)(path) is allowed


@pytest.mark.parametrize(("path", "why"), [
    ("healthz", "must start with /"), ("/*/x", "only a trailing *"), ("/a*b*", "trailing"),
])
def test_bad_always_allow_paths_are_usage_errors(path: str, why: str) -> None:
    with pytest.raises(PolicydError, match="--authorization-always-allow-paths") as e:
        PathMatcher((path,))
    assert why in str(e.value) and e.value.exit_code == 2


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("BEARER abc", "abc"), ("Bearer", None), ("Token abc", None),
    (None, None), ("Bearer   ", None),
])
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(("bind", "port", "address"), [
    ("0.0.0.0", 10259, "0.0.0.0:10259"), ("", 10259, "0.0.0.0:10259"),
    ("::", 443, "[::]:443"), ("::1", 1, "[::1]:1"), ("127.0.0.1", 65535, "127.0.0.1:65535"),
])
def test_secure_address(bind: str, port: int, address: str) -> None:
    assert secure_address(bind, port) == address


@pytest.mark.parametrize(("bind", "port", "flag"), [
    ("localhost", 10259, "--bind-address"), ("[::]", 10259, "--bind-address"),
    ("0.0.0.0:10259", 10259, "--bind-address"), ("0.0.0.0", 70000, "--secure-port"),
])
def test_bad_secure_address_is_a_usage_error(bind: str, port: int, flag: str) -> None:
    with pytest.raises(PolicydError, match=flag) as e:
        secure_address(bind, port)
    assert e.value.exit_code == 2


# -- TLS --------------------------------------------------------------------------------


def _write_pair(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = self_signed_serving_cert(("policyd.example",))
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    return tmp_path / "tls.crt", tmp_path / "tls.key"


def test_tls_from_files(tmp_path: Path) -> None:
    cert, key = _write_pair(tmp_path)
    assert isinstance(server_tls_context(cert, key), ssl.SSLContext)


@pytest.mark.parametrize("case", ["cert only", "key only", "missing cert", "garbage",
                                  "mismatched key", "directory"])
def test_bad_tls_files_are_usage_errors(tmp_path: Path, case: str) -> None:
    cert, key = _write_pair(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    _, other_key = _write_pair(other)
    args: tuple[Path | None, Path | None] = {
        "cert only": (cert, None), "key only": (None, key),
        "missing cert": (tmp_path / "nope.crt", key),
        "garbage": (tmp_path / "garbage", key),
        "mismatched key": (cert, other_key), "directory": (tmp_path, key)}[case]
    (tmp_path / "garbage").write_text("not a certificate")
    with pytest.raises(PolicydError) as e:
        server_tls_context(*args)
    assert e.value.exit_code == 2
    assert "--tls-" in str(e.value)


@pytest.fixture
def https() -> Iterator[HealthServer]:
    api = FakeApiServer()
    api.tokens = {"good": {"username": "prom"}}
    api.grants = {("prom", "/metrics")}
    auth = DelegatedAuth(api.post)
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: True,
                          debug={"/debug/queue": lambda: {"pods": ["secret-pod"]}},
                          tls=server_tls_context(None, None), guard=auth.check)
    server.start()
    yield server
    server.stop()


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # self-signed
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}
                                 if token else {})
    try:
        with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_https_server_guards_all_but_health(https: HealthServer) -> None:
    base = f"https://127.0.0.1:{https.port}"
    assert _get(f"{base}/metrics")[0] == 401
    assert _get(f"{base}/metrics", "bad")[0] == 401
    status, body = _get(f"{base}/metrics", "good")
    assert status == 200 and "scheduler_pending_pods" in body
    status, body = _get(f"{base}/debug/queue", "good")  # allowed /metrics only
    assert status == 403 and "secret-pod" not in body
    assert _get(f"{base}/debug/queue")[0] == 401
    assert _get(f"{base}/metrics?x=1", "good")[0] == 200  # the query is no part of the path
    for path in ("/healthz", "/readyz", "/livez"):
        assert _get(f"{base}{path}") == (200, "ok")


def test_https_server_speaks_no_plain_http(https: HealthServer) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{https.port}/healthz", timeout=5)
    # ... and keeps serving HTTPS afterwards.
    assert _get(f"https://127.0.0.1:{https.port}/healthz") == (200, "ok")


def test_a_stalled_handshake_does_not_block_others(https: HealthServer) -> None:
    silent = socket.create_connection(("127.0.0.1", https.port))  # says nothing
    try:
        done = threading.Event()
        result: list[tuple[int, str]] = []

        def probe() -> None:
            result.append(_get(f"https://127.0.0.1:{https.port}/healthz"))
            done.set()

        threading.Thread(target=probe, daemon=True).start()
        t0 = time.monotonic()
        assert done.wait(5), "a silent client held up the server"
        assert result == [(200, "ok")] and time.monotonic() - t0 < 5
    finally:
        silent.close()


def test_the_self_signed_certificate_names_this_host() -> None:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    cert = x509.load_pem_x509_certificate(self_signed_serving_cert(("10.0.0.7",))[0])
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    names = {str(n.value) for n in sans}
    assert {"localhost", "127.0.0.1", "::1", socket.gethostname(), "10.0.0.7"} <= names
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku


def test_the_given_certificate_is_served(tmp_path: Path) -> None:
    """With --tls-cert-file, a client that trusts that certificate verifies the server
    (host name and chain): the file's certificate is the one served."""
    cert, key = _write_pair(tmp_path)
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: True,
                          tls=server_tls_context(cert, key))
    server.start()
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(f"https://127.0.0.1:{server.port}/healthz",
                                    timeout=5, context=ctx) as r:
            assert r.status == 200
        other = tmp_path / "other"
        other.mkdir()
        other_cert, _ = _write_pair(other)
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(f"https://127.0.0.1:{server.port}/healthz", timeout=5,
                                   context=ssl.create_default_context(cafile=str(other_cert)))
    finally:
        server.stop()


class SlowApiServer(FakeApiServer):
    """Holds every review until `release` is set, counting those waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.release.wait(10)
        return super().post(path, body)


@pytest.mark.parametrize("down", [False, True])
def test_a_burst_with_one_token_sends_one_review_of_each_kind(down: bool) -> None:
    api = SlowApiServer()
    api.tokens = {"good": {"username": "prom"}}
    api.grants = {("prom", "/metrics")}
    api.down = down
    auth = DelegatedAuth(api.post)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(
        auth.check("/metrics", "Bearer good"))) for _ in range(20)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # every thread has reached the review (or waits on it) by now
    api.release.set()
    for t in threads:
        t.join(10)
    assert len(results) == 20
    if down:  # one failed review, shared: every request refused, none allowed
        assert api.count(TOKEN_REVIEW_PATH) == 1
        assert {r.status for r in results} == {401}
    else:
        assert results == [None] * 20
        assert (api.count(TOKEN_REVIEW_PATH), api.count(ACCESS_REVIEW_PATH)) == (1, 1)
