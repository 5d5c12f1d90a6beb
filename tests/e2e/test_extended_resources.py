"""DRA-backed extended resources on the real API server (issue 28): a DeviceClass
naming `spec.extendedResourceName`, a ResourceSlice with one device on n1, and a pod
requesting the extended resource (no device plugin lists it) bound by `policyd run`
as kube-scheduler v1.36.3 binds it: a ResourceClaim created for the pod
(`<pod>-extended-resources-*`, annotated, the pod its controller) with the device
allocated and the pod in reservedFor, and the pod's
`status.extendedResourceClaimStatus` naming the claim and the request each
container's resource maps to."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.e2e.helpers import Cluster, DaemonFactory, write_profile
from tests.polling import wait_for

DRA = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"


def test_an_extended_resource_is_allocated_through_a_created_claim(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    sched = f"policyd-{suffix}"
    resource = f"example.com/gpu-{suffix}"
    cluster.node("n1")
    cluster.node("n2")
    device_class = f"gpu-{suffix}"
    cluster._create_cluster_object(f"{DRA}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": device_class},
        "spec": {"extendedResourceName": resource,
                 "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    cluster._create_cluster_object(f"{DRA}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"n1-{suffix}"},
        "spec": {"driver": DRIVER, "nodeName": "n1",
                 "pool": {"name": f"n1-{suffix}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}]}})
    daemons.start(write_profile(policy_dir.parent, sched))
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "100m", resource: "1"},
                               "limits": {resource: "1"}}}
    cluster.pod("gpu", sched, containers=[container])
    assert cluster.wait_bound("gpu", 30) == "n1"
    pod = cluster.get_pod("gpu") or {}
    uid = pod["metadata"]["uid"]

    status = wait_for(lambda: ((cluster.get_pod("gpu") or {}).get("status") or {}).get(
        "extendedResourceClaimStatus"), 10, "extendedResourceClaimStatus")
    name = status["resourceClaimName"]
    assert name.startswith("gpu-extended-resources-")
    # The request's index is the resource's among all the container's requests, sorted
    # (cpu first): upstream's naming.
    assert status["requestMappings"] == [{"containerName": "main", "resourceName": resource,
                                          "requestName": "container-0-request-1"}]
    found = cluster.get(f"{DRA}/namespaces/{cluster.ns}/resourceclaims/{name}")
    assert found is not None
    claim: dict[str, Any] = found
    meta = claim["metadata"]
    assert meta["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert [(r["kind"], r["name"], r["uid"], r.get("controller"))
            for r in meta["ownerReferences"]] == [("Pod", "gpu", uid, True)]
    assert "resource.kubernetes.io/delete-protection" in meta["finalizers"]
    assert claim["spec"]["devices"]["requests"] == [{"name": "container-0-request-1",
                                                     "exactly": {
        "deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}}]
    claim_status = claim["status"]
    assert [(r["request"], r["driver"], r["pool"], r["device"])
            for r in claim_status["allocation"]["devices"]["results"]] == [
        ("container-0-request-1", DRIVER, f"n1-{suffix}", "gpu-0")]
    assert claim_status["reservedFor"] == [{"resource": "pods", "name": "gpu", "uid": uid}]

    # The one device is taken: a second pod asking for it waits, in upstream's words.
    cluster.pod("second", sched, containers=[container])
    wait_for(lambda: [e for e in cluster.events(pod="second", reason="FailedScheduling")
                      if "cannot allocate all claims" in e["message"]], 30,
             "FailedScheduling for the second pod")
    assert cluster.node_of("second") is None
