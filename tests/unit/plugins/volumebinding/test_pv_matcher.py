"""FindMatchingVolume with the label index gives what walking every PV gives."""

from __future__ import annotations

import random
from typing import Any

from policyd.plugins.volumebinding.objects import claim_info
from policyd.plugins.volumebinding.pv_matcher import candidates, find_matching_volume, fits_node
from tests.unit.plugins.volumebinding.storage import HOSTNAME, ZONE, cluster, node, pv, pvc


def _affinity(rng: random.Random) -> dict[str, Any] | None:
    def expr() -> dict[str, Any]:
        kind = rng.choice(["host", "zone", "notin", "exists"])
        if kind == "host":
            return {"key": HOSTNAME, "operator": "In",
                    "values": rng.sample([f"n{i}" for i in range(12)], rng.randint(1, 3))}
        if kind == "zone":
            return {"key": ZONE, "operator": "In", "values": [rng.choice("abc")]}
        if kind == "notin":
            return {"key": ZONE, "operator": "NotIn", "values": [rng.choice("abc")]}
        return {"key": ZONE, "operator": "Exists"}
    if rng.random() < 0.2:
        return None
    terms = [{"matchExpressions": [expr() for _ in range(rng.randint(1, 2))]}
             for _ in range(rng.choice([1, 1, 2]))]
    return {"required": {"nodeSelectorTerms": terms}}


def _walk(storage: Any, free: tuple[dict[str, Any], ...], node: Any,
          excluded: set[str]) -> dict[str, Any] | None:
    for volume in free:
        if volume["metadata"]["name"] not in excluded and fits_node(storage, volume, node):
            return volume
    return None


def test_index_agrees_with_a_walk_over_every_pv() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        nodes = [node(f"n{i}", rng.choice("abc")) for i in range(12)]
        volumes = tuple(pv(f"v{i}", f"{rng.randint(1, 4)}Gi", affinity=_affinity(rng))
                        for i in range(25))
        claim = pvc("a", size="2Gi")
        state = cluster(*nodes, objects=(claim, *volumes))
        storage = state.storage
        found = candidates(storage, claim_info(storage, claim), storage.pvs.values())
        assert found.by_label, "the generator makes indexable PVs"
        for n in nodes:
            excluded = {f"v{i}" for i in rng.sample(range(25), 5)}
            assert find_matching_volume(storage, found, n, excluded) is \
                _walk(storage, found.free, n, excluded), (seed, n.name)
