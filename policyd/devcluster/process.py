"""Starting and stopping the control plane's server processes, by their own pids.

Leaked etcd or kube-apiserver processes hold ports and memory and confuse the next run,
so every process is tracked by pid *and* start time (a pid alone may be reused by an
unrelated process after ours ended — ``policyd dev down`` must never signal a stranger),
is stopped with SIGTERM and then SIGKILL after a grace period, and is never looked up by
name. Processes tied to this Python process (tests) are additionally:

- put in their own session, so a Ctrl-C at the terminal reaches Python, whose cleanup
  then stops them in order, instead of killing them mid-write;
- stopped by an `atexit` hook and on SIGTERM/SIGHUP (turned into SystemExit so
  ``finally`` blocks and fixture finalizers run);
- given PR_SET_PDEATHSIG=SIGKILL on Linux, so even a SIGKILLed parent leaves nothing.

Detached processes (``policyd dev up``) get none of the last three: they must outlive
the command that started them.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from policyd.devcluster.errors import DevClusterError

_PR_SET_PDEATHSIG = 1

# Non-detached processes still running; stopped at interpreter exit.
_live: set[ManagedProcess] = set()
_live_lock = threading.Lock()
_hooks_installed = False


def proc_start_time(pid: int) -> int | None:
    """The start time of `pid` (clock ticks since boot), or None if it does not run.

    A zombie counts as not running: it has exited and only waits to be reaped.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2 (comm) is parenthesised and may contain spaces: split after its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])  # field 22 of the whole line


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _child_setup(pdeathsig: bool, cpus: frozenset[int] | None) -> Callable[[], None] | None:
    """What runs in the child between fork and exec: the parent-death signal, and the
    CPU affinity (set before exec, so every thread the program starts inherits it)."""
    if not pdeathsig and cpus is None:
        return None

    def setup() -> None:
        if pdeathsig:
            _set_pdeathsig()
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    return setup


@dataclass(eq=False)
class ManagedProcess:
    """One server process (etcd, kube-apiserver, kube-scheduler) and its log file."""

    name: str
    pid: int
    start_time: int | None
    log_path: Path
    argv: tuple[str, ...] = ()
    _popen: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(
        cls,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        detach: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        cpus: frozenset[int] | None = None,
    ) -> ManagedProcess:
        """`cpus`: the CPUs the process may run on (None: any, as its parent)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            try:
                popen = cls._popen_for(argv, log, detach=detach, env=env, cwd=cwd, cpus=cpus)
            except OSError as err:  # not found, not executable, wrong architecture
                raise DevClusterError(f"cannot run {argv[0]}: {err.strerror or err}") from err
        proc = cls(
            name=name,
            pid=popen.pid,
            start_time=proc_start_time(popen.pid),
            log_path=log_path,
            argv=tuple(argv),
            _popen=popen,
        )
        if not detach:
            _register(proc)
        return proc

    @staticmethod
    def _popen_for(
        argv: Sequence[str],
        log: Any,
        *,
        detach: bool,
        env: Mapping[str, str] | None,
        cwd: Path | None,
        cpus: frozenset[int] | None = None,
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,
            close_fds=True,
            preexec_fn=_child_setup(not detach and sys.platform.startswith("linux"), cpus),
        )

    @classmethod
    def attach(cls, name: str, pid: int, start_time: int | None, log_path: Path) -> ManagedProcess:
        """A handle on a process started earlier (by another `policyd` command)."""
        return cls(name=name, pid=pid, start_time=start_time, log_path=log_path)

    def alive(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        current = proc_start_time(self.pid)
        # Same pid but another start time: ours ended and the pid was reused.
        return current is not None and (self.start_time is None or current == self.start_time)

    def exit_code(self) -> int | None:
        return None if self._popen is None else self._popen.poll()

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        if self._popen is not None:
            try:
                self._popen.wait(timeout=max(0.0, timeout))
            except subprocess.TimeoutExpired:
                return False
            return True
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, wait up to `grace` seconds, then SIGKILL. Idempotent."""
        try:
            if self.alive():
                self._signal(signal.SIGTERM)
                if not self._wait(grace):
                    self._signal(signal.SIGKILL)
                    self._wait(5.0)
        finally:
            _unregister(self)

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def to_state(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pid": self.pid,
            "start_time": self.start_time,
            "log": str(self.log_path),
        }

    @classmethod
    def from_state(cls, data: Mapping[str, Any]) -> ManagedProcess:
        return cls.attach(
            str(data["name"]),
            int(data["pid"]),
            None if data.get("start_time") is None else int(data["start_time"]),
            Path(str(data["log"])),
        )


def _register(proc: ManagedProcess) -> None:
    global _hooks_installed
    with _live_lock:
        _live.add(proc)
        if _hooks_installed:
            return
        _hooks_installed = True
    atexit.register(stop_all)
    _install_signal_handlers()


def _unregister(proc: ManagedProcess) -> None:
    with _live_lock:
        _live.discard(proc)


def stop_all() -> None:
    """Stop every non-detached process still running, newest first."""
    with _live_lock:
        procs = sorted(_live, key=lambda p: p.pid, reverse=True)
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.stop(grace=5.0)


def _exit_on_signal(signum: int, _frame: FrameType | None) -> None:
    # SystemExit unwinds the stack, so context managers, pytest fixture finalizers and
    # finally blocks stop the processes in order; atexit is the last resort.
    raise SystemExit(128 + signum)


def _install_signal_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    for sig in (signal.SIGTERM, signal.SIGHUP):
        # Only replace the default action: a host program (pytest plugin, server) with
        # its own handler keeps it.
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _exit_on_signal)
