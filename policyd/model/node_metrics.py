"""The node metrics cache: metric name -> node name -> (value, timestamp).

Score rules must never wait for the network, so providers refresh this cache on their
own threads and scoring only reads it. Each metric is kept as one immutable
`MetricSnapshot` that a provider replaces whole (copy on write): a reader takes the
current snapshot once per scheduling cycle and sees a consistent set of values without a
lock, whatever the providers do meanwhile. Readers pass `now` explicitly, so a value
that outlives its metric's `max_age` counts as missing at read time; updates also drop
such values, so the cache never grows without bound.

It lives in `model`, below the policy compiler whose `metric` rules read it; the
providers that fill it (`policyd.nodemetrics`) are configured by the profile and sit
above `config`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from policyd.clock import REAL_CLOCK

# Unix time: values carry the wall-clock time they were measured at.
WallClock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class MetricSnapshot:
    """One metric's values at one moment; never changed after it is published."""

    name: str
    values: Mapping[str, tuple[float, float]]
    """node name -> (value, unix timestamp of the measurement)."""
    max_age: float
    """Seconds after which a value counts as missing (math.inf: never)."""
    provider: str = ""
    generation: int = 0
    """Bumped on every publish, so readers can cache what they derive from it."""

    def get(self, node: str, now: float) -> float | None:
        """The node's value if present and not older than `max_age` at `now`."""
        entry = self.values.get(node)
        if entry is None or now - entry[1] > self.max_age:
            return None
        return entry[0]

    def fresh(self, now: float) -> dict[str, float]:
        """Every value still fresh at `now`."""
        horizon = now - self.max_age
        return {n: v for n, (v, ts) in self.values.items() if ts >= horizon}


class MetricsReader(Protocol):
    """What score rules read: a snapshot per metric and the current time."""

    def snapshot(self, metric: str) -> MetricSnapshot | None: ...

    def now(self) -> float: ...


_generations = iter(range(1, 2**62))
_gen_lock = threading.Lock()


def _next_generation() -> int:
    with _gen_lock:
        return next(_generations)


class MetricsCache:
    """Thread-safe cache written by providers and read by score rules."""

    def __init__(self, clock: WallClock = REAL_CLOCK.wall) -> None:
        self._clock = clock
        self._lock = threading.Lock()  # serializes writers; readers never take it
        self._metrics: dict[str, MetricSnapshot] = {}

    def now(self) -> float:
        return self._clock()

    def snapshot(self, metric: str) -> MetricSnapshot | None:
        # A dict lookup is atomic under the GIL and snapshots are immutable: no lock.
        return self._metrics.get(metric)

    def metrics(self) -> list[str]:
        return sorted(self._metrics)

    def update(self, metric: str, values: Mapping[str, float], *, max_age: float,
               provider: str = "", timestamp: float | None = None,
               replace: bool = False) -> MetricSnapshot:
        """Merge fresh `values` (measured at `timestamp`, default now) into `metric`.

        Nodes not in `values` keep their previous value until it ages out (a node a
        query missed once is not dropped at once); `replace=True` drops them instead.
        Values already older than `max_age` are removed here.
        """
        ts = self._clock() if timestamp is None else timestamp
        with self._lock:
            old = self._metrics.get(metric)
            merged: dict[str, tuple[float, float]] = {}
            if old is not None and not replace:
                horizon = ts - max_age
                merged = {n: e for n, e in old.values.items() if e[1] >= horizon}
            for node, value in values.items():
                merged[node] = (float(value), ts)
            snap = MetricSnapshot(metric, merged, max_age, provider, _next_generation())
            self._metrics[metric] = snap
            return snap

    def expire(self, now: float | None = None) -> None:
        """Drop aged-out values of every metric (providers that stopped succeeding
        no longer publish, so their stale values would otherwise stay)."""
        now = self._clock() if now is None else now
        with self._lock:
            for name, snap in list(self._metrics.items()):
                fresh = {n: e for n, e in snap.values.items() if now - e[1] <= snap.max_age}
                if len(fresh) != len(snap.values):
                    self._metrics[name] = MetricSnapshot(name, fresh, snap.max_age,
                                                         snap.provider, _next_generation())

    def retain(self, metrics: Iterable[str]) -> None:
        """Forget every metric not in `metrics` (a reload removed its provider)."""
        keep = set(metrics)
        with self._lock:
            for name in [m for m in self._metrics if m not in keep]:
                del self._metrics[name]

    def set_max_age(self, metric: str, max_age: float, provider: str = "") -> None:
        """Apply a reloaded provider's maxAge to values it already published."""
        with self._lock:
            snap = self._metrics.get(metric)
            if snap is not None and (snap.max_age != max_age or snap.provider != provider):
                self._metrics[metric] = MetricSnapshot(metric, snap.values, max_age,
                                                       provider, _next_generation())

    def debug_view(self) -> dict[str, Any]:
        """The cache as JSON-ready data, with each value's age: /debug/metrics-cache."""
        now = self._clock()
        out: dict[str, Any] = {}
        for name in sorted(self._metrics):
            snap = self._metrics[name]
            nodes = {}
            for node in sorted(snap.values):
                value, ts = snap.values[node]
                age = now - ts
                nodes[node] = {"value": value, "timestamp": ts, "ageSeconds": round(age, 3),
                               "stale": age > snap.max_age}
            out[name] = {"provider": snap.provider,
                         "maxAgeSeconds": None if math.isinf(snap.max_age) else snap.max_age,
                         "nodes": nodes}
        return {"now": now, "metrics": out}


@dataclass(slots=True)
class StaticMetrics:
    """Fixed values that never age (`explain --metrics FILE`, tests): every value
    counts as measured now."""

    values: dict[str, dict[str, float]] = field(default_factory=dict)
    _snapshots: dict[str, MetricSnapshot] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for metric, nodes in self.values.items():
            self._snapshots[metric] = MetricSnapshot(
                metric, {n: (float(v), 0.0) for n, v in nodes.items()}, math.inf,
                "file", _next_generation())

    def snapshot(self, metric: str) -> MetricSnapshot | None:
        return self._snapshots.get(metric)

    def now(self) -> float:
        return 0.0


class EmptyMetrics:
    """No values at all: what a metric rule reads before a cache is attached."""

    def snapshot(self, metric: str) -> MetricSnapshot | None:
        return None

    def now(self) -> float:
        return 0.0


EMPTY = EmptyMetrics()
