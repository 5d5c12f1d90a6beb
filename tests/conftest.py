"""Fixtures shared by the integration and end-to-end tests: one real control plane
(etcd + kube-apiserver + kube-controller-manager with the volume controllers, so the
real PV controller binds claims) for the whole session, an admin API client for it, and
a headless Chromium per module for the page tests (`tests.browser`).

One control plane serves the whole session (under pytest-xdist, as `make test` runs
these tests, one per worker: each worker is a session): starting one takes seconds,
building the binaries the first time on a fresh machine takes minutes (progress is
printed to the terminal even under output capture). Tests that need isolation create their own
namespaces or uniquely named objects, and clean up after themselves.

The fixtures are session-scoped and lazy: a run that asks for neither (the unit tests)
starts nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from policyd.devcluster import ControlPlane
    from tests.browser import Browser


def _terminal_progress(config: pytest.Config, prefix: str = "policyd devcluster"
                       ) -> Callable[[str], None]:
    """Write progress to the real terminal, bypassing pytest's output capture."""
    capman: Any = config.pluginmanager.getplugin("capturemanager")

    def write(message: str) -> None:
        if capman is None:
            print(f"[{prefix}] {message}", file=sys.stderr, flush=True)
            return
        with capman.global_and_fixture_disabled():
            sys.stderr.write(f"\n[{prefix}] {message}\n")
            sys.stderr.flush()

    return write


@pytest.fixture(scope="session")
def terminal(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """A line to the real terminal even when the test passes: the figures a test
    measured that a CI log should show (the differential test's case mix)."""
    return _terminal_progress(pytestconfig, "policyd tests")


@pytest.fixture(scope="session")
def control_plane(pytestconfig: pytest.Config) -> Iterator[ControlPlane]:
    """A running etcd + kube-apiserver + kube-controller-manager for the whole session
    (built on first use)."""
    # Imported here, not at the top: this conftest is loaded for every test run, and
    # policyd.devcluster pulls in `cryptography` (about half a second) that unit-only
    # runs never need.
    from policyd.devcluster import ControlPlane

    cp = ControlPlane(progress=_terminal_progress(pytestconfig))
    try:
        cp.start()
        yield cp
    finally:
        # Also runs when a test fails or the session is interrupted (Ctrl-C); process
        # module's atexit/SIGTERM handling covers the rest.
        cp.stop()


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> Iterator[Any]:
    """A `kubernetes.client.ApiClient` authenticated as cluster admin."""
    client = control_plane.api_client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium (and one page) for a module's tests."""
    from tests.browser import Browser

    b = Browser()
    try:
        yield b
    finally:
        b.close()
