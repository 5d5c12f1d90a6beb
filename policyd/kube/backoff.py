"""Exponential backoff with jitter, the server's Retry-After, and a token-bucket rate
limiter.

All are pure over an injected clock so the loops that use them (watch reconnects, bind
retries, event writes, lease renewals, the client's QPS limit) are testable without
sleeping.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# The longest Retry-After we obey: a server (or a proxy in front of it) that asks for
# an hour must not park a watch or a bind that long. client-go's reflector caps its
# own backoff at 30 s; a minute leaves room for an overloaded server's honest ask.
RETRY_AFTER_MAX = 60.0


@dataclass(slots=True)
class Backoff:
    """Delays growing from `initial` by `factor` up to `maximum`, each with up to
    `jitter` (a fraction) added so that many clients do not retry in lockstep.
    `reset()` after a success starts again from `initial`."""

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def base_delay(self, attempt: int) -> float:
        """The delay before retry number `attempt` (1-based), without jitter."""
        if attempt <= 0:
            return 0.0
        # Cap the exponent first: 2.0**1100 would overflow a float.
        exp = min(attempt - 1, 64)
        return float(min(self.maximum, self.initial * self.factor**exp))

    def next_delay(self, retry_after: float | None = None) -> float:
        """The wait before the next retry. `retry_after` (the server's Retry-After, from
        a 429 or a 5xx) makes it at least that long, capped at RETRY_AFTER_MAX, with
        the same share of jitter on top so that clients throttled together do not all
        come back in the same second."""
        self.attempts += 1
        base = self.base_delay(self.attempts)
        delay = base + base * self.jitter * self.rng.random()
        if retry_after is not None and retry_after > 0:
            asked = min(retry_after, RETRY_AFTER_MAX)
            delay = max(delay, asked + asked * self.jitter * self.rng.random())
        return delay

    def reset(self) -> None:
        self.attempts = 0


class TokenBucket:
    """client-go's token bucket (`flowcontrol.NewTokenBucketRateLimiter`): `burst`
    requests at once, refilled at `qps` per second. qps <= 0 means unlimited."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._clock = clock
        self._sleep = sleep
        self._last = clock()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take one token; return how long the caller must wait before using it.

        Tokens may go negative: each waiter reserves its own slot in the future, so
        waiters are served in order without polling."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def take(self) -> None:
        delay = self.reserve()
        if delay > 0:
            self._sleep(delay)
