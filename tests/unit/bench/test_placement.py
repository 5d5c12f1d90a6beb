"""The e2e benchmark's placement checks on hand-made clusters: each check holds on a
good placement and fails, naming the culprit, on a broken one."""

from __future__ import annotations

from typing import Any

from bench.e2e import placement
from bench.e2e.shapes import node_body, pod_body

Obj = dict[str, Any]


def _bound(pod: Obj, node: str) -> Obj:
    pod["spec"]["nodeName"] = node
    return pod


def _measured(i: int, workload: str = "SchedulingBasic", node: str | None = None,
              scheduler: str = "policyd") -> Obj:
    pod = pod_body(f"pod-{i}", workload, scheduler=scheduler, index=i)
    return _bound(pod, node) if node else pod


NODES = [node_body(i) for i in range(6)]  # zones 1,2,3,1,2,3; hw-encrypt on node-0, node-4


def test_every_pod_bound_names_the_unbound() -> None:
    pods = [_measured(0, node="node-1"), _measured(1)]
    check = placement.every_pod_bound(pods, ["pod-0", "pod-1", "pod-2"])
    assert not check.held
    assert check.problems == ["pod-1 not bound", "pod-2 not bound"]
    assert placement.every_pod_bound(pods[:1], ["pod-0"]).held


def test_allocatable_counts_cpu_memory_and_pods_of_every_pod_on_the_node() -> None:
    # 4 cpu / 32Gi / 110 pods; each pod 100m / 500Mi: 40 pods fill the cpu exactly.
    full = [_measured(i, node="node-0") for i in range(40)]
    assert placement.no_node_over_allocatable(NODES, full).held
    over = [*full, pod_body("init-0", "SchedulingBasic", scheduler="policyd", node="node-0")]
    check = placement.no_node_over_allocatable(NODES, over)
    assert not check.held
    assert check.problems[0].startswith("node-0: cpu 4100m/4000m")


def test_allocatable_memory_alone_can_fail() -> None:
    pod = _measured(0, node="node-1")
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1m", "memory": "33Gi"}
    assert not placement.no_node_over_allocatable(NODES, [pod]).held


def test_a_pod_on_a_node_that_does_not_exist_fails() -> None:
    check = placement.no_node_over_allocatable(NODES, [_measured(0, node="node-99")])
    assert not check.held and "does not exist" in check.problems[0]


def test_zone_skew() -> None:
    # node-0/3 zone-1, node-1/4 zone-2, node-2/5 zone-3
    balanced = [_measured(i, "TopologySpreading", node=f"node-{i % 3}") for i in range(9)]
    assert placement.zone_skew_within(NODES, balanced, max_skew=0).held
    skewed = balanced + [_measured(9 + i, "TopologySpreading", node="node-3")
                         for i in range(6)]  # zone-1: 9, others 3
    check = placement.zone_skew_within(NODES, skewed, max_skew=5)
    assert not check.held and "skew 6" in check.detail
    assert placement.zone_skew_within(NODES, skewed[:-1], max_skew=5).held


def test_zone_skew_counts_an_empty_zone_as_zero() -> None:
    only_zone_1 = [_measured(i, "TopologySpreading", node="node-0") for i in range(6)]
    check = placement.zone_skew_within(NODES, only_zone_1, max_skew=5)
    assert not check.held and "skew 6" in check.detail


def test_warm_up_pod_is_not_counted_by_the_spread_selector() -> None:
    warm = _bound(pod_body("warm-up", "TopologySpreading", scheduler="policyd"), "node-0")
    assert placement.zone_skew_within(NODES, [warm], max_skew=0).held


def test_anti_affinity() -> None:
    pods = [_measured(0, "PodAntiAffinity", node="node-1"),
            _measured(1, "PodAntiAffinity", node="node-2")]
    assert placement.anti_affinity_held(pods).held
    pods.append(_measured(2, "PodAntiAffinity", node="node-2"))
    check = placement.anti_affinity_held(pods)
    assert not check.held and check.problems == ["node-2: ['pod-1', 'pod-2']"]


def test_hw_encrypt_both_ways_of_asking() -> None:
    # pod-0..2 of PolicyMix need hw-encrypt (index % 10 < 3); pod-3 does not.
    for scheduler in ("policyd", "kube-scheduler"):
        good = [_measured(0, "PolicyMix", node="node-0", scheduler=scheduler),
                _measured(3, "PolicyMix", node="node-1", scheduler=scheduler)]
        assert placement.hw_encrypt_held(NODES, good).held
        bad = [*good, _measured(1, "PolicyMix", node="node-1", scheduler=scheduler)]
        check = placement.hw_encrypt_held(NODES, bad)
        assert not check.held and check.problems == ["pod-1 on node-1"]


def test_check_placements_per_workload_and_for_the_null_scheduler() -> None:
    names = ["pod-0"]
    pods = [_measured(0, "PodAntiAffinity", node="node-1")]
    assert set(placement.check_placements("PodAntiAffinity", NODES, pods, names)) == {
        "every_measured_pod_bound", "no_node_over_allocatable", "anti_affinity_held"}
    assert set(placement.check_placements("PolicyMix", NODES, pods, names)) >= {
        "hw_encrypt_held"}
    assert set(placement.check_placements("TopologySpreading", NODES, pods, names)) >= {
        "zone_skew_within_max_skew"}
    assert set(placement.check_placements("PodAntiAffinity", NODES, pods, names,
                                          constraints=False)) == {
        "every_measured_pod_bound", "no_node_over_allocatable"}


def _allocated_claim(pod: Obj, node: str, device: str, *, reserved: bool = True) -> Obj:
    """The pod's claim as a scheduler leaves it: allocated on `node`'s pool and
    reserved for the pod."""
    from bench import dra_workload
    meta = pod["metadata"]
    claim = dra_workload.resource_claim(meta["name"], meta["namespace"])
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": dra_workload.DRIVER, "pool": node, "device": device}]}}}
    if reserved:
        claim["status"]["reservedFor"] = [
            {"resource": "pods", "name": meta["name"], "uid": meta.get("uid", "")}]
    return claim


def _dra_pod(i: int, node: str) -> Obj:
    pod = _measured(i, "DynamicResources", node=node)
    pod["metadata"]["uid"] = f"uid-{i}"
    return pod


def test_claims_must_be_allocated_on_the_pods_node_reserved_and_not_shared() -> None:
    pods = [_dra_pod(0, "node-0"), _dra_pod(1, "node-0"), _dra_pod(2, "node-1")]
    claims = [_allocated_claim(pods[0], "node-0", "gpu-0"),
              _allocated_claim(pods[1], "node-0", "gpu-1"),
              _allocated_claim(pods[2], "node-1", "gpu-0")]
    names = ["pod-0", "pod-1", "pod-2"]
    good = placement.claims_allocated_on_their_nodes(pods, claims, names)
    assert good.held, good.problems
    assert good.detail == "3 claims of measured pods checked, 3 devices allocated"
    # The same device twice, a device of another node's pool, a claim not reserved,
    # a claim not allocated, a claim missing: each named.
    twice = _allocated_claim(pods[1], "node-0", "gpu-0")
    elsewhere = _allocated_claim(pods[2], "node-2", "gpu-5")
    unreserved = _allocated_claim(pods[0], "node-0", "gpu-0", reserved=False)
    bad = placement.claims_allocated_on_their_nodes(
        pods, [unreserved, twice, elsewhere], names)
    assert not bad.held
    assert bad.problems == [
        "gpu.bench.example/node-0/gpu-0 allocated to "
        "['bench/pod-0-gpu', 'bench/pod-1-gpu']",
        "pod-0: claim bench/pod-0-gpu not reserved for it",
        "pod-2 on node-1: claim bench/pod-2-gpu has devices ['node-2/gpu-5']"]
    unallocated = dict(claims[2], status={})
    missing = placement.claims_allocated_on_their_nodes(
        pods, [claims[0], unallocated], names)
    assert missing.problems == [
        "pod-1: claim bench/pod-1-gpu does not exist",
        "pod-2: claim bench/pod-2-gpu not allocated",
        "pod-2: claim bench/pod-2-gpu not reserved for it"]


def test_dynamic_resources_checks_claims_unless_the_scheduler_is_null() -> None:
    pods = [_dra_pod(0, "node-0")]
    claims = [_allocated_claim(pods[0], "node-0", "gpu-0")]
    checked = placement.check_placements("DynamicResources", NODES, pods, ["pod-0"],
                                         claims=claims)
    assert checked["claims_allocated_on_their_nodes"].held
    null = placement.check_placements("DynamicResources", NODES, pods, ["pod-0"],
                                      constraints=False, claims=claims)
    assert "claims_allocated_on_their_nodes" not in null
    assert pods[0]["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimName": "pod-0-gpu"}]
