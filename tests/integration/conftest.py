"""What is particular to the integration tests; the control plane and API client
fixtures they use are shared with the end-to-end tests in tests/conftest.py.

Everything here is marked `integration`, so `pytest -m "not integration"` skips it. When
the control plane's binaries are not built yet, the first test's setup builds them,
which takes longer than the project's per-test timeout: the tests get a longer one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
