"""The fixed-rate mode's arithmetic: the schedule, achieved rates, percentiles, the
backlog and the kept-up rule."""

from __future__ import annotations

import pytest

from bench.e2e import pacing


def test_due_times_and_creator_shares_cover_every_pod_once() -> None:
    assert pacing.due_times(4, 3, 10.0) == [10.0, 10.25, 10.5]
    shares = [list(pacing.creator_share(10, 3, k)) for k in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    with pytest.raises(ValueError):
        pacing.due_times(0, 3, 0.0)


def test_achieved_rate() -> None:
    assert pacing.achieved_rate([0.0, 0.5, 1.0]) == 2.0
    assert pacing.achieved_rate([1.0]) == 0.0


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert pacing.percentile(values, 50) == 50.0
    assert pacing.percentile(values, 99) == 99.0
    assert pacing.percentile([3.0, 1.0], 99) == 3.0
    assert pacing.percentile([], 50) == 0.0


def test_backlog_series() -> None:
    created = [0.0, 0.5, 1.0, 1.5, 2.0]
    bound = [0.2, 1.7]
    assert pacing.backlog_series(created, bound) == [(0.0, 1), (1.0, 2), (2.0, 3)]


def test_slope() -> None:
    assert pacing.slope([(0, 0), (1, 2), (2, 4)]) == pytest.approx(2.0)
    assert pacing.slope([(1, 5)]) == 0.0


def _stream(rate: float, seconds: float, latency: float, slowdown: float = 0.0
            ) -> tuple[dict[str, float], dict[str, float]]:
    """Pods created at `rate`; bound `latency` later, plus `slowdown` per second of
    the stream (a scheduler falling behind)."""
    count = int(rate * seconds)
    created = {f"pod-{i}": i / rate for i in range(count)}
    bound = {n: t + latency + slowdown * t for n, t in created.items()}
    return created, bound


def test_a_scheduler_that_keeps_up() -> None:
    out = pacing.rate_outcome(*_stream(100, 30, 0.05))
    assert out.kept_up, out.why_not
    assert out.arrival_rate == pytest.approx(100, rel=0.01)
    assert out.p50_ms == pytest.approx(50, abs=0.1) and out.p99_ms == pytest.approx(50, abs=0.1)
    assert out.bound == out.pods == 3000


def test_a_scheduler_at_90_percent_of_the_rate_does_not() -> None:
    # Bound at 90 pods/s: pod i bound at i / 90.
    created, _ = _stream(100, 30, 0.0)
    bound = {n: t * 100 / 90 for n, t in created.items()}
    out = pacing.rate_outcome(created, bound)
    assert not out.kept_up
    assert "bind rate" in out.why_not and "backlog grew" in out.why_not


def test_a_growing_backlog_fails_even_when_the_bind_rate_passes() -> None:
    # Binds at 90 pods/s while pods arrive at 100/s, then drains the 300-pod backlog
    # at 1000/s once arrivals stop: the overall bind rate passes, the backlog's growth
    # (about 10 pods/s) does not.
    created, _ = _stream(100, 30, 0.0)
    bound = {}
    for i, name in enumerate(created):
        bound[name] = i / 90 if i / 90 < 30 else 30 + (i - 2700) / 1000
    out = pacing.rate_outcome(created, bound)
    assert out.bind_rate >= pacing.KEPT_UP_SHARE * out.arrival_rate
    assert not out.kept_up and out.why_not.startswith("backlog grew")


def test_unbound_pods_fail() -> None:
    created, bound = _stream(50, 10, 0.02)
    del bound["pod-7"]
    out = pacing.rate_outcome(created, bound)
    assert not out.kept_up and "1 of 500 pods not bound" in out.why_not


def test_arrival_met_compares_the_achieved_rate_with_the_asked_one() -> None:
    created, bound = _stream(100, 10, 0.02)
    assert pacing.rate_outcome(created, bound, asked=100).arrival_met
    assert pacing.rate_outcome(created, bound, asked=104).arrival_met
    short = pacing.rate_outcome(created, bound, asked=200)
    assert not short.arrival_met and short.kept_up  # kept up with what did arrive


def test_latency_counts_from_appearance_when_known() -> None:
    created, bound = _stream(50, 10, 0.05)
    appeared = {n: t + 0.03 for n, t in created.items()}
    out = pacing.rate_outcome(created, bound, appeared=appeared)
    assert out.p50_ms == pytest.approx(20, abs=0.1)
    assert pacing.rate_outcome(created, bound).p50_ms == pytest.approx(50, abs=0.1)
