"""Node churn in the engine benchmark: how many heartbeats are due after an elapsed
time, and what applying one does to the cluster (a new record, nothing else)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from bench.engine import mixed
from bench.engine.churn import HeartbeatSchedule, NodeHeartbeats
from bench.engine.workloads import scheduler_perf_node
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict


@pytest.mark.parametrize(("nodes", "period", "elapsed", "due"), [
    (5000, 10.0, 0.0, 1),  # the first update is due at once
    (5000, 10.0, 1.0, 501),  # nodes / period per second, after the first
    (5000, 10.0, 10.0, 5001),  # every node once per period
    (15000, 10.0, 0.5, 751),
    (500, 10.0, 0.0199, 1),  # the second is due only at 0.02 s
    (500, 10.0, 0.02, 2),
    (500, 0.0, 100.0, 0),  # period 0: no churn
    (0, 10.0, 100.0, 0),
])
def test_updates_due_after_an_elapsed_time(nodes: int, period: float, elapsed: float,
                                           due: int) -> None:
    assert HeartbeatSchedule(nodes, period).due(elapsed) == due


def test_each_update_is_handed_out_once_however_the_time_is_sliced() -> None:
    rng = random.Random(7)
    schedule = HeartbeatSchedule(5000, 10.0)
    elapsed, total = 0.0, 0
    while elapsed < 3.0:
        elapsed += rng.uniform(0.0, 0.004)  # one pod's cycle, give or take
        total += schedule.due(elapsed)
    assert total == int(elapsed * 500) + 1
    assert schedule.due(elapsed) == 0
    assert schedule.due(elapsed - 1.0) == 0  # a clock read out of order hands out nothing


def test_a_negative_period_is_refused() -> None:
    with pytest.raises(ValueError, match="churn period"):
        HeartbeatSchedule(10, -1.0)


@pytest.mark.parametrize("make_node", [scheduler_perf_node, mixed.node])
def test_a_heartbeat_replaces_the_record_and_changes_nothing_else(
        make_node: Callable[[int], dict[str, Any]]) -> None:
    cluster = ClusterState([node_from_dict(make_node(i)) for i in range(3)])
    table = cluster.table()
    before = {info.node.name: info.node for info in cluster}
    version = table.version
    beats = NodeHeartbeats(cluster)
    beats.apply(4, 12.0)  # node-0 twice, then node-1, node-2 once: round robin
    assert beats.applied == 4
    cluster.table()
    # The table saw new records with nothing it caches changed: its columns stay.
    assert table.version == version
    versions = {}
    for name, old in before.items():
        new = cluster.get(name)
        assert new is not None
        assert new.node is not old
        versions[name] = new.node.raw["metadata"]["resourceVersion"]
        assert (new.node.labels, new.node.taints, new.node.allocatable, new.node.images) == (
            old.labels, old.taints, old.allocatable, old.images)
        conditions = new.node.raw["status"]["conditions"]
        assert len(conditions) == 4
        assert {c["lastHeartbeatTime"] for c in conditions} == {"2026-01-01T00:00:12Z"}
    assert versions == {"node-0": "3", "node-1": "2", "node-2": "2"}
    # A heartbeat is no cluster event: the daemon's queue would move nothing.
    assert beats.events == 0
