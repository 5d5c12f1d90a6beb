"""The daemon's feature gates: --feature-gates over the profile's, the queue taking
SchedulerPopFromBackoffQ, the gates fixed at start (a reload that changes them says a
restart is needed and keeps building with the running ones)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from policyd.cli.options import feature_gate_settings
from policyd.daemon.loaded_profile import LoadedConfig, load, needs_restart
from policyd.daemon.reload import ConfigWatcher
from policyd.daemon.run import Daemon, RunOptions, connect, load_config
from policyd.errors import PolicydError
from policyd.features import turning_off
from tests.clocks import ManualClock
from tests.unit.daemon.test_start_step import _refused_port

HEAD = "apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n"
OFF = "featureGates: {SchedulerPopFromBackoffQ: false}\n"


@pytest.fixture
def options(tmp_path: Path) -> RunOptions:
    (tmp_path / "profile.yaml").write_text(HEAD + "leaderElection: {leaderElect: false}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{_refused_port()}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    return RunOptions(config=tmp_path / "profile.yaml", kubeconfig=str(kubeconfig),
                      secure_port=0)


def _daemon(options: RunOptions) -> Daemon:
    loaded = load_config(options)
    return Daemon(options, loaded, connect(options, loaded.settings), clock=ManualClock())


def test_the_default_queue_pops_from_backoff(options: RunOptions) -> None:
    d = _daemon(options)
    try:
        assert d.scheduler.state.queue.pop_from_backoff
        assert d.loaded.feature_gates.describe() == "defaults"
    finally:
        d.client.close()


def test_the_flag_turns_the_queue_to_waiting_out_backoff(options: RunOptions) -> None:
    options.feature_gates = feature_gate_settings(["SchedulerPopFromBackoffQ=false"])
    d = _daemon(options)
    try:
        assert not d.scheduler.state.queue.pop_from_backoff
        fw = d.loaded.frameworks["policyd"]
        assert not fw.features.enabled("SchedulerPopFromBackoffQ")
    finally:
        d.client.close()


@pytest.mark.parametrize("gate", ["NominatedNodeNameForExpectation",
                                  "InPlacePodLevelResourcesVerticalScaling"])
def test_every_piece_of_the_daemon_reads_the_one_set_of_gates(options: RunOptions,
                                                              gate: str) -> None:
    """The binder (nominating before PreBind), the cluster cache and the queue (how a
    resizing pod counts and what its update means) and every framework see the gates
    the flag set, not v1.36's defaults."""
    options.feature_gates = feature_gate_settings([f"{gate}=false"])
    d = _daemon(options)
    try:
        s = d.scheduler
        seen = {"frameworks": d.loaded.frameworks["policyd"].features,
                "cluster": s.state.cluster.features, "queue": s.state.queue.features,
                "state": s.state.gates}
        assert {k: g.enabled(gate) for k, g in seen.items()} == dict.fromkeys(seen, False)
        assert s.binder.nominate_for_expectation == (gate != "NominatedNodeNameForExpectation")
    finally:
        d.client.close()


def test_the_flag_overrides_the_profile_per_gate(options: RunOptions) -> None:
    options.config.write_text(HEAD + OFF)
    assert not load_config(options).feature_gates.enabled("SchedulerPopFromBackoffQ")
    options.feature_gates = feature_gate_settings(["SchedulerPopFromBackoffQ=true,"
                                                   "NominatedNodeNameForExpectation=false"])
    gates = load_config(options).feature_gates
    assert gates.overrides() == {"NominatedNodeNameForExpectation": False}


@pytest.mark.parametrize(("text", "message"), [
    ("Nope=true", "unrecognized feature gate: Nope (the kube-scheduler v1.36 gates"),
    ("SchedulerPopFromBackoffQ", "missing bool value for SchedulerPopFromBackoffQ"),
    ("SchedulerQueueingHints=false", "cannot set feature gate SchedulerQueueingHints to "
                                     "false, feature is locked to true"),
])
def test_a_refused_flag_is_a_usage_error(text: str, message: str) -> None:
    with pytest.raises(PolicydError) as err:
        feature_gate_settings([text])
    assert err.value.exit_code == 2
    assert str(err.value).startswith(f"invalid argument {text!r} for \"--feature-gates\" "
                                     f"flag: {message}")


def test_a_reload_keeps_the_running_gates_and_asks_for_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(HEAD)
    started = load(path)
    path.write_text(HEAD + "featureGates: {" + ", ".join(
        f"{n}: false" for n, _ in turning_off("NodeDeclaredFeatures")) + "}\n")
    applied: list[LoadedConfig] = []
    watcher = ConfigWatcher(started, apply=applied.append, rejected=lambda m: None)
    watcher._sig = ()  # as if the file had changed since
    assert watcher.check() is True
    reloaded = applied[0]
    assert reloaded.feature_gates == started.feature_gates  # pinned
    fw = reloaded.frameworks["policyd"]
    assert fw.features.enabled("NodeDeclaredFeatures")
    assert "NodeDeclaredFeatures" in [p.name for p in fw.filter_plugins]
    (pending,) = needs_restart(started.settings, reloaded.settings)
    assert pending.startswith("featureGates (defaults -> ExtendWebSocketsToKubelet=false,")
    assert "NodeDeclaredFeatures=false" in pending


def test_start_logs_the_non_default_gates(options: RunOptions,
                                          caplog: pytest.LogCaptureFixture) -> None:
    options.feature_gates = feature_gate_settings(["SchedulerPopFromBackoffQ=false"])
    d = _daemon(options)
    caplog.set_level(logging.INFO, "policyd.daemon")
    try:
        d.start()  # nothing answers; only the start line matters
    finally:
        d.stop_event.set()
        d.shutdown()
    assert any("feature gates SchedulerPopFromBackoffQ=false" in r.getMessage()
               for r in caplog.records)

