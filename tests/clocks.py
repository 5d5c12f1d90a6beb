"""The one fake clock of the tests: it satisfies `policyd.clock.Clock` and is callable
like the plain time functions some parts take, and moves only when a test says so."""

from __future__ import annotations

import threading


class ManualClock:
    """Time that moves only when told: `advance()`, or a sleep or wait, which returns
    at once having moved the clock by its length. Both readings move together.
    `waits` records every sleep and wait asked for, for tests to assert on."""

    def __init__(self, start: float = 1000.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._offset = wall_start - start
        self.waits: list[float] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._offset

    def __call__(self) -> float:
        """`now()`, for code that takes a plain time function."""
        return self._now

    def set(self, now: float) -> None:
        with self._lock:
            self._now = now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.advance(max(0.0, seconds))

    def wait(self, event: threading.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        self.sleep(seconds)
        return event.is_set()
