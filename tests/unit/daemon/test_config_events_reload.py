"""Daemon settings from the profile, event flood control, reload detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from policyd.daemon.event_recorder import FailureThrottle
from policyd.daemon.loaded_profile import InvalidConfig, load
from policyd.daemon.reload import ConfigWatcher, signature
from tests.clocks import ManualClock

HW_POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: hw-encrypt
spec:
  pluginName: HwEncrypt
  filters:
  - id: needs-hw-encrypt
    message: node(s) lack hardware encryption
    annotationToNodeLabel:
      annotation: myorg.io/require-hw-encrypt
      value: "true"
      label: node.kubernetes.io/hw-encrypt
      labelValue: "true"
"""

PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
leaderElection:
  leaseDuration: 20s
  renewDeadline: 15s
  retryPeriod: 500ms
  resourceNamespace: sched
policies: [hw.yaml]
profiles:
- schedulerName: policyd
"""


def test_load_reads_settings_and_policies(tmp_path: Path) -> None:
    (tmp_path / "hw.yaml").write_text(HW_POLICY)
    (tmp_path / "profile.yaml").write_text(PROFILE)
    loaded = load(tmp_path / "profile.yaml")
    assert list(loaded.frameworks) == ["policyd"]
    assert "HwEncrypt" in [p.name for p in loaded.frameworks["policyd"].filter_plugins]
    assert loaded.settings.pod_initial_backoff == 2
    assert loaded.settings.leader_election().namespace == "sched"
    assert loaded.settings.retry_period == 0.5
    assert tmp_path / "hw.yaml" in loaded.files


def test_load_rejects_a_broken_policy(tmp_path: Path) -> None:
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace("pluginName: HwEncrypt",
                                                        "pluginName: hw-encrypt"))
    (tmp_path / "profile.yaml").write_text(PROFILE)
    with pytest.raises(InvalidConfig) as info:
        load(tmp_path / "profile.yaml")
    assert info.value.exit_code == 1


def test_load_rejects_an_unknown_plugin(tmp_path: Path) -> None:
    (tmp_path / "hw.yaml").write_text(HW_POLICY)
    (tmp_path / "profile.yaml").write_text(PROFILE + """\
  plugins:
    filter:
      enabled:
      - name: hwEncrypt
""")
    with pytest.raises(InvalidConfig, match="hwEncrypt"):
        load(tmp_path / "profile.yaml")




def test_failure_throttle_posts_on_change_or_after_growing_intervals() -> None:
    clock = ManualClock(0.0)
    t = FailureThrottle(clock, initial=60, maximum=240)
    assert t.check("u", "m1") == (True, True)  # first failure: event and condition
    clock.set(10)
    assert t.check("u", "m1") == (False, False)  # same message soon after: nothing
    clock.set(60)
    assert t.check("u", "m1") == (True, False)  # interval passed: event, no patch
    clock.set(100)
    assert t.check("u", "m1") == (False, False)  # next interval is 120 s
    clock.set(180)
    assert t.check("u", "m1") == (True, False)
    clock.set(181)
    assert t.check("u", "m2") == (True, True)  # message changed: both at once
    t.forget("u")
    assert len(t) == 0


def test_reload_signature_sees_changes_in_directories(tmp_path: Path) -> None:
    d = tmp_path / "policies"
    d.mkdir()
    (d / "a.yaml").write_text("x")
    before = signature([d])
    (d / "b.yaml").write_text("y")
    assert signature([d]) != before
    mid = signature([d])
    os.utime(d / "a.yaml", ns=(1, 1))
    assert signature([d]) != mid


def test_watcher_rejects_an_invalid_change_and_keeps_the_old_config(tmp_path: Path) -> None:
    (tmp_path / "hw.yaml").write_text(HW_POLICY)
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE)
    applied: list[object] = []
    rejected: list[str] = []
    w = ConfigWatcher(load(profile), apply=applied.append, rejected=rejected.append)
    assert w.check() is None
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace("value: \"true\"", "value: [1]"))
    assert w.check() is False
    assert rejected and not applied
    assert "HwEncrypt" in [p.name for p in w.current.frameworks["policyd"].filter_plugins]
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace("lack hardware", "lack HW"))
    assert w.check() is True
    assert len(applied) == 1

