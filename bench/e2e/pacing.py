"""The fixed-arrival-rate mode's arithmetic: when each pod is due, what rate was
achieved, latency percentiles, the backlog over time, and whether a scheduler kept up.

Pure functions over timestamps (monotonic seconds), unit-tested without a cluster.

Kept up (the rule the report states): every pod bound, the achieved bind rate (pods
bound / seconds from the first creation to the last bind) at least KEPT_UP_SHARE of
the achieved arrival rate, and no growing backlog: the least-squares slope of the
backlog (pods created but not yet bound, sampled every BACKLOG_STEP seconds over the
arrival window) at most (1 - KEPT_UP_SHARE) of the arrival rate. A scheduler whose
capacity is 95% of the arrival rate is exactly on both bounds.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

KEPT_UP_SHARE = 0.95
BACKLOG_STEP = 1.0


def due_times(rate: float, count: int, t0: float) -> list[float]:
    """Pod i is due at t0 + i / rate."""
    if rate <= 0:
        raise ValueError("rate must be positive")
    return [t0 + i / rate for i in range(count)]


def creator_share(count: int, threads: int, thread: int) -> range:
    """The pod indexes one of `threads` creator threads creates, in order: thread k
    takes k, k + threads, ... so each stays on time when POSTs take < threads / rate."""
    return range(thread, count, threads)


def achieved_rate(times: Sequence[float]) -> float:
    """Events per second over the span of `times` (0 for fewer than two)."""
    if len(times) < 2:
        return 0.0
    span = max(times) - min(times)
    return (len(times) - 1) / span if span > 0 else math.inf


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of `values`; 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def backlog_series(created: Sequence[float], bound: Sequence[float],
                   step: float = BACKLOG_STEP) -> list[tuple[float, int]]:
    """(t, pods created by t but not bound by t) every `step` seconds from the first
    creation to the last."""
    if not created:
        return []
    made, done = sorted(created), sorted(bound)
    t, end = made[0], made[-1]
    out = []
    while t <= end + 1e-9:
        out.append((t, bisect.bisect_right(made, t) - bisect.bisect_right(done, t)))
        t += step
    return out


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points (0 for fewer than two distinct x)."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    if var == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / var


@dataclass(frozen=True)
class RateOutcome:
    arrival_rate: float  # achieved, pods/s
    bind_rate: float  # pods bound / (last bind - first creation)
    backlog_slope: float  # pods/s
    p50_ms: float  # from appearing on the watch (or creation) to bound
    p99_ms: float
    bound: int
    pods: int
    kept_up: bool
    why_not: str  # empty when kept up
    arrival_met: bool  # the creators held at least KEPT_UP_SHARE of the asked rate


def rate_outcome(created: dict[str, float], bound: dict[str, float],
                 asked: float | None = None, appeared: dict[str, float] | None = None
                 ) -> RateOutcome:
    """The fixed-rate figures from when each pod was created (its POST sent) and when
    it was first seen bound. Latency counts from `appeared` (the pod first seen on the
    same watch that sees it bound) where given, else from its creation. `kept_up` is
    judged against the achieved arrival rate; `arrival_met` says whether that was the
    `asked` one (when creations slow down, the API server, shared with the
    scheduler's binds, is the bottleneck, and the run does not test the asked rate)."""
    times = list(created.values())
    done = {n: bound[n] for n in created if n in bound}
    start = created if appeared is None else {n: appeared.get(n, created[n]) for n in created}
    latencies = [(done[n] - start[n]) * 1000 for n in done]
    arrival = achieved_rate(times)
    first = min(times) if times else 0.0
    last_bind = max(done.values()) if done else first
    bind_rate = len(done) / (last_bind - first) if last_bind > first else 0.0
    growth = slope([(t, float(b)) for t, b in backlog_series(times, list(done.values()))])
    reasons = []
    if len(done) < len(created):
        reasons.append(f"{len(created) - len(done)} of {len(created)} pods not bound")
    if bind_rate < KEPT_UP_SHARE * arrival:
        reasons.append(f"bind rate {bind_rate:.1f} < {KEPT_UP_SHARE} x arrival {arrival:.1f}")
    if growth > (1 - KEPT_UP_SHARE) * arrival:
        reasons.append(f"backlog grew {growth:.1f} pods/s")
    return RateOutcome(
        arrival_rate=round(arrival, 2), bind_rate=round(bind_rate, 2),
        backlog_slope=round(growth, 2), p50_ms=round(percentile(latencies, 50), 1),
        p99_ms=round(percentile(latencies, 99), 1), bound=len(done), pods=len(created),
        kept_up=not reasons, why_not="; ".join(reasons),
        arrival_met=asked is None or arrival >= KEPT_UP_SHARE * asked)
