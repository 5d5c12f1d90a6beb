"""Secure serving as kube-scheduler does it: HTTPS, and every request but the health
checks authenticated and authorized by the API server (delegated authn/authz).

- Authentication: the bearer token is sent in a TokenReview; the answer (who, or
  not authenticated) is cached for TOKEN_CACHE_TTL, keyed by a hash of the token.
- Authorization: a SubjectAccessReview on the non-resource URL (verb `get`, the
  path); allowed answers are cached for ALLOW_CACHE_TTL, denied ones for
  DENY_CACHE_TTL. These are k8s.io/apiserver's delegating defaults (10 s each).
- Paths in `--authorization-always-allow-paths` (default /healthz, /readyz, /livez)
  need no credentials at all: a kubelet probe carries none, and health must not
  depend on the API server being reachable.
- A review that fails (API server unreachable, timeout, 5xx) is never cached and
  never allows: cached answers are honoured until they expire, then requests are
  refused (401 when the token cannot be checked, 403 when the access cannot be) —
  closed, never open.

Nothing here knows HTTP servers; `HealthServer` calls `DelegatedAuth.check` with the
path and the Authorization header and sends the refusal it returns.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import ssl
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from policyd.clock import REAL_CLOCK
from policyd.errors import PolicydError

log = logging.getLogger("policyd.daemon.serving")

DEFAULT_SECURE_PORT = 10259
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
TOKEN_CACHE_TTL = 10.0
ALLOW_CACHE_TTL = 10.0
DENY_CACHE_TTL = 10.0
# One review may take this long (upstream's webhook client timeout is also 10 s).
REVIEW_TIMEOUT = 10.0
# Entries per cache: random tokens from a stranger must not grow memory without bound.
CACHE_SIZE = 4096

TOKEN_REVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEW_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

K = TypeVar("K")
V = TypeVar("V")

# POST path, body -> decoded reply; raises on any failure (KubeClient.request fits).
Poster = Callable[[str, dict[str, Any]], dict[str, Any]]


class TTLCache(Generic[K, V]):
    """A bounded map whose entries expire `ttl` seconds after they were put, each with
    its own ttl. Thread-safe; the oldest entries go first when full."""

    def __init__(self, size: int = CACHE_SIZE,
                 clock: Callable[[], float] = REAL_CLOCK.now) -> None:
        self.size = size
        self.clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= self.clock():
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (self.clock() + ttl, value)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class _Call(Generic[V]):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: V | None = None
        self.error: BaseException | None = None


class SingleFlight(Generic[V]):
    """Concurrent calls for one key share one execution: a scrape burst with one token
    sends one TokenReview, not one per connection (upstream coalesces the same way)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, _Call[V]] = {}

    def do(self, key: str, fn: Callable[[], V]) -> V:
        with self._lock:
            call = self._calls.get(key)
            leader = call is None
            if call is None:
                call = self._calls[key] = _Call()
        if not leader:
            call.done.wait()
            if call.error is not None:
                raise call.error
            return call.value  # type: ignore[return-value]
        try:
            call.value = fn()
            return call.value
        except BaseException as exc:
            call.error = exc
            raise
        finally:
            with self._lock:
                del self._calls[key]
            call.done.set()


@dataclass(frozen=True, slots=True)
class UserInfo:
    """Who the API server says a token belongs to (TokenReview status.user)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_review(cls, user: Mapping[str, Any]) -> UserInfo:
        extra = user.get("extra") or {}
        return cls(name=str(user.get("username", "")), uid=str(user.get("uid", "")),
                   groups=tuple(str(g) for g in user.get("groups") or ()),
                   extra=tuple(sorted((str(k), tuple(str(x) for x in v or ()))
                                      for k, v in extra.items())))


@dataclass(frozen=True, slots=True)
class Refusal:
    """An HTTP refusal: 401 (who are you?) or 403 (not you), and why."""

    status: int
    message: str


@dataclass(frozen=True, slots=True)
class _Authn:
    user: UserInfo | None  # None: the API server does not know the token


@dataclass(frozen=True, slots=True)
class _Authz:
    allowed: bool
    reason: str


class PathMatcher:
    """--authorization-always-allow-paths: exact paths, or prefixes ending in `*`."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.exact: set[str] = set()
        self.prefixes: list[str] = []
        for p in paths:
            p = p.strip()
            if not p:
                continue
            if not p.startswith("/"):
                raise PolicydError(f"--authorization-always-allow-paths: {p!r} is not "
                                   "a path (it must start with /)")
            if "*" in p[:-1]:
                raise PolicydError(f"--authorization-always-allow-paths: {p!r}: only a "
                                   "trailing * (a prefix) is allowed")
            if p.endswith("*"):
                self.prefixes.append(p[:-1])
            else:
                self.exact.add(p)

    def __call__(self, path: str) -> bool:
        return path in self.exact or any(path.startswith(p) for p in self.prefixes)


@dataclass
class DelegatedAuth:
    """The delegating authenticator and authorizer with their caches. `post` sends a
    review to the API server (its own client: scrapes must not spend the scheduler's
    QPS); `clock` is injectable for tests."""

    post: Poster
    always_allow: PathMatcher = field(
        default_factory=lambda: PathMatcher(DEFAULT_ALWAYS_ALLOW_PATHS))
    token_ttl: float = TOKEN_CACHE_TTL
    allow_ttl: float = ALLOW_CACHE_TTL
    deny_ttl: float = DENY_CACHE_TTL
    clock: Callable[[], float] = REAL_CLOCK.now

    def __post_init__(self) -> None:
        self._tokens: TTLCache[str, _Authn] = TTLCache(clock=self.clock)
        self._access: TTLCache[str, _Authz] = TTLCache(clock=self.clock)
        self._token_flights: SingleFlight[_Authn] = SingleFlight()
        self._access_flights: SingleFlight[_Authz] = SingleFlight()

    def check(self, path: str, authorization: str | None, verb: str = "get"
              ) -> Refusal | None:
        """None when the request may proceed, else the refusal to send."""
        if self.always_allow(path):
            return None
        token = bearer_token(authorization)
        if token is None:
            return Refusal(401, "Unauthorized: a bearer token is required")
        try:
            user = self.authenticate(token)
        except Exception as exc:  # fail closed: an unchecked token is no identity
            log.warning("TokenReview failed, request refused: %s", exc)
            return Refusal(401, "Unauthorized: the token could not be checked")
        if user is None:
            return Refusal(401, "Unauthorized")
        try:
            allowed, reason = self.authorize(user, verb, path)
        except Exception as exc:  # fail closed
            log.warning("SubjectAccessReview failed, request refused: %s", exc)
            return Refusal(403, f'Forbidden: user "{user.name}": the access could not '
                                f'be checked')
        if not allowed:
            why = f": {reason}" if reason else ""
            return Refusal(403, f'Forbidden: user "{user.name}" cannot {verb} path '
                                f'"{path}"{why}')
        return None

    def authenticate(self, token: str) -> UserInfo | None:
        """The token's user, None when it does not authenticate; raises when the API
        server cannot say (nothing is cached then)."""
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._tokens.get(key)
        if cached is not None:
            return cached.user

        def review() -> _Authn:
            reply = self.post(TOKEN_REVIEW_PATH, {
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token}})
            status = reply.get("status") or {}
            user = UserInfo.from_review(status.get("user") or {}) \
                if status.get("authenticated") else None
            if user is not None and not user.name:
                user = None  # an authenticated nobody is nobody
            answer = _Authn(user)
            self._tokens.put(key, answer, self.token_ttl)
            return answer

        return self._token_flights.do(key, review).user

    def authorize(self, user: UserInfo, verb: str, path: str) -> tuple[bool, str]:
        """(allowed, reason) for `verb` on the non-resource URL `path`; raises when
        the API server cannot say (nothing is cached then)."""
        spec: dict[str, Any] = {
            "user": user.name, "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        key = json.dumps(spec, sort_keys=True)
        cached = self._access.get(key)
        if cached is not None:
            return cached.allowed, cached.reason

        def review() -> _Authz:
            reply = self.post(ACCESS_REVIEW_PATH, {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": spec})
            status = reply.get("status") or {}
            if status.get("evaluationError") and not status.get("allowed"):
                # The authorizer could not decide: an error, not a denial to remember.
                raise RuntimeError(f"evaluation error: {status['evaluationError']}")
            answer = _Authz(bool(status.get("allowed")) and not status.get("denied"),
                            str(status.get("reason", "")))
            self._access.put(key, answer,
                             self.allow_ttl if answer.allowed else self.deny_ttl)
            return answer

        decision = self._access_flights.do(key, review)
        return decision.allowed, decision.reason


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, None without one."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def server_tls_context(cert_file: Path | None, key_file: Path | None,
                       extra_hosts: tuple[str, ...] = ()) -> ssl.SSLContext:
    """The serving TLS context: from --tls-cert-file/--tls-private-key-file, or a
    self-signed certificate generated at start when neither is given. A missing,
    unreadable or mismatched file is a usage error naming the flag and the file."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if (cert_file is None) != (key_file is None):
        raise PolicydError("--tls-cert-file and --tls-private-key-file go together: "
                           "give both or neither")
    if cert_file is not None and key_file is not None:
        for flag, path in (("--tls-cert-file", cert_file),
                           ("--tls-private-key-file", key_file)):
            if not path.is_file() or not os.access(path, os.R_OK):
                raise PolicydError(f"{flag} {str(path)!r}: not a readable file")
        try:
            ctx.load_cert_chain(cert_file, key_file)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise PolicydError(f"--tls-cert-file {str(cert_file)!r} with "
                               f"--tls-private-key-file {str(key_file)!r}: not a valid "
                               f"PEM certificate and matching key ({exc})") from None
        return ctx
    # cryptography (~0.1 s) only without a given certificate.
    from policyd.pki import self_signed_serving_cert

    cert, key = self_signed_serving_cert(extra_hosts)
    # ssl loads certificates from files only: a private directory that exists just
    # for the load (the key never stays on disk).
    with tempfile.TemporaryDirectory(prefix="policyd-tls-") as d:
        cert_path, key_path = Path(d, "tls.crt"), Path(d, "tls.key")
        cert_path.write_bytes(cert)
        key_path.touch(0o600)
        key_path.write_bytes(key)
        ctx.load_cert_chain(cert_path, key_path)
    return ctx
