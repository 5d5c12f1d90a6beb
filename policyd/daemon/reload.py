"""Hot reload of the profile and its policies.

Polls the files' (mtime, size, inode) every few seconds rather than using inotify: a
ConfigMap mounted in a pod changes by an atomic symlink swap that inotify on the file
itself misses, and polling works the same on every platform. A change is validated
exactly as at start-up; a valid one replaces the frameworks (pods waiting as
unschedulable get another chance). Any failure (problems in the files, an unreadable
file, even a bug while loading or applying) is logged, reported as a Warning event on
the policyd Lease and counted as a rejected reload, and the running version keeps
scheduling.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from policyd.daemon.config import LoadedConfig, load, policy_files
from policyd.errors import PolicydError

log = logging.getLogger("policyd.daemon.reload")

Signature = tuple[tuple[str, int, int, int], ...]


def signature(paths: list[Path]) -> Signature:
    """What identifies the content of `paths` (directories expanded) without reading
    it; a missing file counts too, so its reappearance is noticed."""
    out = []
    for p in policy_files(paths):
        try:
            st = os.stat(p)  # follows symlinks: a ConfigMap swap changes the target
            out.append((str(p), st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((str(p), -1, -1, -1))
    return tuple(out)


class ConfigWatcher:
    def __init__(self, current: LoadedConfig, *, apply: Callable[[LoadedConfig], None],
                 rejected: Callable[[str], None], interval: float = 2.0,
                 extra_policies: list[Path] | None = None) -> None:
        self.current = current
        self.apply = apply
        self.rejected = rejected
        self.interval = interval
        self.extra_policies = extra_policies or []
        self._sig = signature(current.files)
        self.reloads = 0
        self.failures = 0

    def check(self) -> bool | None:
        """Reload if anything changed: True applied, False rejected, None unchanged.

        Every failure is a rejection reported through `rejected` (the Warning event
        and the reload metric): problems in the files, an unreadable file, and any
        unexpected exception while loading or applying. The previous configuration
        keeps scheduling in each case.
        """
        sig = signature(self.current.files)
        if sig == self._sig:
            return None
        self._sig = sig
        try:
            loaded = load(self.current.path, self.extra_policies)
        except PolicydError as exc:  # InvalidConfig, unreadable files
            return self._reject(str(exc))
        except Exception as exc:  # a bug must not leave the change unreported
            log.exception("loading the changed configuration failed")
            return self._reject(f"cannot load {self.current.path}: "
                                f"{type(exc).__name__}: {exc}")
        try:
            self.apply(loaded)
        except Exception as exc:  # `apply` puts the previous configuration back
            log.exception("applying the changed configuration failed")
            return self._reject(f"cannot apply {loaded.path}: {type(exc).__name__}: {exc}")
        # The new config may name other policy files: watch those from now on.
        self._sig = signature(loaded.files)
        self.current = loaded
        self.reloads += 1
        log.info("configuration reloaded from %s (profiles: %s)", loaded.path,
                 ", ".join(loaded.frameworks))
        return True

    def _reject(self, message: str) -> bool:
        self.failures += 1
        log.error("configuration change rejected; still running the previous one: %s",
                  message)
        self.rejected(message)
        return False

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            try:
                self.check()
            except Exception:
                log.exception("configuration reload failed")
