"""End-to-end fixtures: a policyd daemon, in-process or as a subprocess, against the
real local control plane (`control_plane`, shared with the integration tests, comes
from tests/conftest.py).

Isolation: every test gets its own namespace and scheduler name, and starts and ends
with no Nodes, so FailedScheduling messages (`0/N nodes ...`) are exact. The control
plane's kube-controller-manager runs only the volume controllers (no garbage collector,
no namespace controller, no kubelet), so pods are deleted explicitly with grace 0.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from policyd.devcluster import ControlPlane
from tests.e2e.helpers import Cluster, DaemonFactory, ProcessFactory, daemons_on, fresh_cluster

_HERE = Path(__file__).parent
REPO = _HERE.parent.parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e: policyd run against a real kube-apiserver (tests/e2e; deselect with "
        "-m 'not e2e')",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def cluster(control_plane: ControlPlane) -> Iterator[Cluster]:
    with fresh_cluster(control_plane) as c:
        yield c


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    """A copy of the example policies (tests may rewrite them)."""
    d = tmp_path / "policies"
    d.mkdir()
    for f in sorted((REPO / "policies").glob("*.yaml")):
        shutil.copy(f, d / f.name)
    return d


@pytest.fixture
def daemons(control_plane: ControlPlane, tmp_path: Path) -> Iterator[DaemonFactory]:
    with daemons_on(control_plane, tmp_path) as factory:
        yield factory


@pytest.fixture
def processes(control_plane: ControlPlane, tmp_path: Path) -> Iterator[ProcessFactory]:
    factory = ProcessFactory(control_plane.kubeconfig_path, tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()
