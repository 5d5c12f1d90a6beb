"""VolumeBinding's PreFilter and Filter (upstream's volume_binding_test.go and the
FindPodVolumes cases of binder_test.go, in our own data)."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.engine.cycle import schedule_one
from policyd.framework.runtime import Framework
from policyd.framework.status import Code, Status
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from policyd.plugins.volumebinding.plugin import (
    ERR_UNBOUND_IMMEDIATE,
    STATE_KEY,
    VolumeBinding,
    VolumeBindingState,
    new,
)
from tests.builders import make_pod
from tests.unit.plugins.volumebinding.storage import (
    ZONE,
    capacity,
    cluster,
    csi_driver,
    cycle,
    info,
    node,
    pv,
    pvc,
    storage_class,
)


def run(state: ClusterState, pod: Pod, plugin: VolumeBinding | None = None
        ) -> tuple[Status | None, dict[str, Status | None], Any]:
    """PreFilter, then Filter on every node: (PreFilter status, node -> Filter status,
    the plugin's cycle data)."""
    plugin = plugin or new()
    cs = cycle(state)
    _, pre = plugin.pre_filter(cs, pod, cs.all_nodes)
    if pre is not None:
        return pre, {}, cs.get(STATE_KEY)
    verdicts = {n.name: plugin.filter(cs, pod, n) for n in cs.all_nodes}
    return None, verdicts, cs.get(STATE_KEY)


def chosen(data: VolumeBindingState, node_name: str) -> dict[str, str]:
    """claim -> PV name Filter chose on the node."""
    volumes = data.by_node[node_name]
    return {b.pvc["metadata"]["name"]: b.pv["metadata"]["name"]
            for b in volumes.static_bindings}


def rejected(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


# -- PreFilter

def test_pod_without_claims_is_skipped_with_empty_state() -> None:
    pre, _, data = run(cluster(node("n1")), make_pod("p").obj())
    assert pre is not None and pre.is_skip
    assert isinstance(data, VolumeBindingState) and data.claims is None


@pytest.mark.parametrize(("claims", "pod", "message"), [
    ((), make_pod("p").pvc("a"), 'persistentvolumeclaim "a" not found'),
    ((pvc("a", volume="pv-a", bound=True),), make_pod("p").pvc("a").pvc("b"),
     'persistentvolumeclaim "b" not found'),
    ((pvc("a", volume="pv-a", status={"phase": "Lost"}),), make_pod("p").pvc("a"),
     'persistentvolumeclaim "a" bound to non-existent persistentvolume "pv-a"'),
    ((pvc("a", metadata={"name": "a", "namespace": "default", "uid": "u",
                         "deletionTimestamp": "2026-01-01T00:00:00Z"}),),
     make_pod("p").pvc("a"), 'persistentvolumeclaim "a" is being deleted'),
    ((), make_pod("p").set("spec.volumes", [{"name": "data", "ephemeral": {}}]),
     'waiting for ephemeral volume controller to create the persistentvolumeclaim '
     '"p-data"'),
    ((pvc("p-data"),), make_pod("p").set("spec.volumes", [{"name": "data", "ephemeral": {}}]),
     "PVC default/p-data was not created for pod default/p (pod is not owner)"),
    ((pvc("a", "fast"),), make_pod("p").pvc("a"), ERR_UNBOUND_IMMEDIATE),
    # No class, or a class that does not exist, binds immediately.
    ((pvc("a", None),), make_pod("p").pvc("a"), ERR_UNBOUND_IMMEDIATE),
    ((pvc("a", "gone"),), make_pod("p").pvc("a"), ERR_UNBOUND_IMMEDIATE),
    # Pre-bound (volumeName set, binding not complete) counts as immediate.
    ((pvc("a", volume="pv-a"), pv("pv-a")), make_pod("p").pvc("a"), ERR_UNBOUND_IMMEDIATE),
])
def test_pre_filter_rejections_are_upstreams(claims: tuple[dict[str, Any], ...],
                                             pod: Any, message: str) -> None:
    pre, _, _ = run(cluster(node("n1"), objects=claims), pod.obj())
    assert pre == rejected(message)


def test_ephemeral_claim_owned_by_the_pod_is_used() -> None:
    pod = make_pod("p").uid("pod-uid").set(
        "spec.volumes", [{"name": "data", "ephemeral": {}}]).obj()
    claim = pvc("p-data", metadata={"name": "p-data", "namespace": "default", "uid": "c",
                                     "ownerReferences": [{"uid": "pod-uid",
                                                          "controller": True}]})
    pre, verdicts, data = run(cluster(node("n1"), objects=(claim, pv("v1", node="n1"))), pod)
    assert pre is None and verdicts == {"n1": None}
    assert chosen(data, "n1") == {"p-data": "v1"}


def test_class_without_binding_mode_is_an_error() -> None:
    state = cluster(node("n1"), objects=(pvc("a", "odd"),),
                    classes=(storage_class("odd", mode=None),))
    pre, _, _ = run(state, make_pod("p").pvc("a").obj())
    assert pre == Status.error('VolumeBindingMode not set for StorageClass "odd"')


def test_no_node_restriction_in_v136() -> None:
    state = cluster(node("n1"), node("n2"),
                    objects=(pvc("a", volume="v1", bound=True), pv("v1", node="n1")))
    cs = cycle(state)
    names, status = new().pre_filter(cs, make_pod("p").pvc("a").obj(), cs.all_nodes)
    assert names is None and status is None


# -- Filter: bound claims

def test_bound_claims_pv_must_fit_the_node() -> None:
    state = cluster(node("n1"), node("n2"),
                    objects=(pvc("a", volume="v1", bound=True), pv("v1", node="n1")))
    _, verdicts, _ = run(state, make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": None, "n2": rejected(ERR_REASON_NODE_CONFLICT)}


def test_bound_claim_whose_pv_is_gone() -> None:
    state = cluster(node("n1"), objects=(pvc("a", volume="v1", bound=True),))
    _, verdicts, _ = run(state, make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": rejected(ERR_REASON_PV_NOT_EXIST)}


def test_bound_conflict_and_unbound_conflict_both_reported_in_upstreams_order() -> None:
    state = cluster(node("n2"), objects=(pvc("a", volume="v1", bound=True),
                                         pv("v1", node="n1"), pvc("b")))
    _, verdicts, _ = run(state, make_pod("p").pvc("a").pvc("b").obj())
    assert verdicts == {"n2": rejected(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)}


def test_malformed_pv_affinity_of_a_bound_claim_names_the_pv() -> None:
    bad = pv("v1", affinity={"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "k", "operator": "Near", "values": ["x"]}]}]}})
    state = cluster(node("n1"), objects=(pvc("a", volume="v1", bound=True), bad))
    _, verdicts, _ = run(state, make_pod("p").pvc("a").obj())
    status = verdicts["n1"]
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons[0].startswith("PersistentVolume v1: ")
    assert "Near" in status.reasons[0]


# -- Filter: static binding (FindMatchingVolume)

def test_smallest_fitting_pv_is_chosen() -> None:
    objects = (pvc("a", size="5Gi"), pv("big", "100Gi", node="n1"),
               pv("small", "4Gi", node="n1"), pv("right", "6Gi", node="n1"),
               pv("other-node", "5Gi", node="n2"))
    _, verdicts, data = run(cluster(node("n1"), objects=objects),
                            make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": None}
    assert chosen(data, "n1") == {"a": "right"}
    assert data.has_static_bindings


def test_prebound_pv_is_preferred_to_a_smaller_one() -> None:
    claim = pvc("a", size="1Gi")
    objects = (claim, pv("small", "1Gi", node="n1"), pv("mine", "10Gi", node="n1", claim=claim))
    _, _, data = run(cluster(node("n1"), objects=objects), make_pod("p").pvc("a").obj())
    assert chosen(data, "n1") == {"a": "mine"}


def test_prebound_pv_that_misses_the_node_means_no_match() -> None:
    # Upstream returns no PV at all, even though another would fit.
    claim = pvc("a")
    objects = (claim, pv("free", node="n1"), pv("mine", node="n2", claim=claim))
    _, verdicts, _ = run(cluster(node("n1"), objects=objects), make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": rejected(ERR_REASON_BIND_CONFLICT)}


@pytest.mark.parametrize("candidate", [
    pv("x", "1Gi", node="n1", modes=("ReadOnlyMany",)),
    pv("x", "1Gi", node="n1", phase="Released"),
    pv("x", "512Mi", node="n1"),
    pv("x", "1Gi", "other", node="n1"),
    pv("x", "1Gi", node="n2"),
    pv("x", "1Gi", node="n1", claim=pvc("someone-else")),
    pv("x", "1Gi", node="n1", labels={"tier": "slow"}),
])
def test_pvs_that_do_not_fit_the_claim_are_not_chosen(candidate: dict[str, Any]) -> None:
    claim = pvc("a", spec={"accessModes": ["ReadWriteOnce"], "storageClassName": "wait",
                           "resources": {"requests": {"storage": "1Gi"}},
                           "selector": {"matchLabels": {"tier": "fast"}}})
    if "labels" not in candidate["metadata"]:
        candidate["metadata"]["labels"] = {"tier": "fast"}
    _, verdicts, _ = run(cluster(node("n1"), objects=(claim, candidate)),
                         make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": rejected(ERR_REASON_BIND_CONFLICT)}


def test_volume_mode_and_deletion_exclude_a_pv() -> None:
    block = pv("block", node="n1")
    block["spec"]["volumeMode"] = "Block"
    deleting = pv("deleting", node="n1")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    _, verdicts, _ = run(cluster(node("n1"), objects=(pvc("a"), block, deleting)),
                         make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": rejected(ERR_REASON_BIND_CONFLICT)}


def test_each_claim_gets_its_own_pv_smallest_request_first() -> None:
    objects = (pvc("big", size="8Gi"), pvc("small", size="1Gi"),
               pv("v8", "8Gi", node="n1"), pv("v10", "10Gi", node="n1"))
    _, verdicts, data = run(cluster(node("n1"), objects=objects),
                            make_pod("p").pvc("big").pvc("small").obj())
    # "small" goes first and takes v8 (smallest that fits); "big" then takes v10.
    assert verdicts == {"n1": None}
    assert chosen(data, "n1") == {"small": "v8", "big": "v10"}


def test_second_claim_without_a_pv_left_rejects_the_node() -> None:
    objects = (pvc("a"), pvc("b"), pv("only", node="n1"))
    _, verdicts, _ = run(cluster(node("n1"), objects=objects),
                         make_pod("p").pvc("a").pvc("b").obj())
    assert verdicts == {"n1": rejected(ERR_REASON_BIND_CONFLICT)}


def test_malformed_pv_is_ignored_not_raised() -> None:
    bad = pv("bad", "lots", node="n1")
    _, verdicts, _ = run(cluster(node("n1"), objects=(pvc("a"), bad, pv("ok", node="n1"))),
                         make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": None}


def test_malformed_claim_request_names_the_claim() -> None:
    pre, _, _ = run(cluster(node("n1"), objects=(pvc("a", size="lots"),)),
                    make_pod("p").pvc("a").obj())
    assert pre is not None and pre.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert pre.reasons[0].startswith(
        "PersistentVolumeClaim default/a: spec.resources.requests.storage: ")


# -- Filter: dynamic provisioning

def provisioning(*objects: dict[str, Any], allowed: list[dict[str, Any]] | None = None,
                 provisioner: str = "csi.example.com") -> ClusterState:
    return cluster(node("n1", "a"), node("n2", "b"), objects=objects, classes=(
        storage_class("wait", provisioner=provisioner, allowed=allowed),))


def test_claim_without_a_pv_is_provisioned() -> None:
    _, verdicts, data = run(provisioning(pvc("a")), make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": None, "n2": None}
    assert [p.pvc["metadata"]["name"] for p in data.by_node["n1"].dynamic_provisions] == ["a"]
    assert not data.has_static_bindings


def test_no_provisioner_means_no_volume() -> None:
    _, verdicts, _ = run(provisioning(pvc("a"), provisioner="kubernetes.io/no-provisioner"),
                         make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": rejected(ERR_REASON_BIND_CONFLICT),
                        "n2": rejected(ERR_REASON_BIND_CONFLICT)}


def test_allowed_topologies_limit_provisioning() -> None:
    allowed = [{"matchLabelExpressions": [{"key": ZONE, "values": ["b"]}]}]
    _, verdicts, _ = run(provisioning(pvc("a"), allowed=allowed), make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": rejected(ERR_REASON_BIND_CONFLICT), "n2": None}


def test_storage_capacity_is_checked_when_the_driver_asks() -> None:
    objects = (pvc("a", size="10Gi"), csi_driver("csi.example.com", True),
               capacity("cap-a", "wait", "a", "5Gi"), capacity("cap-b", "wait", "b", "20Gi"))
    _, verdicts, data = run(provisioning(*objects), make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": rejected(ERR_REASON_NOT_ENOUGH_SPACE), "n2": None}
    assert data.by_node["n2"].dynamic_provisions[0].capacity["metadata"]["name"] == "cap-b"


def test_maximum_volume_size_is_preferred_to_capacity() -> None:
    objects = (pvc("a", size="10Gi"), csi_driver("csi.example.com", True),
               capacity("cap-a", "wait", "a", "100Gi", maximum="5Gi"))
    _, verdicts, _ = run(provisioning(*objects), make_pod("p").pvc("a").obj())
    assert verdicts["n1"] == rejected(ERR_REASON_NOT_ENOUGH_SPACE)


def test_capacity_is_not_checked_when_the_driver_does_not_track_it() -> None:
    objects = (pvc("a", size="10Gi"), csi_driver("csi.example.com", False),
               capacity("cap-a", "wait", "a", "1Gi"))
    _, verdicts, _ = run(provisioning(*objects), make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": None, "n2": None}


def test_claim_being_provisioned_for_another_node() -> None:
    claim = pvc("a")
    claim["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "n2"}
    _, verdicts, data = run(provisioning(claim), make_pod("p").pvc("a").obj())
    assert verdicts["n1"] == rejected(ERR_REASON_BIND_CONFLICT)
    assert verdicts["n2"] is None
    assert len(data.by_node["n2"].dynamic_provisions) == 1


def test_static_and_dynamic_together() -> None:
    objects = (pvc("a"), pvc("b", size="50Gi"), pv("v1", node="n1"))
    _, verdicts, data = run(provisioning(*objects), make_pod("p").pvc("a").pvc("b").obj())
    assert verdicts == {"n1": None, "n2": None}
    assert chosen(data, "n1") == {"a": "v1"}
    assert [p.pvc["metadata"]["name"] for p in data.by_node["n1"].dynamic_provisions] == ["b"]
    assert [p.pvc["metadata"]["name"] for p in data.by_node["n2"].dynamic_provisions] == \
        ["a", "b"]


def test_missing_class_at_provisioning_is_an_error_not_a_crash() -> None:
    state = provisioning(pvc("a"))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("a").obj()
    _, pre = plugin.pre_filter(cs, pod, cs.all_nodes)
    assert pre is None
    state.storage.delete("StorageClass", "wait")  # deleted between PreFilter and Filter
    assert plugin.filter(cs, pod, info(state, "n1")) == Status.error(
        'failed to find storage class "wait"')


# -- Score

def test_score_is_skipped_without_storage_capacity_scoring() -> None:
    state = cluster(node("n1"), objects=(pvc("a"), pv("v1", node="n1")))
    cs = cycle(state)
    plugin = new()
    pod = make_pod("p").pvc("a").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    plugin.filter(cs, pod, info(state, "n1"))
    status = plugin.pre_score(cs, pod, cs.all_nodes)
    assert status is not None and status.is_skip


# -- the whole cycle

def framework(plugin: VolumeBinding) -> Framework:
    return Framework("p", pre_filter=[plugin], filter=[plugin], reserve=[plugin],
                     pre_bind=[plugin])


@pytest.mark.parametrize("reference", [True, False])
def test_failed_scheduling_message_counts_volume_reasons(reference: bool) -> None:
    objects = (pvc("a"), pv("v1", node="n1", phase="Bound"), pv("v2", node="n3"))
    state = cluster(node("n1"), node("n2"), node("n3"), objects=objects)
    result = schedule_one(framework(new()), make_pod("p").pvc("a").obj(), state,
                          reference=reference)
    assert result.node == "n3"
    state.storage.upsert("PersistentVolume", pv("v2", node="n3", phase="Released"))
    result = schedule_one(framework(new()), make_pod("p").pvc("a").obj(), state,
                          reference=reference)
    assert result.node is None
    assert result.message == ("0/3 nodes are available: 3 node(s) didn't find available "
                              "persistent volumes to bind.")


def test_immediate_claim_message_replaces_the_node_list() -> None:
    state = cluster(node("n1"), node("n2"), objects=(pvc("a", "fast"),))
    result = schedule_one(framework(new()), make_pod("p").pvc("a").obj(), state)
    assert result.message == ("0/2 nodes are available: pod has unbound immediate "
                              "PersistentVolumeClaims.")


@pytest.mark.parametrize(("pools", "fits"), [
    ((), False),  # the driver tracks capacity and reports none
    ((capacity("c", "other", "a", "100Gi"),), False),  # another class's pool
    ((capacity("c", "wait", "b", "100Gi"),), False),  # a pool the node does not reach
    ((capacity("c", "wait", "a", None),), False),  # neither capacity nor maximum
    ((capacity("c", "wait", "a", "0"),), False),
    ((capacity("c", "wait", "a", None, maximum="0"),), False),
    ((capacity("c", "wait", "a", "1Gi", maximum="1Mi"),), False),
    ((capacity("c", "wait", "a", "10Gi"),), True),  # exactly enough
    ((capacity("c1", "wait", "a", "1Gi"), capacity("c2", "wait", "a", "20Gi")), True),
])
def test_capacity_pools(pools: tuple[dict[str, Any], ...], fits: bool) -> None:
    objects = (pvc("a", size="10Gi"), csi_driver("csi.example.com", True), *pools)
    _, verdicts, _ = run(provisioning(*objects), make_pod("p").pvc("a").obj())
    assert verdicts["n1"] == (None if fits else rejected(ERR_REASON_NOT_ENOUGH_SPACE))


def test_claim_without_a_request_skips_the_capacity_check() -> None:
    objects = (pvc("a", size=None), csi_driver("csi.example.com", True))
    _, verdicts, _ = run(provisioning(*objects), make_pod("p").pvc("a").obj())
    assert verdicts == {"n1": None, "n2": None}


def test_binding_beside_a_claim_already_selected_for_the_node() -> None:
    selected = pvc("b")
    selected["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "n1"}
    objects = (pvc("a"), selected, pv("v1", node="n1"))
    _, verdicts, data = run(provisioning(*objects), make_pod("p").pvc("a").pvc("b").obj())
    assert verdicts["n1"] is None
    assert chosen(data, "n1") == {"a": "v1"}
    assert [p.pvc["metadata"]["name"] for p in data.by_node["n1"].dynamic_provisions] == ["b"]
