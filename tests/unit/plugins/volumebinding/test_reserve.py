"""Reserve and Unreserve: the chosen PVs and claims to provision are assumed into
the cluster's storage caches, so the next pod's cycle does not take them, and
released again."""

from __future__ import annotations

from policyd.engine.cycle import reserve, schedule_one
from policyd.framework.runtime import Framework
from policyd.plugins.volumebinding.binder import ERR_REASON_BIND_CONFLICT
from policyd.plugins.volumebinding.plugin import STATE_KEY, VolumeBinding, new
from tests.builders import make_pod
from tests.unit.plugins.volumebinding.storage import (
    cluster,
    cycle,
    info,
    node,
    pv,
    pvc,
    storage_class,
)


def framework(plugin: VolumeBinding) -> Framework:
    return Framework("p", pre_filter=[plugin], filter=[plugin], reserve=[plugin],
                     pre_bind=[plugin])


def test_reserve_assumes_the_pv_bound_to_the_claim() -> None:
    claim = pvc("a")
    state = cluster(node("n1"), objects=(claim, pv("v1", node="n1")))
    fw = framework(new())
    pod = make_pod("p").pvc("a").obj()
    result = schedule_one(fw, pod, state)
    state.assume(pod, "n1")
    assert reserve(fw, result).node == "n1"
    assumed = state.storage.pvs.get("v1")
    assert assumed is not None and state.storage.pvs.is_assumed("v1")
    assert assumed["spec"]["claimRef"] == {
        "kind": "PersistentVolumeClaim", "namespace": "default", "name": "a",
        "uid": "uid-a", "apiVersion": "v1",
        "resourceVersion": claim["metadata"]["resourceVersion"]}
    assert assumed["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    # The API server's version is untouched.
    api = state.storage.pvs.api_object("v1")
    assert api is not None and "claimRef" not in api["spec"]


def test_the_next_pod_does_not_get_the_same_pv() -> None:
    state = cluster(node("n1"), objects=(pvc("a"), pvc("b"), pv("v1", node="n1")))
    fw = framework(new())
    first, second = make_pod("p1").pvc("a").obj(), make_pod("p2").pvc("b").obj()
    result = schedule_one(fw, first, state)
    state.assume(first, "n1")
    reserve(fw, result)
    again = schedule_one(fw, second, state)
    assert again.node is None
    assert again.message == f"0/1 nodes are available: 1 {ERR_REASON_BIND_CONFLICT}."


def test_unreserve_restores_the_caches() -> None:
    state = cluster(node("n1"), objects=(pvc("a"), pvc("b"), pv("v1", node="n1")))
    fw = framework(new())
    first, second = make_pod("p1").pvc("a").obj(), make_pod("p2").pvc("b").obj()
    result = schedule_one(fw, first, state)
    state.assume(first, "n1")
    reserve(fw, result)
    assert result.cycle_state is not None
    fw.run_unreserve(result.cycle_state, first, "n1")
    fw.run_unreserve(result.cycle_state, first, "n1")  # idempotent
    state.forget(first)
    assert not state.storage.pvs.is_assumed("v1")
    assert schedule_one(fw, second, state).node == "n1"


def test_prebound_pv_is_assumed_without_the_controller_annotation() -> None:
    claim = pvc("a")
    prebound = pv("v1", node="n1", claim=claim, claim_uid=False)
    state = cluster(node("n1"), objects=(claim, prebound))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("a").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    assert plugin.filter(cs, pod, info(state, "n1")) is None
    assert plugin.reserve(cs, pod, "n1") is None
    assumed = state.storage.pvs.get("v1")
    assert assumed is not None and assumed["spec"]["claimRef"]["uid"] == "uid-a"
    assert "annotations" not in assumed["metadata"]


def test_claim_to_provision_is_assumed_with_the_selected_node() -> None:
    state = cluster(node("n1"), objects=(pvc("a"),), classes=(
        storage_class("wait", provisioner="csi.example.com"),))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("a").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    plugin.filter(cs, pod, info(state, "n1"))
    assert plugin.reserve(cs, pod, "n1") is None
    claim = state.storage.pvcs.get("default/a")
    assert claim is not None
    assert claim["metadata"]["annotations"] == {"volume.kubernetes.io/selected-node": "n1"}
    assert not cs.read(STATE_KEY).all_bound
    plugin.unreserve(cs, pod, "n1")
    assert not state.storage.pvcs.is_assumed("default/a")


def test_all_bound_pod_has_nothing_to_assume() -> None:
    state = cluster(node("n1"), objects=(pvc("a", volume="v1", bound=True),
                                         pv("v1", node="n1", phase="Bound")))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("a").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    plugin.filter(cs, pod, info(state, "n1"))
    assert plugin.reserve(cs, pod, "n1") is None
    assert cs.read(STATE_KEY).all_bound
    assert not state.storage.pvs.is_assumed("v1")


def test_stale_pv_fails_reserve_and_leaves_nothing_assumed() -> None:
    state = cluster(node("n1"), objects=(pvc("a"), pvc("b"), pv("v1", node="n1"),
                                         pv("v2", "2Gi", node="n1")))
    plugin = new()
    fw = framework(plugin)
    pod = make_pod("p").pvc("a").pvc("b").obj()
    result = schedule_one(fw, pod, state)
    # v2 changes on the API server after the cycle chose it: the assumption of v1
    # must be undone when v2's fails.
    newer = pv("v2", "2Gi", node="n1")
    newer["metadata"]["resourceVersion"] = "999999"
    state.storage.upsert("PersistentVolume", newer)
    state.assume(pod, "n1")
    failed = reserve(fw, result)
    assert failed.node is None and failed.error is not None
    assert failed.error.message.startswith('running Reserve plugin "VolumeBinding": ')
    assert not state.storage.pvs.is_assumed("v1")
    assert not state.storage.pvs.is_assumed("v2")


def test_reserve_without_pre_filter_is_an_error_and_unreserve_is_harmless() -> None:
    state = cluster(node("n1"))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("a").obj()
    status = plugin.reserve(cs, pod, "n1")
    assert status is not None and status.message.endswith("not found")
    plugin.unreserve(cs, pod, "n1")


# PreBindPreFlight: whether PreBind will have work, decided from what Reserve kept.

def test_pre_flight_says_pre_bind_works_for_a_claim_to_bind_or_provision() -> None:
    state = cluster(node("n1"), objects=(pvc("a"), pvc("b"), pv("v1", node="n1")),
                    classes=(storage_class("wait", provisioner="csi.example.com"),))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("a").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    plugin.filter(cs, pod, info(state, "n1"))
    assert plugin.reserve(cs, pod, "n1") is None
    assert plugin.pre_bind_pre_flight(cs, pod, "n1") is None


def test_pre_flight_skips_a_pod_whose_claims_are_all_bound() -> None:
    state = cluster(node("n1"), objects=(pvc("a", volume="v1", bound=True),
                                         pv("v1", node="n1", phase="Bound")))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("a").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    plugin.filter(cs, pod, info(state, "n1"))
    plugin.reserve(cs, pod, "n1")
    status = plugin.pre_bind_pre_flight(cs, pod, "n1")
    assert status is not None and status.is_skip


def test_pre_flight_without_a_decision_for_the_node_is_an_error() -> None:
    state = cluster(node("n1"), node("n2"), objects=(pvc("a"), pv("v1", node="n1")))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("a").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    plugin.filter(cs, pod, info(state, "n1"))
    plugin.reserve(cs, pod, "n1")
    status = plugin.pre_bind_pre_flight(cs, pod, "n2")
    assert status is not None and status.message == 'no pod volume found for node "n2"'
    # Without PreFilter's state: upstream's CycleState read error.
    bare = cycle(state)
    missing = plugin.pre_bind_pre_flight(bare, pod, "n1")
    assert missing is not None
    assert missing.message == 'error reading "VolumeBinding" from cycleState: not found'
