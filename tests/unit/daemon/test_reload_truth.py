"""A reload says what it did: backoff changes take effect at once, fields that need a
restart are named (log, Warning event, `applied_restart_required`), the changed file is
named, a deleted policy file is said to be gone, and configuration events go to an
object that exists (the Lease, else the daemon's own Pod, else the log only)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from policyd.daemon.loaded_profile import RuntimeSettings, load, needs_restart
from policyd.daemon.queue import SchedulingQueue
from policyd.daemon.reload import ConfigWatcher, describe_change
from policyd.daemon.run import Daemon, RunOptions, flag_overrides, own_pod_ref
from policyd.kube.api import ObjectRef
from policyd.model.records import pod_from_dict
from tests.unit.daemon.test_config_events_reload import HW_POLICY, PROFILE
from tests.unit.daemon.test_reload_failures import daemon, reloads


@pytest.fixture
def running(tmp_path: Path) -> tuple[Path, Daemon, ConfigWatcher]:
    (tmp_path / "hw.yaml").write_text(HW_POLICY)
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE)
    loaded = load(profile)
    d = daemon(loaded)
    w = ConfigWatcher(loaded, apply=d._apply_config, rejected=d._config_rejected)
    return tmp_path, d, w


def edit_profile(tmp_path: Path, old: str, new: str) -> None:
    path = tmp_path / "profile.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def posted(d: Daemon) -> list[tuple[str, str, str, str, str]]:
    return d.events.posted  # type: ignore[attr-defined, no-any-return]


# -- what is applied live ---------------------------------------------------------------

def test_a_backoff_change_reaches_the_queue_and_needs_no_restart(
        running: tuple[Path, Daemon, ConfigWatcher]) -> None:
    tmp_path, d, w = running
    edit_profile(tmp_path, "podInitialBackoffSeconds: 2\npodMaxBackoffSeconds: 20",
                 "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 40")
    assert w.check() is True
    assert d.scheduler.queue.backoff == (5.0, 40.0)  # type: ignore[attr-defined]
    assert reloads(d, "applied") == 1 and reloads(d, "applied_restart_required") == 0
    assert posted(d) == []


def test_the_queue_backs_off_with_the_new_values_from_then_on() -> None:
    now = [0.0]
    q = SchedulingQueue(lambda a, b: False, clock=lambda: now[0], initial_backoff=1,
                        max_backoff=2)
    pod = pod_from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                         "spec": {"containers": [{"name": "c"}]}})
    q.add(pod)
    qp = q.pop()
    assert qp is not None
    q.set_backoff(8, 30)
    assert q.requeue(qp, unschedulable=False) == "backoff"
    now[0] = 8.9
    assert q.pop() is None  # the old 1 s would have let it out long ago
    now[0] = 9.0  # expiry 8 s, backing off until its window (8-9 s) has passed
    assert q.pop() is qp


@pytest.mark.parametrize(("old", "new", "named"), [
    ("leaseDuration: 20s", "leaseDuration: 30s", "leaderElection.leaseDuration (20 -> 30)"),
    ("retryPeriod: 500ms", "retryPeriod: 1s", "leaderElection.retryPeriod (0.5 -> 1)"),
    ("resourceNamespace: sched", "resourceNamespace: other",
     "leaderElection.resourceNamespace (sched -> other)"),
    ("leaderElection:\n", "parallelism: 4\nleaderElection:\n", "parallelism (16 -> 4)"),
    ("leaderElection:\n", "clientConnection:\n  qps: 5\nleaderElection:\n",
     "clientConnection.qps (50 -> 5)"),
    ("leaderElection:\n", "leaderElection:\n  leaderElect: false\n",
     "leaderElection.leaderElect (true -> false)"),
])
def test_a_change_that_needs_a_restart_is_said_so(
        running: tuple[Path, Daemon, ConfigWatcher], caplog: pytest.LogCaptureFixture,
        old: str, new: str, named: str) -> None:
    tmp_path, d, w = running
    caplog.set_level(logging.INFO, "policyd")
    edit_profile(tmp_path, old, new)
    assert w.check() is True  # the rest of the change is in force
    assert reloads(d, "applied_restart_required") == 1 and reloads(d, "applied") == 0
    [(kind, name, event_type, reason, message)] = posted(d)
    assert (kind, name, event_type, reason) == ("Lease", "policyd", "Warning",
                                                "RestartRequired")
    assert named in message and "until policyd restarts" in message
    assert str(tmp_path / "profile.yaml") in message
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(named in m for m in warnings), warnings
    # Still not in force on the next reload (of an unrelated file): said again.
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace("lack", "have no"))
    assert w.check() is True
    assert reloads(d, "applied_restart_required") == 2
    # Back to the running value: fully applied again.
    edit_profile(tmp_path, new, old)
    assert w.check() is True
    assert reloads(d, "applied") == 1 and len(posted(d)) == 2


def test_backoff_and_a_restart_field_together(
        running: tuple[Path, Daemon, ConfigWatcher]) -> None:
    tmp_path, d, w = running
    edit_profile(tmp_path, "podInitialBackoffSeconds: 2", "podInitialBackoffSeconds: 3")
    edit_profile(tmp_path, "renewDeadline: 15s", "renewDeadline: 12s")
    assert w.check() is True
    assert d.scheduler.queue.backoff == (3.0, 20.0)  # type: ignore[attr-defined]
    [(*_, message)] = posted(d)
    assert "leaderElection.renewDeadline (15 -> 12)" in message
    assert "Backoff" not in message


def test_a_field_a_flag_overrides_needs_no_restart(
        running: tuple[Path, Daemon, ConfigWatcher]) -> None:
    tmp_path, d, w = running
    d.flag_overrides = flag_overrides(RunOptions(config=tmp_path, binders=8))
    edit_profile(tmp_path, "leaderElection:\n", "parallelism: 4\nleaderElection:\n")
    assert w.check() is True
    assert reloads(d, "applied") == 1 and posted(d) == []


def test_needs_restart_names_profile_fields() -> None:
    base = RuntimeSettings()
    assert needs_restart(base, base) == []
    assert needs_restart(base, replace(base, pod_max_backoff=60)) == []
    assert needs_restart(base, replace(base, burst=7, kubeconfig="/k")) == [
        "clientConnection.burst (100 -> 7)", "clientConnection.kubeconfig (unset -> /k)"]
    assert needs_restart(base, replace(base, burst=7), ignore={"burst"}) == []


def test_flag_overrides() -> None:
    assert flag_overrides(RunOptions(config=Path("p"))) == frozenset()
    assert flag_overrides(RunOptions(config=Path("p"), leader_elect=False, qps=3,
                                     lease_name="x")) == {"leader_elect", "qps",
                                                          "lease_name"}


# -- which file changed ----------------------------------------------------------------

def test_the_reload_log_names_the_changed_file(
        running: tuple[Path, Daemon, ConfigWatcher], caplog: pytest.LogCaptureFixture
) -> None:
    tmp_path, _, w = running
    caplog.set_level(logging.INFO, "policyd")
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace("lack", "have no"))
    assert w.check() is True
    [line] = [r.getMessage() for r in caplog.records if "reloaded" in r.getMessage()]
    assert f"{tmp_path / 'hw.yaml'} changed" in line
    assert "profile.yaml changed" not in line
    caplog.clear()
    edit_profile(tmp_path, "podMaxBackoffSeconds: 20", "podMaxBackoffSeconds: 25")
    assert w.check() is True
    [line] = [r.getMessage() for r in caplog.records if "reloaded" in r.getMessage()]
    assert f"{tmp_path / 'profile.yaml'} changed" in line and "hw.yaml" not in line


def test_a_rejection_names_the_changed_file(
        running: tuple[Path, Daemon, ConfigWatcher]) -> None:
    tmp_path, d, w = running
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace('value: "true"', "value: [1]"))
    assert w.check() is False
    [(*_, reason, message)] = posted(d)
    assert reason == "InvalidConfiguration"
    assert f"{tmp_path / 'hw.yaml'} changed" in message


@pytest.mark.parametrize("layout", ["directory", "listed file"])
def test_a_deleted_policy_file_is_said_to_be_gone(tmp_path: Path, layout: str) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "hw.yaml").write_text(HW_POLICY)
    (policies / "other.yaml").write_text(HW_POLICY.replace("HwEncrypt", "Other")
                                         .replace("hw-encrypt", "other"))
    entry = "policies" if layout == "directory" else "[policies/hw.yaml, policies/other.yaml]"
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE.replace("policies: [hw.yaml]", f"policies: {entry}"
                                       if layout == "listed file" else "policies: [policies]")
                       + "  plugins:\n    filter:\n      enabled:\n      - name: HwEncrypt\n")
    loaded = load(profile)
    d = daemon(loaded)
    w = ConfigWatcher(loaded, apply=d._apply_config, rejected=d._config_rejected)
    (policies / "hw.yaml").unlink()
    assert w.check() is False
    [(*_, message)] = posted(d)
    assert f"{policies / 'hw.yaml'} was deleted" in message
    assert "other.yaml" not in message


def test_describe_change() -> None:
    before = (("/p/a.yaml", 1, 1, 1), ("/p/b.yaml", 1, 1, 2))
    assert describe_change(before, (("/p/a.yaml", 2, 1, 1), ("/p/b.yaml", 1, 1, 2))) \
        == "/p/a.yaml changed"
    assert describe_change(before, (("/p/a.yaml", 1, 1, 1),)) == "/p/b.yaml was deleted"
    assert describe_change(before, (("/p/a.yaml", 1, 1, 1), ("/p/b.yaml", -1, -1, -1))) \
        == "/p/b.yaml was deleted"
    assert describe_change(before, (*before, ("/p/c.yaml", 1, 1, 3))) == "/p/c.yaml changed"
    # A deleted file that comes back is a change.
    assert describe_change((("/p/a.yaml", -1, -1, -1),), (("/p/a.yaml", 1, 1, 1),)) \
        == "/p/a.yaml changed"


# -- where configuration events go -------------------------------------------------------

def test_without_leader_election_events_go_to_the_own_pod(
        running: tuple[Path, Daemon, ConfigWatcher]) -> None:
    tmp_path, d, w = running
    d.elector = None
    d.own_pod = own_pod_ref({"POD_NAME": "policyd-7d9", "POD_NAMESPACE": "policyd-system",
                             "POD_UID": "u-1"})
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace('value: "true"', "value: [1]"))
    assert w.check() is False
    [(kind, name, event_type, reason, _)] = posted(d)
    assert (kind, name, event_type, reason) == ("Pod", "policyd-7d9", "Warning",
                                                "InvalidConfiguration")


def test_without_leader_election_or_pod_name_it_is_logged_only(
        running: tuple[Path, Daemon, ConfigWatcher], caplog: pytest.LogCaptureFixture
) -> None:
    tmp_path, d, w = running
    d.elector = None
    d.own_pod = None
    (tmp_path / "hw.yaml").write_text(HW_POLICY.replace('value: "true"', "value: [1]"))
    assert w.check() is False
    assert posted(d) == []
    assert reloads(d, "rejected") == 1
    assert any("rejected" in r.getMessage() and r.levelno == logging.ERROR
               for r in caplog.records)


def test_own_pod_ref_reads_the_downward_api_variables() -> None:
    assert own_pod_ref({}) is None
    assert own_pod_ref({"POD_NAME": "p"}) is None
    assert own_pod_ref({"POD_NAMESPACE": "ns"}) is None
    assert own_pod_ref({"POD_NAME": "p", "POD_NAMESPACE": "ns"}) == ObjectRef(
        "v1", "Pod", "ns", "p", "")
    ref = own_pod_ref({"POD_NAME": "p", "POD_NAMESPACE": "ns", "POD_UID": "u"})
    assert ref is not None and ref.uid == "u"
