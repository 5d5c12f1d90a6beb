"""Fixtures giving integration tests a real control plane (etcd + kube-apiserver).

One control plane serves the whole session: starting one takes seconds, building the
binaries the first time on a fresh machine takes minutes (progress is printed to the
terminal even under output capture). Tests that need isolation create their own
namespaces or uniquely named objects, and clean up after themselves.

Everything here is marked `integration`, so `pytest -m "not integration"` skips it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster import ControlPlane
from policyd.devcluster.assets import binaries_in, cache_dir, from_env

# A cold build on a 2-core machine takes about 6 minutes, more than the project's
# per-test timeout, and it happens inside the first integration test's setup.
_COLD_BUILD_TIMEOUT_S = 3600

_HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "integration: runs against a real kube-apiserver built from source "
        "(tests/integration; deselect with -m 'not integration')",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    needs_build = from_env() is None and binaries_in(cache_dir(), "cache") is None
    for item in items:
        if _HERE not in Path(str(item.fspath)).parents:
            continue
        item.add_marker(pytest.mark.integration)
        if needs_build:
            item.add_marker(pytest.mark.timeout(_COLD_BUILD_TIMEOUT_S))


def _terminal_progress(config: pytest.Config) -> Callable[[str], None]:
    """Write progress to the real terminal, bypassing pytest's output capture."""
    capman: Any = config.pluginmanager.getplugin("capturemanager")

    def write(message: str) -> None:
        if capman is None:
            print(f"[policyd devcluster] {message}", file=sys.stderr, flush=True)
            return
        with capman.global_and_fixture_disabled():
            sys.stderr.write(f"\n[policyd devcluster] {message}\n")
            sys.stderr.flush()

    return write


@pytest.fixture(scope="session")
def control_plane(pytestconfig: pytest.Config) -> Iterator[ControlPlane]:
    """A running etcd + kube-apiserver for the whole session (built on first use)."""
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
