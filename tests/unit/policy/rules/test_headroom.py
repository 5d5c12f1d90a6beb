"""A `headroom` rule on amounts at the limits of int64 (issue 26): the columns would wrap
`(allocatable - used) * 100` and round in float64, so the mask must still pass exactly
the nodes the per-node check passes."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import pytest

from policyd.framework.interfaces import FilterPlugin
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict, pod_from_dict
from policyd.policy.compiler import compile_policy
from tests.plugin_harness import run_filter
from tests.unit.policy.conftest import check_docs, make_policy

GPU = "example.com/gpu"
# Everyday amounts and amounts beyond the columns' exact range, up to int64's largest.
AMOUNTS = ["0", "1", "8", "45035996273704", "45035996273705", "90071992547409921",
           "9e18", "9223372036854775807"]


def _node(name: str, amount: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110",
                                       GPU: amount}}}


def _pod(name: str, amount: str, node: str = "") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"nodeName": node, "containers": [{
                "name": "c", "image": "x",
                "resources": {"requests": {GPU: amount}, "limits": {GPU: amount}}}]}}


@pytest.mark.parametrize("headroom", [{"percent": 10}, {"percent": 12.5},
                                      {"percent": 33.3}, {"percent": 0.1},
                                      {"percent": 0}, {"percent": 100},
                                      {"quantity": "1"}, {"quantity": "9e18"}])
@pytest.mark.parametrize("request_amount", ["1", "45035996273705", "4e18"])
def test_mask_is_the_per_node_check_at_int64_limits(headroom: dict[str, Any],
                                                    request_amount: str) -> None:
    doc = make_policy(filters=[{"id": "keep", "message": "no room",
                                "headroom": {"resource": GPU, **headroom}}])
    assert check_docs(doc).problems == []
    policy = compile_policy(doc)
    assert isinstance(policy, FilterPlugin)
    nodes = [node_from_dict(_node(f"n{i}", a)) for i, a in enumerate(AMOUNTS)]
    # Some nodes already run a pod asking for a large share.
    existing = [pod_from_dict(_pod(f"e{i}", "4e18", f"n{i}"))
                for i, a in enumerate(AMOUNTS) if a in ("9e18", "9223372036854775807")]
    cluster = ClusterState(nodes, existing)
    pod = pod_from_dict(_pod("new", request_amount))
    out = run_filter(policy, pod, cluster)  # asserts the mask agrees with filter
    assert out.columnar
    passed = {n for n, s in out.by_node().items() if s is None}
    # What the rule says, in exact integers.
    want = set()
    for i, amount in enumerate(AMOUNTS):
        alloc = int(float(amount)) if "e" in amount else int(amount)
        used = int(float(request_amount)) if "e" in request_amount else int(request_amount)
        used += 4 * 10**18 if amount in ("9e18", "9223372036854775807") else 0
        if "percent" in headroom:
            # The percent is the decimal written, exactly (as the reference reads it).
            ok = (alloc - used) * 100 >= alloc * Fraction(str(headroom["percent"]))
        else:
            q = headroom["quantity"]
            ok = alloc - used >= (int(float(q)) if "e" in q else int(q))
        if ok:
            want.add(f"n{i}")
    assert passed == want


def test_subsets_of_large_and_small_nodes_agree() -> None:
    doc = make_policy(filters=[{"id": "keep", "message": "no room",
                                "headroom": {"resource": GPU, "percent": 1.1}}])
    policy = compile_policy(doc)
    assert isinstance(policy, FilterPlugin)
    # 3000 with 2967 used keeps exactly 1.1% free; in float64 3000 * 1.1 is
    # 3300.0000000000005, which (3000 - 2967) * 100 = 3300 would fall short of.
    assert 3000 * 1.1 > 3300
    nodes = [node_from_dict(_node(f"n{i}", a)) for i, a in enumerate([*AMOUNTS, "3000"])]
    cluster = ClusterState(nodes, [])
    pod = pod_from_dict(_pod("new", "2967"))
    assert run_filter(policy, pod, cluster, [len(AMOUNTS)]).statuses == [None]
    for size in (1, 2, 3):
        for subset in itertools.combinations(range(len(nodes)), size):
            run_filter(policy, pod, cluster, list(subset))
