"""Waiting for a started server to answer: a GET that never raises, and a poll loop.

Shared by every process of the control plane (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager): each is ready when one of its HTTP endpoints says so, and a
process that exits while we wait must fail at once with its log, not after a timeout.
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.process import ManagedProcess


def http_get(url: str, context: ssl.SSLContext | None, timeout: float = 2.0) -> tuple[int, str]:
    """(status, body) of a GET; status 0 when nothing answers yet."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return int(resp.status), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode(errors="replace")
    except (OSError, ssl.SSLError):
        return 0, ""


def unverified_context() -> ssl.SSLContext:
    """TLS without certificate checks, for the health endpoints of kube-scheduler and
    kube-controller-manager: they serve a self-signed certificate generated in memory,
    and the check is about liveness on loopback, not about trusting it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def wait_until(
    process: ManagedProcess, check: Callable[[], bool], timeout: float, what: str
) -> None:
    """Poll `check()` until true; fail fast (with the log tail) if the process exits."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        if not process.alive():
            code = process.exit_code()
            raise DevClusterError(
                f"{what} exited during startup"
                + (f" with code {code}" if code is not None else "")
                + f" (log: {process.log_path})",
                details=process.log_tail(),
            )
        if check():
            return
        if time.monotonic() >= deadline:
            raise DevClusterError(
                f"{what} not ready after {timeout:.0f}s (log: {process.log_path})",
                details=process.log_tail(),
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


class Component:
    """A control-plane process beside the API server (kube-scheduler,
    kube-controller-manager): its process, and readiness through `ready()`."""

    name = "component"

    def __init__(self, process: ManagedProcess, port: int) -> None:
        self.process = process
        self.port = port

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def alive(self) -> bool:
        return self.process.alive()

    def ready(self) -> bool:
        raise NotImplementedError

    def wait_ready(self, timeout: float = 60.0) -> None:
        wait_until(self.process, self.ready, timeout, self.name)

    def stop(self, grace: float = 10.0) -> None:
        self.process.stop(grace)
