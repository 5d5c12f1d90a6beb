"""MetricsCache: merge, aging, retain, expire, debug view, and readers never seeing a
half-written metric while writers publish concurrently."""

from __future__ import annotations

import math
import threading

from policyd.model.node_metrics import MetricsCache, StaticMetrics
from tests.clocks import ManualClock


def test_update_merges_and_values_age_out_at_read_time() -> None:
    clock = ManualClock(100.0)
    cache = MetricsCache(clock)
    assert cache.snapshot("lat") is None
    cache.update("lat", {"a": 5, "b": 7}, max_age=30, provider="prom")
    clock.set(110.0)
    snap = cache.update("lat", {"b": 9}, max_age=30, provider="prom")
    assert snap.get("a", 110.0) == 5.0  # kept: not in this refresh, still fresh
    assert snap.get("b", 110.0) == 9.0
    assert snap.get("a", 130.0) == 5.0  # exactly max_age old: still fresh
    assert snap.get("a", 130.5) is None  # older than max_age: missing
    assert snap.get("b", 130.5) == 9.0
    assert snap.fresh(131.0) == {"b": 9.0}
    assert snap.get("zzz", 110.0) is None


def test_update_drops_aged_values_and_replace_drops_absent_nodes() -> None:
    clock = ManualClock(0.0)
    cache = MetricsCache(clock)
    cache.update("lat", {"a": 1, "b": 2}, max_age=10)
    clock.set(20.0)
    snap = cache.update("lat", {"c": 3}, max_age=10)
    assert set(snap.values) == {"c"}  # a and b were 20 s old: pruned
    snap = cache.update("lat", {"d": 4}, max_age=10, replace=True)
    assert set(snap.values) == {"d"}


def test_generations_grow_and_snapshots_are_immutable() -> None:
    cache = MetricsCache(ManualClock())
    s1 = cache.update("lat", {"a": 1}, max_age=10)
    s2 = cache.update("lat", {"a": 2}, max_age=10)
    assert s2.generation > s1.generation
    assert s1.values["a"][0] == 1.0 and s2.values["a"][0] == 2.0


def test_expire_retain_and_max_age_changes() -> None:
    clock = ManualClock(0.0)
    cache = MetricsCache(clock)
    cache.update("lat", {"a": 1}, max_age=10, provider="p")
    cache.update("load", {"a": 1}, max_age=100, provider="q")
    clock.set(50.0)
    cache.expire()
    lat, load = cache.snapshot("lat"), cache.snapshot("load")
    assert lat is not None and lat.values == {}
    assert load is not None and load.values != {}
    cache.set_max_age("load", 20.0, "q")
    load = cache.snapshot("load")
    assert load is not None and load.get("a", 50.0) is None
    cache.retain(["load"])
    assert cache.metrics() == ["load"]


def test_debug_view_shows_ages_and_staleness() -> None:
    clock = ManualClock(115.0)
    cache = MetricsCache(clock)
    cache.update("lat", {"a": 5}, max_age=30, provider="prom", timestamp=80.0)
    cache.update("lat", {"b": 6}, max_age=30, provider="prom", timestamp=95.0)
    view = cache.debug_view()
    assert view["now"] == 115.0
    lat = view["metrics"]["lat"]
    assert lat["provider"] == "prom" and lat["maxAgeSeconds"] == 30
    assert lat["nodes"]["a"] == {"value": 5.0, "timestamp": 80.0, "ageSeconds": 35.0,
                                 "stale": True}
    assert lat["nodes"]["b"]["stale"] is False


def test_static_metrics_never_age() -> None:
    static = StaticMetrics({"lat": {"a": 3}})
    snap = static.snapshot("lat")
    assert snap is not None and snap.max_age == math.inf
    assert snap.get("a", static.now() + 1e12) == 3.0
    assert static.snapshot("other") is None


def test_concurrent_writers_and_readers_see_whole_snapshots() -> None:
    cache = MetricsCache()
    nodes = [f"n{i}" for i in range(200)]
    stop = threading.Event()
    errors: list[str] = []

    def writer(value: int) -> None:
        while not stop.is_set():
            cache.update("lat", dict.fromkeys(nodes, value), max_age=60, replace=True)

    def reader() -> None:
        for _ in range(2000):
            snap = cache.snapshot("lat")
            if snap is None:
                continue
            seen = {v for v, _ in snap.values.values()}
            if len(seen) != 1 or len(snap.values) != len(nodes):
                errors.append(f"mixed snapshot: {sorted(seen)}")
                return

    writers = [threading.Thread(target=writer, args=(v,)) for v in (1, 2, 3)]
    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in writers + readers:
        t.start()
    for t in readers:
        t.join()
    stop.set()
    for t in writers:
        t.join()
    assert errors == []
