"""The placement-quality check on synthetic placements: a placement that follows the
default profile's resource scoring holds, round-robin fails it on MixedShapes (and shows
its loss per pod on one shape), a packer fails it on the spread, and the scores are
upstream's integer arithmetic."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.e2e import quality
from bench.e2e.shapes import ACCEL_RESOURCE, node_body, pod_body

Obj = dict[str, Any]
GI = 1024**3
MI = 1024**2


def _cluster(nodes: int, init: int, workload: str) -> tuple[list[Obj], list[Obj]]:
    """`nodes` nodes, `init` bound init pods on the first ones (as the bench does)."""
    node_list = [node_body(i) for i in range(nodes)]
    init_pods = [pod_body(f"init-{i}", workload, scheduler="policyd", node=f"node-{i % nodes}")
                 for i in range(init)]
    return node_list, init_pods


def _greedy(nodes: list[Obj], init: list[Obj], pods: list[Obj]) -> list[Obj]:
    """Each pod on the first best-scoring node that fits it, in order: what a scheduler
    scoring every node with the default resource scorers does."""
    alloc = {n["metadata"]["name"]: n["status"]["allocatable"] for n in nodes}
    used = {name: [0, 0, 0, 0] for name in alloc}
    for p in init:
        cpu, mem, ext = quality.requests(p)
        u = used[p["spec"]["nodeName"]]
        u[0] += cpu
        u[1] += mem
        u[2] += 1
        u[3] += ext
    names = list(alloc)
    a_cpu = np.array([int(alloc[n]["cpu"]) * 1000 for n in names], dtype=np.int64)
    a_mem = np.array([32 * GI for _ in names], dtype=np.int64)
    a_ext = np.array([int(alloc[n].get(ACCEL_RESOURCE, "0")) for n in names])
    for pod in pods:
        cpu, mem, ext = quality.requests(pod)
        u_cpu = np.array([used[n][0] for n in names], dtype=np.int64)
        u_mem = np.array([used[n][1] for n in names], dtype=np.int64)
        u_ext = np.array([used[n][3] for n in names])
        total = quality.scores(u_cpu, u_mem, a_cpu, a_mem, cpu, mem)
        fits = (u_cpu + cpu <= a_cpu) & (u_mem + mem <= a_mem) & (u_ext + ext <= a_ext)
        total = np.where(fits, total, -1)
        best = names[int(np.argmax(total))]
        pod["spec"]["nodeName"] = best
        u = used[best]
        u[0] += cpu
        u[1] += mem
        u[2] += 1
        u[3] += ext
    return pods


def _round_robin(nodes: list[Obj], pods: list[Obj]) -> list[Obj]:
    for i, pod in enumerate(pods):
        pod["spec"]["nodeName"] = nodes[i % len(nodes)]["metadata"]["name"]
    return pods


def _measured(workload: str, count: int) -> list[Obj]:
    return [pod_body(f"pod-{i}", workload, scheduler="policyd", index=i) for i in range(count)]


def test_scores_are_upstreams_integer_arithmetic() -> None:
    # An empty 4 cpu / 32Gi node and a 100m / 500Mi pod. LeastAllocated: cpu
    # (4000-100)*100/4000 = 97, memory (32768-500)*100/32768 = 98, mean 97.
    # Balanced: with the pod |0.025 - 0.01526|/2 = 0.00487 -> int64(99.51) = 99,
    # without 100 -> 50 + (50 + 99 - 100) / 2 = 74. Total 171.
    zero = np.zeros(1, dtype=np.int64)
    got = quality.scores(zero, zero, np.array([4000]), np.array([32 * GI]), 100, 500 * MI)
    assert got.tolist() == [171]
    # Requests beyond allocatable score 0 for that resource (leastRequestedScore).
    assert quality.least_allocated(np.array([3950]), 100, np.array([4000])).tolist() == [0]


def test_greedy_least_allocated_placement_holds() -> None:
    nodes, init = _cluster(50, 10, "SchedulingBasic")
    pods = _greedy(nodes, init, _measured("SchedulingBasic", 100))
    q = quality.placement_quality(nodes, [*init, *pods], [p["metadata"]["name"] for p in pods])
    assert q.held, q.detail
    assert q.better_share == 0.0 and q.mean_regret == 0.0 and q.did_not_fit == 0
    assert q.pods == 100 and q.spread_ratio == 1.0


def test_round_robin_on_one_shape_ends_like_least_allocated_but_loses_per_pod() -> None:
    # A fifth of the nodes hold an init pod, as in the bench: round-robin sends a pod
    # to each of them per round while emptier nodes exist. Its final placement is
    # least-allocated's (two or three pods per node either way), so the check holds;
    # the per-pod replay shows the loss.
    nodes, init = _cluster(50, 10, "SchedulingBasic")
    pods = _round_robin(nodes, _measured("SchedulingBasic", 100))
    q = quality.placement_quality(nodes, [*init, *pods], [p["metadata"]["name"] for p in pods])
    assert q.held and q.spread_ratio == 1.0
    assert q.better_share > 0.1 and q.mean_regret > 0


def test_packing_pods_onto_few_nodes_fails_on_the_spread() -> None:
    nodes, init = _cluster(50, 10, "SchedulingBasic")
    pods = _measured("SchedulingBasic", 100)
    for i, pod in enumerate(pods):  # fits everywhere (10 pods of 100m per node)
        pod["spec"]["nodeName"] = f"node-{i // 10}"
    q = quality.placement_quality(nodes, [*init, *pods], [p["metadata"]["name"] for p in pods])
    assert q.did_not_fit == 0
    assert not q.held and q.spread_ratio > quality.MAX_SPREAD_RATIO


def test_round_robin_fails_on_mixed_shapes_and_misses_extended_resources() -> None:
    nodes, init = _cluster(40, 8, "MixedShapes")
    rr = _round_robin(nodes, _measured("MixedShapes", 120))
    q = quality.placement_quality(nodes, [*init, *rr], [p["metadata"]["name"] for p in rr])
    assert not q.held
    assert q.did_not_fit > 0  # pods on nodes without room or without the extended resource
    assert q.better_share > 0.2
    good = _greedy(nodes, init, _measured("MixedShapes", 120))
    q = quality.placement_quality(nodes, [*init, *good], [p["metadata"]["name"] for p in good])
    assert q.held, q.detail
    assert q.did_not_fit == 0


def test_a_slightly_reordered_replay_of_a_good_placement_still_holds() -> None:
    # Binds run in parallel, so the watch may see two decisions' binds swapped.
    nodes, init = _cluster(50, 10, "MixedShapes")
    pods = _greedy(nodes, init, _measured("MixedShapes", 100))
    order = [p["metadata"]["name"] for p in pods]
    for i in range(0, len(order) - 1, 10):
        order[i], order[i + 1] = order[i + 1], order[i]
    assert quality.placement_quality(nodes, [*init, *pods], order).held
