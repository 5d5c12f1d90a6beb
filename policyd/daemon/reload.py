"""Hot reload of the profile and its policies.

Polls the files' (mtime, size, inode) every few seconds rather than using inotify: a
ConfigMap mounted in a pod changes by an atomic symlink swap that inotify on the file
itself misses, and polling works the same on every platform. A change is validated
exactly as at start-up; a valid one replaces the frameworks (pods waiting as
unschedulable get another chance). Any failure (problems in the files, an unreadable
file, even a bug while loading or applying) is logged, reported as a Warning event on
the policyd Lease and counted as a rejected reload, and the running version keeps
scheduling. Every log line and event of a reload names the files that changed, and a
file that was deleted is said to be gone: its absence is usually the real cause of
whatever problem the new version has (a plugin no longer registered, say).

With cluster policies (`clusterPolicies: true`) a reload combines the files with the
SchedulingPolicy objects in effect (checked against the new files: an object whose
name or pluginName a file now takes is refused), and a change of the objects
(`recombine`) rebuilds through the same path, one at a time with file reloads. When a
combination cannot be built, the running one keeps scheduling, and the objects whose
new version could not run say why in their status.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from policyd.clock import REAL_CLOCK, Clock
from policyd.daemon.cluster_policies import ClusterPolicies
from policyd.daemon.loaded_profile import LoadedConfig, load, policy_files
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


def describe_change(before: Signature, after: Signature) -> str:
    """Which files differ between two signatures, for log lines and events:
    `/p/hw.yaml was deleted; /p/profile.yaml changed`. A directory is named only when
    no file under it is (its own entry changes whenever a file is added or removed)."""
    old = {path: rest for path, *rest in before}
    new = {path: rest for path, *rest in after}
    deleted = [p for p, st in old.items() if st[0] != -1 and new.get(p, [-1])[0] == -1]
    changed = [p for p, st in new.items()
               if st[0] != -1 and old.get(p) != st and not os.path.isdir(p)]
    if not deleted and not changed:  # only a directory's entry moved
        changed = [p for p, st in new.items() if old.get(p) != st]
    parts = [f"{p} was deleted" for p in deleted] + [f"{p} changed" for p in changed]
    return "; ".join(parts) or "no file changed"


class ConfigWatcher:
    def __init__(self, current: LoadedConfig, *, apply: Callable[[LoadedConfig], None],
                 rejected: Callable[[str], None], interval: float = 2.0,
                 extra_policies: list[Path] | None = None, clock: Clock = REAL_CLOCK,
                 cluster: ClusterPolicies | None = None,
                 apply_cluster: Callable[[LoadedConfig], None] | None = None,
                 cluster_rejected: Callable[[str], None] | None = None) -> None:
        self.current = current
        self.clock = clock
        self.apply = apply
        self.rejected = rejected
        self.interval = interval
        self.extra_policies = extra_policies or []
        self.cluster = cluster
        # A rebuild for cluster policies is not a reload of the files: the daemon
        # reports it apart (its own log lines and event, not the reload metric).
        self.apply_cluster = apply_cluster or apply
        self.cluster_rejected = cluster_rejected or rejected
        # File reloads and cluster-policy rebuilds, one at a time.
        self._lock = threading.RLock()
        self._sig = signature(current.files)
        self.reloads = 0
        self.failures = 0
        self.last_change = ""

    def check(self) -> bool | None:
        """Reload if anything changed: True applied, False rejected, None unchanged.

        Every failure is a rejection reported through `rejected` (the Warning event
        and the reload metric): problems in the files, an unreadable file, and any
        unexpected exception while loading or applying. The previous configuration
        keeps scheduling in each case.
        """
        with self._lock:
            return self._check()

    def _check(self) -> bool | None:
        sig = signature(self.current.files)
        if sig == self._sig:
            return None
        # Also what the last change is reported as (the daemon's restart-required event).
        self.last_change = change = describe_change(self._sig, sig)
        self._sig = sig
        try:
            loaded = self._load()
        except PolicydError as exc:  # InvalidConfig, unreadable files
            return self._reject(change, str(exc))
        except Exception as exc:  # a bug must not leave the change unreported
            log.exception("loading the changed configuration failed")
            return self._reject(change, f"cannot load {self.current.path}: "
                                        f"{type(exc).__name__}: {exc}")
        try:
            self.apply(loaded)
        except Exception as exc:  # `apply` puts the previous configuration back
            log.exception("applying the changed configuration failed")
            return self._reject(change, f"cannot apply {loaded.path}: "
                                        f"{type(exc).__name__}: {exc}")
        if self.cluster is not None:
            self.cluster.applied()
        # The new config may name other policy files: watch those from now on.
        self._sig = signature(loaded.files)
        self.current = loaded
        self.reloads += 1
        log.info("configuration reloaded from %s (%s; profiles: %s)", loaded.path, change,
                 ", ".join(loaded.frameworks))
        return True

    def recombine(self, change: str) -> bool:
        """Rebuild from the running files and the cluster policies now (after
        `change`, which names the objects that changed): True applied, False refused
        (the running frameworks stay; the cluster policies say why). A file change
        not yet picked up is reloaded instead, with the objects."""
        if self.cluster is None:
            return False
        with self._lock:
            if signature(self.current.files) != self._sig:
                return self._check() is True
            try:
                loaded = self._load()
                self.apply_cluster(loaded)
            except Exception as exc:
                if not isinstance(exc, PolicydError):
                    log.exception("rebuilding with the changed cluster policies failed")
                problem = str(exc) if isinstance(exc, PolicydError) \
                    else f"{type(exc).__name__}: {exc}"
                self.cluster.refused(" ".join(line.strip() for line in problem.splitlines()))
                message = f"{change}: {problem}"
                log.error("cluster policy change not applied; the running policies keep "
                          "scheduling: %s", message)
                self.cluster_rejected(message)
                return False
            self.cluster.applied()
            self.current = loaded
            log.info("cluster policies applied (%s; profiles: %s)", change,
                     ", ".join(loaded.frameworks))
            return True

    def _load(self) -> LoadedConfig:
        if self.cluster is not None:
            self.cluster.proposed = None
        return load(self.current.path, self.extra_policies, self.cluster,
                    gate_overrides=self.current.gate_overrides,
                    pinned_gates=self.current.feature_gates,
                    cluster_policies_flag=self.current.cluster_policies_flag)

    def _reject(self, change: str, problem: str) -> bool:
        self.failures += 1
        message = f"{change}: {problem}"
        log.error("configuration change rejected; still running the previous one: %s",
                  message)
        self.rejected(message)
        return False

    def run(self, stop: threading.Event) -> None:
        while not self.clock.wait(stop, self.interval):
            try:
                self.check()
            except Exception:
                log.exception("configuration reload failed")
