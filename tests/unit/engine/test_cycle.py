"""The columnar fast path must decide exactly like the per-node reference path."""

from __future__ import annotations

import random

import pytest

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict, pod_from_dict
from tests.gen.clusters import gen_cluster, gen_pod


@pytest.mark.parametrize("seed", range(40))
def test_fast_and_reference_paths_agree(seed: int) -> None:
    rng = random.Random(seed)
    nodes, existing = gen_cluster(rng, rng.randint(3, 40), rng.randint(0, 40))
    pods = [gen_pod(rng, f"new-{i}").raw() for i in range(25)]

    def run(reference: bool) -> list[tuple[str | None, str, list[str]]]:
        cluster = ClusterState([node_from_dict(n) for n in nodes],
                               [pod_from_dict(p) for p in existing])
        fw = default_framework(seed=seed)
        out = []
        for raw in pods:
            pod = pod_from_dict(raw)
            r = schedule_one(fw, pod, cluster, reference=reference)
            out.append((r.node, r.message, sorted(r.feasible)))
            if r.node is not None:
                cluster.assume(pod, r.node)
        return out

    fast, ref = run(False), run(True)
    for i, (f, r) in enumerate(zip(fast, ref, strict=True)):
        assert f == r, f"pod {i} of seed {seed}"
