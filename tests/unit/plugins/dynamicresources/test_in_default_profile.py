"""DynamicResources registered where kube-scheduler v1.36's default profile has it:
after InterPodAffinity and before DefaultPreemption (so PostFilter frees an idle claim
before evicting a pod), weight 2, in place of policyd's former ResourceClaimUnsupported."""

from __future__ import annotations

import pytest

from policyd.config.plugins import default_framework
from policyd.engine.cycle import reserve, schedule_one
from policyd.features import with_settings
from policyd.model.cluster import ClusterState
from policyd.plugins import names, registry
from tests.builders import make_node, make_pod
from tests.unit.plugins.dynamicresources import scene

PREEMPTION = ", preemption: "


def test_registered_with_upstreams_weight_and_points() -> None:
    spec = registry.builtin(names.DYNAMIC_RESOURCES)
    assert spec is not None and spec.default_weight == 2
    assert spec.extension_points == {
        "preEnqueue", "preFilter", "filter", "postFilter", "score", "reserve", "preBind"}
    assert names.DYNAMIC_RESOURCES not in names.UPSTREAM_NOT_IMPLEMENTED
    assert registry.builtin("ResourceClaimUnsupported") is None


def test_in_the_default_profile_where_upstream_has_it() -> None:
    order = registry.DEFAULT_PROFILE_ORDER
    assert order.index(names.INTER_POD_AFFINITY) < order.index(
        names.DYNAMIC_RESOURCES) < order.index(names.NODE_RESOURCES_BALANCED_ALLOCATION)
    fw = default_framework([])
    post = [p.name for p in fw.post_filter_plugins]
    assert post[0] == names.DYNAMIC_RESOURCES  # before DefaultPreemption, if present
    assert [(s.name, s.weight) for s in fw.scores if s.name == names.DYNAMIC_RESOURCES] == [
        (names.DYNAMIC_RESOURCES, 2)]


def _tail_ok(message: str, head: str) -> bool:
    # DefaultPreemption, once registered, adds its own part after ours.
    return message == head or message.startswith(head + PREEMPTION)


@pytest.mark.parametrize("reference", [False, True])
def test_the_default_profile_refuses_a_pod_whose_claim_is_missing(reference: bool) -> None:
    state = ClusterState([make_node("n1").obj(), make_node("n2").obj()])
    pod = make_pod("gpu-job").resource_claim("gpu", claim="c1").obj()
    r = schedule_one(default_framework([]), pod, state, reference=reference)
    assert r.node is None and r.unschedulable
    assert _tail_ok(r.message, '0/2 nodes are available: could not find ResourceClaim '
                               '"default/c1". no new claims to deallocate')
    assert r.diagnosis.unschedulable_plugins == {names.DYNAMIC_RESOURCES}


@pytest.mark.parametrize("reference", [False, True])
def test_the_default_profile_says_it_for_every_unschedulable_pod(reference: bool) -> None:
    state = ClusterState([make_node("n1").capacity(cpu="2", memory="4Gi", pods="10").obj()])
    r = schedule_one(default_framework([]), make_pod().req(cpu="3").obj(), state,
                     reference=reference)
    assert _tail_ok(r.message, "0/1 nodes are available: 1 Insufficient cpu. "
                               "no new claims to deallocate")


def test_a_missing_pvc_is_named_before_the_claim_as_upstream_orders_the_plugins() -> None:
    state = ClusterState([make_node("n1").obj()])
    pod = make_pod().pvc("data").resource_claim("gpu", claim="c1").obj()
    r = schedule_one(default_framework([]), pod, state)
    # The volume plugins' PreFilters run before DynamicResources', which then never
    # runs: its PostFilter errs ("not found") and stops the others, as upstream's does.
    assert r.message == '0/1 nodes are available: persistentvolumeclaim "data" not found. not found'


@pytest.mark.parametrize("reference", [False, True])
def test_the_default_profile_places_a_pod_where_its_device_is(reference: bool) -> None:
    state = scene.cluster(scene.nodes("n1", "n2", "n3"), classes=[scene.gpu_class()],
                          slices=[scene.gpu_slice("n2", "g0")], claims=[scene.claim("c1")])
    fw = default_framework([])
    r = schedule_one(fw, scene.pod_using("p", "c1").obj(), state, reference=reference)
    assert r.node == "n2"
    # Reserved, its device is in flight: the next pod's claim finds no other.
    reserve(fw, r)
    scene.add_claim(state, scene.claim("c2"))
    r2 = schedule_one(fw, scene.pod_using("q", "c2").obj(), state, reference=reference)
    assert r2.node is None
    assert _tail_ok(r2.message, "0/3 nodes are available: 3 cannot allocate all claims. "
                                "still not schedulable")


@pytest.mark.parametrize("reference", [False, True])
def test_the_default_profile_places_an_extended_resource_where_dra_serves_it(
        reference: bool) -> None:
    """DRAExtendedResource: NodeResourcesFit leaves `example.com/gpu` to DynamicResources
    on nodes that do not list it, which allocates it where a slice has a device; the
    gate off, every node is `Insufficient example.com/gpu`."""
    cls = scene.gpu_class()
    cls["spec"]["extendedResourceName"] = "example.com/gpu"
    state = scene.cluster(scene.nodes("n1", "n2", "n3"), classes=[cls],
                          slices=[scene.gpu_slice("n2", "g0")])
    pod = make_pod("p").req({"cpu": "100m", "example.com/gpu": "1"}).obj()
    r = schedule_one(default_framework([]), pod, state, reference=reference)
    assert r.node == "n2"
    two = make_pod("q").req({"cpu": "100m", "example.com/gpu": "2"}).obj()
    r2 = schedule_one(default_framework([]), two, state, reference=reference)
    assert _tail_ok(r2.message, "0/3 nodes are available: 3 cannot allocate all claims. "
                                "still not schedulable")
    off = default_framework([], features=with_settings([("DRAExtendedResource", False)]))
    r3 = schedule_one(off, pod, state, reference=reference)
    assert r3.node is None
    assert _tail_ok(r3.message, "0/3 nodes are available: 3 Insufficient example.com/gpu. "
                                "no new claims to deallocate")
