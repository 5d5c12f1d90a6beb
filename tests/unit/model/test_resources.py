"""`pod_requests` against component-helpers' `resource.PodRequests` (v1.36): the cases of
upstream's `TestPodResourceRequests`, its non-zero (`NonMissingContainerRequests`) and
pod-level-resources behaviour, and what NodeResourcesFit's tests rely on.

Known differences from upstream are strict xfails naming the fix, so they turn into
failures (and get their marker removed) the day the model is fixed.
"""

from __future__ import annotations

from typing import Any

import pytest

from policyd.features import DEFAULTS, with_settings
from policyd.model.cluster import ClusterState
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


# -- in-place resize at pod level (InPlacePodLevelResourcesVerticalScaling, v1.36 beta, on)
# A bound pod counts on its node as PodInfo.CalculateResource reads it: PodRequests with
# UseStatusResources (containers: InPlacePodVerticalScaling, GA) and, under the gate, the
# pod-level status.resources / status.allocatedResources.

GATE_OFF = with_settings([("InPlacePodLevelResourcesVerticalScaling", False)])
MI = 1024**2


def _bound(containers: list[dict[str, Any]], status: dict[str, Any] | None = None,
           pod_level: Req | None = None, init: list[dict[str, Any]] | None = None,
           overhead: Req | None = None) -> Pod:
    """A bound pod from raw container specs and a raw status (phase Running added)."""
    raw = make_pod("resized").node("n").raw()
    raw["spec"]["containers"] = containers
    if init:
        raw["spec"]["initContainers"] = init
    if pod_level is not None:
        raw["spec"]["resources"] = {"requests": pod_level}
    if overhead:
        raw["spec"]["overhead"] = overhead
    raw["status"] = {"phase": "Running", **(status or {})}
    return pod_from_dict(raw)


def _c(name: str, requests: Req, restart: str = "") -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "pause", "resources": {"requests": requests}}
    if restart:
        c["restartPolicy"] = restart
    return c


def _cs(name: str, actual: Req | None, allocated: Req | None = None) -> dict[str, Any]:
    """A container status; `actual` None leaves `resources` out (the kubelet reports none)."""
    cs: dict[str, Any] = {"name": name}
    if actual is not None:
        cs["resources"] = {"requests": actual} if actual else {}
    if allocated is not None:
        cs["allocatedResources"] = allocated
    return cs


def _pending(reason: str, status: str = "True") -> dict[str, Any]:
    return {"type": "PodResizePending", "status": status, "reason": reason}


IN_PROGRESS = {"type": "PodResizeInProgress", "status": "True"}

# (id, pod, requested with the gate on, requested with it off)
POD_LEVEL_RESIZE: list[tuple[str, Pod, dict[str, int], dict[str, int]]] = [
    ("pod-level only: spec, actuated, allocated, the larger per resource",
     _bound([_c("c", {})], {"resources": {"requests": {"cpu": "1", "memory": "3Gi"}},
                            "allocatedResources": {"cpu": "3", "memory": "1Gi"},
                            "conditions": [IN_PROGRESS]},
            pod_level={"cpu": "2", "memory": "2Gi"}),
     {"cpu": 3000, "memory": 3 * GI}, {"cpu": 2000, "memory": 2 * GI}),
    ("pod-level only, scaled down and actuated: the spec still counts until it is smaller",
     _bound([_c("c", {})], {"resources": {"requests": {"cpu": "500m"}},
                            "allocatedResources": {"cpu": "500m"}},
            pod_level={"cpu": "1"}),
     {"cpu": 1000}, {"cpu": 1000}),
    ("pod-level allocatedResources without status.resources: spec only",
     _bound([_c("c", {})], {"allocatedResources": {"cpu": "3"}}, pod_level={"cpu": "2"}),
     {"cpu": 2000}, {"cpu": 2000}),
    ("pod-level status.resources without requests: spec vs allocated",
     _bound([_c("c", {})], {"resources": {}, "allocatedResources": {"cpu": "3"}},
            pod_level={"cpu": "2"}),
     {"cpu": 3000}, {"cpu": 2000}),
    ("pod-level resize deferred: still the larger",
     _bound([_c("c", {})], {"resources": {"requests": {"cpu": "1"}},
                            "conditions": [_pending("Deferred")]}, pod_level={"cpu": "4"}),
     {"cpu": 4000}, {"cpu": 4000}),
    ("pod-level resize infeasible: actuated vs allocated, the spec ignored",
     _bound([_c("c", {})], {"resources": {"requests": {"cpu": "2"}},
                            "allocatedResources": {"cpu": "1"},
                            "conditions": [_pending("Infeasible")]}, pod_level={"cpu": "4"}),
     {"cpu": 2000}, {"cpu": 4000}),
    ("infeasible, a pod-level resource neither actuated nor allocated counts zero",
     _bound([_c("c", {"memory": "1Gi"})],
            {"resources": {"requests": {"cpu": "2"}}, "conditions": [_pending("Infeasible")]},
            pod_level={"cpu": "4", "memory": "2Gi"}),
     {"cpu": 2000}, {"cpu": 4000, "memory": 2 * GI}),
    ("PodResizePending's status is not read, only its reason",
     _bound([_c("c", {})], {"resources": {"requests": {"cpu": "2"}},
                            "conditions": [_pending("Infeasible", status="False")]},
            pod_level={"cpu": "4"}),
     {"cpu": 2000}, {"cpu": 4000}),
    ("the first PodResizePending condition decides",
     _bound([_c("c", {})], {"resources": {"requests": {"cpu": "2"}},
                            "conditions": [_pending("Deferred"), _pending("Infeasible")]},
            pod_level={"cpu": "4"}),
     {"cpu": 4000}, {"cpu": 4000}),
    ("container level only: status counts whatever the gate",
     _bound([_c("c", {"cpu": "1"})], {"containerStatuses": [_cs("c", {"cpu": "2"})]}),
     {"cpu": 2000}, {"cpu": 2000}),
    ("container status `resources: {}`: spec vs allocated",
     _bound([_c("c", {"cpu": "1"})], {"containerStatuses": [_cs("c", {}, {"cpu": "3"})]}),
     {"cpu": 3000}, {"cpu": 3000}),
    ("container status without resources: allocatedResources alone is not read",
     _bound([_c("c", {"cpu": "1"})], {"containerStatuses": [_cs("c", None, {"cpu": "3"})]}),
     {"cpu": 1000}, {"cpu": 1000}),
    ("container infeasible: actuated vs allocated",
     _bound([_c("c", {"cpu": "4"})],
            {"containerStatuses": [_cs("c", {"cpu": "2"}, {"cpu": "1"})],
             "conditions": [_pending("Infeasible")]}),
     {"cpu": 2000}, {"cpu": 2000}),
    ("both levels: pod-level replaces the containers' cpu, memory from the containers",
     _bound([_c("c", {"cpu": "1", "memory": "1Gi"})],
            {"containerStatuses": [_cs("c", {"cpu": "2", "memory": "2Gi"})],
             "resources": {"requests": {"cpu": "5"}}},
            pod_level={"cpu": "3"}),
     {"cpu": 5000, "memory": 2 * GI}, {"cpu": 3000, "memory": 2 * GI}),
    ("a sidecar's status counts, a regular init container's does not",
     _bound([_c("c", {"cpu": "1"})], {"initContainerStatuses": [
         _cs("side", {"cpu": "2"}), _cs("init", {"cpu": "9"})]},
            init=[_c("side", {"cpu": "1"}, restart="Always"), _c("init", {"cpu": "500m"})]),
     {"cpu": 3000}, {"cpu": 3000}),
    ("overhead is added to the resized pod-level requests",
     _bound([_c("c", {})], {"resources": {"requests": {"cpu": "2"}}},
            pod_level={"cpu": "1"}, overhead={"cpu": "250m"}),
     {"cpu": 2250}, {"cpu": 1250}),
]


@pytest.mark.parametrize(("p", "on", "off"), [c[1:] for c in POD_LEVEL_RESIZE],
                         ids=[c[0] for c in POD_LEVEL_RESIZE])
def test_bound_pod_resized_at_pod_level_counts_per_gate(
        p: Pod, on: dict[str, int], off: dict[str, int]) -> None:
    for gates, want in ((DEFAULTS, on), (GATE_OFF, off)):
        info = NodeInfo(node_from_dict(make_node("n").raw()), gates)
        info.add_pod(p)
        assert {k: v for k, v in info.requested.items() if v} == want, gates.overrides()
        info.remove_pod(p)
        assert not any(info.requested.values())


def test_gate_off_and_on_counts_are_cached_apart() -> None:
    p = POD_LEVEL_RESIZE[0][1]
    assert pod_requests(p, use_status=True)["cpu"] == 3000
    assert pod_requests(p, use_status=True, features=GATE_OFF)["cpu"] == 2000


def test_pending_pod_counts_its_spec() -> None:
    # The pod being scheduled is read without status (computePodResourceRequest).
    p = POD_LEVEL_RESIZE[0][1]
    assert pod_requests(p) == {"cpu": 2000, "memory": 2 * GI}


def test_cluster_state_counts_with_its_gates() -> None:
    p = POD_LEVEL_RESIZE[0][1]
    node = node_from_dict(make_node("n").raw())
    for gates, want in ((DEFAULTS, 3000), (GATE_OFF, 2000)):
        info = ClusterState([node], [p], features=gates).get("n")
        assert info is not None and info.requested["cpu"] == want


# Non0CPU / Non0Mem with pod-level requests (getNonMissingContainerRequests): only a
# resource the pod's requests lack altogether gets the per-container default.
NON_ZERO_POD_LEVEL: list[tuple[str, Pod, dict[str, int]]] = [
    ("pod-level memory; one container asks cpu: no cpu default for the other",
     pod([{"cpu": "500m"}, {}], pod_level={"memory": "1Gi"}), {"cpu": 500, "memory": GI}),
    ("pod-level memory; no cpu anywhere: each container gets the default",
     pod([{}, {}], pod_level={"memory": "1Gi"}),
     {"cpu": 2 * DEFAULT_MILLI_CPU_REQUEST, "memory": GI}),
    ("pod-level memory; overhead cpu counts as set",
     pod([{}], pod_level={"memory": "1Gi"}, overhead={"cpu": "100m"}),
     {"cpu": 100, "memory": GI}),
    ("no pod-level requests: every container without cpu gets the default",
     pod([{"cpu": "500m"}, {}]), {"cpu": 500 + DEFAULT_MILLI_CPU_REQUEST,
                                 "memory": 2 * DEFAULT_MEMORY_REQUEST}),
    ("pod-level hugepages only: still pod-level set",
     pod([{"cpu": "500m", "memory": "1Mi"}, {}], pod_level={"hugepages-2Mi": "2Mi"}),
     {"cpu": 500, "memory": MI}),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in NON_ZERO_POD_LEVEL],
                         ids=[c[0] for c in NON_ZERO_POD_LEVEL])
def test_non_zero_requests_with_pod_level_resources(p: Pod, want: dict[str, int]) -> None:
    assert pod_requests(p, non_zero=True) == want
    info = NodeInfo(node_from_dict(make_node("n").raw()))
    info.add_pod(p)
    assert info.non_zero_requested == want


def test_explicit_zero_kept_through_an_infeasible_resize() -> None:
    # Found by the differential test: spec, status and allocation all say cpu 0 and the
    # resize is infeasible; max(actuated, allocated) still names cpu, so the container
    # gets no 100m default in Non0CPU (maxResourceList adds a missing key at zero).
    p = _bound([_c("c", {"cpu": "0"})],
               {"containerStatuses": [_cs("c", {"cpu": "0m"}, {"cpu": "0m"})],
                "conditions": [_pending("Infeasible")]})
    assert pod_requests(p, non_zero=True, use_status=True) == {
        "cpu": 0, "memory": DEFAULT_MEMORY_REQUEST}


def test_init_container_explicit_zero_names_the_resource() -> None:
    p = pod([{"cpu": "1"}], init=[("init", {"example.com/gpu": "0"})])
    assert pod_requests(p) == {"cpu": 1000, "example.com/gpu": 0}
