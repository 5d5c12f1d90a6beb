"""Constructing a Daemon sends nothing: with `clusterPolicies: true` the one list of
SchedulingPolicy objects is `start()`'s first step, before anything is served."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from policyd.daemon.run import Daemon, RunOptions, connect, load_config
from policyd.errors import RuntimeFailure
from tests.clocks import ManualClock

# A profile naming a plugin no policy file provides (Gpu): only a cluster policy could.
from tests.unit.config.conftest import HEAD
from tests.unit.config.test_cluster_policies_option import NAMES_GPU

ROOT = Path(__file__).resolve().parents[3]

def _refused_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def options(tmp_path: Path) -> RunOptions:
    (tmp_path / "pol").mkdir()
    shutil.copy(ROOT / "policies" / "hw-encrypt.yaml", tmp_path / "pol")
    (tmp_path / "profile.yaml").write_text(HEAD + NAMES_GPU)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{_refused_port()}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    return RunOptions(config=tmp_path / "profile.yaml", kubeconfig=str(kubeconfig),
                      secure_port=0, metrics_bind_address="127.0.0.1:0")


def test_construction_lists_nothing_and_start_lists_first(options: RunOptions) -> None:
    loaded = load_config(options)
    assert not loaded.complete  # Gpu can only come from a SchedulingPolicy object
    clock = ManualClock()
    # Built against an API server that refuses every connection: nothing is asked yet.
    d = Daemon(options, loaded, connect(options, loaded.settings), clock=clock)
    try:
        assert clock.waits == [] and not d.crd_served
        with pytest.raises(RuntimeFailure) as failed:
            d.start()
        assert str(failed.value).startswith("cannot list SchedulingPolicy objects (")
        assert str(failed.value).endswith(
            "), and the profile names plugins no policy file provides")
        # The list was retried (its backoff slept on the daemon's clock) and failed
        # before anything was bound or any loop started.
        assert len(clock.waits) == 3
        assert d.http is None and d.https is None and d._threads == []
    finally:
        d.client.close()
