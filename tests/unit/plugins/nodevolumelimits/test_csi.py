"""NodeVolumeLimits, with the cases of upstream's csi_test.go (CSI, pending, in-tree
migrated and inline volumes, generic ephemeral volumes, VolumeAttachments, PreFilter
Skip, the four queueing hints) and our own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from policyd.engine.cycle import schedule_one
from policyd.features import with_settings
from policyd.framework import Code, CycleState, PluginError, Status
from policyd.framework.events import (
    CSI_NODE,
    PERSISTENT_VOLUME_CLAIM,
    POD,
    QUEUE,
    QUEUE_SKIP,
    VOLUME_ATTACHMENT,
    ActionType,
)
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.plugins.helper.volumes import after_own_or_ephemeral_claim_change
from policyd.plugins.nodevolumelimits.csi import (
    ERR_REASON_MAX_VOLUME_COUNT,
    NAME,
    after_attachment_deleted,
    after_csi_node_updated,
    after_pod_deleted,
    new,
)
from policyd.plugins.volumerestrictions import volume_restrictions
from policyd.plugins.volumezone import volume_zone
from tests.builders import make_node, make_pod
from tests.plugin_harness import run_filter

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
TOO_MANY = Status(Code.UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT,))
SKIPPED = Status.skip()


# -- stored objects ---------------------------------------------------------------------

def csi_pv(name: str, driver: str, handle: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"csi": {"driver": driver, "volumeHandle": handle or name}}}


def in_tree_pv(name: str, source: str, body: dict[str, Any],
               labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": "1"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta,
            "spec": {source: body}}


def claim(name: str, volume: str = "", storage_class: str | None = None, ns: str = "default",
          owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": "1"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "abc",
                                    "uid": owner, "controller": True}]
    spec: dict[str, Any] = {}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": spec}


def storage_class(name: str, provisioner: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": "WaitForFirstConsumer"}


def csi_node(name: str, limits: dict[str, int | None]) -> dict[str, Any]:
    drivers = []
    for driver, count in limits.items():
        d: dict[str, Any] = {"name": driver, "nodeID": name}
        if count is not None:
            d["allocatable"] = {"count": count}
        drivers.append(d)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": name}, "spec": {"drivers": drivers}}


def attachment(name: str, node: str, pv_name: str | None, attacher: str = EBS
               ) -> dict[str, Any]:
    source = {"persistentVolumeName": pv_name} if pv_name is not None else {}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": name},
            "spec": {"attacher": attacher, "nodeName": node, "source": source}}


# Upstream's fixture: claim "csi-<driver>-<n>" bound to a PV of that driver; csi-4 is
# pending (class with the EBS provisioner), csi-5 has no class, csi-6's PV is gone.
BASE: list[tuple[str, dict[str, Any]]] = [
    ("StorageClass", storage_class("csi-sc", EBS)),
    ("StorageClass", storage_class("in-tree-sc", "kubernetes.io/aws-ebs")),
    ("PersistentVolumeClaim", claim("csi-4", storage_class="csi-sc")),
    ("PersistentVolumeClaim", claim("csi-5")),
    ("PersistentVolumeClaim", claim("csi-6", "missing-pv", storage_class="csi-sc")),
    ("PersistentVolumeClaim", claim("in-tree-pending", storage_class="in-tree-sc")),
]
for _driver in (EBS, GCE, "kubernetes.io/aws-ebs", "kubernetes.io/hostpath"):
    for _i in range(4):
        _name = f"csi-{_driver}-{_i}"
        if _driver == "kubernetes.io/aws-ebs":
            _pv = in_tree_pv(_name, "awsElasticBlockStore", {"volumeID": f"vol-{_i}"})
        elif _driver == "kubernetes.io/hostpath":
            _pv = in_tree_pv(_name, "hostPath", {"path": "/tmp"})
        else:
            _pv = csi_pv(_name, _driver)
        BASE.append(("PersistentVolume", _pv))
        BASE.append(("PersistentVolumeClaim", claim(_name, _name)))


def cluster(pods: Sequence[Pod] = (), limits: dict[str, int | None] | None = None,
            extra: Sequence[tuple[str, dict[str, Any]]] = ()) -> ClusterState:
    """One node, node-1, with these pods; a CSINode with these limits (none: no CSINode)."""
    c = ClusterState([make_node("node-1").obj()], list(pods))
    for kind, obj in [*BASE, *extra]:
        c.storage.upsert(kind, obj)
    if limits is not None:
        c.storage.upsert("CSINode", csi_node("node-1", limits))
    return c


def claims_pod(*claims: str, name: str = "pod", node: str = "") -> Pod:
    b = make_pod(name)
    for c in claims:
        b = b.pvc(c)
    if node:
        b = b.node(node)
    return b.obj()


def volumes_pod(*volumes: dict[str, Any], name: str = "pod", node: str = "",
                ns: str = "default", uid: str = "") -> Pod:
    b = make_pod(name, ns).set("spec.volumes", [{"name": f"v{i}", **v} if "name" not in v
                                                 else v for i, v in enumerate(volumes)])
    if node:
        b = b.node(node)
    if uid:
        b = b.uid(uid)
    return b.obj()


def verdict(pod: Pod, c: ClusterState) -> Status | None:
    """PreFilter then Filter on node-1: Skip, or the node's status."""
    out = run_filter(new(), pod, c)
    return out.stopped if out.stopped is not None else out.statuses[0]


def ebs(n: int) -> str:
    return f"csi-{EBS}-{n}"


def running(*claims: str, name: str = "running") -> Pod:
    return claims_pod(*claims, name=name, node="node-1")


# -- CSI volumes ------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("name", "pod", "existing", "limits", "want"),
    [
        ("fits when node volume limit >= new pod's CSI volumes",
         claims_pod(ebs(0)), [running(ebs(1), ebs(2))], {EBS: 4}, None),
        ("doesn't fit when the limit is reached",
         claims_pod(ebs(0)), [running(ebs(1), ebs(2))], {EBS: 2}, TOO_MANY),
        ("two new volumes over the limit",
         claims_pod(ebs(0), ebs(3)), [running(ebs(1), ebs(2))], {EBS: 3}, TOO_MANY),
        ("a driver that states no limit",
         claims_pod(ebs(0)), [running(ebs(1), ebs(2))], {EBS: None}, None),
        ("only the pod's driver's limit matters",
         claims_pod(ebs(0)), [running(ebs(1), ebs(2))], {GCE: 1}, None),
        ("volumes of another driver do not count",
         claims_pod(ebs(0)), [running(f"csi-{GCE}-1", f"csi-{GCE}-2")], {EBS: 1, GCE: 2},
         None),
        ("pending claims count towards the limit",
         claims_pod("csi-4"), [running(ebs(1), ebs(2))], {EBS: 2}, TOO_MANY),
        ("a claim whose PV is gone counts by its class",
         claims_pod("csi-6"), [running(ebs(1), ebs(2))], {EBS: 2}, TOO_MANY),
        ("a pending claim without a class is not counted",
         claims_pod("csi-5"), [running(ebs(1), ebs(2))], {EBS: 2}, None),
        ("a volume already on the node costs nothing",
         claims_pod(ebs(1)), [running(ebs(1), ebs(2))], {EBS: 2}, None),
        ("one pending claim shared with a pod on the node counts once",
         claims_pod("csi-4"), [running("csi-4", ebs(1))], {EBS: 2}, None),
        ("an existing pod's missing claim is not counted",
         claims_pod(ebs(0)), [running("gone", ebs(1))], {EBS: 2}, None),
        ("the limit is per node: no CSINode, no limits",
         claims_pod(ebs(0)), [running(ebs(1), ebs(2))], None, None),
    ],
)
def test_csi_volumes(name: str, pod: Pod, existing: list[Pod],
                     limits: dict[str, int | None] | None, want: Status | None) -> None:
    assert verdict(pod, cluster(existing, limits)) == want


# -- in-tree volumes migrated to CSI --------------------------------------------------------

AWS_INLINE = {"awsElasticBlockStore": {"volumeID": "aws-inline1"}}
IN_TREE = "csi-kubernetes.io/aws-ebs-"


@pytest.mark.parametrize(
    ("name", "pod", "existing", "limits", "want"),
    [
        ("in-tree PVs count as the EBS driver's",
         claims_pod(IN_TREE + "0"), [running(IN_TREE + "1", IN_TREE + "2")], {EBS: 2},
         TOO_MANY),
        ("nil CSINode: no migration, no limits",
         claims_pod(IN_TREE + "0"), [running(IN_TREE + "1", IN_TREE + "2")], None, None),
        ("unbound in-tree claims count as the driver's",
         claims_pod("in-tree-pending"), [running(IN_TREE + "1", IN_TREE + "2")], {EBS: 2},
         TOO_MANY),
        ("non-migratable in-tree volumes are not counted",
         claims_pod("csi-kubernetes.io/hostpath-0"), [running(ebs(1), ebs(2))], {EBS: 2},
         None),
        ("inline in-tree volumes count",
         volumes_pod(AWS_INLINE), [running(IN_TREE + "1", IN_TREE + "2")], {EBS: 2},
         TOO_MANY),
        ("in-tree and CSI volumes count together (scheduling in-tree)",
         claims_pod(IN_TREE + "0"), [running(ebs(1), ebs(2))], {EBS: 2}, TOO_MANY),
        ("in-tree, inline and CSI volumes count together",
         claims_pod(IN_TREE + "0"), [running(ebs(1)), volumes_pod(AWS_INLINE, name="i",
                                                                   node="node-1")],
         {EBS: 2}, TOO_MANY),
        ("in-tree and CSI volumes count together (scheduling CSI)",
         claims_pod(ebs(0)), [running(IN_TREE + "1", IN_TREE + "2")], {EBS: 2}, TOO_MANY),
        ("an inline volume with a CSI PV's handle is that volume",
         volumes_pod({"awsElasticBlockStore": {"volumeID": ebs(1)}}), [running(ebs(1))],
         {EBS: 1}, None),
        ("aws:// volume IDs name the same volume",
         volumes_pod({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}),
         [running(IN_TREE + "1")], {EBS: 1}, None),
    ],
)
def test_in_tree_volumes(name: str, pod: Pod, existing: list[Pod],
                         limits: dict[str, int | None] | None, want: Status | None) -> None:
    assert verdict(pod, cluster(existing, limits)) == want


@pytest.mark.parametrize(
    ("source", "body", "driver"),
    [
        ("gcePersistentDisk", {"pdName": "disk"}, GCE),
        ("azureDisk", {"diskName": "d", "diskURI": "/sub/disk", "kind": "Managed"},
         "disk.csi.azure.com"),
        ("cinder", {"volumeID": "c1"}, "cinder.csi.openstack.org"),
        ("portworxVolume", {"volumeID": "p1"}, "pxd.portworx.com"),
    ],
)
def test_each_migrated_plugin_counts_under_its_driver(source: str, body: dict[str, Any],
                                                      driver: str) -> None:
    pod = volumes_pod({source: body})
    assert verdict(pod, cluster([], {driver: 0})) == TOO_MANY
    assert verdict(pod, cluster([], {driver: 1})) is None
    assert verdict(pod, cluster([], {EBS: 0})) is None


@pytest.mark.parametrize(("source", "body"), [
    ("azureFile", {"secretName": "s", "shareName": "share"}),
    ("vsphereVolume", {"volumePath": "[ds] vol.vmdk"})])
def test_translatable_but_not_migrated_plugins_pass_but_never_count(
        source: str, body: dict[str, Any]) -> None:
    pod = volumes_pod({source: body})
    assert new().pre_filter(CycleState(), pod, []) == (None, None)  # not skipped
    limits: dict[str, int | None] = {"file.csi.azure.com": 0, "csi.vsphere.vmware.com": 0}
    assert verdict(pod, cluster([], limits)) is None


def test_gce_pv_handle_names_its_zone_unlike_the_inline_form() -> None:
    # The PV form of one disk is projects/UNSPECIFIED/zones/<zone>/disks/d, the inline
    # form projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d: two volumes, as upstream.
    zonal = in_tree_pv("gce-zonal", "gcePersistentDisk", {"pdName": "d"},
                       {"topology.kubernetes.io/zone": "us-central1-a"})
    bare = in_tree_pv("gce-bare", "gcePersistentDisk", {"pdName": "d"})
    extra = [("PersistentVolume", zonal), ("PersistentVolumeClaim", claim("z", "gce-zonal")),
             ("PersistentVolume", bare), ("PersistentVolumeClaim", claim("b", "gce-bare"))]
    inline = volumes_pod({"gcePersistentDisk": {"pdName": "d"}})
    assert verdict(inline, cluster([running("b")], {GCE: 1}, extra)) is None
    assert verdict(inline, cluster([running("z")], {GCE: 1}, extra)) == TOO_MANY


@pytest.mark.parametrize(("zones", "counted"), [
    ("us-central1-a__us-central1-b", True),  # regional
    ("us-central1-a__us-east1-b", False),  # two regions: the translation fails
    ("us-central1-a__", False)])
def test_gce_regional_pv(zones: str, counted: bool) -> None:
    pv = in_tree_pv("gce-r", "gcePersistentDisk", {"pdName": "d"},
                    {"failure-domain.beta.kubernetes.io/zone": zones})
    extra = [("PersistentVolume", pv), ("PersistentVolumeClaim", claim("r", "gce-r"))]
    assert verdict(claims_pod("r"), cluster([], {GCE: 0}, extra)) == (
        TOO_MANY if counted else None)


def test_failed_inline_translations_are_upstreams_errors() -> None:
    bad_aws = volumes_pod({"name": "data",
                           "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/bad"}})
    assert verdict(bad_aws, cluster([], {EBS: 5})) == Status.error(
        "converting volume(data) from inline to csi: failed to translate Kubernetes ID to "
        "EBS Volume ID Invalid format for AWS volume (aws://us-east-1a/bad)")
    shared = volumes_pod({"name": "d", "azureDisk": {"diskName": "x", "diskURI": "/x",
                                                     "kind": "Shared"}})
    assert verdict(shared, cluster([], {"disk.csi.azure.com": 5})) == Status.error(
        "converting volume(d) from inline to csi: kind(Shared) is not supported in csi "
        "migration")
    # Without a CSINode the migration is off: nothing is translated.
    assert verdict(bad_aws, cluster([], None)) is None


def test_shared_azure_disk_pv_is_not_counted() -> None:
    pv = in_tree_pv("az", "azureDisk", {"diskName": "x", "diskURI": "/x", "kind": "Shared"})
    extra = [("PersistentVolume", pv), ("PersistentVolumeClaim", claim("az", "az"))]
    assert verdict(claims_pod("az"), cluster([], {"disk.csi.azure.com": 0}, extra)) is None


# -- generic ephemeral volumes -------------------------------------------------------------

EPHEMERAL = {"name": "xyz", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}


def ephemeral_pod() -> Pod:
    return volumes_pod(EPHEMERAL, name="abc", ns="test", uid="12345")


def test_ephemeral_claim_missing() -> None:
    assert verdict(ephemeral_pod(), cluster([], {EBS: 5})) == Status.unresolvable(
        'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found')
    # Even without limits: the claim is looked up first.
    assert verdict(ephemeral_pod(), cluster([], None)) == Status.unresolvable(
        'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found')


def test_ephemeral_claim_not_owned() -> None:
    extra = [("PersistentVolumeClaim", claim("abc-xyz", storage_class="csi-sc", ns="test"))]
    assert verdict(ephemeral_pod(), cluster([], {EBS: 5}, extra)) == Status.error(
        "PVC test/abc-xyz was not created for pod test/abc (pod is not owner)")


@pytest.mark.parametrize(("limit", "want"), [(1, None), (0, TOO_MANY)])
def test_ephemeral_claim_counts_by_its_class(limit: int, want: Status | None) -> None:
    extra = [("PersistentVolumeClaim", claim("abc-xyz", storage_class="csi-sc", ns="test",
                                             owner="12345"))]
    assert verdict(ephemeral_pod(), cluster([], {EBS: limit}, extra)) == want


def test_ephemeral_and_persistent_volumes_count_together() -> None:
    extra = [("PersistentVolumeClaim", claim("abc-xyz", storage_class="csi-sc", ns="test",
                                             owner="12345"))]
    pod = volumes_pod(EPHEMERAL, {"name": "p", "persistentVolumeClaim": {"claimName": "c"}},
                      name="abc", ns="test", uid="12345")
    extra.append(("PersistentVolumeClaim", claim("c", ebs(0), ns="test")))
    assert verdict(pod, cluster([running(ebs(1))], {EBS: 2}, extra)) == TOO_MANY
    assert verdict(pod, cluster([running(ebs(1))], {EBS: 3}, extra)) is None


# -- PreFilter ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("pod", "skips"), [
    (make_pod().obj(), True),
    (volumes_pod({"configMap": {"name": "c"}}, {"secret": {"secretName": "s"}}), True),
    (volumes_pod({"configMap": {"name": "c"}}, {"persistentVolumeClaim": {"claimName": "x"}}),
     False),
    (volumes_pod({"configMap": {"name": "c"}}, EPHEMERAL), False),
    (volumes_pod({"configMap": {"name": "c"}}, AWS_INLINE), False),
    (volumes_pod({"hostPath": {"path": "/x"}}), True),
])
def test_pre_filter(pod: Pod, skips: bool) -> None:
    _, status = new().pre_filter(CycleState(), pod, [])
    assert (status == SKIPPED) is skips


# -- VolumeAttachments -------------------------------------------------------------------------

def with_attachments(c: ClusterState, *vas: dict[str, Any]) -> ClusterState:
    for va in vas:
        c.storage.upsert("VolumeAttachment", va)
    return c


def test_attachments_count_when_no_pod_accounts_for_them() -> None:
    c = with_attachments(cluster([], {EBS: 2}), attachment("va-1", "node-1", ebs(1)),
                         attachment("va-2", "node-1", ebs(2)))
    assert verdict(claims_pod(ebs(0)), c) == TOO_MANY


def test_attachments_under_the_limit_fit() -> None:
    c = with_attachments(cluster([], {EBS: 3}), attachment("va-1", "node-1", ebs(1)),
                         attachment("va-2", "node-1", ebs(2)))
    assert verdict(claims_pod(ebs(0)), c) is None


def test_attachment_of_a_pods_volume_counts_once() -> None:
    c = with_attachments(cluster([running(ebs(1))], {EBS: 2}),
                         attachment("va-1", "node-1", ebs(1)))
    assert verdict(claims_pod(ebs(0)), c) is None


@pytest.mark.parametrize("va", [
    attachment("other-node", "node-2", ebs(1)),
    attachment("no-pv-name", "node-1", None),
    attachment("pv-gone", "node-1", "gone"),
    attachment("not-csi", "node-1", IN_TREE + "1"),
    attachment("no-attacher", "node-1", ebs(1), attacher=""),
])
def test_attachments_that_do_not_count(va: dict[str, Any]) -> None:
    c = with_attachments(cluster([], {EBS: 1}), va)
    assert verdict(claims_pod(ebs(0)), c) is None


def test_without_attachments_in_storage_none_are_counted() -> None:
    assert verdict(claims_pod(ebs(0)), cluster([], {EBS: 1})) is None


# -- malformed stored objects ---------------------------------------------------------------

def test_malformed_csi_node_is_named() -> None:
    c = cluster([])
    c.storage.upsert("CSINode", {"metadata": {"name": "node-1"},
                                 "spec": {"drivers": {"ebs.csi.aws.com": 3}}})
    assert verdict(claims_pod(ebs(0)), c) == Status.unresolvable(
        "CSINode node-1: spec.drivers must be a list")
    c.storage.upsert("CSINode", {"metadata": {"name": "node-1"}, "spec": {"drivers": [
        {"name": EBS, "allocatable": {"count": "3"}}]}})
    assert verdict(claims_pod(ebs(0)), c) == Status.unresolvable(
        "CSINode node-1: spec.drivers[0].allocatable.count must be an integer")


def test_pv_without_spec_is_named_for_the_pod_and_for_a_pod_on_the_node() -> None:
    bare = {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "bare", "resourceVersion": "1"}}
    extra = [("PersistentVolume", bare), ("PersistentVolumeClaim", claim("bare", "bare"))]
    reason = Status.unresolvable("PersistentVolume bare: spec must be an object")
    assert verdict(claims_pod("bare"), cluster([], {EBS: 3}, extra)) == reason
    assert verdict(claims_pod(ebs(0)), cluster([running("bare")], {EBS: 3}, extra)) == reason


def test_claim_volume_without_a_name_is_an_error() -> None:
    pod = volumes_pod({"persistentVolumeClaim": {"claimName": ""}})
    assert verdict(pod, cluster([], {EBS: 3})) == Status.error(
        "PersistentVolumeClaim had no name")


# -- caches follow the stored objects ---------------------------------------------------------

def test_a_pod_on_the_node_is_counted_again_after_its_claim_binds() -> None:
    c = cluster([running("late")], {EBS: 1})
    pod = claims_pod(ebs(0))
    assert verdict(pod, c) is None  # "late" is not there: not counted
    c.storage.upsert("PersistentVolumeClaim", claim("late", ebs(1)))
    assert verdict(pod, c) == TOO_MANY


def test_limits_follow_a_new_csi_node_version() -> None:
    c = cluster([running(ebs(1))], {EBS: 1})
    pod = claims_pod(ebs(0))
    assert verdict(pod, c) == TOO_MANY
    c.storage.upsert("CSINode", csi_node("node-1", {EBS: 2}))
    assert verdict(pod, c) is None


# -- events and hints -------------------------------------------------------------------------

def test_events() -> None:
    got = {(e.event.resource, e.event.action, e.hint is not None)
           for e in new().events_to_register()}
    assert got == {(CSI_NODE, ActionType.ADD, False), (CSI_NODE, ActionType.UPDATE, True),
                   (POD, ActionType.DELETE, True),
                   (PERSISTENT_VOLUME_CLAIM, ActionType.ADD, True),
                   (VOLUME_ATTACHMENT, ActionType.DELETE, True)}


@pytest.mark.parametrize(("deleted", "want"), [
    (running(ebs(1), name="d"), QUEUE),
    (volumes_pod(AWS_INLINE, name="d", node="node-1"), QUEUE),
    (volumes_pod(name="d", node="node-1"), QUEUE_SKIP),
    (claims_pod(ebs(1), name="d"), QUEUE_SKIP),  # never scheduled
    (make_pod("d").pvc(ebs(1)).set("status.nominatedNodeName", "node-1").obj(), QUEUE),
    (volumes_pod({"configMap": {"name": "c"}}, name="d", node="node-1"), QUEUE_SKIP),
])
def test_hint_after_pod_deleted(deleted: Pod, want: object) -> None:
    assert after_pod_deleted(claims_pod(ebs(0)), deleted, None) is want


@pytest.mark.parametrize(("pod", "added", "want"), [
    (claims_pod("c"), claim("c", ns="other"), QUEUE_SKIP),
    (claims_pod("c"), claim("c"), QUEUE),
    (volumes_pod(EPHEMERAL, name="abc", ns="test"), claim("abc-xyz", ns="test"), QUEUE),
    (claims_pod("c"), claim("d"), QUEUE_SKIP),
    (make_pod().obj(), claim("c"), QUEUE_SKIP),
])
def test_hint_after_claim_added(pod: Pod, added: dict[str, Any], want: object) -> None:
    assert after_own_or_ephemeral_claim_change(pod, None, added) is want


@pytest.mark.parametrize(("pod", "attacher", "want"), [
    (claims_pod("c"), EBS, QUEUE),
    (volumes_pod(AWS_INLINE), EBS, QUEUE),
    (volumes_pod({"gcePersistentDisk": {"pdName": "d"}}), EBS, QUEUE_SKIP),
    (volumes_pod(AWS_INLINE, {"persistentVolumeClaim": {"claimName": "c"}}), GCE, QUEUE),
    (volumes_pod({"awsElasticBlockStore": {"volumeID": "aws://z/bad"}}), GCE, QUEUE),
    (volumes_pod({"configMap": {"name": "c"}}), EBS, QUEUE_SKIP),
])
def test_hint_after_attachment_deleted(pod: Pod, attacher: str, want: object) -> None:
    assert after_attachment_deleted(pod, attachment("va", "node-1", "pv", attacher),
                                    None) is want


@pytest.mark.parametrize(("old", "new_", "want"), [
    ({EBS: 1}, {EBS: 2}, QUEUE),
    ({EBS: 2}, {EBS: 1}, QUEUE_SKIP),
    ({EBS: 1}, {EBS: 1}, QUEUE_SKIP),
    ({EBS: 1}, {EBS: 1, GCE: 1}, QUEUE),  # a new driver with a limit
    ({EBS: 1}, {EBS: 1, GCE: None}, QUEUE_SKIP),  # a new driver without one
    ({EBS: None}, {EBS: 3}, QUEUE),
])
def test_hint_after_csi_node_updated(old: dict[str, int | None], new_: dict[str, int | None],
                                     want: object) -> None:
    assert after_csi_node_updated(claims_pod("c"), csi_node("n", old), csi_node("n", new_)) \
        is want


def test_factory() -> None:
    assert new(None).name == NAME == "NodeVolumeLimits"
    with pytest.raises(PluginError):
        new({"x": 1})


# -- the whole cycle, with the other volume plugins ---------------------------------------

def test_whole_cycle_counts_reasons_on_both_paths() -> None:
    zone = "topology.kubernetes.io/zone"
    # In the default profile's filter order (VolumeBinding would sit between the last two).
    plugins: list[Any] = [volume_restrictions.new(), new(), volume_zone.new()]
    fw = Framework("p", pre_filter=plugins, filter=plugins)
    c = ClusterState([make_node(n).labels({zone: z}).obj()
                      for n, z in (("full", "a"), ("other-zone", "b"), ("free", "a"))])
    for kind, obj in BASE:
        c.storage.upsert(kind, obj)
    zonal = csi_pv("zonal", EBS)
    zonal["metadata"]["labels"] = {zone: "a"}
    c.storage.upsert("PersistentVolume", zonal)
    c.storage.upsert("PersistentVolumeClaim", claim("zonal", "zonal"))
    for n in ("full", "other-zone", "free"):
        c.storage.upsert("CSINode", csi_node(n, {EBS: 1}))
    c.upsert_pod(claims_pod(ebs(1), name="holder", node="full"))
    pod = claims_pod("zonal")
    for reference in (False, True):
        r = schedule_one(fw, pod, c, reference=reference)
        assert r.node == "free"
    c.upsert_pod(claims_pod(ebs(2), name="holder-2", node="free"))
    for reference in (False, True):
        r = schedule_one(fw, pod, c, reference=reference)
        assert r.node is None
        assert r.message == ("0/3 nodes are available: 1 node(s) had no available volume "
                             "zone, 2 node(s) exceed max volume count.")
    missing = claims_pod("nowhere")
    r = schedule_one(fw, missing, c)
    assert r.message == ('0/3 nodes are available: persistentvolumeclaim "nowhere" not '
                         "found.")


# -- VolumeLimitScaling (alpha, off in v1.36): checkCSIDriverOnNode before counting

SCALING = with_settings([("VolumeLimitScaling", True)])


def csi_driver(name: str, prevent: bool | None) -> tuple[str, dict[str, Any]]:
    spec: dict[str, Any] = {"attachRequired": True}
    if prevent is not None:
        spec["preventPodSchedulingIfMissing"] = prevent
    return ("CSIDriver", {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                          "metadata": {"name": name}, "spec": spec})


def not_installed(driver: str) -> Status:
    return Status(Code.UNSCHEDULABLE, (f"{driver} CSI driver is not installed on the node",))


# (id, pod, CSINode limits or None, extra objects, verdict with the gate on, off)
DRIVER_CASES: list[tuple[str, Pod, dict[str, int | None] | None,
                         list[tuple[str, dict[str, Any]]], Status | None, Status | None]] = [
    ("opted in, no CSINode: not installed", claims_pod(ebs(0)), None,
     [csi_driver(EBS, True)], not_installed(EBS), None),
    ("opted in, listed by the CSINode (no count): installed", claims_pod(ebs(0)),
     {EBS: None}, [csi_driver(EBS, True)], None, None),
    ("opted in, the CSINode lists another driver", claims_pod(ebs(0)), {GCE: 10},
     [csi_driver(EBS, True)], not_installed(EBS), None),
    ("not opted in", claims_pod(ebs(0)), None, [csi_driver(EBS, False)], None, None),
    ("opt-in field absent", claims_pod(ebs(0)), None, [csi_driver(EBS, None)], None, None),
    ("no CSIDriver object: assumed installed", claims_pod(ebs(0)), None, [], None, None),
    ("a pending claim counts as its class's provisioner", claims_pod("csi-4"), {GCE: 10},
     [csi_driver(EBS, True)], not_installed(EBS), None),
    ("the driver check comes before the limit", claims_pod(ebs(0), f"csi-{GCE}-0"),
     {EBS: 0}, [csi_driver(GCE, True)], not_installed(GCE), TOO_MANY),
    ("installed, then the limit applies", claims_pod(ebs(0)), {EBS: 0},
     [csi_driver(EBS, True)], TOO_MANY, TOO_MANY),
    ("two drivers missing: the first by name", claims_pod(ebs(0), f"csi-{GCE}-0"), None,
     [csi_driver(EBS, True), csi_driver(GCE, True)], not_installed(EBS), None),
]


@pytest.mark.parametrize(("pod", "limits", "extra", "on", "off"),
                         [c[1:] for c in DRIVER_CASES], ids=[c[0] for c in DRIVER_CASES])
def test_volume_limit_scaling_requires_opted_in_drivers_on_the_node(
        pod: Pod, limits: dict[str, int | None] | None,
        extra: list[tuple[str, dict[str, Any]]], on: Status | None,
        off: Status | None) -> None:
    c = cluster(limits=limits, extra=extra)
    for plugin, want in ((new(features=SCALING), on), (new(), off)):
        out = run_filter(plugin, pod, c)
        assert out.stopped is None
        assert out.statuses[0] == want
