"""What /healthz reports: why this process should be restarted (empty: healthy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from policyd.kube.leaderelection import LeaderElector

# /healthz fails when the leader has not renewed its lease for a lease duration plus
# this long (kube-scheduler's leader-election watchdog allows the same 20 s) ...
LEADER_HEALTH_TIMEOUT = 20.0
# ... or when the scheduling loop has not come round for this long (a cycle takes
# milliseconds to seconds; the loop otherwise wakes every 0.2 s).
SCHEDULING_STALL_LIMIT = 120.0


class _Thread(Protocol):
    @property
    def name(self) -> str: ...

    def is_alive(self) -> bool: ...


def health_problems(threads: Sequence[_Thread], scheduling_stalled: float,
                    elector: LeaderElector | None) -> list[str]:
    """A thread that should run for the daemon's life has ended (a watch, the
    scheduling loop, leader election, reloads), the scheduling loop has not come round
    for `scheduling_stalled` seconds past the limit, or the leader has not renewed its
    lease long past its duration (its loop is stuck: it should have stepped down). A
    standby replica, a watch retrying through an API outage and unsynced caches are
    all healthy (/readyz covers the caches)."""
    problems = [f"{t.name}: the thread has exited" for t in threads if not t.is_alive()]
    if scheduling_stalled > SCHEDULING_STALL_LIMIT:
        problems.append(f"policyd-scheduler: no progress for {scheduling_stalled:.0f}s")
    if elector is not None:
        stuck = elector.check(LEADER_HEALTH_TIMEOUT)
        if stuck:
            problems.append(f"policyd-leader: {stuck}")
    return problems
