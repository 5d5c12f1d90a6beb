"""The metrics address (IPv6 as kube-scheduler takes it, a busy port is a runtime
failure, not a usage error) and /healthz reflecting the daemon's health."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from policyd.daemon.endpoints import serve_metrics
from policyd.daemon.health import LEADER_HEALTH_TIMEOUT, SCHEDULING_STALL_LIMIT
from policyd.daemon.metrics import HealthServer, Metrics, parse_bind_address
from policyd.daemon.run import Daemon
from policyd.errors import EXIT_RUNTIME, EXIT_USAGE, PolicydError, RuntimeFailure
from policyd.kube.leaderelection import LeaderElectionSettings, LeaderElector
from tests.clocks import ManualClock


def _has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


needs_ipv6 = pytest.mark.skipif(not _has_ipv6(), reason="no IPv6 loopback here")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def serve() -> Iterator[Callable[..., HealthServer]]:
    started: list[HealthServer] = []

    def start(address: str, **kw: Any) -> HealthServer:
        server = HealthServer(address, Metrics(), lambda: True, **kw)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


# -- the address ------------------------------------------------------------------------

@pytest.mark.parametrize(("address", "expected"), [
    ("[::1]:10251", ("::1", 10251, socket.AF_INET6)),
    ("[::]:0", ("::", 0, socket.AF_INET6)),
    ("[fd00::5]:65535", ("fd00::5", 65535, socket.AF_INET6)),
    ("127.0.0.1:10251", ("127.0.0.1", 10251, socket.AF_INET)),
    ("0.0.0.0:1", ("0.0.0.0", 1, socket.AF_INET)),
    (":10251", ("127.0.0.1", 10251, socket.AF_INET)),  # plain HTTP: loopback unless asked
    ("localhost:80", ("localhost", 80, socket.AF_INET)),
])
def test_bind_addresses_are_read_as_kube_scheduler_reads_them(
        address: str, expected: tuple[str, int, socket.AddressFamily]) -> None:
    assert parse_bind_address(address) == expected


@pytest.mark.parametrize(("address", "why"), [
    ("nonsense", "HOST:PORT"),
    ("::1:10251", "brackets"),
    ("[::1]", "HOST:PORT"),
    ("[::1:10251", "brackets"),
    ("[localhost]:10251", "not an IPv6 address"),
    ("[127.0.0.1]:10251", "not an IPv6 address"),
    ("127.0.0.1:70000", "0 to 65535"),
    ("127.0.0.1:-1", "HOST:PORT"),
    ("127.0.0.1:http", "HOST:PORT"),
])
def test_malformed_bind_addresses_say_why(address: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_bind_address(address)
    with pytest.raises(PolicydError) as info:
        serve_metrics(address, Metrics(), lambda: True)
    assert info.value.exit_code == EXIT_USAGE
    assert f"cannot serve metrics on {address!r}" in str(info.value)


@needs_ipv6
@pytest.mark.parametrize("address", ["[::1]:0", "[::]:0"])
def test_ipv6_addresses_are_served(serve: Callable[..., HealthServer], address: str) -> None:
    server = serve(address)
    assert server.address == f"{address[:-2]}:{server.port}"
    assert get(f"http://[::1]:{server.port}/healthz") == (200, "ok")


@needs_ipv6
def test_the_ipv6_wildcard_takes_ipv4_too(serve: Callable[..., HealthServer]) -> None:
    server = serve("[::]:0")
    assert get(f"http://127.0.0.1:{server.port}/readyz") == (200, "ok")


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_a_busy_port_is_a_runtime_failure_naming_the_address(family: str) -> None:
    if family == "ipv6" and not _has_ipv6():
        pytest.skip("no IPv6 loopback here")
    af, host, shown = ((socket.AF_INET, "127.0.0.1", "127.0.0.1") if family == "ipv4"
                       else (socket.AF_INET6, "::1", "[::1]"))
    with socket.socket(af) as holder:
        holder.bind((host, 0))
        holder.listen(1)
        address = f"{shown}:{holder.getsockname()[1]}"
        with pytest.raises(RuntimeFailure) as info:
            serve_metrics(address, Metrics(), lambda: True)
    assert info.value.exit_code == EXIT_RUNTIME != EXIT_USAGE
    assert str(info.value) == (f"cannot serve metrics on {address!r}: the address is "
                               "already in use (another process listens on it)")


# -- /healthz ------------------------------------------------------------------------------

def test_healthz_reports_each_problem_with_500(serve: Callable[..., HealthServer]) -> None:
    problems: list[str] = []
    server = serve("127.0.0.1:0", health=lambda: list(problems))
    url = f"http://127.0.0.1:{server.port}"
    assert get(f"{url}/healthz") == (200, "ok")
    problems += ["policyd-watch-pods: the thread has exited", "policyd-leader: stuck"]
    for path in ("/healthz", "/livez"):
        code, body = get(url + path)
        assert code == 500
        assert body.splitlines() == ["[-]policyd-watch-pods: the thread has exited",
                                     "[-]policyd-leader: stuck", "healthz check failed"]
    assert get(f"{url}/readyz") == (200, "ok")  # readiness is about the caches only


def test_a_failing_health_check_is_unhealthy(serve: Callable[..., HealthServer]) -> None:
    def broken() -> list[str]:
        raise RuntimeError("boom")

    server = serve("127.0.0.1:0", health=broken)
    code, body = get(f"http://127.0.0.1:{server.port}/healthz")
    assert code == 500 and "RuntimeError: boom" in body




def thread(name: str, alive: bool) -> Any:
    return SimpleNamespace(name=name, is_alive=lambda: alive)


def daemon(clock: ManualClock, elector: LeaderElector | None = None) -> Daemon:
    d = Daemon.__new__(Daemon)
    d.stop_event = threading.Event()
    d._threads = [thread(n, True) for n in ("policyd-watch-nodes", "policyd-watch-pods",
                                            "policyd-leader", "policyd-scheduler",
                                            "policyd-reload")]
    # The scheduler's Clock: only `now` is read, from the same hand-driven time.
    d.scheduler = SimpleNamespace(clock=SimpleNamespace(now=clock),  # type: ignore[assignment]
                                  heartbeat=clock())
    d.elector = elector
    return d


def test_a_running_daemon_is_healthy() -> None:
    assert daemon(ManualClock()).health_problems() == []


@pytest.mark.parametrize("name", ["policyd-watch-pods", "policyd-scheduler",
                                  "policyd-leader", "policyd-reload"])
def test_a_dead_loop_is_unhealthy(name: str) -> None:
    d = daemon(ManualClock())
    d._threads = [thread(t.name, t.name != name) for t in d._threads]
    assert d.health_problems() == [f"{name}: the thread has exited"]
    d.stop_event.set()  # shutting down: threads end on purpose
    assert d.health_problems() == []


def test_a_stalled_scheduling_loop_is_unhealthy() -> None:
    clock = ManualClock()
    d = daemon(clock)
    clock.advance(SCHEDULING_STALL_LIMIT)
    assert d.health_problems() == []
    clock.advance(1)
    [problem] = d.health_problems()
    assert problem.startswith("policyd-scheduler: no progress for")
    d.scheduler.heartbeat = clock.now()  # type: ignore[misc]  # it came round again
    assert d.health_problems() == []


def elector(clock: ManualClock) -> LeaderElector:
    settings = LeaderElectionSettings(namespace="ns", name="policyd", lease_duration=15,
                                      renew_deadline=10, identity="me")
    return LeaderElector(None, settings, clock=clock)  # type: ignore[arg-type]


def test_a_leader_stuck_past_its_lease_is_unhealthy() -> None:
    clock = ManualClock()
    e = elector(clock)
    d = daemon(clock, e)
    e._after_attempt(True)  # leading, just renewed
    clock.advance(15 + LEADER_HEALTH_TIMEOUT)
    d.scheduler.heartbeat = clock.now()  # type: ignore[misc]  # a SimpleNamespace here
    assert e.check(LEADER_HEALTH_TIMEOUT) is None and d.health_problems() == []
    clock.advance(1)
    assert d.health_problems() == ["policyd-leader: lease ns/policyd not renewed for 36s"]
    # Its loop comes back and steps down: a standby is healthy.
    e._after_attempt(False)
    assert d.health_problems() == []


def test_a_standby_that_never_led_is_healthy() -> None:
    clock = ManualClock()
    e = elector(clock)
    clock.advance(10_000)
    assert e.check(LEADER_HEALTH_TIMEOUT) is None
