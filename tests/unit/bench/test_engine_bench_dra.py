"""The engine benchmark's DynamicResources workload: every device of a small cluster
is handed out once, each claim stored allocated on its pod's node and reserved for
it, and a pod more than the devices stays pending."""

from __future__ import annotations

from bench.dra_workload import DEVICES_PER_NODE, DRIVER
from bench.engine import dra
from bench.engine_bench import build, cell_sizes, run_one
from policyd.engine.cycle import schedule_one

NODES = 3


def test_every_device_once_then_no_room() -> None:
    pods = NODES * DEVICES_PER_NODE + 1
    fw, cluster, todo = build(dra.NAME, NODES, 2, pods)
    placed: dict[str, str] = {}
    for k, pod in enumerate(todo):
        result = schedule_one(fw, pod, cluster)
        if result.node is None:
            continue
        cluster.assume(pod, result.node)
        result = dra.settle(fw, cluster, result, resource_version=k + 2)
        assert result.node is not None
        placed[pod.name] = result.node
    assert len(placed) == pods - 1 and todo[-1].name not in placed
    devices = set()
    for name, node in placed.items():
        claim = cluster.dra.claims.get(f"{dra.NAMESPACE}/{name}-gpu")
        assert claim is not None
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"]) == (DRIVER, node)
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": name, "uid": name}]
        devices.add((node, result["device"]))
        assert cluster.dra.claims.pending_allocation(claim["metadata"]["uid"]) is None
    assert len(devices) == len(placed)


def test_a_short_run_places_every_pod_and_is_capped_at_the_devices() -> None:
    assert cell_sizes(dra.NAME, NODES, 5, 1000, 0) == (5, NODES * DEVICES_PER_NODE)
    row = run_one(dra.NAME, NODES, 2, NODES * DEVICES_PER_NODE, churn_period=0.05)
    assert row["placed"] == row["pods"] == NODES * DEVICES_PER_NODE
