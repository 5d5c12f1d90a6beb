"""The storage objects' assume cache: what the scheduler assumed stands until the API
server shows a version at least as new; restore and delete drop it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policyd.model.cluster import ClusterState
from policyd.model.records import pod_from_dict
from policyd.model.storage import (
    CSI_STORAGE_CAPACITY,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    StaleObjectError,
    StorageObjects,
    object_key,
    resource_version,
)
from tests.builders import make_node, make_pod


def pv(name: str, rv: str | None = "5", claim: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if rv is not None:
        meta["resourceVersion"] = rv
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}}
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    return {"kind": "PersistentVolume", "metadata": meta, "spec": spec}


def test_keys_are_namespaced_only_for_namespaced_kinds() -> None:
    claim = {"metadata": {"name": "data", "namespace": "shop"}}
    assert object_key(PERSISTENT_VOLUME_CLAIM, claim) == "shop/data"
    assert object_key(CSI_STORAGE_CAPACITY, {"metadata": {"name": "c"}}) == "default/c"
    assert object_key(PERSISTENT_VOLUME, {"metadata": {"name": "pv1", "namespace": "x"}}) \
        == "pv1"


def test_resource_versions_that_are_not_numbers_count_as_oldest() -> None:
    assert resource_version(pv("a", "12")) == 12
    assert resource_version(pv("a", None)) == -1
    assert resource_version(pv("a", "abc")) == -1


def test_an_assumption_stands_until_the_informer_shows_a_version_as_new() -> None:
    s = StorageObjects()
    s.upsert(PERSISTENT_VOLUME, pv("pv1", "5"))
    bound = pv("pv1", "5", claim="data")
    s.pvs.assume(bound)
    assert s.pvs.get("pv1") is bound and s.pvs.is_assumed("pv1")
    assert s.pvs.api_object("pv1") is not bound
    s.pvs.upsert(pv("pv1", "4"))  # an older event, replayed: the assumption stays
    assert s.pvs.get("pv1") is bound
    newer = pv("pv1", "6", claim="data")
    s.pvs.upsert(newer)  # the write landed
    assert s.pvs.get("pv1") is newer and not s.pvs.is_assumed("pv1")


def test_restore_and_delete_drop_the_assumption() -> None:
    s = StorageObjects()
    original = pv("pv1", "5")
    s.upsert(PERSISTENT_VOLUME, original)
    s.pvs.assume(pv("pv1", "5", claim="data"))
    s.pvs.restore("pv1")
    assert s.pvs.get("pv1") is original
    s.pvs.assume(pv("pv1", "5", claim="data"))
    s.delete(PERSISTENT_VOLUME, "pv1")
    assert s.pvs.get("pv1") is None and "pv1" not in s.pvs


def test_assuming_an_unknown_or_changed_object_is_refused() -> None:
    s = StorageObjects()
    with pytest.raises(StaleObjectError, match="pv1 is not in the cache"):
        s.pvs.assume(pv("pv1", "5"))
    s.upsert(PERSISTENT_VOLUME, pv("pv1", "7"))
    with pytest.raises(StaleObjectError, match="changed since it was read"):
        s.pvs.assume(pv("pv1", "6", claim="data"))


def test_every_change_moves_the_generation() -> None:
    s = StorageObjects()
    seen = [s.generation]
    s.upsert(STORAGE_CLASS, {"metadata": {"name": "fast"}, "provisioner": "x"})
    s.upsert(PERSISTENT_VOLUME, pv("pv1"))
    s.pvs.assume(pv("pv1", claim="data"))
    s.pvs.restore("pv1")
    s.delete(STORAGE_CLASS, "fast")
    seen.append(s.generation)
    assert seen[-1] == seen[0] + 5
    before = s.generation
    s.delete(STORAGE_CLASS, "missing")  # nothing there: nothing changed
    assert s.generation == before


def test_decoded_values_are_kept_per_object_version_and_not_in_the_object() -> None:
    s = StorageObjects()
    first = pv("pv1", "5")
    s.upsert(PERSISTENT_VOLUME, first)
    calls: list[str] = []

    def size(obj: dict[str, Any]) -> str:
        calls.append(obj["metadata"]["resourceVersion"])
        return str(obj["spec"]["capacity"]["storage"])

    assert s.decoded(first, "size", size) == "1Gi"
    assert s.decoded(first, "size", size) == "1Gi"
    assert calls == ["5"]
    assert copy.deepcopy(first) == pv("pv1", "5")  # nothing was written into it
    second = pv("pv1", "6")
    second["spec"]["capacity"]["storage"] = "2Gi"
    s.upsert(PERSISTENT_VOLUME, second)
    assert s.decoded(second, "size", size) == "2Gi"
    assert calls == ["5", "6"]


def test_the_cluster_knows_which_claims_pods_on_nodes_use() -> None:
    with_claim = pod_from_dict({
        "kind": "Pod", "metadata": {"name": "db-0", "namespace": "shop", "uid": "u1"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}], "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}})
    assert with_claim.persistent_claims == ("data-db-0",)
    assert with_claim.pvc_names == ("data-db-0", "db-0-scratch")
    other = make_pod("other").node("n1").obj()
    cluster = ClusterState([make_node("n1").obj()], [with_claim, other])
    assert cluster.claim_in_use("shop/data-db-0")
    assert not cluster.claim_in_use("shop/db-0-scratch")  # upstream counts PVC volumes
    cluster.remove_node("n1")
    assert not cluster.claim_in_use("shop/data-db-0")  # on no known node
    cluster.upsert_node(make_node("n1").obj())
    assert cluster.claim_in_use("shop/data-db-0")
    cluster.remove_pod("u1")
    assert not cluster.claim_in_use("shop/data-db-0")
