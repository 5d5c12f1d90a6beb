"""Dynamic provisioning on the real control plane: a WaitForFirstConsumer claim waits
for a node, the real PV controller hands it to the test provisioner, the provisioner's
PV gets the claim Bound (issue 16). The scheduler's part (choosing the node, writing
the selected-node annotation) is played by the test here."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.helpers import Cluster
from tests.e2e.provisioner import (
    HOSTNAME,
    PROVISIONED_BY,
    SELECTED_NODE,
    Provisioner,
    volume_name,
)
from tests.polling import wait_for

Obj = dict[str, Any]


@pytest.fixture
def driver(cluster: Cluster) -> Iterator[str]:
    """A unique provisioner name with a WaitForFirstConsumer StorageClass of the same
    name; the class and every PV it provisioned are deleted afterwards."""
    name = f"{uuid.uuid4().hex[:8]}.csi.policyd.test"
    cluster.client.request("POST", "/apis/storage.k8s.io/v1/storageclasses", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": name,
        "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"})
    try:
        yield name
    finally:
        claims = f"/api/v1/namespaces/{cluster.ns}/persistentvolumeclaims"
        cluster.client.request("DELETE", claims)
        for pv in cluster.client.request("GET", "/api/v1/persistentvolumes")["items"]:
            if pv["metadata"].get("annotations", {}).get(PROVISIONED_BY) == name:
                cluster.client.request("DELETE", f"/api/v1/persistentvolumes/"
                                       f"{pv['metadata']['name']}")
        cluster.client.request("DELETE", f"/apis/storage.k8s.io/v1/storageclasses/{name}")


def _claim_path(cluster: Cluster, name: str) -> str:
    return f"/api/v1/namespaces/{cluster.ns}/persistentvolumeclaims/{name}"


def _create_claim(cluster: Cluster, name: str, storage_class: str) -> Obj:
    return cluster.client.request(
        "POST", f"/api/v1/namespaces/{cluster.ns}/persistentvolumeclaims", body={
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": "3Gi"}}}})


def test_wait_for_first_consumer_claim_is_provisioned_on_the_selected_node(
        cluster: Cluster, driver: str) -> None:
    cluster.node("n1")
    cluster.node("n2")
    with Provisioner(cluster.client, driver) as prov:
        claim = _create_claim(cluster, "data", driver)
        # The PV controller has seen it (its WaitForFirstConsumer event) and leaves it
        # Pending: nothing selected a node yet, so nothing is provisioned.
        wait_for(lambda: [e for e in cluster.events()
                          if e["involvedObject"].get("name") == "data"
                          and e["reason"] == "WaitForFirstConsumer"], 20,
                 "WaitForFirstConsumer event")
        current = cluster.get(_claim_path(cluster, "data")) or {}
        assert current["status"]["phase"] == "Pending"
        assert not prov.provisioned
        assert cluster.get(f"/api/v1/persistentvolumes/{volume_name(claim)}") is None

        # What the scheduler's PreBind writes for dynamic provisioning.
        cluster.client.request(
            "PATCH", _claim_path(cluster, "data"),
            body={"metadata": {"annotations": {SELECTED_NODE: "n2"}}},
            content_type="application/merge-patch+json")
        bound = wait_for(lambda: (c := cluster.get(_claim_path(cluster, "data")))
                         and c["status"].get("phase") == "Bound" and c, 30, "claim Bound")
        assert prov.errors == []

    annotations = bound["metadata"]["annotations"]
    # The real PV controller handed the claim to the provisioner, then bound it.
    assert annotations["volume.kubernetes.io/storage-provisioner"] == driver
    assert annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert bound["spec"]["volumeName"] == volume_name(claim)
    assert prov.provisioned == {(cluster.ns, "data"): volume_name(claim)}
    pv = cluster.get(f"/api/v1/persistentvolumes/{volume_name(claim)}") or {}
    assert pv["status"]["phase"] == "Bound"
    assert pv["metadata"]["annotations"][PROVISIONED_BY] == driver
    assert pv["spec"]["capacity"]["storage"] == "3Gi"
    assert pv["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pv["spec"]["storageClassName"] == driver
    assert pv["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert pv["spec"]["csi"]["driver"] == driver
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["n2"]}]}]


def test_claims_of_other_provisioners_are_left_alone(cluster: Cluster, driver: str) -> None:
    cluster.node("n1")
    with Provisioner(cluster.client, f"other-{driver}") as other:
        _create_claim(cluster, "theirs", driver)
        cluster.client.request(
            "PATCH", _claim_path(cluster, "theirs"),
            body={"metadata": {"annotations": {SELECTED_NODE: "n1"}}},
            content_type="application/merge-patch+json")
        # Handed to `driver` by the PV controller, which is not this provisioner.
        wait_for(lambda: ((cluster.get(_claim_path(cluster, "theirs")) or {})
                          .get("metadata", {}).get("annotations", {})
                          .get("volume.kubernetes.io/storage-provisioner") == driver),
                 20, "claim handed to its provisioner")
        wait_for(lambda: [e for e in cluster.events()
                          if e["involvedObject"].get("name") == "theirs"
                          and e["reason"] == "ExternalProvisioning"], 20,
                 "ExternalProvisioning event")
    assert other.provisioned == {} and other.errors == []
    claim = cluster.get(_claim_path(cluster, "theirs")) or {}
    assert claim["status"]["phase"] == "Pending"
