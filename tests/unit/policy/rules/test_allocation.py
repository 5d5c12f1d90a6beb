"""An `allocation` score rule and NodeResourcesFit's Least/MostAllocated scorer give the
same raw value on every node, per node and over NodeTable columns: the rule reuses the
plugin's arithmetic, and these generated cases keep it that way."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from policyd.framework import CycleState
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict, pod_from_dict
from policyd.plugins.noderesources.fit import LEAST_ALLOCATED, MOST_ALLOCATED, new
from policyd.policy.rules.scores.allocation import AllocationScore

GPU = "example.com/gpu"
RESOURCES = ["cpu", "memory", "ephemeral-storage", GPU]
# Besides everyday sizes: 0, and (memory) sizes beyond exact int64 column arithmetic,
# where both fall back to the per-node path.
AMOUNTS = {"cpu": ["0", "250m", "1", "3500m", "16"],
           "memory": ["0", "200Mi", "1Gi", "6Gi", "64Gi", "3Pi"],
           "ephemeral-storage": ["0", "1Gi", "20Gi"],
           GPU: ["0", "1", "2", "8"]}


def _requests(rng: random.Random, gpu: bool) -> dict[str, str]:
    # No cpu or memory request means the non-zero defaults (100m, 200Mi) count.
    out = {r: rng.choice(AMOUNTS[r][1:4]) for r in RESOURCES[:3] if rng.random() < 0.6}
    if gpu:
        # NodeResourcesFit leaves out an extended resource the pod does not ask for;
        # a policy counts it all the same, so the pod asks for one here.
        out[GPU] = rng.choice(AMOUNTS[GPU][1:])
    return out


def _pod(rng: random.Random, name: str, gpu: bool, node: str = "") -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": "pause",
                   "resources": {"requests": _requests(rng, gpu and i == 0)}}
                  for i in range(rng.randint(1, 2))]
    spec: dict[str, Any] = {"containers": containers}
    if node:
        spec["nodeName"] = node
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": spec}


def _node(rng: random.Random, name: str) -> dict[str, Any]:
    allocatable = {r: rng.choice(AMOUNTS[r]) for r in RESOURCES if rng.random() < 0.85}
    allocatable["pods"] = "110"
    return {"kind": "Node", "metadata": {"name": name, "labels": {}},
            "status": {"allocatable": allocatable}}


@pytest.mark.parametrize("seed", range(300))
def test_allocation_rule_scores_as_node_resources_fit(seed: int) -> None:
    rng = random.Random(seed)
    most = rng.random() < 0.5
    chosen = rng.sample(RESOURCES, rng.randint(1, len(RESOURCES)))
    resources = [{"name": r, "weight": rng.randint(1, 100)} for r in chosen]
    gpu = GPU in chosen
    rule = AllocationScore({"id": "a", "weight": 1, "normalize": "none", "allocation": {
        "strategy": "most" if most else "least", "resources": resources}})
    builtin = new({"scoringStrategy": {"type": MOST_ALLOCATED if most else LEAST_ALLOCATED,
                                       "resources": resources}})
    nodes = [node_from_dict(_node(rng, f"n{i}")) for i in range(rng.randint(1, 8))]
    bound = [pod_from_dict(_pod(rng, f"e{i}", rng.random() < 0.5, rng.choice(nodes).name))
             for i in range(rng.randint(0, 10))]
    pod = pod_from_dict(_pod(rng, "incoming", gpu))
    cluster = ClusterState(nodes, bound)
    table = cluster.table()
    infos = table.infos
    state = CycleState(infos, cluster)
    assert builtin.pre_score(state, pod, infos) is None

    value = rule.bind(pod)
    want = [builtin.score(state, pod, info) for info in infos]
    assert [value(info) for info in infos] == want

    for idx in (np.arange(len(infos), dtype=np.int64),
                np.array(sorted(rng.sample(range(len(infos)), rng.randint(1, len(infos)))),
                         dtype=np.int64)):
        column = rule.values(value, pod, table, idx)
        assert column.tolist() == [want[i] for i in idx.tolist()]
        vector = builtin.score_vector(state, pod, table, idx)
        if vector is not None:
            assert vector.tolist() == column.tolist()
