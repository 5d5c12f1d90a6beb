"""The engine benchmark's Mixed workload: its shapes differ from each other, each fits
a sizeable share of a small heterogeneous cluster (through the engine itself), and a
short run with churn places every pod."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from bench.engine import mixed
from bench.engine_bench import build, run_one
from policyd.engine.cycle import schedule_one
from policyd.model.records import pod_from_dict

NODES = 60
INIT = 120


def _what_plugins_read(pod: dict[str, Any]) -> str:
    """A pod without its name: what makes two pods schedule differently."""
    meta = pod["metadata"]
    return json.dumps({"labels": meta.get("labels"), "annotations": meta.get("annotations"),
                       "spec": pod["spec"]}, sort_keys=True)


def test_at_least_ten_shapes_all_different() -> None:
    assert len(mixed.SHAPES) >= 10
    names = [mixed.shape_name(k) for k in range(len(mixed.SHAPES))]
    assert len(set(names)) == len(names)
    # The shapes differ beyond their app label and image.
    def skeleton(k: int) -> str:
        p = mixed.pod("p", k)
        p["metadata"]["labels"].pop("app", None)
        for c in p["spec"]["containers"]:
            c.pop("image")
        return _what_plugins_read(p)
    assert len({skeleton(k) for k in range(len(mixed.SHAPES))}) == len(mixed.SHAPES)


def test_consecutive_pods_differ() -> None:
    stream = [_what_plugins_read(mixed.pod(f"p-{k}", k)) for k in range(200)]
    assert all(a != b for a, b in itertools.pairwise(stream))


def test_the_nodes_differ_where_the_shapes_need_it() -> None:
    nodes = [mixed.node(i) for i in range(NODES)]
    sizes = {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes}
    effects = {t["effect"] for n in nodes for t in n["spec"].get("taints", [])}
    images = {len(n["status"]["images"]) for n in nodes}
    assert sizes == {"small", "medium", "large"}
    assert effects == {"NoSchedule", "PreferNoSchedule"}
    assert min(images) > 0


@pytest.fixture(scope="module")
def small_cluster() -> Any:
    fw, cluster, _ = build("Mixed", NODES, INIT, 0)
    assert sum(len(info.pods) for info in cluster) == INIT  # every existing pod placed
    return fw, cluster


@pytest.mark.parametrize("shape", range(len(mixed.SHAPES)),
                         ids=[s.__name__ for s in mixed.SHAPES])
def test_each_shape_fits_a_sizeable_share_of_the_nodes(small_cluster: Any, shape: int
                                                       ) -> None:
    fw, cluster = small_cluster
    k = shape  # the measured stream starts again at 0, as in the bench
    result = schedule_one(fw, pod_from_dict(mixed.pod(f"probe-{k}", k)), cluster)
    assert result.node is not None, result.message
    # At least 10% of the nodes (the dedicated pools are 10% each), so the shape
    # exercises the scoring of many nodes and does not run out in docs/performance.md's runs.
    assert len(result.feasible) >= NODES // 10


def test_the_shapes_select_different_nodes(small_cluster: Any) -> None:
    fw, cluster = small_cluster
    feasible = set()
    for k in range(len(mixed.SHAPES)):
        result = schedule_one(fw, pod_from_dict(mixed.pod(f"probe-{k}", k)), cluster)
        feasible.add(frozenset(result.feasible))
    assert len(feasible) >= 8


def test_a_short_run_with_churn_places_every_pod() -> None:
    row = run_one("Mixed", NODES, INIT, 240, churn_period=0.05, gc_freeze=False)
    assert row["placed"] == 240
    assert row["nodeUpdates"] > NODES  # every node updated at least once
    assert row["nodeUpdateEvents"] == 0
    assert set(row["shapeP50ms"]) == {s.__name__ for s in mixed.SHAPES}


def test_without_churn_no_node_is_updated() -> None:
    row = run_one("SchedulingBasic", 20, 20, 50, churn_period=0, gc_freeze=False)
    assert (row["placed"], row["nodeUpdates"], row["churnPeriod"]) == (50, 0, 0)
