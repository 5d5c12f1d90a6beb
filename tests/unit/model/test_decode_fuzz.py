"""Malformed objects: decoding either succeeds or raises InvalidObjectError naming the
field, and whatever decodes can be scheduled without an exception escaping the engine."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.errors import InvalidObjectError
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, node_from_dict, pod_from_dict
from tests.gen.clusters import gen_cluster, gen_pod
from tests.gen.mutate import mutate

JUNK = [None, 0, -1, 1.5, True, "", "x", "-1", "1e400", "NaN", [], {}, [1], {"a": 1},
        "Infinity", "999999999999999999999999", "100m", {"key": None}]


def _mutate(obj: dict[str, Any], rng: random.Random, n: int) -> dict[str, Any]:
    return mutate(obj, rng, n, JUNK)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 4))
def test_mutated_objects_decode_or_fail_cleanly_and_never_crash_the_engine(
        seed: int, mutations: int) -> None:
    rng = random.Random(seed)
    nodes, existing = gen_cluster(rng, 4, 4)
    decoded_nodes = []
    for raw in nodes:
        try:
            decoded_nodes.append(node_from_dict(_mutate(raw, rng, mutations)))
        except InvalidObjectError as exc:
            assert exc.field is not None and exc.kind == "Node"
    unique: dict[str, Node] = {}
    for n in decoded_nodes:
        unique.setdefault(n.name, n)  # the first of each name, in order
    decoded_nodes = list(unique.values())
    cluster = ClusterState(decoded_nodes, [pod_from_dict(p) for p in existing])
    fw = default_framework(seed=seed)
    for i in range(3):
        raw = _mutate(gen_pod(rng, f"new-{i}").raw(), rng, mutations)
        try:
            pod = pod_from_dict(raw)
        except InvalidObjectError as exc:
            assert exc.kind == "Pod"
            continue
        for reference in (False, True):
            result = schedule_one(fw, pod, cluster, reference=reference)
            # Either a decision, or a status: never an exception out of the engine.
            assert result.node is not None or result.message
