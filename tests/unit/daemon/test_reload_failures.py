"""Every failed reload is reported the same way (Warning event on the Lease, the
`rejected` reload metric) and leaves the running configuration in place: problems in
the files, unreadable files, and unexpected exceptions while loading or applying."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from policyd.daemon import reload as reload_module
from policyd.daemon.loaded_profile import LoadedConfig, load
from policyd.daemon.metrics import Metrics
from policyd.daemon.reload import ConfigWatcher
from policyd.daemon.run import Daemon
from policyd.kube.leaderelection import LeaderElectionSettings
from tests.unit.daemon.test_config_events_reload import HW_POLICY, PROFILE


class Events:
    def __init__(self) -> None:
        self.posted: list[tuple[Any, ...]] = []

    def event(self, ref: Any, event_type: str, reason: str, message: str, action: str,
              component: str) -> None:
        self.posted.append((ref.kind, ref.name, event_type, reason, message))


class Queue:
    def __init__(self) -> None:
        self.backoff: tuple[float, float] | None = None

    def set_backoff(self, initial: float, maximum: float) -> None:
        self.backoff = (initial, maximum)


class Scheduler:
    """Records the frameworks it is given; `fail_on` makes one switch raise."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_on: object | None = None
        self.queue = Queue()

    def set_frameworks(self, frameworks: dict[str, Any]) -> None:
        self.calls.append(frameworks)
        if frameworks is self.fail_on:
            raise RuntimeError("cannot instrument")


def daemon(loaded: LoadedConfig) -> Daemon:
    """A Daemon with only what the reload path touches: no client, no threads."""
    d = Daemon.__new__(Daemon)
    d.loaded = loaded
    d.running = loaded.settings
    d.flag_overrides = frozenset()
    d.own_pod = None
    d.metrics = Metrics()
    d.events = Events()  # type: ignore[assignment]
    d.elector = SimpleNamespace(lease_uid="lease-uid")  # type: ignore[assignment]
    d.le_settings = LeaderElectionSettings(namespace="sched", name="policyd")
    d.node_metrics = None
    d.scheduler = Scheduler()  # type: ignore[assignment]
    return d


def reloads(d: Daemon, result: str) -> float:
    value = d.metrics.registry.get_sample_value("policyd_config_reloads_total",
                                                {"result": result})
    return value or 0.0


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Daemon, ConfigWatcher]:
    (tmp_path / "hw.yaml").write_text(HW_POLICY)
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE)
    loaded = load(profile)
    d = daemon(loaded)
    w = ConfigWatcher(loaded, apply=d._apply_config, rejected=d._config_rejected)
    return tmp_path, d, w


def assert_rejected(d: Daemon, w: ConfigWatcher, before: LoadedConfig, needle: str) -> None:
    assert w.failures == 1 and w.reloads == 0
    assert w.current is before and d.loaded is before
    assert reloads(d, "rejected") == 1 and reloads(d, "applied") == 0
    [(kind, name, event_type, reason, message)] = d.events.posted  # type: ignore[attr-defined]
    assert (kind, name, event_type, reason) == ("Lease", "policyd", "Warning",
                                                "InvalidConfiguration")
    assert needle in message and "\n" not in message


DEEP_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: hw-encrypt
spec:
  pluginName: HwEncrypt
  filters:
  - id: deep
    message: node(s) rejected
    jmespath: '{expression}'
"""

DEEP = {
    "parentheses": "(" * 3000 + "node" + ")" * 3000,
    "not": "!" * 3000 + "node",
    "calls": "not_null(" * 3000 + "node" + ")" * 3000,
    "or chain": " || ".join(["node"] * 3000),
}


@pytest.mark.parametrize("expression", DEEP.values(), ids=DEEP.keys())
def test_a_deep_jmespath_policy_is_a_rejected_reload(
        setup: tuple[Path, Daemon, ConfigWatcher], expression: str) -> None:
    tmp_path, d, w = setup
    before = w.current
    (tmp_path / "hw.yaml").write_text(DEEP_POLICY.format(expression=expression))
    assert w.check() is False
    assert_rejected(d, w, before, "nests deeper than")
    assert d.scheduler.calls == []  # type: ignore[attr-defined]


def test_an_unexpected_exception_while_loading_is_a_rejected_reload(
        setup: tuple[Path, Daemon, ConfigWatcher], monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path, d, w = setup
    before = w.current

    def broken(*_: Any, **__: Any) -> LoadedConfig:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(reload_module, "load", broken)
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace("lack", "have no"))
    assert w.check() is False
    assert_rejected(d, w, before, "RecursionError: maximum recursion depth exceeded")


def test_a_failure_while_applying_restores_the_running_configuration(
        setup: tuple[Path, Daemon, ConfigWatcher], monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path, d, w = setup
    before = w.current
    sched: Scheduler = d.scheduler  # type: ignore[assignment]
    real_load = load

    def load_and_break(*args: Any, **kwargs: Any) -> LoadedConfig:
        loaded = real_load(*args, **kwargs)
        sched.fail_on = loaded.frameworks
        return loaded

    monkeypatch.setattr(reload_module, "load", load_and_break)
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace("lack", "have no"))
    assert w.check() is False
    assert_rejected(d, w, before, "RuntimeError: cannot instrument")
    # Switched to the new frameworks, failed, switched back to the running ones.
    assert [c is before.frameworks for c in sched.calls] == [False, True]


def test_an_unreadable_profile_is_a_rejected_reload(
        setup: tuple[Path, Daemon, ConfigWatcher]) -> None:
    tmp_path, d, w = setup
    before = w.current
    (tmp_path / "profile.yaml").unlink()
    assert w.check() is False
    assert_rejected(d, w, before, "profile.yaml")


def test_a_valid_change_is_applied_and_counted(
        setup: tuple[Path, Daemon, ConfigWatcher]) -> None:
    tmp_path, d, w = setup
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace("lack", "have no"))
    assert w.check() is True
    assert reloads(d, "applied") == 1 and reloads(d, "rejected") == 0
    assert d.loaded is w.current
    assert d.scheduler.calls == [w.current.frameworks]  # type: ignore[attr-defined]
    assert d.events.posted == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("breakage", ["dangling symlink", "symlink loop", "link to parent"])
def test_a_broken_policy_directory_is_a_rejected_reload(tmp_path: Path, breakage: str) -> None:
    d = tmp_path / "policies"
    d.mkdir()
    (d / "hw.yaml").write_text(HW_POLICY)
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE.replace("policies: [hw.yaml]", "policies: [policies]"))
    loaded = load(profile)
    dm = daemon(loaded)
    w = ConfigWatcher(loaded, apply=dm._apply_config, rejected=dm._config_rejected)
    if breakage == "dangling symlink":
        (d / "gpu.yaml").symlink_to("../elsewhere/gpu.yaml")
    elif breakage == "symlink loop":
        (d / "a").symlink_to("b")
        (d / "b").symlink_to("a")
    else:
        (d / "sub").mkdir()
        (d / "sub" / "up").symlink_to("..")
    assert w.check() is False
    assert_rejected(dm, w, loaded, "symlink")
    assert w.check() is None  # nothing changed since: no second event
    # Fixed: the change is noticed and applied.
    for link in ("gpu.yaml", "a", "b", "sub/up"):
        if (d / link).is_symlink():
            (d / link).unlink()
    assert w.check() is True
    assert reloads(dm, "applied") == 1
