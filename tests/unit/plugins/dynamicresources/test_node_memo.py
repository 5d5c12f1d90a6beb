"""DynamicResources' allocation memo (node_memo.py): a kept answer is the answer a
fresh allocator gives, and everything an answer depends on drops it.

The differential test drives one long-lived plugin through a random history (pods of
several claim shapes scheduled and their claims written, left in flight, deallocated;
node labels, slices and classes changed) and after every step asks a plugin with no
history the same questions, on both evaluation forms."""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np
import pytest

from policyd.engine.cycle import reserve, schedule_one
from policyd.framework import CycleState
from policyd.model.cluster import ClusterState
from policyd.model.dra_objects import DEVICE_CLASS, RESOURCE_SLICE
from policyd.model.records import Pod
from policyd.plugins.dynamicresources.allocation import DraState
from policyd.plugins.dynamicresources.plugin import STATE_KEY, DynamicResources, new
from tests.builders import make_node
from tests.unit.plugins.dynamicresources.scene import (
    DRIVER,
    GPU_CLASS,
    add_claim,
    claim,
    cluster,
    exact,
    first_available,
    framework,
    gpu_class,
    gpu_slice,
    pod_using,
)

Obj = dict[str, Any]
ZONES = ("a", "b")


def _node(i: int, zone: str) -> Any:
    return (make_node(f"n{i}").capacity(cpu="64", memory="64Gi", pods="200")
            .label("kubernetes.io/hostname", f"n{i}").label("zone", zone).obj())


def _zone_slice(zone: str, devices: int) -> Obj:
    """A slice of a pool shared by the nodes of one zone (node selector)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"zone-{zone}"},
            "spec": {"driver": DRIVER, "pool": {"name": f"zone-{zone}", "generation": 1,
                                                "resourceSliceCount": 1},
                     "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "zone", "operator": "In", "values": [zone]}]}]},
                     "devices": [{"name": f"z{k}", "attributes": {"big": {"bool": k % 2 == 0}}}
                                 for k in range(devices)]}}


def _slice(i: int, devices: int) -> Obj:
    return gpu_slice(f"n{i}", *(f"g{k}" for k in range(devices)),
                     attributes={"big": {"bool": i % 3 == 0}})


SHAPES: tuple[list[Obj], ...] = (
    [exact("gpu")],
    [exact("gpu", count=2)],
    [exact("gpu", selectors=[{"cel": {"expression":
                                      f'device.attributes["{DRIVER}"].big'}}])],
    [first_available("gpu", ("two", GPU_CLASS, 2), ("one", GPU_CLASS, 1))],
)


def _scene(rng: random.Random) -> ClusterState:
    nodes = [_node(i, ZONES[i % 2]) for i in range(6)]
    slices = [_slice(i, rng.randrange(0, 4)) for i in range(6)]
    slices += [_zone_slice(z, rng.randrange(1, 4)) for z in ZONES]
    return cluster(nodes, classes=[gpu_class()], slices=slices)


def _answers(plugin: DynamicResources, state: ClusterState, pod: Pod
             ) -> dict[str, tuple[Any, Any]]:
    """Per node: Filter's status (code and reasons) and the allocation it decided,
    through the reference `filter`."""
    cycle = CycleState(state.node_infos(), state)
    _, status = plugin.pre_filter(cycle, pod, state.node_infos())
    assert status is None, status
    data: DraState = cycle.read(STATE_KEY)
    out = {}
    for info in state.node_infos():
        st = plugin.filter(cycle, pod, info)
        out[info.name] = ((st.code, st.reasons) if st is not None else None,
                          data.allocations_on(info.name))
    return out


def _masked(plugin: DynamicResources, state: ClusterState, pod: Pod
            ) -> dict[str, tuple[bool, Any]]:
    """Per node: whether `filter_mask` lets it through, and with which allocation."""
    cycle = CycleState(state.node_infos(), state)
    plugin.pre_filter(cycle, pod, state.node_infos())
    table = state.table()
    idx = np.arange(len(table), dtype=np.int64)
    mask = plugin.filter_mask(cycle, pod, table, idx)
    assert mask is not None
    data: DraState = cycle.read(STATE_KEY)
    return {table.names[i]: (bool(mask[i]), data.allocations_on(table.names[i]))
            for i in idx.tolist()}


def _write_claim(state: ClusterState, key: str, rv: int) -> None:
    """What PreBind and then the informer do: the decided allocation written."""
    claims = state.dra.claims
    current = claims.get(key)
    assert current is not None
    uid = current["metadata"]["uid"]
    decided = claims.pending_allocation(uid)
    assert decided is not None
    written = copy.deepcopy(decided)
    written["metadata"]["resourceVersion"] = str(rv)
    claims.upsert(written)
    claims.remove_pending_allocation(uid, force=True)


def _relabel(state: ClusterState, i: int, zone: str) -> None:
    state.upsert_node(_node(i, zone))


@pytest.mark.parametrize("seed", range(12))
def test_kept_answers_are_a_fresh_allocators_answers(seed: int) -> None:
    rng = random.Random(seed)
    state = _scene(rng)
    plugin = new()
    fw = framework(plugin)
    written: list[str] = []
    rv = 10
    hits = 0
    for step in range(30):
        rv += 1
        name = f"c{step}"
        add_claim(state, claim(name, *copy.deepcopy(rng.choice(SHAPES))))
        pod = pod_using(f"p{step}", name).obj()
        fresh = _answers(new(), state, pod)
        assert _answers(plugin, state, pod) == fresh
        masked = _masked(plugin, state, pod)
        assert masked == {n: (status is None, decided if status is None else None)
                          for n, (status, decided) in fresh.items()}
        hits += sum(a.hits for a in plugin._node_memo._shapes.values())
        # Schedule it with the long-lived plugin, then change the world a little.
        result = schedule_one(fw, pod, state)
        if result.node is not None:
            state.assume(pod, result.node)
            result = reserve(fw, result)
            if result.node is not None and rng.random() < 0.7:
                _write_claim(state, f"default/{name}", rv)
                written.append(f"default/{name}")
        event = rng.random()
        if event < 0.15 and written:  # a claim deallocated (its pod gone)
            key = written.pop(rng.randrange(len(written)))
            freed = copy.deepcopy(state.dra.claims.get(key))
            assert freed is not None
            freed["metadata"]["resourceVersion"] = str(rv)
            del freed["status"]
            state.dra.claims.upsert(freed)
        elif event < 0.25:
            _relabel(state, rng.randrange(6), rng.choice(ZONES))
        elif event < 0.3:
            i = rng.randrange(6)
            state.dra.upsert(RESOURCE_SLICE, _slice(i, rng.randrange(0, 4)))
    assert hits > 0  # the memo was used, not bypassed


def _pod_cycle(plugin: DynamicResources, state: ClusterState, claim_name: str
               ) -> tuple[CycleState, Pod]:
    pod = pod_using(f"pod-{claim_name}", claim_name).obj()
    cycle = CycleState(state.node_infos(), state)
    _, status = plugin.pre_filter(cycle, pod, state.node_infos())
    assert status is None
    return cycle, pod


def _misses_for(plugin: DynamicResources, state: ClusterState, claim_name: str
                ) -> list[str]:
    """The nodes whose answer the allocator had to compute for a new pod."""
    add_claim(state, claim(claim_name))
    cycle, pod = _pod_cycle(plugin, state, claim_name)
    data: DraState = cycle.read(STATE_KEY)
    assert data.answers is not None
    computed = []
    for info in state.node_infos():
        before = data.answers.misses
        plugin.filter(cycle, pod, info)
        if data.answers.misses > before:
            computed.append(info.name)
    return computed


def _three_nodes() -> ClusterState:
    return cluster([_node(i, "a") for i in range(3)], classes=[gpu_class()],
                   slices=[_slice(i, 2) for i in range(3)])


def test_an_allocation_on_one_node_drops_that_nodes_answer_only() -> None:
    state, plugin = _three_nodes(), new()
    assert _misses_for(plugin, state, "c0") == ["n0", "n1", "n2"]
    assert _misses_for(plugin, state, "c1") == []
    taken = claim("other", status={"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0"}]}}})
    add_claim(state, taken)
    assert _misses_for(plugin, state, "c2") == ["n1"]
    # ... and the answer computed then takes the other device.
    cycle, pod = _pod_cycle(plugin, state, "c2")
    plugin.filter(cycle, pod, state.get("n1"))  # type: ignore[arg-type]
    data: DraState = cycle.read(STATE_KEY)
    [result] = data.allocations_on("n1") or []
    assert [d.device for d in result.devices] == ["g1"]


def test_an_allocation_in_flight_and_its_withdrawal_each_drop_the_answer() -> None:
    state, plugin = _three_nodes(), new()
    _misses_for(plugin, state, "c0")
    state.dra.claims.signal_pending_allocation("uid-x", claim("x", status={"allocation": {
        "devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "g0"}]}}}))
    assert _misses_for(plugin, state, "c1") == ["n2"]
    assert state.dra.claims.remove_pending_allocation("uid-x")
    assert _misses_for(plugin, state, "c2") == ["n2"]


def test_a_slice_or_class_change_drops_every_answer() -> None:
    state, plugin = _three_nodes(), new()
    _misses_for(plugin, state, "c0")
    state.dra.upsert(RESOURCE_SLICE, _slice(0, 3))
    assert _misses_for(plugin, state, "c1") == ["n0", "n1", "n2"]
    state.dra.upsert(DEVICE_CLASS, gpu_class(GPU_CLASS, "true"))
    assert _misses_for(plugin, state, "c2") == ["n0", "n1", "n2"]
    assert _misses_for(plugin, state, "c3") == []


def test_a_node_whose_labels_changed_is_asked_again() -> None:
    state, plugin = _three_nodes(), new()
    _misses_for(plugin, state, "c0")
    _relabel(state, 2, "b")
    assert _misses_for(plugin, state, "c1") == ["n2"]


def test_another_claim_shape_or_store_has_answers_of_its_own() -> None:
    state, plugin = _three_nodes(), new()
    _misses_for(plugin, state, "c0")
    add_claim(state, claim("two", exact("gpu", count=2)))
    cycle, _ = _pod_cycle(plugin, state, "two")
    data: DraState = cycle.read(STATE_KEY)
    assert data.answers is not None and len(data.answers) == 0
    other = _three_nodes()
    assert _misses_for(plugin, other, "c0") == ["n0", "n1", "n2"]


def test_a_node_taken_by_the_mask_is_asked_again_after_a_bind_there() -> None:
    """The mask's rows follow the table: a pod bound on a node writes its row, whose
    answer is then checked again (and still valid: pods do not change devices)."""
    state, plugin = _three_nodes(), new()
    add_claim(state, claim("c0"))
    first = _masked(plugin, state, pod_using("p0", "c0").obj())
    assert all(passed for passed, _ in first.values())
    state.assume(pod_using("bound", "c0").obj(), "n1")
    again = _masked(plugin, state, pod_using("p0", "c0").obj())
    assert again == first


def test_the_mask_asks_again_for_a_node_whose_labels_changed() -> None:
    """Only zone b's nodes can use its pool: a node moved there passes from then on
    (the mask alone, no `filter` call in between to drop the answer)."""
    state = cluster([_node(0, "a"), _node(1, "b")], classes=[gpu_class()],
                    slices=[_zone_slice("b", 2)])
    plugin = new()
    add_claim(state, claim("c0"))
    pod = pod_using("p0", "c0").obj()
    assert {n: passed for n, (passed, _) in _masked(plugin, state, pod).items()} == {
        "n0": False, "n1": True}
    _relabel(state, 0, "b")
    assert {n: passed for n, (passed, _) in _masked(plugin, state, pod).items()} == {
        "n0": True, "n1": True}


def test_the_daemon_path_places_as_the_reference_path() -> None:
    """A sequence of pods with claims through whole cycles: the columnar path with
    its memo chooses the same nodes and devices as the reference path."""
    chosen = []
    for reference in (True, False):
        state = cluster([_node(i, ZONES[i % 2]) for i in range(4)], classes=[gpu_class()],
                        slices=[*(_slice(i, 2) for i in range(4)), _zone_slice("b", 1)])
        plugin = new()
        fw = framework(plugin, seed=3)
        placed = []
        for k in range(9):
            # One device, or a firstAvailable request (two devices, else one) which
            # Score ranks per node; the later ones find only single devices left.
            shape = SHAPES[3] if k in (2, 6, 7, 8) else SHAPES[0]
            add_claim(state, claim(f"c{k}", *copy.deepcopy(shape)))
            pod = pod_using(f"p{k}", f"c{k}").obj()
            result = schedule_one(fw, pod, state, reference=reference)
            if result.node is not None:
                state.assume(pod, result.node)
                result = reserve(fw, result)
            decided = state.dra.claims.pending_allocation(f"uid-c{k}")
            devices = (decided["status"]["allocation"]["devices"]["results"]
                       if decided is not None else None)
            placed.append((result.node, devices))
        chosen.append(placed)
    assert chosen[0] == chosen[1]
    requests = {d["request"] for _, devices in chosen[0] for d in devices or ()}
    assert requests == {"gpu", "gpu/two", "gpu/one"}  # both alternatives were taken


def test_claim_objects_are_read_by_their_allocation_shape_only() -> None:
    from policyd.plugins.dynamicresources.node_memo import claims_key
    a, b = claim("a"), claim("b", namespace="other")
    assert claims_key([a]) == claims_key([b])
    assert claims_key([a]) != claims_key([claim("a", exact("gpu", count=2))])
    assert claims_key([a, b]) != claims_key([a])



def test_an_allocation_error_leaves_the_mask_to_the_per_node_filter() -> None:
    """An Error must reach the cycle as `filter` words it: the mask declines."""
    state = _three_nodes()
    broken = exact("gpu", selectors=[{"cel": {"expression":
                                              f'device.attributes["{DRIVER}"].nope == 1'}}])
    add_claim(state, claim("c0", broken))
    plugin = new()
    pod = pod_using("p0", "c0").obj()
    cycle = CycleState(state.node_infos(), state)
    plugin.pre_filter(cycle, pod, state.node_infos())
    status = plugin.filter(cycle, pod, state.node_infos()[0])
    assert status is not None and not status.is_rejected  # an Error
    table = state.table()
    assert plugin.filter_mask(cycle, pod, table,
                              np.arange(len(table), dtype=np.int64)) is None


@pytest.mark.parametrize("reference", [True, False])
def test_a_first_available_pod_prefers_the_node_with_its_first_alternative(
        reference: bool) -> None:
    """n1 can give two devices (the first alternative, 8 points), n0 only one (7):
    both paths score per node from Filter's allocations, whatever the seed."""
    for seed in range(6):
        state = cluster([_node(0, "a"), _node(1, "a")], classes=[gpu_class()],
                        slices=[_slice(0, 1), _slice(1, 2)])
        add_claim(state, claim("c0", *copy.deepcopy(SHAPES[3])))
        result = schedule_one(framework(new(), seed=seed), pod_using("p0", "c0").obj(),
                              state, reference=reference)
        assert result.node == "n1", seed
