"""NodeResourcesFit, with the cases of upstream's v1.36 `noderesources/fit_test.go`
(TestEnoughRequests, TestNotEnoughRequests, TestStorageRequests,
TestRestartableInitContainers, TestFitScore), `least_allocated_test.go`,
`most_allocated_test.go` and `requested_to_capacity_ratio_test.go`: same inputs, same
reasons, codes and scores. Cases that need upstream-only machinery (DRA extended
resources, feature gates switched off) are left out; see the module docstring of
`policyd.plugins.noderesources.fit`.

Upstream builds pods with no containers (`st.MakePod().Obj()`); policyd's decoder needs
one, so those pods get one container that explicitly requests cpu 0 and memory 0, which
gives the same actual and the same "non-zero" requests.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from policyd.errors import InvalidObjectError
from policyd.features import with_settings
from policyd.framework import Code, CycleState, PluginError, Status
from policyd.framework.events import QUEUE, QUEUE_SKIP
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Node, Pod, node_from_dict, pod_from_dict
from policyd.plugins import names
from policyd.plugins.helper.function_shape import ShapePoint, broken_linear_function
from policyd.plugins.noderesources.fit import (
    DEFAULT_WEIGHT,
    ERR_REASON_INSUFFICIENT_CPU,
    ERR_REASON_INSUFFICIENT_EPHEMERAL_STORAGE,
    ERR_REASON_INSUFFICIENT_MEMORY,
    ERR_REASON_TOO_MANY_PODS,
    NodeResourcesFit,
    new,
)
from tests import plugin_harness as harness
from tests.builders import make_node, make_pod

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_IO_A = "kubernetes.io/something"
K8S_IO_B = "subdomain.kubernetes.io/something"
HUGEPAGES_A = "hugepages-2Mi"

Req = dict[str, str]


def insufficient(name: str) -> str:
    return f"Insufficient {name}"


def res(cpu: int = 0, memory: int = 0, ephemeral: int = 0, **scalars: int) -> Req:
    """upstream's newResourcePod(framework.Resource{...}) container: it always sets cpu
    (millicores), memory, pods and ephemeral-storage, zero or not."""
    out = {"cpu": f"{cpu}m", "memory": str(memory), "pods": "0",
           "ephemeral-storage": str(ephemeral)}
    out.update({_SCALAR_NAMES[k]: str(v) for k, v in scalars.items()})
    return out


_SCALAR_NAMES = {"ext_a": EXT_A, "ext_b": EXT_B, "k8s_a": K8S_IO_A, "k8s_b": K8S_IO_B,
                 "huge_a": HUGEPAGES_A}


def pod(*containers: Req, init: tuple[Req, ...] = (), sidecars: tuple[Req, ...] = (),
        overhead: Req | None = None, pod_level: Req | None = None, name: str = "pod",
        node: str = "") -> Pod:
    b = make_pod(name).containers(*containers)
    for r in init:
        b.init_container(r)
    for r in sidecars:
        b.init_container(r, sidecar=True)
    if overhead:
        b.overhead(overhead)
    if pod_level:
        b.pod_requests(pod_level)
    if node:
        b.node(node)
    return b.obj()


def empty_pod(name: str = "pod", node: str = "") -> Pod:
    """st.MakePod().Obj(): a pod with no containers, hence no requests at all."""
    return pod({"cpu": "0", "memory": "0"}, name=name, node=node)


def node(name: str = "node", **allocatable: str) -> Node:
    return make_node(name).capacity(
        {_SCALAR_NAMES.get(k, k.replace("_", "-")): v for k, v in allocatable.items()}).obj()


def node_info(n: Node, *existing: Pod) -> NodeInfo:
    info = NodeInfo(n)
    for p in existing:
        info.add_pod(p)
    return info


def run_filter(plugin: NodeResourcesFit, p: Pod, info: NodeInfo) -> Status | None:
    state = CycleState([info])
    _, status = plugin.pre_filter(state, p, [info])
    assert status is None  # NodeResourcesFit's PreFilter never skips or rejects
    return plugin.filter(state, p, info)


def unsched(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


# Upstream's test node: makeAllocatableResources(10, 20, 32, 5, 20, 5).
def upstream_node() -> Node:
    return node(cpu="10m", memory="20", pods="32", ext_a="5", ephemeral_storage="20",
                huge_a="5")


ENOUGH_REQUESTS: list[tuple[str, Pod, Pod | None, dict[str, Any], Status | None]] = [
    ("no resources requested always fits",
     empty_pod(), pod(res(cpu=10, memory=20)), {}, None),
    ("too many resources fails",
     pod(res(cpu=1, memory=1)), pod(res(cpu=10, memory=20)), {},
     unsched(ERR_REASON_INSUFFICIENT_CPU, ERR_REASON_INSUFFICIENT_MEMORY)),
    ("too many resources fails due to init container cpu",
     pod(res(cpu=1, memory=1), init=(res(cpu=3, memory=1),)), pod(res(cpu=8, memory=19)), {},
     unsched(ERR_REASON_INSUFFICIENT_CPU)),
    ("too many resources fails due to highest init container cpu",
     pod(res(cpu=1, memory=1), init=(res(cpu=3, memory=1), res(cpu=2, memory=1))),
     pod(res(cpu=8, memory=19)), {}, unsched(ERR_REASON_INSUFFICIENT_CPU)),
    ("too many resources fails due to init container memory",
     pod(res(cpu=1, memory=1), init=(res(cpu=1, memory=3),)), pod(res(cpu=9, memory=19)), {},
     unsched(ERR_REASON_INSUFFICIENT_MEMORY)),
    ("too many resources fails due to highest init container memory",
     pod(res(cpu=1, memory=1), init=(res(cpu=1, memory=3), res(cpu=1, memory=2))),
     pod(res(cpu=9, memory=19)), {}, unsched(ERR_REASON_INSUFFICIENT_MEMORY)),
    ("init container fits because it's the max, not sum, of containers and init containers",
     pod(res(cpu=1, memory=1), init=(res(cpu=1, memory=1),)), pod(res(cpu=9, memory=19)), {},
     None),
    ("multiple init containers fit because it's the max, not sum, of containers and init "
     "containers",
     pod(res(cpu=1, memory=1), init=(res(cpu=1, memory=1), res(cpu=1, memory=1))),
     pod(res(cpu=9, memory=19)), {}, None),
    ("both resources fit", pod(res(cpu=1, memory=1)), pod(res(cpu=5, memory=5)), {}, None),
    ("one resource memory fits",
     pod(res(cpu=2, memory=1)), pod(res(cpu=9, memory=5)), {},
     unsched(ERR_REASON_INSUFFICIENT_CPU)),
    ("one resource cpu fits",
     pod(res(cpu=1, memory=2)), pod(res(cpu=5, memory=19)), {},
     unsched(ERR_REASON_INSUFFICIENT_MEMORY)),
    ("equal edge case", pod(res(cpu=5, memory=1)), pod(res(cpu=5, memory=19)), {}, None),
    ("equal edge case for init container",
     pod(res(cpu=4, memory=1), init=(res(cpu=5, memory=1),)), pod(res(cpu=5, memory=19)), {},
     None),
    ("extended resource fits", pod(res(ext_a=1)), pod(res()), {}, None),
    ("extended resource fits for init container",
     pod(res(), init=(res(ext_a=1),)), pod(res()), {}, None),
    ("extended resource capacity enforced",
     pod(res(cpu=1, memory=1, ext_a=10)), pod(res(ext_a=0)), {},
     unresolvable(insufficient(EXT_A))),
    ("extended resource capacity enforced for init container",
     pod(res(), init=(res(cpu=1, memory=1, ext_a=10),)), pod(res(ext_a=0)), {},
     unresolvable(insufficient(EXT_A))),
    ("extended resource allocatable enforced",
     pod(res(cpu=1, memory=1, ext_a=1)), pod(res(ext_a=5)), {},
     unsched(insufficient(EXT_A))),
    ("extended resource allocatable enforced for init container",
     pod(res(), init=(res(cpu=1, memory=1, ext_a=1),)), pod(res(ext_a=5)), {},
     unsched(insufficient(EXT_A))),
    ("extended resource allocatable enforced for multiple containers",
     pod(res(cpu=1, memory=1, ext_a=3), res(cpu=1, memory=1, ext_a=3)), pod(res(ext_a=2)), {},
     unresolvable(insufficient(EXT_A))),
    ("extended resource allocatable admits multiple init containers",
     pod(res(), init=(res(cpu=1, memory=1, ext_a=3), res(cpu=1, memory=1, ext_a=3))),
     pod(res(ext_a=2)), {}, None),
    ("extended resource allocatable enforced for multiple init containers",
     pod(res(), init=(res(cpu=1, memory=1, ext_a=6), res(cpu=1, memory=1, ext_a=3))),
     pod(res(ext_a=2)), {}, unresolvable(insufficient(EXT_A))),
    ("extended resource allocatable enforced for unknown resource",
     pod(res(cpu=1, memory=1, ext_b=1)), pod(res()), {}, unresolvable(insufficient(EXT_B))),
    ("extended resource allocatable enforced for unknown resource for init container",
     pod(res(), init=(res(cpu=1, memory=1, ext_b=1),)), pod(res()), {},
     unresolvable(insufficient(EXT_B))),
    ("kubernetes.io resource capacity enforced",
     pod(res(cpu=1, memory=1, k8s_a=10)), pod(res()), {},
     unresolvable(insufficient(K8S_IO_A))),
    ("kubernetes.io resource capacity enforced for init container",
     pod(res(), init=(res(cpu=1, memory=1, k8s_b=10),)), pod(res()), {},
     unresolvable(insufficient(K8S_IO_B))),
    ("hugepages resource capacity enforced",
     pod(res(cpu=1, memory=1, huge_a=10)), pod(res(huge_a=0)), {},
     unresolvable(insufficient(HUGEPAGES_A))),
    ("hugepages resource capacity enforced for init container",
     pod(res(), init=(res(cpu=1, memory=1, huge_a=10),)), pod(res(huge_a=0)), {},
     unresolvable(insufficient(HUGEPAGES_A))),
    ("hugepages resource allocatable enforced for multiple containers",
     pod(res(cpu=1, memory=1, huge_a=3), res(cpu=1, memory=1, huge_a=3)), pod(res(huge_a=2)),
     {}, unresolvable(insufficient(HUGEPAGES_A))),
    ("skip checking ignored extended resource",
     pod(res(cpu=1, memory=1, ext_b=1)), pod(res()), {"ignoredResources": [EXT_B]}, None),
    ("resources + pod overhead fits",
     pod(res(cpu=1, memory=1), overhead={"cpu": "3m", "memory": "13"}),
     pod(res(cpu=5, memory=5)), {}, None),
    ("requests + overhead does not fit for memory",
     pod(res(cpu=1, memory=1), overhead={"cpu": "1m", "memory": "15"}),
     pod(res(cpu=5, memory=5)), {}, unsched(ERR_REASON_INSUFFICIENT_MEMORY)),
    ("skip checking ignored extended resource via resource groups",
     pod(res(cpu=1, memory=1, ext_b=1, k8s_a=1)), pod(res()),
     {"ignoredResourceGroups": ["example.com"]}, unresolvable(insufficient(K8S_IO_A))),
    ("skip checking extended resource request with quantity zero via resource groups",
     pod(res(cpu=1, memory=1, ext_a=0)), pod(res(ext_a=6)), {}, None),
    ("skip checking resource request with quantity zero",
     pod(res(ext_a=1)), pod(res(cpu=20, memory=30, ext_a=1)), {}, None),
    ("both pod-level and container-level resources fit",
     pod(res(cpu=1, memory=1), pod_level={"cpu": "1m", "memory": "2"}),
     pod(res(cpu=5, memory=5)), {}, None),
    ("pod-level cpu resource not fit",
     pod(res(cpu=1, memory=1), pod_level={"cpu": "7m", "memory": "2"}),
     pod(res(cpu=5, memory=5)), {}, unsched(ERR_REASON_INSUFFICIENT_CPU)),
    ("pod-level memory resource not fit",
     pod(res(cpu=1, memory=1), pod_level={"cpu": "3m", "memory": "2"}),
     pod(res(cpu=5, memory=19)), {}, unsched(ERR_REASON_INSUFFICIENT_MEMORY)),
    ("pod-level hugepages resource fit",
     pod(pod_level={"cpu": "3m", "memory": "2", HUGEPAGES_A: "5"}), None, {}, None),
    ("both pod-level and container-level hugepages resource fit",
     pod(res(cpu=1, memory=1, huge_a=3), pod_level={"cpu": "3m", "memory": "2",
                                                     HUGEPAGES_A: "5"}), None, {}, None),
    ("pod-level hugepages resource not fit",
     pod(pod_level={"cpu": "3m", "memory": "2", HUGEPAGES_A: "10"}), None, {},
     unresolvable(insufficient(HUGEPAGES_A))),
    ("one pod-level cpu resource fits and all init and non-init containers resources fit",
     pod(res(cpu=1, memory=1), init=(res(cpu=1, memory=1),),
         pod_level={"cpu": "3m", "memory": "2"}),
     pod(res(cpu=5, memory=19)), {}, unsched(ERR_REASON_INSUFFICIENT_MEMORY)),
]


@pytest.mark.parametrize(("p", "existing", "args", "want"),
                         [c[1:] for c in ENOUGH_REQUESTS], ids=[c[0] for c in ENOUGH_REQUESTS])
def test_enough_requests(p: Pod, existing: Pod | None, args: dict[str, Any],
                         want: Status | None) -> None:
    info = node_info(upstream_node(), *([existing] if existing else []))
    assert run_filter(new(args), p, info) == want


# TestNotEnoughRequests: makeAllocatableResources(10, 20, 1, 0, 0, 0), one pod already.
NOT_ENOUGH_PODS: list[tuple[str, Pod, Pod]] = [
    ("even without specified resources, predicate fails when there's no space for "
     "additional pod", empty_pod(), pod(res(cpu=10, memory=20))),
    ("even if both resources fit, predicate fails when there's no space for additional pod",
     pod(res(cpu=1, memory=1)), pod(res(cpu=5, memory=5))),
    ("even for equal edge case, predicate fails when there's no space for additional pod",
     pod(res(cpu=5, memory=1)), pod(res(cpu=5, memory=19))),
    ("even for equal edge case, predicate fails when there's no space for additional pod "
     "due to init container",
     pod(res(cpu=5, memory=1), init=(res(cpu=5, memory=1),)), pod(res(cpu=5, memory=19))),
]


@pytest.mark.parametrize(("p", "existing"), [c[1:] for c in NOT_ENOUGH_PODS],
                         ids=[c[0] for c in NOT_ENOUGH_PODS])
def test_not_enough_pods(p: Pod, existing: Pod) -> None:
    n = node(cpu="10m", memory="20", pods="1", ext_a="0", ephemeral_storage="0", huge_a="0")
    assert run_filter(new(), p, node_info(n, existing)) == unsched(ERR_REASON_TOO_MANY_PODS)


STORAGE: list[tuple[str, Pod, Pod, Status | None]] = [
    ("empty storage requested, and pod fits",
     pod(res(cpu=1, memory=1)), pod(res(cpu=2, memory=10)), None),
    ("storage ephemeral local storage request exceeds allocatable",
     pod(res(ephemeral=25)), pod(res(cpu=2, memory=2)),
     unresolvable(ERR_REASON_INSUFFICIENT_EPHEMERAL_STORAGE)),
    ("ephemeral local storage is sufficient",
     pod(res(ephemeral=5)), pod(res(cpu=2, memory=2, ephemeral=10)), None),
    ("pod fits", pod(res(ephemeral=10)), pod(res(cpu=2, memory=2)), None),
]


@pytest.mark.parametrize(("p", "existing", "want"), [c[1:] for c in STORAGE],
                         ids=[c[0] for c in STORAGE])
def test_storage_requests(p: Pod, existing: Pod, want: Status | None) -> None:
    assert run_filter(new(), p, node_info(upstream_node(), existing)) == want


RESTARTABLE_INIT: list[tuple[str, Pod, Status | None]] = [
    ("allow pod without restartable init containers", empty_pod(), None),
    ("allow pod with restartable init containers",
     pod(sidecars=({},)), None),
    ("allow pod if the total requested resources do not exceed the node's allocatable "
     "resources", pod({"cpu": "1m"}, sidecars=({"cpu": "1m"},)), None),
    ("not allow pod if the total requested resources do exceed the node's allocatable "
     "resources", pod({"cpu": "1m"}, sidecars=({"cpu": "2m"},)),
     unresolvable(ERR_REASON_INSUFFICIENT_CPU)),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in RESTARTABLE_INIT],
                         ids=[c[0] for c in RESTARTABLE_INIT])
def test_restartable_init_containers(p: Pod, want: Status | None) -> None:
    # makeAllocatableResources(2, 0, 1, 0, 0, 0); the SidecarContainers gate is GA.
    n = node(cpu="2m", memory="0", pods="1", ext_a="0", ephemeral_storage="0", huge_a="0")
    assert run_filter(new(), p, node_info(n)) == want


def test_too_many_pods_comes_first_and_unresolvable_wins() -> None:
    n = node(cpu="10m", memory="20", pods="1")
    info = node_info(n, pod(res(cpu=5, memory=5)))
    got = run_filter(new(), pod(res(cpu=6, memory=30)), info)
    assert got == unresolvable(ERR_REASON_TOO_MANY_PODS, ERR_REASON_INSUFFICIENT_CPU,
                               ERR_REASON_INSUFFICIENT_MEMORY)


def test_node_without_pods_allocatable_takes_no_pod() -> None:
    assert run_filter(new(), empty_pod(), node_info(node(cpu="1"))) == unsched(
        ERR_REASON_TOO_MANY_PODS)


def test_scalar_reasons_sorted_by_name() -> None:
    # Upstream follows Go map order (random); policyd sorts for a stable message.
    got = run_filter(new(), pod(res(ext_b=1, ext_a=1)), node_info(node(pods="10")))
    assert got == unresolvable(insufficient(EXT_A), insufficient(EXT_B))


def test_names_the_scheduler_does_not_keep_are_not_checked() -> None:
    # "foo" is neither native nor domain-prefixed: the scheduler's Resource type drops it.
    assert run_filter(new(), pod({"foo": "3"}), node_info(node(pods="10"))) is None


def test_ignored_resources_only_apply_to_extended_resources() -> None:
    p = pod(res(cpu=1, k8s_a=1, huge_a=1))
    plugin = new({"ignoredResources": [K8S_IO_A, HUGEPAGES_A, "cpu"],
                  "ignoredResourceGroups": ["kubernetes.io"]})
    got = run_filter(plugin, p, node_info(node(pods="10")))
    assert got == unresolvable(ERR_REASON_INSUFFICIENT_CPU, insufficient(HUGEPAGES_A),
                               insufficient(K8S_IO_A))


def test_pre_filter_never_skips_and_filter_needs_it() -> None:
    plugin = new()
    info = node_info(node(pods="1"))
    state = CycleState([info])
    assert plugin.pre_filter(state, empty_pod(), [info]) == (None, None)
    fresh = CycleState([info])
    status = plugin.filter(fresh, empty_pod(), info)
    assert status is not None and status.code is Code.ERROR


def test_module_contract() -> None:
    assert DEFAULT_WEIGHT == 1
    assert new().name == names.NODE_RESOURCES_FIT


# --- generated clusters ---------------------------------------------------------------------------

_RESOURCE_CHOICES = ("cpu", "memory", "ephemeral-storage", EXT_A, EXT_B, HUGEPAGES_A,
                     K8S_IO_A)


def _random_requests(rng: random.Random) -> Req:
    out: Req = {}
    for name in rng.sample(_RESOURCE_CHOICES, rng.randint(0, 4)):
        out[name] = str(rng.choice((0, 1, 2, 3, 5, 8)))
    return out


def _random_cluster(rng: random.Random, n_nodes: int) -> ClusterState:
    cluster = ClusterState()
    for i in range(n_nodes):
        alloc = {name: str(rng.choice((0, 1, 4, 8, 16)))
                 for name in rng.sample(_RESOURCE_CHOICES, rng.randint(0, 6))}
        if rng.random() < 0.9:
            alloc["pods"] = str(rng.randint(0, 4))
        raw = make_node(f"n{i}").raw()
        raw["status"]["allocatable"] = alloc
        cluster.upsert_node(node_from_dict(raw))
        for j in range(rng.randint(0, 3)):
            cluster.upsert_pod(pod(_random_requests(rng), name=f"e{i}-{j}", node=f"n{i}"))
    return cluster


def _random_pod(rng: random.Random, name: str) -> Pod:
    containers = [_random_requests(rng) for _ in range(rng.randint(1, 2))]
    init = tuple(_random_requests(rng) for _ in range(rng.randint(0, 1)))
    return pod(*containers, init=init, name=name)


def test_quantities_beyond_int64_are_rejected_when_decoded() -> None:
    # resource.Quantity values must fit an int64; the decoder refuses larger ones with
    # the field named, so no plugin ever sees them.
    with pytest.raises(InvalidObjectError, match=r"status\.allocatable\.memory"):
        node("big", memory="100E", pods="10")
    with pytest.raises(InvalidObjectError, match=r"resources\.requests\.memory"):
        pod({"memory": "200E"})


def test_near_int64_forms_agree() -> None:
    cluster = ClusterState([node("big", memory="9E", pods="10"), node("small", pods="10")])
    for mem in ("1", "8E", "9E"):
        assert harness.run_filter(new(), pod({"memory": mem}), cluster).columnar


# --- args ---------------------------------------------------------------------------------

def test_defaults() -> None:
    plugin = new()
    assert plugin.strategy == "LeastAllocated"
    assert [(r.name, r.weight) for r in plugin.resources] == [("cpu", 1), ("memory", 1)]
    assert new({"scoringStrategy": {"type": "MostAllocated"}}).resources == plugin.resources
    # v1 defaulting turns a missing or zero weight into 1 (upstream's internal-config
    # "resource with zero weight" error case cannot happen through v1 decoding).
    zero = new({"scoringStrategy": {"type": "MostAllocated",
                                    "resources": [{"name": "cpu", "weight": 0},
                                                  {"name": "memory"}]}})
    assert [r.weight for r in zero.resources] == [1, 1]


def _problems(args: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(PluginError) as err:
        new(args)
    assert err.value.plugin == names.NODE_RESOURCES_FIT
    return [(p.path, p.message) for p in err.value.problems]


BAD_ARGS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("resource with negative weight",
     {"scoringStrategy": {"type": "LeastAllocated",
                          "resources": [{"name": "memory", "weight": -1},
                                        {"name": "cpu", "weight": 1}]}},
     ["scoringStrategy.resources[0].weight"]),
    ("resource weight larger than MaxNodeScore",
     {"scoringStrategy": {"type": "MostAllocated",
                          "resources": [{"name": "memory", "weight": 1},
                                        {"name": "cpu", "weight": 101}]}},
     ["scoringStrategy.resources[1].weight"]),
    ("unknown strategy and bad ignored names, all reported",
     {"scoringStrategy": {"type": "Spread"},
      "ignoredResources": ["ok.com/x", "-bad"],
      "ignoredResourceGroups": ["a/b"]},
     ["ignoredResources[1]", "ignoredResourceGroups[0]", "scoringStrategy.type"]),
    ("missing strategy type",
     {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}]}},
     ["scoringStrategy.type"]),
    ("shape out of order and out of range",
     {"scoringStrategy": {"type": "RequestedToCapacityRatio",
                          "requestedToCapacityRatio": {"shape": [
                              {"utilization": 50, "score": 11},
                              {"utilization": 40, "score": 1},
                              {"utilization": 101, "score": -1}]}}},
     ["scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
      "scoringStrategy.requestedToCapacityRatio.shape[0].score",
      "scoringStrategy.requestedToCapacityRatio.shape[2].utilization",
      "scoringStrategy.requestedToCapacityRatio.shape[2].score"]),
    ("empty shape",
     {"scoringStrategy": {"type": "RequestedToCapacityRatio",
                          "requestedToCapacityRatio": {"shape": []}}},
     ["scoringStrategy.requestedToCapacityRatio.shape"]),
    ("RequestedToCapacityRatio without a shape",
     {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
     ["scoringStrategy.requestedToCapacityRatio"]),
    ("unknown fields and wrong kind",
     {"kind": "NodeResourcesBalancedAllocationArgs", "ignoredResource": ["x"],
      "scoringStrategy": {"type": "LeastAllocated", "weight": 3}},
     ["ignoredResource", "kind", "scoringStrategy.weight"]),
    ("wrong types",
     {"ignoredResources": "example.com/x",
      "scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu",
                                                                  "weight": "1"}]}},
     ["ignoredResources", "scoringStrategy.resources[0].weight"]),
]


@pytest.mark.parametrize(("args", "paths"), [c[1:] for c in BAD_ARGS],
                         ids=[c[0] for c in BAD_ARGS])
def test_bad_args(args: dict[str, Any], paths: list[str]) -> None:
    assert sorted(p for p, _ in _problems(args)) == sorted(paths)


def test_bad_args_messages() -> None:
    problems = dict(_problems({"scoringStrategy": {
        "type": "Spread", "resources": [{"name": "cpu", "weight": 101}]},
        "ignoredResourceGroups": ["a/b"]}))
    assert problems["scoringStrategy.type"] == (
        'Unsupported value: "Spread": supported values: "LeastAllocated", "MostAllocated", '
        '"RequestedToCapacityRatio"')
    assert problems["scoringStrategy.resources[0].weight"] == (
        "Invalid value: 101: resource weight of cpu not in valid range (0, 100]")
    assert problems["ignoredResourceGroups[0]"] == (
        "Invalid value: 'a/b': resource group name can't contain '/'")


def test_good_args() -> None:
    plugin = new({"apiVersion": "kubescheduler.config.k8s.io/v1",
                  "kind": "NodeResourcesFitArgs",
                  "ignoredResources": ["example.com/foo"],
                  "ignoredResourceGroups": ["example.org"],
                  "scoringStrategy": {
                      "type": "RequestedToCapacityRatio",
                      "resources": [{"name": "intel.com/foo", "weight": 3}],
                      "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                             {"utilization": 100,
                                                              "score": 10}]}}})
    assert plugin.ignored_resources == {"example.com/foo"}
    assert plugin.ignored_resource_groups == {"example.org"}
    assert plugin.shape == (ShapePoint(0, 0), ShapePoint(100, 10))


# --- scores -------------------------------------------------------------------------------

def cap(name: str, cpu: str, memory: str, **extra: str) -> Node:
    """st.MakeNode().Capacity({...}): allocatable = capacity, no pods entry."""
    return node(name, cpu=cpu, memory=memory, **extra)


def req(*containers: Req, name: str = "pod", node_name: str = "") -> Pod:
    return pod(*containers, name=name, node=node_name)


def run_scores(plugin: NodeResourcesFit, p: Pod, nodes: list[Node], existing: list[Pod],
               pre_score: bool = True) -> list[int]:
    cluster = ClusterState(nodes, existing)
    infos = cluster.node_infos()
    state = CycleState(infos, cluster)
    if pre_score:
        assert plugin.pre_score(state, p, infos) is None
    return [plugin.score(state, p, i) for i in infos]


EXT_RES = "abc.com/xyz"
EXTENDED_SET = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                {"name": EXT_RES, "weight": 1}]
REQ_3000_5000 = ({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
ZERO = {"cpu": "0", "memory": "0"}

SCORE_CASES: list[tuple[str, str, list[dict[str, Any]] | None, Pod, list[Node], list[Pod],
                        list[int]]] = [
    # least_allocated_test.go
    ("least: nothing scheduled, nothing requested", "LeastAllocated", None, empty_pod(),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], [], [100, 100]),
    ("least: nothing scheduled, resources requested, differently sized nodes",
     "LeastAllocated", None, req(*REQ_3000_5000),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], [], [37, 50]),
    ("least: no resources requested, pods scheduled", "LeastAllocated", None, empty_pod(),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")],
     [empty_pod("e1", "node1"), empty_pod("e2", "node1"), empty_pod("e3", "node2"),
      empty_pod("e4", "node2")], [100, 100]),
    ("least: no resources requested, pods scheduled with resources", "LeastAllocated", None,
     empty_pod(), [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")],
     [req({"cpu": "3000", "memory": "0"}, name="e1", node_name="node1"),
      req({"cpu": "3000", "memory": "0"}, name="e2", node_name="node1"),
      req({"cpu": "3000", "memory": "0"}, name="e3", node_name="node2"),
      req({"cpu": "3000", "memory": "5000"}, name="e4", node_name="node2")], [70, 57]),
    ("least: resources requested, pods scheduled with resources", "LeastAllocated", None,
     req(*REQ_3000_5000), [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")],
     [req({"cpu": "3000", "memory": "0"}, name="e1", node_name="node1"),
      req({"cpu": "3000", "memory": "5000"}, name="e2", node_name="node2")], [57, 45]),
    ("least: resources requested, pods scheduled with resources, differently sized nodes",
     "LeastAllocated", None, req(*REQ_3000_5000),
     [cap("node1", "10000", "20000"), cap("node2", "10000", "50000")],
     [req({"cpu": "3000", "memory": "0"}, name="e1", node_name="node1"),
      req({"cpu": "3000", "memory": "5000"}, name="e2", node_name="node2")], [57, 60]),
    ("least: requested resources exceed node capacity", "LeastAllocated", None,
     req({"cpu": "3000", "memory": "0"}),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")],
     [req({"cpu": "3000", "memory": "0"}, name="e1", node_name="node1"),
      req({"cpu": "3000", "memory": "5000"}, name="e2", node_name="node2")], [50, 25]),
    ("least: zero node resources, pods scheduled with resources", "LeastAllocated", None,
     empty_pod(), [node("node1"), node("node2")],
     [req({"cpu": "3000", "memory": "0"}, name="e1", node_name="node1"),
      req({"cpu": "3000", "memory": "5000"}, name="e2", node_name="node2")], [0, 0]),
    ("least: different weight on CPU and memory, differently sized nodes", "LeastAllocated",
     [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}], req(*REQ_3000_5000),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], [], [41, 50]),
    ("least: bypass extended resource if the pod does not request", "LeastAllocated",
     EXTENDED_SET, req(*REQ_3000_5000),
     [cap("node1", "6000", "10000"), cap("node2", "6000", "10000", **{EXT_RES: "4"})], [],
     [50, 50]),
    ("least: honor extended resource if the pod requests", "LeastAllocated", EXTENDED_SET,
     req({"cpu": "3000", "memory": "5000", EXT_RES: "2"}),
     [cap("node1", "6000", "10000", **{EXT_RES: "4"}),
      cap("node2", "6000", "10000", **{EXT_RES: "10"})], [], [50, 60]),
    ("least: if the node doesn't have a resource", "LeastAllocated",
     [{"name": EXT_RES, "weight": 2}, {"name": "cpu", "weight": 1},
      {"name": "memory", "weight": 1}], req({"cpu": "3000", "memory": "4000"}),
     [cap("node1", "6000", "10000"), cap("node2", "6000", "10000", **{EXT_RES: "4"})], [],
     [55, 55]),
    # most_allocated_test.go
    ("most: nothing scheduled, nothing requested", "MostAllocated", None, empty_pod(),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], [], [0, 0]),
    ("most: nothing scheduled, resources requested, differently sized nodes",
     "MostAllocated", None, req(*REQ_3000_5000),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], [], [62, 50]),
    ("most: no resources requested, pods scheduled with resources", "MostAllocated", None,
     empty_pod(), [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")],
     [req({"cpu": "3000", "memory": "0"}, name="e1", node_name="node1"),
      req({"cpu": "3000", "memory": "0"}, name="e2", node_name="node1"),
      req({"cpu": "3000", "memory": "0"}, name="e3", node_name="node2"),
      req({"cpu": "3000", "memory": "5000"}, name="e4", node_name="node2")], [30, 42]),
    ("most: resources requested, pods scheduled with resources", "MostAllocated", None,
     req(*REQ_3000_5000), [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")],
     [req({"cpu": "3000", "memory": "0"}, name="e1", node_name="node1"),
      req({"cpu": "3000", "memory": "5000"}, name="e2", node_name="node2")], [42, 55]),
    ("most: resources requested equal node capacity", "MostAllocated", None,
     req({"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}),
     [cap("node1", "5000", "10000"), cap("node2", "10000", "9000")], [], [95, 75]),
    ("most: different weight on CPU and memory", "MostAllocated",
     [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}], req(*REQ_3000_5000),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], [], [58, 50]),
    ("most: no resources requested, pods scheduled, nonzero request for resource",
     "MostAllocated", None, make_pod("pod").obj(),
     [cap("node1", "250m", "1000Mi"), cap("node2", "250m", "1000Mi")],
     [make_pod("e1").node("node1").obj(), make_pod("e2").node("node1").obj()], [80, 30]),
    ("most: bypass extended resource if the pod does not request", "MostAllocated",
     EXTENDED_SET, req(*REQ_3000_5000),
     [cap("node1", "6000", "10000"), cap("node2", "6000", "10000", **{EXT_RES: "4"})], [],
     [50, 50]),
    ("most: honor extended resource if the pod request", "MostAllocated", EXTENDED_SET,
     req({"cpu": "3000", "memory": "5000", EXT_RES: "2"}),
     [cap("node1", "6000", "10000", **{EXT_RES: "4"}),
      cap("node2", "6000", "10000", **{EXT_RES: "10"})], [], [50, 40]),
    ("most: if the node doesn't have a resource", "MostAllocated",
     [{"name": EXT_RES, "weight": 2}, {"name": "cpu", "weight": 1},
      {"name": "memory", "weight": 1}], req({"cpu": "3000", "memory": "4000"}),
     [cap("node1", "6000", "10000"), cap("node2", "6000", "10000", **{EXT_RES: "4"})], [],
     [45, 45]),
    # fit_test.go TestFitScore
    ("fit: MostAllocated", "MostAllocated", None, req({"cpu": "1000", "memory": "2000"}),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")],
     [req({"cpu": "2000", "memory": "4000"}, name="e1", node_name="node1"),
      req({"cpu": "1000", "memory": "2000"}, name="e2", node_name="node2")], [67, 36]),
    ("fit: LeastAllocated", "LeastAllocated", None, req({"cpu": "1000", "memory": "2000"}),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")],
     [req({"cpu": "2000", "memory": "4000"}, name="e1", node_name="node1"),
      req({"cpu": "1000", "memory": "2000"}, name="e2", node_name="node2")], [32, 63]),
    ("fit: MostAllocated with sidecar container", "MostAllocated", None,
     req({"cpu": "1000", "memory": "2000"}),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")],
     [pod({"cpu": "1000", "memory": "2000"}, sidecars=({"cpu": "1000", "memory": "2000"},),
          name="e1", node="node1"),
      req({"cpu": "1000", "memory": "2000"}, name="e2", node_name="node2")], [67, 45]),
    ("fit: LeastAllocated with sidecar container", "LeastAllocated", None,
     req({"cpu": "1000", "memory": "2000"}),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")],
     [pod({"cpu": "1000", "memory": "2000"}, sidecars=({"cpu": "1000", "memory": "2000"},),
          name="e1", node="node1"),
      req({"cpu": "1000", "memory": "2000"}, name="e2", node_name="node2")], [32, 55]),
]


@pytest.mark.parametrize("pre_score", [True, False], ids=["prescore", "no-prescore"])
@pytest.mark.parametrize(("strategy", "resources", "p", "nodes", "existing", "want"),
                         [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_least_and_most_allocated(strategy: str, resources: list[dict[str, Any]] | None,
                                  p: Pod, nodes: list[Node], existing: list[Pod],
                                  want: list[int], pre_score: bool) -> None:
    strategy_args: dict[str, Any] = {"type": strategy}
    if resources is not None:
        strategy_args["resources"] = resources
    plugin = new({"scoringStrategy": strategy_args})
    assert run_scores(plugin, p, nodes, existing, pre_score) == want


@pytest.mark.parametrize("pre_score", [True, False], ids=["prescore", "no-prescore"])
def test_score_ignores_pod_level_requests(pre_score: bool) -> None:
    """Found by the differential test (kube-scheduler v1.36 logs at -v=10): Fit's scorer
    is built without enablePodLevelResources, so it scores the containers' non-zero
    requests (2 x 100m / 200Mi here), not spec.resources.requests (2 cpu / 1Gi); the
    filter does honour them."""
    p = pod({}, {}, pod_level={"cpu": "2", "memory": "1Gi"})
    nodes = [cap("n0", "4", "2Gi"), cap("n5", "4", "3000Mi")]
    # cpu (4000-200)*100/4000 = 95; memory (2048-400)*100/2048 = 80, (3000-400)*100/3000 = 86
    assert run_scores(new(None), p, nodes, [], pre_score) == [87, 90]
    # With the same requests at container level the pod-level view is what counts.
    assert run_scores(new(None), pod({"cpu": "2", "memory": "1Gi"}), nodes, [],
                      pre_score) == [50, 57]
    # Overhead still counts (PodRequests adds it after the containers).
    with_overhead = pod({}, {}, pod_level={"cpu": "2", "memory": "1Gi"},
                        overhead={"cpu": "200m", "memory": "0"})
    assert run_scores(new(None), with_overhead, nodes, [], pre_score) == [85, 88]
    plugin = new(None)
    cluster = ClusterState([node("small", cpu="1", memory="4Gi", pods="10")], [])
    infos = cluster.node_infos()
    state = CycleState(infos, cluster)
    plugin.pre_filter(state, p, infos)
    status = plugin.filter(state, p, infos[0])
    assert status is not None and status.reasons == ("Insufficient cpu",)


def rtcr(shape: list[tuple[int, int]], resources: list[dict[str, Any]] | None = None
         ) -> NodeResourcesFit:
    strategy: dict[str, Any] = {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s}
                                               for u, s in shape]}}
    if resources is not None:
        strategy["resources"] = resources
    return new({"scoringStrategy": strategy})


LEAST_SHAPE = [(0, 10), (100, 0)]
INTEL_FOO = "intel.com/foo"
INTEL_BAR = "intel.com/bar"


def make_upstream_node(name: str, milli_cpu: int, memory: int, **extended: int) -> Node:
    """test_util.go makeNode: cpu in millicores, capacity = allocatable."""
    alloc = {"cpu": f"{milli_cpu}m", "memory": str(memory)}
    alloc.update({k.replace("_", "."): str(v) for k, v in extended.items()})
    raw = make_node(name).raw()
    raw["status"]["allocatable"] = alloc
    return node_from_dict(raw)


def _ext_node(name: str, foo: int, bar: int | None = None) -> Node:
    extra = {INTEL_FOO: foo} if bar is None else {INTEL_FOO: foo, INTEL_BAR: bar}
    raw = make_node(name).raw()
    raw["status"]["allocatable"] = {"cpu": "4000m", "memory": str(10000 * 1024 * 1024),
                                    **{k: str(v) for k, v in extra.items()}}
    return node_from_dict(raw)


RTCR_CASES: list[tuple[str, NodeResourcesFit, Pod, list[Node], list[Pod], list[int]]] = [
    # requested_to_capacity_ratio_test.go TestRequestedToCapacityRatioScoringStrategy
    ("nothing scheduled, nothing requested (default - least requested nodes have priority)",
     rtcr(LEAST_SHAPE), empty_pod(),
     [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")],
     [empty_pod("e1", "node1"), empty_pod("e2", "node1")], [100, 100]),
    ("nothing scheduled, resources requested, differently sized nodes (default - least "
     "requested nodes have priority)", rtcr(LEAST_SHAPE), req(*REQ_3000_5000),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")],
     [empty_pod("e1", "node1"), empty_pod("e2", "node1")], [38, 50]),
    ("no resources requested, pods scheduled with resources (default - least requested "
     "nodes have priority)", rtcr(LEAST_SHAPE), empty_pod(),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")],
     [req({"cpu": "3000", "memory": "5000"}, name="e1", node_name="node1"),
      req({"cpu": "3000", "memory": "5000"}, name="e2", node_name="node2")], [38, 50]),
    # fit_test.go TestFitScore
    ("fit: RequestedToCapacityRatio case1", rtcr(LEAST_SHAPE),
     req({"cpu": "3000", "memory": "5000"}),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")],
     [req({"cpu": "2000", "memory": "4000"}, name="e1", node_name="node1"),
      req({"cpu": "1000", "memory": "2000"}, name="e2", node_name="node2")], [10, 32]),
    ("fit: RequestedToCapacityRatio case2", rtcr([(0, 0), (100, 10)]),
     req({"cpu": "3000", "memory": "5000"}),
     [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")],
     [req({"cpu": "2000", "memory": "4000"}, name="e1", node_name="node1"),
      req({"cpu": "1000", "memory": "2000"}, name="e2", node_name="node2")], [95, 68]),
    # TestResourceBinPackingSingleExtended
    ("single extended: nothing scheduled, nothing requested",
     rtcr([(0, 0), (100, 1)], [{"name": INTEL_FOO, "weight": 1}]), empty_pod(),
     [_ext_node("node1", 8), _ext_node("node2", 4)], [], [0, 0]),
    ("single extended: resources requested, pods scheduled with less resources",
     rtcr([(0, 0), (100, 1)], [{"name": INTEL_FOO, "weight": 1}]), req({INTEL_FOO: "2"}),
     [_ext_node("node1", 8), _ext_node("node2", 4)], [empty_pod("e1")], [2, 5]),
    ("single extended: resources requested, pods scheduled with resources, on node with "
     "existing pod running", rtcr([(0, 0), (100, 1)], [{"name": INTEL_FOO, "weight": 1}]),
     req({INTEL_FOO: "2"}), [_ext_node("node1", 8), _ext_node("node2", 4)],
     [req({INTEL_FOO: "2"}, name="e1", node_name="node2")], [2, 10]),
    ("single extended: resources requested, pods scheduled with more resources",
     rtcr([(0, 0), (100, 1)], [{"name": INTEL_FOO, "weight": 1}]), req({INTEL_FOO: "4"}),
     [_ext_node("node1", 8), _ext_node("node2", 4)], [empty_pod("e1")], [5, 10]),
    # TestResourceBinPackingMultipleExtended
    ("multiple extended: nothing scheduled, nothing requested",
     rtcr([(0, 0), (100, 1)], [{"name": INTEL_FOO, "weight": 3},
                               {"name": INTEL_BAR, "weight": 5}]), empty_pod(),
     [_ext_node("node1", 8, 4), _ext_node("node2", 4, 8)], [], [0, 0]),
    ("multiple extended: resources requested, pods scheduled with less resources",
     rtcr([(0, 0), (100, 1)], [{"name": INTEL_FOO, "weight": 3},
                               {"name": INTEL_BAR, "weight": 5}]),
     req({INTEL_FOO: "2", INTEL_BAR: "2"}),
     [_ext_node("node1", 8, 4), _ext_node("node2", 4, 8)], [empty_pod("e1")], [4, 3]),
    ("multiple extended: resources requested, pods scheduled with resources, on node with "
     "existing pod running",
     rtcr([(0, 0), (100, 1)], [{"name": INTEL_FOO, "weight": 3},
                               {"name": INTEL_BAR, "weight": 5}]),
     req({INTEL_FOO: "2", INTEL_BAR: "2"}),
     [_ext_node("node1", 8, 4), _ext_node("node2", 4, 8)],
     [req({INTEL_FOO: "4", INTEL_BAR: "2"}, name="e1", node_name="node2")], [4, 7]),
    ("multiple extended: resources requested, pods scheduled with more resources",
     rtcr([(0, 0), (100, 1)], [{"name": INTEL_FOO, "weight": 3},
                               {"name": INTEL_BAR, "weight": 5}]),
     req({INTEL_FOO: "4", INTEL_BAR: "2"}),
     [_ext_node("node1", 8, 4), _ext_node("node2", 4, 8)], [empty_pod("e1")], [5, 5]),
]


@pytest.mark.parametrize("pre_score", [True, False], ids=["prescore", "no-prescore"])
@pytest.mark.parametrize(("plugin", "p", "nodes", "existing", "want"),
                         [c[1:] for c in RTCR_CASES], ids=[c[0] for c in RTCR_CASES])
def test_requested_to_capacity_ratio(plugin: NodeResourcesFit, p: Pod, nodes: list[Node],
                                     existing: list[Pod], want: list[int],
                                     pre_score: bool) -> None:
    assert run_scores(plugin, p, nodes, existing, pre_score) == want


BROKEN_LINEAR: list[tuple[list[tuple[int, int]], list[tuple[int, int]]]] = [
    ([(10, 1), (90, 9)],
     [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9),
      (99, 9), (100, 9), (110, 9)]),
    ([(0, 2), (40, 10), (100, 0)],
     [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
    ([(0, 2), (40, 2), (100, 2)],
     [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
]


@pytest.mark.parametrize(("points", "assertions"), BROKEN_LINEAR)
def test_broken_linear_function(points: list[tuple[int, int]],
                                assertions: list[tuple[int, int]]) -> None:
    f = broken_linear_function([ShapePoint(u, s) for u, s in points])
    assert [(p, f(p)) for p, _ in assertions] == assertions


def test_broken_linear_function_truncates_toward_zero_on_a_falling_segment() -> None:
    # 10 + (0 - 10) * 1 / 3: Go truncates -3.33 to -3, giving 7 (flooring would give 6).
    f = broken_linear_function([ShapePoint(0, 10), ShapePoint(3, 0)])
    assert f(1) == 7


def test_requested_to_capacity_ratio_rounds_half_away_from_zero() -> None:
    # cpu 25% -> 25, memory 100% -> 100: (25 + 100) / 2 = 62.5 -> 63 (round() gives 62).
    plugin = rtcr([(0, 0), (100, 10)])
    p = req({"cpu": "1", "memory": "4"})
    assert run_scores(plugin, p, [cap("n", "4", "4")], []) == [63]


# --- columnar paths (NodeTable) -------------------------------------------------------------

VECTOR_ARGS: list[dict[str, Any] | None] = [
    None,
    {"ignoredResources": [EXT_B]},
    {"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1},
        {"name": EXT_A, "weight": 5}, {"name": "ephemeral-storage", "weight": 2}]}},
    {"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": HUGEPAGES_A, "weight": 2}, {"name": "cpu", "weight": 1},
        {"name": "pods", "weight": 1}, {"name": K8S_IO_A, "weight": 7}]}},
    {"scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 2}, {"name": EXT_A}],
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                               {"utilization": 30, "score": 3},
                                               {"utilization": 70, "score": 9},
                                               {"utilization": 100, "score": 0}]}}},
]


@pytest.mark.parametrize("args", VECTOR_ARGS)
@pytest.mark.parametrize("seed", range(4))
def test_columnar_forms_match_reference_forms(seed: int, args: dict[str, Any] | None) -> None:
    import numpy as np

    rng = random.Random(seed)
    cluster = _random_cluster(rng, 50)
    plugin = new(args)
    for round_ in range(10):
        n = len(cluster.node_infos())
        subset = sorted(rng.sample(range(n), n // 2)) if round_ % 2 else None
        p = _random_pod(rng, f"v{round_}")
        assert harness.run_filter(plugin, p, cluster, subset).columnar
        assert harness.run_score(plugin, p, cluster, subset).columnar
        # Without PreScore (disabled in a profile) both forms compute the request.
        table = cluster.table()
        idx = np.arange(n, dtype=np.int64)
        state = CycleState(table.infos, cluster)
        vector = plugin.score_vector(state, p, table, idx)
        assert vector is not None
        assert vector.tolist() == [plugin.score(state, p, i) for i in table.infos]
        # Every node's Filter status at once, reasons and codes included (an
        # unschedulable pod's diagnosis), on the nodes it picks.
        plugin.pre_filter(state, p, table.infos)
        rows = idx if subset is None else np.array(subset, np.int64)
        assert plugin.filter_statuses(state, p, table, rows) == [
            plugin.filter(state, p, table.infos[i]) for i in rows.tolist()]
        cluster.upsert_pod(pod(_random_requests(rng), name=f"y{round_}",
                               node=rng.choice(table.infos).name))
        if round_ % 4 == 3:  # nodes leave and change: the table must follow
            cluster.remove_node(rng.choice(table.infos).name)
        if round_ % 5 == 4:
            raw = make_node(rng.choice(cluster.node_infos()).name).raw()
            raw["status"]["allocatable"] = {"pods": "9", "cpu": "3", EXT_A: "2"}
            cluster.upsert_node(node_from_dict(raw))


def test_vector_paths_decline_values_beyond_exact_range() -> None:
    import numpy as np

    cluster = ClusterState([node("big", memory="1E", pods="10")])
    table = cluster.table()
    idx = np.arange(1, dtype=np.int64)
    plugin = new()
    p = pod({"memory": "1"})
    state = CycleState(table.infos, cluster)
    plugin.pre_filter(state, p, table.infos)
    plugin.pre_score(state, p, table.infos)
    assert plugin.score_vector(state, p, table, idx) is None
    assert plugin.score(state, p, table.infos[0]) == 99
    p = pod({"memory": "2E"})  # an int64 comparison is still exact
    plugin.pre_filter(state, p, table.infos)
    mask = plugin.filter_mask(state, p, table, idx)
    assert mask is not None and mask.tolist() == [False]
    assert plugin.filter_statuses(state, p, table, idx) == [
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient memory",))]
    with pytest.raises(InvalidObjectError):  # beyond int64: refused when decoded
        pod({"memory": "10E"})


def test_scale_down_hint_reads_resize_status() -> None:
    """isSchedulableAfterPodScaleDown reads requests with UseStatusResources (and the
    pod-level status under InPlacePodLevelResourcesVerticalScaling): a bound pod whose
    pod-level spec stays at 2 cpu but whose actuated cpu drops from 3 to 1 frees room."""
    def resized(actual: str) -> Pod:
        raw = make_pod("bound").uid("b").node("n").pod_requests(cpu="2").raw()
        raw["status"]["resources"] = {"requests": {"cpu": actual}}
        return pod_from_dict(raw)

    pending = make_pod("p").req(cpu="1").obj()
    gate_off = with_settings([("InPlacePodLevelResourcesVerticalScaling", False)])
    for plugin, want in ((new(), QUEUE), (new(features=gate_off), QUEUE_SKIP)):
        hint = plugin.events_to_register()[0].hint
        assert hint is not None
        assert hint(pending, resized("3"), resized("1")) == want
