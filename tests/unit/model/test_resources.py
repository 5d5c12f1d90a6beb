"""`pod_requests` against component-helpers' `resource.PodRequests` (v1.36): the cases of
upstream's `TestPodResourceRequests`, its non-zero (`NonMissingContainerRequests`) and
pod-level-resources behaviour, and what NodeResourcesFit's tests rely on.

Known differences from upstream are strict xfails naming the fix, so they turn into
failures (and get their marker removed) the day the model is fixed.
"""

from __future__ import annotations

from typing import Any

import pytest

from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod, node_from_dict, pod_from_dict
from policyd.model.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    pod_requests,
)
from tests.builders import make_node, make_pod

Req = dict[str, str]
GI = 1024**3


def pod(containers: list[Req] | None = None, init: list[tuple[str, Req]] | None = None,
        overhead: Req | None = None, pod_level: Req | None = None) -> Pod:
    """Init containers are ("init" | "sidecar", requests) in order."""
    b = make_pod("p").containers(*(containers or [{}]))
    for kind, requests in init or []:
        b.init_container(requests, sidecar=kind == "sidecar")
    if overhead:
        b.overhead(overhead)
    if pod_level:
        b.pod_requests(pod_level)
    return b.obj()


UPSTREAM_CASES: list[tuple[str, Pod, dict[str, int]]] = [
    ("nil options, larger init container",
     pod([{"cpu": "1"}], init=[("init", {"cpu": "4"})]), {"cpu": 4000}),
    ("nil options, larger containers",
     pod([{"cpu": "2"}, {"cpu": "3"}], init=[("init", {"cpu": "2"})]), {"cpu": 5000}),
    ("pod overhead included",
     pod([{"cpu": "2"}, {"cpu": "3"}], init=[("init", {"cpu": "2"})],
         overhead={"cpu": "1", "memory": "1Gi"}), {"cpu": 6000, "memory": GI}),
    ("restartable init container",
     pod([{"cpu": "1"}], init=[("sidecar", {"cpu": "1"})]), {"cpu": 2000}),
    ("multiple restartable init containers",
     # max(5, restartable init containers (3+2+1) + regular (1)) = 7
     pod([{"cpu": "1"}], init=[("init", {"cpu": "5"}), ("sidecar", {"cpu": "1"}),
                               ("sidecar", {"cpu": "2"}), ("sidecar", {"cpu": "3"})]),
     {"cpu": 7000}),
    ("multiple restartable and regular init containers",
     # init-2 needs 5 + the sidecars started before it (1+2) = 8; the one after it
     # does not count for it
     pod([{"cpu": "1"}], init=[("init", {"cpu": "5"}), ("sidecar", {"cpu": "1"}),
                               ("sidecar", {"cpu": "2"}), ("init", {"cpu": "5"}),
                               ("sidecar", {"cpu": "3"})]),
     {"cpu": 8000}),
    ("restartable-init, init and regular",
     pod([{"cpu": "100"}], init=[("sidecar", {"cpu": "10"}), ("init", {"cpu": "200"})]),
     {"cpu": 210000}),
    # fit.go's computePodResourceRequest doc example (also REFERENCE.md's worked example)
    ("max of init containers vs sum of containers, per resource",
     pod([{"cpu": "2", "memory": "1G"}, {"cpu": "1", "memory": "1G"}],
         init=[("init", {"cpu": "2", "memory": "1G"}), ("init", {"cpu": "2", "memory": "3G"})]),
     {"cpu": 3000, "memory": 3 * 10**9}),
    ("extended and hugepages follow the same rules",
     pod([{"example.com/a": "1", "hugepages-2Mi": "2Mi"}],
         init=[("sidecar", {"example.com/a": "1"}), ("init", {"hugepages-2Mi": "6Mi"})]),
     {"example.com/a": 2, "hugepages-2Mi": 6 * 2**20}),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in UPSTREAM_CASES],
                         ids=[c[0] for c in UPSTREAM_CASES])
def test_pod_requests(p: Pod, want: dict[str, int]) -> None:
    got = pod_requests(p)
    assert {k: v for k, v in got.items() if v} == want


D_CPU, D_MEM = DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST

NON_ZERO_CASES: list[tuple[str, Pod, dict[str, int]]] = [
    ("a container without requests counts the defaults", pod([{}]),
     {"cpu": D_CPU, "memory": D_MEM}),
    ("an explicit zero is kept (only missing requests are filled)",
     pod([{"cpu": "0"}]), {"cpu": 0, "memory": D_MEM}),
    ("defaults are per container", pod([{"cpu": "50m"}, {}]),
     {"cpu": 50 + D_CPU, "memory": 2 * D_MEM}),
    ("init containers get defaults too",
     pod([{"cpu": "50m", "memory": "1"}], init=[("init", {})]), {"cpu": D_CPU, "memory": D_MEM}),
    ("a sidecar without requests adds the defaults",
     pod([{"cpu": "50m", "memory": "1"}], init=[("sidecar", {})]),
     {"cpu": 50 + D_CPU, "memory": 1 + D_MEM}),
    ("overhead is added on top",
     pod([{}], overhead={"cpu": "10m", "memory": "1"}),
     {"cpu": D_CPU + 10, "memory": D_MEM + 1}),
    ("pod-level cpu replaces the container sum, memory keeps the defaults",
     pod([{}, {}], pod_level={"cpu": "300m"}), {"cpu": 300, "memory": 2 * D_MEM}),
    ("only cpu and memory are reported", pod([{"ephemeral-storage": "1"}]),
     {"cpu": D_CPU, "memory": D_MEM}),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in NON_ZERO_CASES],
                         ids=[c[0] for c in NON_ZERO_CASES])
def test_pod_requests_non_zero(p: Pod, want: dict[str, int]) -> None:
    assert pod_requests(p, non_zero=True) == want


POD_LEVEL_CASES: list[tuple[str, Pod, dict[str, int]]] = [
    ("pod-level cpu and memory replace the containers'",
     pod([{"cpu": "1m", "memory": "1"}], pod_level={"cpu": "7m", "memory": "2"}),
     {"cpu": 7, "memory": 2}),
    ("pod-level replaces even a larger init container",
     pod([{"cpu": "1m"}], init=[("init", {"cpu": "5m"})], pod_level={"cpu": "3m"}),
     {"cpu": 3}),
    ("pod-level hugepages replace the containers'",
     pod([{"cpu": "1m", "hugepages-2Mi": "3"}],
         pod_level={"cpu": "3m", "memory": "2", "hugepages-2Mi": "5"}),
     {"cpu": 3, "memory": 2, "hugepages-2Mi": 5}),
    ("pod-level ephemeral-storage is not a pod-level resource: containers' count",
     pod([{"ephemeral-storage": "4"}], pod_level={"cpu": "1m", "ephemeral-storage": "9"}),
     {"cpu": 1, "ephemeral-storage": 4}),
    ("overhead is added after pod-level",
     pod([{"cpu": "1m"}], pod_level={"cpu": "3m"}, overhead={"cpu": "2m"}), {"cpu": 5}),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in POD_LEVEL_CASES],
                         ids=[c[0] for c in POD_LEVEL_CASES])
def test_pod_requests_pod_level(p: Pod, want: dict[str, int]) -> None:
    assert {k: v for k, v in pod_requests(p).items() if v} == want


def test_pod_requests_is_memoized_per_pod() -> None:
    p = pod([{"cpu": "1"}])
    assert pod_requests(p) is pod_requests(p)
    assert pod_requests(p, non_zero=True) is pod_requests(p, non_zero=True)


def test_sub_unit_quantities_are_rounded_once_per_pod() -> None:
    # 500u + 500u = 1m (upstream); 1m + 1m = 2m (per-container ceil).
    p = pod([{"cpu": "500u", "memory": "500m"}, {"cpu": "500u", "memory": "500m"}])
    assert pod_requests(p) == {"cpu": 1, "memory": 1}


def _resized_pod(spec: Req, status: Req, allocated: Req | None = None,
                 infeasible: bool = False) -> Pod:
    raw = make_pod("resized").node("n").raw()
    raw["spec"]["containers"] = [{"name": "c", "image": "pause",
                                  "resources": {"requests": spec}}]
    cs: dict[str, Any] = {"name": "c", "resources": {"requests": status}}
    if allocated:
        cs["allocatedResources"] = allocated
    raw["status"] = {"phase": "Running", "containerStatuses": [cs]}
    if infeasible:
        raw["status"]["conditions"] = [{"type": "PodResizePending", "status": "True",
                                        "reason": "Infeasible"}]
    return pod_from_dict(raw)


RESIZED: list[tuple[str, Pod, dict[str, int]]] = [
    ("resized: per-resource 3-way maximum",
     _resized_pod({"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"},
                  {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                  {"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"}),
     {"cpu": 30, "memory": 30 * 10**6, "ephemeral-storage": 30 * 10**9}),
    ("resized, infeasible", _resized_pod({"cpu": "4"}, {"cpu": "2"}, infeasible=True),
     {"cpu": 2000}),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in RESIZED], ids=[c[0] for c in RESIZED])
def test_bound_pod_being_resized_counts_status_resources(p: Pod, want: dict[str, int]) -> None:
    info = NodeInfo(node_from_dict(make_node("n").raw()))
    info.add_pod(p)
    assert {k: v for k, v in info.requested.items() if v} == want
