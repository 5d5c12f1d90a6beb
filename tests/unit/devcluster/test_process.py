"""Process handling: start, liveness by pid + start time, SIGTERM then SIGKILL."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.process import ManagedProcess, proc_start_time

# Ignores SIGTERM, so only the SIGKILL after the grace period ends it.
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('up', flush=True); time.sleep(60)"
)


def _wait_for_output(log: Path, text: str) -> None:
    deadline = time.monotonic() + 10
    while text not in log.read_text():
        assert time.monotonic() < deadline, f"{text!r} never appeared in {log}"
        time.sleep(0.01)


def test_start_log_and_stop(tmp_path: Path) -> None:
    proc = ManagedProcess.start(
        "sleeper",
        [sys.executable, "-c", "print('hello', flush=True); import time; time.sleep(60)"],
        tmp_path / "sleeper.log",
    )
    try:
        _wait_for_output(proc.log_path, "hello")
        assert proc.alive()
        assert proc.start_time == proc_start_time(proc.pid)
        # Own session: a Ctrl-C at the terminal does not hit it directly.
        assert os.getsid(proc.pid) == proc.pid
    finally:
        proc.stop(grace=5)
    assert not proc.alive()
    assert proc_start_time(proc.pid) is None
    assert "hello" in proc.log_tail()
    proc.stop()  # idempotent


def test_sigkill_after_grace(tmp_path: Path) -> None:
    proc = ManagedProcess.start("stubborn", [sys.executable, "-c", STUBBORN], tmp_path / "s.log")
    _wait_for_output(proc.log_path, "up")
    proc.stop(grace=0.5)
    assert not proc.alive()
    assert proc.exit_code() == -9


def test_attached_handle_detects_pid_reuse(tmp_path: Path) -> None:
    proc = ManagedProcess.start(
        "sleeper",
        [sys.executable, "-c", "import time; time.sleep(60)"],
        tmp_path / "l.log",
        detach=True,
    )
    try:
        same = ManagedProcess.from_state(proc.to_state())
        assert same.alive()
        assert proc.start_time is not None
        stranger = ManagedProcess.attach("sleeper", proc.pid, proc.start_time + 1, proc.log_path)
        assert not stranger.alive()
        stranger.stop(grace=0.1)  # must not signal a process that is not ours
        assert proc.alive()
        same.stop(grace=5)
        assert proc_start_time(proc.pid) is None or proc.exit_code() is not None
    finally:
        proc.stop(grace=1)


def test_start_time_of_missing_pid() -> None:
    assert proc_start_time(2**22 + 12345) is None


def test_unrunnable_binary_is_a_clear_error(tmp_path: Path) -> None:
    not_executable = tmp_path / "etcd"
    not_executable.write_text("")
    with pytest.raises(DevClusterError, match=r"cannot run .*etcd: Permission denied"):
        ManagedProcess.start("etcd", [str(not_executable)], tmp_path / "etcd.log")


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two CPUs to choose one of")
def test_cpus_pin_the_process_and_the_threads_it_starts(tmp_path: Path) -> None:
    # The benchmark's pinned mode keeps the control plane off the scheduler's core.
    cpu = min(os.sched_getaffinity(0))
    code = ("import os, threading; t = threading.Thread(target=lambda: print("
            "'thread', sorted(os.sched_getaffinity(0)), flush=True)); t.start(); t.join(); "
            "print('main', sorted(os.sched_getaffinity(0)), flush=True); "
            "import time; time.sleep(60)")
    proc = ManagedProcess.start("pinned", [sys.executable, "-c", code],
                                tmp_path / "pinned.log", cpus=frozenset({cpu}))
    try:
        _wait_for_output(proc.log_path, "main")
        assert proc.log_path.read_text().split("\n")[:2] == [f"thread [{cpu}]", f"main [{cpu}]"]
        assert os.sched_getaffinity(proc.pid) == {cpu}
    finally:
        proc.stop(grace=1)
