"""Exponential backoff with jitter, the server's Retry-After, the one retry policy,
and a token-bucket rate limiter.

All are pure over an injected clock so the loops that use them (watch reconnects, bind
retries, event writes, lease renewals, the client's QPS limit) are testable without
sleeping. `RetryPolicy` is what a loop that gives up asks after each failure: retry
after this long, or give up (and why); it decides on the failure's type
(`Failure`, set where the HTTP status is known), never on its message.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

# The longest Retry-After we obey: a server (or a proxy in front of it) that asks for
# an hour must not park a watch or a bind that long. client-go's reflector caps its
# own backoff at 30 s; a minute leaves room for an overloaded server's honest ask.
RETRY_AFTER_MAX = 60.0

# Jitter needs no seed of its own per operation: a fresh `random.Random()` reads 2.5 KB
# from the OS to seed itself, and every bind and event write begins a `Retries`. One
# generator serves them all (its `random()` is atomic under the GIL).
_JITTER = random.Random()


@dataclass(slots=True)
class Backoff:
    """Delays growing from `initial` by `factor` up to `maximum`, each with up to
    `jitter` (a fraction) added so that many clients do not retry in lockstep.
    `reset()` after a success starts again from `initial`."""

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2
    rng: random.Random = field(default=_JITTER)
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


class Failure(Enum):
    """What a failed call means for a retry of the same request."""

    TEMPORARY = "temporary"
    """No response, throttled (429) or a server-side failure (5xx): it may succeed later."""
    PERMANENT = "permanent"
    """The server answered no (any other 4xx): repeating the request cannot help."""


class RetryableError(Protocol):
    """What the policy reads of a failure (`policyd.kube.client.ApiError` has both)."""

    @property
    def failure(self) -> Failure: ...

    @property
    def retry_after(self) -> float | None: ...


class GiveUp(Enum):
    """Why a retry loop stops; the values are the `reason` labels of drop counters."""

    PERMANENT = "rejected"
    """The failure is permanent."""
    OUT_OF_TIME = "retries_exhausted"
    """The next attempt, after its backoff or the server's Retry-After, would start
    past the deadline: retrying sooner would only be throttled again."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How one operation is retried: only after a temporary failure, after a
    `Backoff(initial, maximum)` delay (at least the server's Retry-After), and never
    starting an attempt more than `deadline` seconds after `begin()`."""

    initial: float = 0.2
    maximum: float = 5.0
    deadline: float = 30.0

    def begin(self, now: Callable[[], float]) -> Retries:
        """The retries of one operation whose first attempt starts now."""
        return Retries(self, now)


class Retries:
    """One operation under a `RetryPolicy`: `after(error)` once per failed attempt."""

    def __init__(self, policy: RetryPolicy, now: Callable[[], float]) -> None:
        self.backoff = Backoff(initial=policy.initial, maximum=policy.maximum)
        self._now = now
        self.deadline = now() + policy.deadline
        self.attempts = 0
        """Failed attempts so far (the number of `after` calls)."""

    def after(self, error: RetryableError) -> float | GiveUp:
        """The wait before the next attempt, or why there is none."""
        self.attempts += 1
        if error.failure is Failure.PERMANENT:
            return GiveUp.PERMANENT
        delay = self.backoff.next_delay(error.retry_after)
        if self._now() + delay > self.deadline:
            return GiveUp.OUT_OF_TIME
        return delay


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
