"""The one clock the daemon's loops and the node metrics read and wait on.

Every loop that waits (bind retries, event writes, the scheduling loop, metrics
providers) and every deadline or age it computes goes through a `Clock`, so a test
drives time by hand (`tests/clocks.ManualClock`) and never sleeps. Components that only read the
time take `Clock.now` (or `Clock.wall`) as a plain function: they need no more.

A leaf module: it imports nothing from policyd, so any layer may use it.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds: deadlines, intervals, ages inside this process."""
        ...

    def wall(self) -> float:
        """Unix time: timestamps that others read (metric values, /debug pages)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds`; nothing cuts it short."""
        ...

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait `seconds` or until `event` is set; True if it was set (a stop)."""
        ...


class RealClock:
    """The process's clocks; what every component uses unless a test says otherwise."""

    # The functions themselves, not wrappers: the queue reads `now` on every pod.
    now = staticmethod(time.monotonic)
    wall = staticmethod(time.time)
    sleep = staticmethod(time.sleep)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(seconds)


REAL_CLOCK = RealClock()
