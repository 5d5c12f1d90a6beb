"""The plugins whose vectors are memoized between pods (RowMemo): over random sequences
of cluster changes and recurring pod shapes, the memoized vector equals the one a fresh
plugin computes from scratch, and the per-node reference `filter`/`score`."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from policyd.framework import CycleState
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, Pod
from policyd.model.table import NodeTable
from policyd.plugins.noderesources import balanced_allocation, fit
from policyd.plugins.tainttoleration import taint_toleration
from tests.builders import make_node, make_pod

GPU = "example.com/gpu"
TAINTS = [(), (("dedicated", "db", "NoSchedule"),), (("spot", "", "PreferNoSchedule"),),
          (("dedicated", "db", "NoSchedule"), ("spot", "", "PreferNoSchedule"))]
CAPACITIES = [{"cpu": "4", "memory": "16Gi", "pods": "110"},
              {"cpu": "2", "memory": "4Gi", "pods": "3"},
              {"cpu": "8", "memory": "8Gi", "pods": "110", GPU: "2"},
              {"cpu": "500m", "memory": "1Gi", "pods": "110", "ephemeral-storage": "10Gi"}]
REQUESTS: list[dict[str, str]] = [
    {}, {"cpu": "100m"}, {"cpu": "1", "memory": "1Gi"}, {"memory": "3Gi"},
    {"cpu": "500m", GPU: "1"}, {"cpu": "1500m", "memory": "2Gi", "ephemeral_storage": "1Gi"}]
TOLERATIONS: list[list[dict[str, str]]] = [
    [], [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
    [{"key": "spot", "effect": "PreferNoSchedule", "operator": "Exists"}],
    [{"operator": "Exists"}]]


# Beyond exact vector arithmetic (2**50): the plugins decline their vector form for it.
HUGE = {"cpu": "4", "memory": "2Pi", "pods": "110"}


def gen_node(rng: random.Random, name: str) -> Node:
    b = make_node(name).capacity(HUGE if rng.random() < 0.03 else rng.choice(CAPACITIES))
    for key, value, effect in rng.choice(TAINTS):
        b = b.taint(key, value, effect)
    return b.obj()


def gen_pod(rng: random.Random, name: str) -> Pod:
    b = make_pod(name)
    requests = rng.choice(REQUESTS)
    if requests:
        b = b.req(requests)
    for toleration in rng.choice(TOLERATIONS):
        b = b.toleration(**toleration)
    return b.obj()


def mutate(rng: random.Random, state: ClusterState, nodes: dict[str, Node],
           bound: list[Pod], step: int) -> None:
    """One random change of the kinds the daemon sees."""
    names = sorted(nodes)
    kind = rng.choice(["assume", "assume", "assume", "remove", "forget", "heartbeat",
                       "resize", "add", "delete", "nothing"])
    if kind == "assume" and names:
        pod = gen_pod(rng, f"bound-{step}")
        state.assume(pod, rng.choice(names))
        bound.append(pod)
    elif kind in ("remove", "forget") and bound:
        pod = bound.pop(rng.randrange(len(bound)))
        if kind == "remove":
            state.remove_pod(pod.uid)
        else:
            state.forget(pod)
    elif kind == "heartbeat" and names:
        name = rng.choice(names)  # a new record with the same content
        state.upsert_node(nodes[name])
    elif kind == "resize" and names:  # allocatable or taints change (maybe a new resource)
        name = rng.choice(names)
        nodes[name] = gen_node(rng, name)
        state.upsert_node(nodes[name])
    elif kind == "add":
        name = f"n{step}"
        nodes[name] = gen_node(rng, name)
        state.upsert_node(nodes[name])
    elif kind == "delete" and len(names) > 1:
        name = rng.choice(names)
        del nodes[name]
        state.remove_node(name)


Plugins = dict[str, Any]


def plugins() -> Plugins:
    return {
        "fit": fit.new(),
        "most": fit.new({"scoringStrategy": {"type": "MostAllocated"}}),
        "ratio": fit.new({"scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1},
                          {"name": GPU, "weight": 3}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                   {"utilization": 100, "score": 10}]}}}),
        "balanced": balanced_allocation.new(),
        "balanced3": balanced_allocation.new({"resources": [
            {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
            {"name": GPU, "weight": 1}]}),
        "taint": taint_toleration.new(),
    }


Vectors = dict[str, list[Any] | None]


def vectors(pl: Plugins, pod: Pod, state: ClusterState, table: NodeTable,
            idx: Any) -> tuple[Vectors, Vectors]:
    """(each memoized vector, the per-node reference of the same) for `pod`."""
    infos = table.infos
    memo: Vectors = {}
    reference: Vectors = {}

    def cycle() -> CycleState:
        cs = CycleState(infos, state)
        cs.table = table
        return cs

    def record(name: str, vector: Any, one: Callable[[int], Any]) -> None:
        memo[name] = None if vector is None else vector.tolist()
        reference[name] = None if vector is None else [one(i) for i in idx.tolist()]

    def each(method: Callable[..., Any], cs: CycleState) -> Callable[[int], Any]:
        """The plugin's per-node answer for node i (its Score, its Filter status)."""
        return lambda i: method(cs, pod, infos[i])

    def passes(method: Callable[..., Any], cs: CycleState) -> Callable[[int], bool]:
        return lambda i: method(cs, pod, infos[i]) is None

    for name in ("fit", "most", "ratio"):
        p, cs = pl[name], cycle()
        p.pre_filter(cs, pod, infos)
        if name == "fit":
            record("fit/filter", p.filter_mask(cs, pod, table, idx), passes(p.filter, cs))
        p.pre_score(cs, pod, infos)
        record(f"{name}/score", p.score_vector(cs, pod, table, idx), each(p.score, cs))
    for name in ("balanced", "balanced3"):
        p, cs = pl[name], cycle()
        if p.pre_score(cs, pod, infos) is None:  # not a Skip
            record(f"{name}/score", p.score_vector(cs, pod, table, idx), each(p.score, cs))
    p, cs = pl["taint"], cycle()
    record("taint/filter", p.filter_mask(cs, pod, table, idx), passes(p.filter, cs))
    p.pre_score(cs, pod, infos)
    record("taint/score", p.score_vector(cs, pod, table, idx), each(p.score, cs))
    return memo, reference


@pytest.mark.parametrize("seed", range(12))
def test_memoized_vectors_equal_fresh_and_reference(seed: int) -> None:
    rng = random.Random(seed)
    nodes = {f"n{i}": gen_node(rng, f"n{i}") for i in range(rng.randint(3, 12))}
    state = ClusterState(list(nodes.values()))
    bound: list[Pod] = []
    long_lived = plugins()
    for step in range(120):
        for _ in range(rng.choice([0, 1, 1, 2, 5])):
            mutate(rng, state, nodes, bound, step)
        table = state.table()
        n = len(table)
        idx = np.arange(n) if rng.random() < 0.6 else \
            np.array(sorted(rng.sample(range(n), rng.randint(0, n))), np.int64)
        pod = gen_pod(rng, f"pod-{step}")
        memoized, reference = vectors(long_lived, pod, state, table, idx)
        fresh, _ = vectors(plugins(), pod, state, table, idx)
        assert memoized.keys() == fresh.keys(), f"step {step}"
        for name, values in memoized.items():
            # A fresh plugin may decline (None: some row is beyond exact vector math)
            # where the memo brought a few rows up to date through the per-node path.
            if fresh[name] is not None:
                assert values == fresh[name], f"step {step}: {name}"
            if values is not None:  # None: the plugin asked for its per-node path
                assert values == reference[name], f"step {step}: {name}"
    # Several pod shapes took turns, so entries were reused, not only recomputed.
    assert len(long_lived["fit"]._fit_memo) > 1


def test_a_node_beyond_exact_vector_math_only_declines_where_it_is_asked_for() -> None:
    state = ClusterState([make_node("a").obj(), make_node("b").capacity(HUGE).obj()])
    table = state.table()
    pl = plugins()
    pod = make_pod("p").req(cpu="1", memory="1Gi").obj()
    for _ in range(3):  # first use, then from the memo
        memo, reference = vectors(pl, pod, state, table, np.arange(2))
        assert memo["fit/score"] is None and memo["balanced/score"] is None
        memo, reference = vectors(pl, pod, state, table, np.array([0]))
        assert memo["fit/score"] == reference["fit/score"] is not None
        assert memo["balanced/score"] == reference["balanced/score"] is not None
