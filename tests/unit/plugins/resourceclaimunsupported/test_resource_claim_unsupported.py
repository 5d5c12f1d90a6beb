"""ResourceClaimUnsupported: policyd's own stand-in for DynamicResources (issue 12,
item 4): a pod with DRA claims is refused, naming the claim, never bound blindly."""

from __future__ import annotations

import pytest

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.framework import Code, CycleState, PluginError
from policyd.model.cluster import ClusterState
from policyd.plugins import names, registry
from policyd.plugins.resourceclaimunsupported.resource_claim_unsupported import new
from tests.builders import PodBuilder, make_node, make_pod

TAIL = "policyd has no DynamicResources plugin yet (see README, known limits)"


def test_skips_pod_without_claims() -> None:
    names_, status = new().pre_filter(CycleState(), make_pod().obj(), [])
    assert names_ is None
    assert status is not None and status.code is Code.SKIP


@pytest.mark.parametrize(("pod", "reason"), [
    (make_pod().resource_claim("gpu", claim="shared-gpu"),
     f'pod uses ResourceClaim "shared-gpu": {TAIL}'),
    (make_pod().resource_claim("gpu", template="single-gpu"),
     f'pod uses ResourceClaim "gpu" (from ResourceClaimTemplate "single-gpu"): {TAIL}'),
    # The claim controller created the template's claim: its generated name is used.
    (make_pod("job").resource_claim("gpu", template="single-gpu").set(
        "status.resourceClaimStatuses", [{"name": "gpu", "resourceClaimName": "job-gpu-x7"}]),
     f'pod uses ResourceClaim "job-gpu-x7": {TAIL}'),
    # Several: the first is named.
    (make_pod().resource_claim("a", claim="first").resource_claim("b", template="t"),
     f'pod uses ResourceClaim "first": {TAIL}'),
])
def test_rejects_pod_with_claim_naming_it(pod: PodBuilder, reason: str) -> None:
    names_, status = new().pre_filter(CycleState(), pod.obj(), [])
    assert names_ is None
    assert status is not None
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (reason,)


def test_container_claims_alone_are_not_pod_claims() -> None:
    # resources.claims only refers to spec.resourceClaims; without them nothing to do.
    pod = make_pod().set("spec.containers", [{"name": "c", "resources": {
        "claims": [{"name": "gpu"}]}}]).obj()
    _, status = new().pre_filter(CycleState(), pod, [])
    assert status is not None and status.code is Code.SKIP


def test_in_the_default_profile_where_dynamic_resources_stands() -> None:
    order = registry.DEFAULT_PROFILE_ORDER
    assert names.RESOURCE_CLAIM_UNSUPPORTED in order
    assert order.index(names.INTER_POD_AFFINITY) < order.index(
        names.RESOURCE_CLAIM_UNSUPPORTED) < order.index(
        names.NODE_RESOURCES_BALANCED_ALLOCATION)
    assert names.RESOURCE_CLAIM_UNSUPPORTED not in names.UPSTREAM_NOT_IMPLEMENTED


@pytest.mark.parametrize("reference", [False, True])
def test_the_cycle_refuses_it_on_every_node(reference: bool) -> None:
    state = ClusterState([make_node("n1").obj(), make_node("n2").obj()])
    pod = make_pod("gpu-job").resource_claim("gpu", claim="c1").obj()
    r = schedule_one(default_framework([]), pod, state, reference=reference)
    assert r.node is None and r.unschedulable
    assert r.message == (f'0/2 nodes are available: pod uses ResourceClaim "c1": {TAIL}. '
                         "preemption: 0/2 nodes are available: 2 Preemption is not "
                         "helpful for scheduling.")
    assert r.diagnosis.unschedulable_plugins == {names.RESOURCE_CLAIM_UNSUPPORTED}


def test_a_missing_pvc_is_named_before_the_claim_as_upstream_orders_the_plugins() -> None:
    state = ClusterState([make_node("n1").obj()])
    pod = make_pod().pvc("data").resource_claim("gpu", claim="c1").obj()
    r = schedule_one(default_framework([]), pod, state)
    # The volume plugins' PreFilters run before DynamicResources' place.
    assert r.message == ('0/1 nodes are available: persistentvolumeclaim "data" not found. '
                         "preemption: 0/1 nodes are available: 1 Preemption is not "
                         "helpful for scheduling.")



def test_factory() -> None:
    assert new(None).name == names.RESOURCE_CLAIM_UNSUPPORTED
    assert registry.builtin(names.RESOURCE_CLAIM_UNSUPPORTED) is not None
    with pytest.raises(PluginError):
        new({"x": 1})
