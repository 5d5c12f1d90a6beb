"""VolumeZone, with the cases of upstream's volume_zone_test.go (single zone, multi
zone, unbound claims, the three hints) and our own."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework import Code, CycleState, PluginError, Status
from policyd.framework.events import (
    NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    QUEUE,
    QUEUE_SKIP,
    STORAGE_CLASS,
    ActionType,
)
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.plugins.helper.volumes import after_own_claim_change
from policyd.plugins.volumezone.volume_zone import (
    ERR_REASON_CONFLICT,
    NAME,
    REGION,
    REGION_BETA,
    ZONE,
    ZONE_BETA,
    after_storage_class_added,
    after_volume_changed,
    label_zones_to_set,
    new,
)
from tests.builders import make_node, make_pod
from tests.plugin_harness import run_filter

CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,))


def pv(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": "1"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta,
            "spec": {"capacity": {"storage": "1Gi"}}}


def pvc(name: str, volume: str = "", storage_class: str | None = None,
        ns: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "1"},
            "spec": spec}


def storage_class(name: str, mode: str | None) -> dict[str, Any]:
    sc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                          "metadata": {"name": name}, "provisioner": "example.com/csi"}
    if mode is not None:
        sc["volumeBindingMode"] = mode
    return sc


PVS = [
    pv("Vol_1", {ZONE_BETA: "us-west1-a"}),
    pv("Vol_2", {REGION_BETA: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", {REGION_BETA: "us-west1"}),
    pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Stable_3", {ZONE: "us-west1-a", REGION: "us-west1-a"}),
    pv("Vol_Multi_1", {ZONE_BETA: "us-west1-c__us-west1-a"}),
    pv("Vol_Multi_Stable", {ZONE: "us-west1-c__us-west1-a"}),
    pv("Vol_Bad_Label", {ZONE: "us-west1-a__"}),
    pv("Vol_No_Labels"),
]
CLAIMS = [pvc(f"PVC_{v['metadata']['name'][4:]}", v["metadata"]["name"]) for v in PVS] + [
    pvc("PVC_not_exist", "Vol_not_exist"),
    pvc("PVC_EmptySC"),
    pvc("PVC_NoSC", storage_class="Class_0"),
    pvc("PVC_WaitSC", storage_class="Class_Wait"),
    pvc("PVC_ImmediateSC", storage_class="Class_Immediate"),
    pvc("PVC_NotSetSC", storage_class="Class_NotSet"),
]
CLASSES = [storage_class("Class_Wait", "WaitForFirstConsumer"),
           storage_class("Class_Immediate", "Immediate"),
           storage_class("Class_NotSet", None)]


def cluster(*node_labels: dict[str, str]) -> ClusterState:
    c = ClusterState([make_node(f"host{i}").exact_labels(labels).obj()
                      for i, labels in enumerate(node_labels, 1)])
    for obj in PVS:
        c.storage.upsert("PersistentVolume", obj)
    for obj in CLAIMS:
        c.storage.upsert("PersistentVolumeClaim", obj)
    for obj in CLASSES:
        c.storage.upsert("StorageClass", obj)
    return c


def pod_with(*claims: str) -> Pod:
    b = make_pod("pod_1")
    for c in claims:
        b = b.pvc(c)
    return b.obj()


def one_node(pod: Pod, labels: dict[str, str]) -> Status | None:
    out = run_filter(new(), pod, cluster(labels))
    if out.stopped is not None:
        return None if out.stopped.is_skip else out.stopped
    return out.statuses[0]


USELESS = {"uselessLabel": "none"}


@pytest.mark.parametrize(
    ("name", "claim", "labels", "want"),
    [
        # upstream's TestSingleZone
        ("node without labels", "PVC_1", {}, None),
        ("beta zone label matched", "PVC_1", {ZONE_BETA: "us-west1-a", **USELESS}, None),
        ("beta region label matched", "PVC_2", {REGION_BETA: "us-west1", **USELESS}, None),
        ("beta region label doesn't match", "PVC_2", {REGION_BETA: "no_us-west1", **USELESS},
         CONFLICT),
        ("beta zone label doesn't match", "PVC_1", {ZONE_BETA: "no_us-west1-a", **USELESS},
         CONFLICT),
        ("zone label matched", "PVC_Stable_1", {ZONE: "us-west1-a", **USELESS}, None),
        ("region label matched", "PVC_Stable_2", {REGION: "us-west1", **USELESS}, None),
        ("region label doesn't match", "PVC_Stable_2", {REGION: "no_us-west1", **USELESS},
         CONFLICT),
        ("zone label doesn't match", "PVC_Stable_1", {ZONE: "no_us-west1-a", **USELESS},
         CONFLICT),
        ("pv with zone and region, node with only zone", "PVC_Stable_3",
         {ZONE: "us-west1-a"}, CONFLICT),
        ("pv with zone, node with beta zone", "PVC_Stable_1", {ZONE_BETA: "us-west1-a"},
         CONFLICT),
        ("pv with beta label, node with ga label, matched", "PVC_1", {ZONE: "us-west1-a"},
         None),
        ("pv with beta label, node with ga label, don't match", "PVC_1",
         {ZONE: "us-west1-b"}, CONFLICT),
        # upstream's TestMultiZone
        ("multi: beta zone in the set", "PVC_Multi_1", {ZONE_BETA: "us-west1-a"}, None),
        ("multi: beta zone not in the set", "PVC_Multi_1", {ZONE_BETA: "us-west1-b"},
         CONFLICT),
        ("multi: zone in the set", "PVC_Multi_Stable", {ZONE: "us-west1-c"}, None),
        ("multi: zone not in the set", "PVC_Multi_Stable", {ZONE: "us-west1-b"}, CONFLICT),
        # our own
        ("node with only an unrelated topology label", "PVC_Stable_1",
         {REGION: "us-west1"}, CONFLICT),
        ("an empty item makes the label ignored", "PVC_Bad_Label", {ZONE: "us-east1-a"},
         None),
        ("pv without labels", "PVC_No_Labels", {ZONE: "us-west1-a"}, None),
    ],
)
def test_filter(name: str, claim: str, labels: dict[str, str], want: Status | None) -> None:
    assert one_node(pod_with(claim), labels) == want


def test_pod_without_claims_skips() -> None:
    for pod in (make_pod().obj(), make_pod().set(
            "spec.volumes", [{"name": "e", "ephemeral": {}}, {"name": "x", "emptyDir": {}}]
    ).obj()):
        _, status = new().pre_filter(CycleState(), pod, [])
        assert status == Status.skip()


def test_pv_without_topology_labels_skips() -> None:
    out = run_filter(new(), pod_with("PVC_No_Labels"), cluster({ZONE: "a"}))
    assert out.stopped == Status.skip()


def test_every_volume_must_match() -> None:
    out = run_filter(new(), pod_with("PVC_Stable_1", "PVC_Stable_2"),
                     cluster({ZONE: "us-west1-a", REGION: "us-west1"},
                             {ZONE: "us-west1-a", REGION: "us-east1"},
                             {ZONE: "us-west1-b", REGION: "us-west1"}))
    assert out.statuses == [None, CONFLICT, CONFLICT]


@pytest.mark.parametrize(
    ("claim", "want"),
    [
        # upstream's TestWithBinding, with the informer lister's resource names
        ("PVC_EmptySC", "PersistentVolumeClaim had no pv name and storageClass name"),
        ("PVC_NoSC", 'storageclass.storage.k8s.io "Class_0" not found'),
        ("PVC_NotSetSC", 'VolumeBindingMode not set for StorageClass "Class_NotSet"'),
        # our own
        ("PVC_ImmediateSC", "PersistentVolume had no name"),
        ("PVC_not_exist", 'persistentvolume "Vol_not_exist" not found'),
        ("PVC_missing", 'persistentvolumeclaim "PVC_missing" not found'),
        ("", "PersistentVolumeClaim had no name"),
    ],
)
def test_claims_that_cannot_be_followed(claim: str, want: str) -> None:
    status = Status.unresolvable(want)
    out = run_filter(new(), pod_with(claim), cluster({ZONE_BETA: "us-west1-a"}))
    assert out.stopped == status
    # Filter's fallback (PreFilter did not run) says the same.
    c = cluster({ZONE_BETA: "us-west1-a"})
    assert new().filter(CycleState(c.node_infos(), c), pod_with(claim),
                        c.node_infos()[0]) == status


def test_wait_for_first_consumer_claims_are_left_to_volume_binding() -> None:
    out = run_filter(new(), pod_with("PVC_WaitSC"), cluster({ZONE_BETA: "us-west1-a"}))
    assert out.stopped == Status.skip()
    out = run_filter(new(), pod_with("PVC_WaitSC", "PVC_1"),
                     cluster({ZONE_BETA: "us-west1-a"}, {ZONE_BETA: "us-west1-b"}))
    assert out.statuses == [None, CONFLICT]


def test_beta_class_annotation_is_read_first() -> None:
    c = cluster({ZONE: "a"})
    claim = pvc("annotated", storage_class="Class_Immediate")
    claim["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class":
                                        "Class_Wait"}
    c.storage.upsert("PersistentVolumeClaim", claim)
    assert run_filter(new(), pod_with("annotated"), c).stopped == Status.skip()


def test_first_failing_claim_in_volume_order() -> None:
    out = run_filter(new(), pod_with("PVC_1", "PVC_missing", "PVC_EmptySC"), cluster({}))
    assert out.stopped == Status.unresolvable('persistentvolumeclaim "PVC_missing" not found')


@pytest.mark.parametrize(
    ("obj", "kind", "want"),
    [
        ({**pvc("PVC_Bad"), "spec": "x"}, "PersistentVolumeClaim",
         "PersistentVolumeClaim default/PVC_Bad: spec must be an object"),
        ({**pv("Vol_Bad"), "metadata": {"name": "Vol_Bad", "labels": ["zone"]}},
         "PersistentVolume", "PersistentVolume Vol_Bad: metadata.labels must be a map"),
        ({**pv("Vol_Bad"), "metadata": {"name": "Vol_Bad", "labels": {ZONE: 3}}},
         "PersistentVolume", f"PersistentVolume Vol_Bad: label {ZONE} must be a string"),
    ],
)
def test_malformed_objects_are_named_not_raised(obj: dict[str, Any], kind: str, want: str
                                               ) -> None:
    c = cluster({ZONE: "a"})
    c.storage.upsert(kind, obj)
    c.storage.upsert("PersistentVolumeClaim", pvc("PVC_Bad", "Vol_Bad"))
    if kind == "PersistentVolumeClaim":
        c.storage.upsert(kind, obj)
    out = run_filter(new(), pod_with("PVC_Bad"), c)
    assert out.stopped == Status.unresolvable(want)


def test_pv_without_spec_is_fine_here() -> None:
    # VolumeZone reads only a PV's labels, as upstream does.
    c = cluster({ZONE: "a"})
    bare = pv("Vol_Bare", {ZONE: "a"})
    del bare["spec"]
    c.storage.upsert("PersistentVolume", bare)
    c.storage.upsert("PersistentVolumeClaim", pvc("PVC_Bare", "Vol_Bare"))
    assert run_filter(new(), pod_with("PVC_Bare"), c).statuses == [None]


def test_topologies_follow_a_new_pv_version() -> None:
    c = cluster({ZONE: "us-west1-a"})
    assert run_filter(new(), pod_with("PVC_Stable_1"), c).statuses == [None]
    moved = pv("Vol_Stable_1", {ZONE: "us-west1-b"})
    moved["metadata"]["resourceVersion"] = "2"
    c.storage.upsert("PersistentVolume", moved)
    assert run_filter(new(), pod_with("PVC_Stable_1"), c).statuses == [CONFLICT]


@pytest.mark.parametrize(("value", "want"), [
    ("a", {"a"}), ("a__b", {"a", "b"}), (" a __ b ", {"a", "b"}), ("a__", None),
    ("", None), ("a____b", None)])
def test_label_zones_to_set(value: str, want: set[str] | None) -> None:
    got = label_zones_to_set(value)
    assert (None if got is None else set(got)) == want


# -- events and hints -----------------------------------------------------------------

def test_events() -> None:
    got = {(e.event.resource, e.event.action, e.hint is not None)
           for e in new().events_to_register()}
    assert got == {
        (STORAGE_CLASS, ActionType.ADD, True),
        (NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, False),
        (PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE, True),
        (PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE, True),
    }


@pytest.mark.parametrize(
    ("old", "new_", "want"),
    [
        (None, pvc("PVC_1", "Vol_1"), QUEUE),  # created
        (None, pvc("PVC_2", "Vol_1"), QUEUE_SKIP),  # not the pod's
        (None, pvc("PVC_1", "Vol_1", ns="ns1"), QUEUE_SKIP),  # other namespace
        (pvc("PVC_1"), pvc("PVC_1", "Vol_1"), QUEUE),  # bound
        ("not-a-pvc", "not-a-pvc", QUEUE),
    ],
)
def test_hint_after_claim_changed(old: Any, new_: Any, want: object) -> None:
    assert after_own_claim_change(pod_with("PVC_1"), old, new_) is want


@pytest.mark.parametrize(("sc", "want"), [
    (storage_class("SC_1", None), QUEUE_SKIP),
    (storage_class("SC_1", "Immediate"), QUEUE_SKIP),
    (storage_class("SC_1", "WaitForFirstConsumer"), QUEUE),
    ("not-a-class", QUEUE)])
def test_hint_after_storage_class_added(sc: Any, want: object) -> None:
    assert after_storage_class_added(pod_with("PVC_1"), None, sc) is want


@pytest.mark.parametrize(
    ("old", "new_", "want"),
    [
        (None, pv("Vol_1"), QUEUE),
        (pv("Vol_1", {ZONE_BETA: "us-west1-a"}), pv("Vol_1", {ZONE_BETA: "us-west1-b"}),
         QUEUE),
        (pv("Vol_1", {ZONE_BETA: "us-west1-a"}),
         pv("Vol_1", {ZONE_BETA: "us-west1-a", ZONE: "zone"}), QUEUE),
        (pv("Vol_1", {ZONE_BETA: "us-west1-a", ZONE: "zone"}),
         pv("Vol_1", {ZONE_BETA: "us-west1-a", ZONE: "zone", "other": "x"}), QUEUE_SKIP),
    ],
)
def test_hint_after_volume_changed(old: Any, new_: Any, want: object) -> None:
    assert after_volume_changed(pod_with("PVC_1"), old, new_) is want


def test_factory() -> None:
    assert new(None).name == NAME == "VolumeZone"
    with pytest.raises(PluginError):
        new({"x": 1})


def test_filter_without_volumes_passes_at_once() -> None:
    info = NodeInfo(make_node("n").labels({ZONE: "a"}).obj())
    assert new().filter(CycleState(), make_pod().obj(), info) is None
