"""VolumeRestrictions, with the cases of upstream's volume_restrictions_test.go (disk
conflicts per kind, ReadWriteOncePod claims, the two queueing hints) and our own."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework import Code, CycleState, PluginError, Status
from policyd.framework.events import (
    NODE,
    PERSISTENT_VOLUME_CLAIM,
    POD,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
)
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.plugins.helper.volumes import after_own_claim_change
from policyd.plugins.volumerestrictions.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    NAME,
    after_pod_deleted,
    new,
)
from tests.builders import make_node, make_pod
from tests.plugin_harness import filter_statuses, run_filter

DISK = Status(Code.UNSCHEDULABLE, (ERR_REASON_DISK_CONFLICT,))
RWOP = Status(Code.UNSCHEDULABLE, (ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,))

GCE_FOO = {"gcePersistentDisk": {"pdName": "foo"}}
GCE_BAR = {"gcePersistentDisk": {"pdName": "bar"}}
AWS_FOO = {"awsElasticBlockStore": {"volumeID": "foo"}}
AWS_BAR = {"awsElasticBlockStore": {"volumeID": "bar"}}
RBD_AB = {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD_CD = {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI_1 = {"iscsi": {"targetPortal": "127.0.0.1:3260", "lun": 0, "fsType": "ext4",
                     "iqn": "iqn.2016-12.server:storage.target01"}}
ISCSI_2 = {"iscsi": {"targetPortal": "127.0.0.1:3260", "lun": 0, "fsType": "ext4",
                     "iqn": "iqn.2017-12.server:storage.target01"}}
EMPTY_DIR: dict[str, Any] = {"emptyDir": {}}


def with_volumes(*sources: dict[str, Any], name: str = "pod", ns: str = "default",
                 read_only: bool = False) -> Pod:
    volumes = []
    for i, source in enumerate(sources):
        vol: dict[str, Any] = {"name": f"v{i}"}
        for kind, body in source.items():
            vol[kind] = {**body, "readOnly": True} if read_only and kind != "emptyDir" \
                else dict(body)
        volumes.append(vol)
    return make_pod(name, ns).set("spec.volumes", volumes).obj()


def node_with(*pods: Pod) -> NodeInfo:
    info = NodeInfo(make_node("node-1").obj())
    for p in pods:
        info.add_pod(p)
    return info


@pytest.mark.parametrize(
    ("name", "pod", "existing", "want"),
    [
        # upstream's four tables, one per kind: nothing, one state, same, different
        ("gce nothing", with_volumes(), [], None),
        ("gce one state", with_volumes(GCE_FOO), [], None),
        ("gce same state", with_volumes(GCE_FOO), [with_volumes(GCE_FOO, name="e")], DISK),
        ("gce different state", with_volumes(GCE_BAR), [with_volumes(GCE_FOO, name="e")], None),
        ("volume without restrictions", with_volumes(EMPTY_DIR),
         [with_volumes(GCE_FOO, name="e")], None),
        ("aws same state", with_volumes(AWS_FOO), [with_volumes(AWS_FOO, name="e")], DISK),
        ("aws different state", with_volumes(AWS_BAR), [with_volumes(AWS_FOO, name="e")], None),
        ("rbd same state", with_volumes(RBD_AB), [with_volumes(RBD_AB, name="e")], DISK),
        ("rbd different monitors", with_volumes(RBD_CD), [with_volumes(RBD_AB, name="e")],
         None),
        ("iscsi same state", with_volumes(ISCSI_1), [with_volumes(ISCSI_1, name="e")], DISK),
        ("iscsi different iqn", with_volumes(ISCSI_2), [with_volumes(ISCSI_1, name="e")],
         None),
        # our own: read-only mounts
        ("gce both read-only", with_volumes(GCE_FOO, read_only=True),
         [with_volumes(GCE_FOO, name="e", read_only=True)], None),
        ("gce one read-only", with_volumes(GCE_FOO, read_only=True),
         [with_volumes(GCE_FOO, name="e")], DISK),
        ("aws read-only still conflicts", with_volumes(AWS_FOO, read_only=True),
         [with_volumes(AWS_FOO, name="e", read_only=True)], DISK),
        ("iscsi both read-only", with_volumes(ISCSI_1, read_only=True),
         [with_volumes(ISCSI_1, name="e", read_only=True)], None),
        ("rbd both read-only", with_volumes(RBD_AB, read_only=True),
         [with_volumes(RBD_AB, name="e", read_only=True)], None),
        ("rbd one shared monitor", with_volumes(
            {"rbd": {"monitors": ["b", "z"], "pool": "foo", "image": "bar"}}),
         [with_volumes(RBD_AB, name="e")], DISK),
        ("rbd other image", with_volumes(
            {"rbd": {"monitors": ["a"], "pool": "foo", "image": "other"}}),
         [with_volumes(RBD_AB, name="e")], None),
        ("rbd default pool equals explicit rbd", with_volumes(
            {"rbd": {"monitors": ["a"], "image": "img"}}),
         [with_volumes({"rbd": {"monitors": ["a"], "pool": "rbd", "image": "img"}},
                       name="e")], DISK),
        ("gce and aws of the same name do not conflict", with_volumes(AWS_FOO),
         [with_volumes(GCE_FOO, name="e")], None),
        ("second volume conflicts", with_volumes(GCE_BAR, AWS_FOO),
         [with_volumes(EMPTY_DIR, AWS_FOO, name="e")], DISK),
        ("other namespace still conflicts (disks are node-wide)",
         with_volumes(GCE_FOO), [with_volumes(GCE_FOO, name="e", ns="other")], DISK),
    ],
)
def test_disk_conflicts(name: str, pod: Pod, existing: list[Pod], want: Status | None
                        ) -> None:
    assert filter_statuses(new(), pod, node_with(*existing)) == [want]


def test_pre_filter_skips_pods_without_checked_volumes() -> None:
    plugin = new()
    for pod in (make_pod().obj(), with_volumes(EMPTY_DIR),
                with_volumes({"configMap": {"name": "x"}})):
        _, status = plugin.pre_filter(CycleState(), pod, [])
        assert status is not None and status.code is Code.SKIP


def test_pre_filter_passes_pods_with_disks() -> None:
    assert new().pre_filter(CycleState(), with_volumes(GCE_FOO), []) == (None, None)


# -- ReadWriteOncePod -----------------------------------------------------------------

def claim(name: str, *modes: str, ns: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "1"},
            "spec": {"accessModes": list(modes)}}


def claims_pod(name: str, *claims: str, node: str = "") -> Pod:
    b = make_pod(name)
    for c in claims:
        b = b.pvc(c)
    if node:
        b = b.node(node)
    return b.obj()


def cluster(pods: list[Pod], claims: list[dict[str, Any]]) -> ClusterState:
    c = ClusterState([make_node("node-1").obj(), make_node("node-2").obj()], pods)
    for obj in claims:
        c.storage.upsert("PersistentVolumeClaim", obj)
    return c


RWOP1 = claim("claim-with-rwop-1", "ReadWriteOncePod")
RWOP2 = claim("claim-with-rwop-2", "ReadWriteOncePod")
RWX = claim("claim-with-rwx", "ReadWriteMany")


def test_claim_not_found_is_unresolvable_with_the_listers_message() -> None:
    out = run_filter(new(), claims_pod("p", "claim-with-rwop-1"), cluster([], []))
    assert out.stopped == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                 ('persistentvolumeclaim "claim-with-rwop-1" not found',))


def test_first_missing_claim_in_volume_order_is_named() -> None:
    out = run_filter(new(), claims_pod("p", "claim-with-rwx", "gone-1", "gone-2"),
                     cluster([], [RWX]))
    assert out.stopped is not None
    assert out.stopped.reasons == ('persistentvolumeclaim "gone-1" not found',)


def test_no_access_mode_conflict_skips() -> None:
    existing = claims_pod("rwx-user", "claim-with-rwx", node="node-1")
    out = run_filter(new(), claims_pod("p", "claim-with-rwop-1"),
                     cluster([existing], [RWOP1, RWX]))
    assert out.stopped is not None and out.stopped.is_skip


@pytest.mark.parametrize("claims", [["claim-with-rwop-1"],
                                    ["claim-with-rwop-1", "claim-with-rwop-2"]])
def test_claim_in_use_rejects_every_node(claims: list[str]) -> None:
    users = [claims_pod("user", *claims, node="node-1"),
             claims_pod("rwx-user", "claim-with-rwx", node="node-1")]
    out = run_filter(new(), claims_pod("p", *claims), cluster(users, [RWOP1, RWOP2, RWX]))
    assert out.stopped is None
    assert out.statuses == [RWOP, RWOP]  # node-2 too: the claim is in use cluster-wide


def test_claim_used_only_by_a_pending_pod_is_free() -> None:
    pending = claims_pod("pending", "claim-with-rwop-1")
    out = run_filter(new(), claims_pod("p", "claim-with-rwop-1"), cluster([pending], [RWOP1]))
    assert out.stopped is not None and out.stopped.is_skip


def test_claim_of_another_namespace_is_another_claim() -> None:
    other_ns = make_pod("user", "other").pvc("claim-with-rwop-1").node("node-1").obj()
    c = cluster([other_ns], [RWOP1, claim("claim-with-rwop-1", "ReadWriteOncePod",
                                           ns="other")])
    out = run_filter(new(), claims_pod("p", "claim-with-rwop-1"), c)
    assert out.stopped is not None and out.stopped.is_skip


def test_assumed_user_counts_and_forgetting_it_frees_the_claim() -> None:
    c = cluster([], [RWOP1])
    user = claims_pod("user", "claim-with-rwop-1")
    c.assume(user, "node-2")
    pod = claims_pod("p", "claim-with-rwop-1")
    assert run_filter(new(), pod, c).statuses == [RWOP, RWOP]
    c.forget(user)
    assert run_filter(new(), pod, c).stopped == Status.skip()


def test_disk_conflict_is_reported_before_the_claim_conflict() -> None:
    user = claims_pod("user", "claim-with-rwop-1", node="node-1")
    disk_user = with_volumes(GCE_FOO, name="disk-user")
    c = cluster([user], [RWOP1])
    c.assume(disk_user, "node-1")
    raw = make_pod("p").pvc("claim-with-rwop-1").raw()
    raw["spec"]["volumes"].append({"name": "d", **GCE_FOO})
    pod = make_pod("p").set("spec.volumes", raw["spec"]["volumes"]).obj()
    out = run_filter(new(), pod, c)
    assert out.by_node() == {"node-1": DISK, "node-2": RWOP}


def test_generic_ephemeral_claims_are_not_looked_up() -> None:
    # Upstream looks at persistentVolumeClaim volumes only.
    pod = make_pod("p").set("spec.volumes", [{"name": "scratch", "ephemeral": {}}]).obj()
    assert run_filter(new(), pod, cluster([], [])).stopped == Status.skip()


def test_filter_without_pre_filter_is_upstreams_error() -> None:
    status = new().filter(CycleState(), with_volumes(GCE_FOO), node_with())
    assert status == Status.error('cannot read "PreFilterVolumeRestrictions" from cycleState')


@pytest.mark.parametrize(("spec", "field"), [(None, "spec must be an object"),
                                             ("oops", "spec must be an object"),
                                             ({"accessModes": "ReadWriteOncePod"},
                                              "spec.accessModes must be a list")])
def test_malformed_claim_is_named_not_raised(spec: Any, field: str) -> None:
    bad = claim("bad", "ReadWriteOncePod")
    if spec is None:
        del bad["spec"]
    else:
        bad["spec"] = spec
    out = run_filter(new(), claims_pod("p", "bad"), cluster([], [bad]))
    assert out.stopped == Status.unresolvable(f"PersistentVolumeClaim default/bad: {field}")


# -- events and hints -----------------------------------------------------------------

def test_events() -> None:
    got = {(e.event.resource, e.event.action, e.hint is not None)
           for e in new().events_to_register()}
    assert got == {(POD, ActionType.DELETE, True), (NODE, ActionType.ADD, False),
                   (PERSISTENT_VOLUME_CLAIM, ActionType.ADD, True)}


@pytest.mark.parametrize(
    ("pod", "deleted", "want"),
    [
        (with_volumes(GCE_FOO), with_volumes(GCE_FOO, name="d"), QUEUE),
        (with_volumes(GCE_FOO), with_volumes(GCE_BAR, name="d"), QUEUE_SKIP),
        (with_volumes(AWS_FOO), with_volumes(AWS_FOO, name="d"), QUEUE),
        (with_volumes(AWS_FOO), with_volumes(AWS_BAR, name="d"), QUEUE_SKIP),
        (with_volumes(RBD_AB), with_volumes(RBD_AB, name="d"), QUEUE),
        (with_volumes(RBD_AB), with_volumes(RBD_CD, name="d"), QUEUE_SKIP),
        (with_volumes(ISCSI_1), with_volumes(ISCSI_1, name="d"), QUEUE),
        (with_volumes(ISCSI_1), with_volumes(ISCSI_2, name="d"), QUEUE_SKIP),
        (claims_pod("pod1", "claim-rwop"), claims_pod("pod2", "claim-rwop"), QUEUE),
        (claims_pod("pod1", "claim-1-rwop"), claims_pod("pod2", "claim-2-rwop"), QUEUE_SKIP),
        # our own: upstream compares namespaces first, even for disks
        (with_volumes(GCE_FOO), with_volumes(GCE_FOO, name="d", ns="other"), QUEUE_SKIP),
    ],
)
def test_hint_after_pod_deleted(pod: Pod, deleted: Pod, want: object) -> None:
    assert after_pod_deleted(pod, deleted, None) is want


@pytest.mark.parametrize(
    ("pod", "added", "want"),
    [
        (claims_pod("p", "claim-with-rwx-1", "claim-with-rwx-2"), claim("claim-with-rwx-1"),
         QUEUE),
        (claims_pod("p", "claim-with-rwx-1"), claim("claim-with-rwx-2"), QUEUE_SKIP),
        (make_pod("p", "kube-system").pvc("claim-with-rwx-1").obj(), claim("claim-with-rwx-1"),
         QUEUE_SKIP),
    ],
)
def test_hint_after_claim_added(pod: Pod, added: dict[str, Any], want: object) -> None:
    assert after_own_claim_change(pod, None, added) is want


def test_factory() -> None:
    assert new(None).name == NAME == "VolumeRestrictions"
    with pytest.raises(PluginError):
        new({"x": 1})


# -- PreFilterExtensions ------------------------------------------------------------

def test_removing_the_claims_user_frees_it_and_adding_it_back_takes_it() -> None:
    """RemovePod/AddPod (preemption's dry runs): the in-use count follows the user, on
    a cloned state, leaving the original alone; by claim name, as upstream."""
    user = claims_pod("user", "claim-with-rwop-1", "claim-with-rwx", node="node-1")
    c = cluster([user], [RWOP1, RWX])
    pod = claims_pod("p", "claim-with-rwop-1")
    plugin = new()
    state = CycleState(c.node_infos(), c)
    assert plugin.pre_filter(state, pod, c.node_infos()) == (None, None)
    info = c.get("node-2")
    assert info is not None
    assert plugin.filter(state, pod, info) == RWOP
    dry = state.clone()
    assert plugin.remove_pod(dry, pod, user, info) is None
    assert plugin.filter(dry, pod, info) is None
    assert plugin.filter(state, pod, info) == RWOP  # the original is untouched
    assert plugin.add_pod(dry, pod, user, info) is None
    assert plugin.filter(dry, pod, info) == RWOP
    # A pod without the claim changes nothing; without PreFilter's state, an error.
    assert plugin.remove_pod(dry, pod, claims_pod("x", "claim-with-rwx"), info) is None
    assert plugin.filter(dry, pod, info) == RWOP
    failed = plugin.remove_pod(CycleState(), pod, user, info)
    assert failed is not None and failed.code is Code.ERROR
