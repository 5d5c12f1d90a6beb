"""Pods with DRA ResourceClaims on the real API server (issue 12, item 4; issue 28):
a pod whose template claim the resourceclaim controller creates is bound with its
claim allocated and reserved for it, a second pod cannot take the same device, and
freeing it lets the waiting pod bind on the claim's event; a pod whose template's
claim does not exist is held out of the queue silently (upstream's PreEnqueue), and
one whose claim cannot be allocated stays Pending with a FailedScheduling event in
upstream's words (a DeviceClass that does not exist), instead of being bound with
its claims unallocated."""

from __future__ import annotations

import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from policyd.daemon.queue import GATED, UNSCHEDULABLE
from policyd.daemon.run import Daemon
from tests.e2e.helpers import Cluster, DaemonFactory, write_profile
from tests.polling import wait_for

# What follows the refusal: DynamicResources' PostFilter, then DefaultPreemption's
# (preemption cannot help a pod refused as unresolvable), as kube-scheduler v1.36.3
# words it for a pod its own DynamicResources refuses in PreFilter.
POST_FILTER = ("no new claims to deallocate, preemption: 0/1 nodes are available: "
               "1 Preemption is not helpful for scheduling.")


def test_claim_pods_stay_pending_with_the_reason(cluster: Cluster, daemons: DaemonFactory,
                                                 policy_dir: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    cluster.node("n1")
    # A real ResourceClaim for one pod; the other's template does not exist (the API
    # server still creates the pod).
    cluster.client.request(
        "POST", f"/apis/resource.k8s.io/v1/namespaces/{cluster.ns}/resourceclaims",
        body={"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": "shared-accelerator"},
              "spec": {"devices": {"requests": [{"name": "acc", "exactly": {
                  "deviceClassName": "accelerators.example.com"}}]}}})
    d = daemons.start(write_profile(policy_dir.parent, sched))
    claims = {"gpu-job": {"name": "gpu", "resourceClaimTemplateName": "single-gpu"},
              "shared": {"name": "gpu", "resourceClaimName": "shared-accelerator"}}
    for name, claim in claims.items():
        pod = cluster.pod(name, sched, resourceClaims=[claim])
        assert pod["spec"]["resourceClaims"] == [claim]
    cluster.pod("plain", sched)
    assert cluster.wait_bound("plain") == "n1"  # the daemon is scheduling

    # No claim controller makes gpu-job's claim (its template does not exist):
    # DynamicResources' PreEnqueue holds it out of the queue, no cycle, no event.
    gpu_job = cluster.get_pod("gpu-job")["metadata"]["uid"]  # type: ignore[index]
    wait_for(lambda: d.scheduler.queue.where(gpu_job) == GATED, 10, "gpu-job gated")
    expected = {
        "shared": "request acc: device class accelerators.example.com does not exist"}
    for name, reason in expected.items():
        message = f"0/1 nodes are available: {reason}. {POST_FILTER}"
        events = wait_for(partial(cluster.events, pod=name, reason="FailedScheduling"),
                          15, f"FailedScheduling for {name}")
        assert [(e["type"], e["message"]) for e in events] == [("Warning", message)]
        assert events[0]["source"]["component"] == sched
        cond = wait_for(partial(cluster.condition, name), 10, "PodScheduled condition")
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "False", "Unschedulable", message)
        uid = cluster.get_pod(name)["metadata"]["uid"]  # type: ignore[index]
        wait_for(partial(_waits_unschedulable, d, uid), 10,
                 "unschedulable")
    # Still Pending a while later: never bound with its claim unallocated; the held
    # pod never tried.
    time.sleep(1.5)
    assert cluster.events(pod="gpu-job", reason="FailedScheduling") == []
    assert cluster.condition("gpu-job") is None
    for name in [*expected, "gpu-job"]:
        assert cluster.node_of(name) is None
        assert (cluster.get_pod(name) or {})["status"].get("phase") == "Pending"


DRA = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"


def _waits_unschedulable(d: Daemon, uid: str) -> bool:
    return bool(d.scheduler.queue.where(uid) == UNSCHEDULABLE)


def _claim_of(cluster: Cluster, pod: str) -> dict[str, Any] | None:
    """The ResourceClaim generated for `pod`'s one template claim, once it exists."""
    statuses = ((cluster.get_pod(pod) or {}).get("status") or {}).get(
        "resourceClaimStatuses") or []
    name = statuses[0].get("resourceClaimName") if statuses else None
    if not name:
        return None
    return cluster.get(f"{DRA}/namespaces/{cluster.ns}/resourceclaims/{name}")


def test_a_device_is_allocated_reserved_and_freed_for_the_next_pod(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    sched = f"policyd-{suffix}"
    cluster.node("n1")
    device_class = f"gpu-{suffix}"
    cluster._create_cluster_object(f"{DRA}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": device_class},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    # One GPU on n1, in a pool of its own.
    cluster._create_cluster_object(f"{DRA}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"n1-{suffix}"},
        "spec": {"driver": DRIVER, "nodeName": "n1",
                 "pool": {"name": f"n1-{suffix}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "attributes": {
                     "model": {"string": "a100"}}}]}})
    cluster.client.request(
        "POST", f"{DRA}/namespaces/{cluster.ns}/resourceclaimtemplates",
        body={"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
              "metadata": {"name": "one-gpu"},
              "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                  "deviceClassName": device_class}}]}}}})
    daemons.start(write_profile(policy_dir.parent, sched))
    claims = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]

    cluster.pod("first", sched, resourceClaims=claims)
    assert cluster.wait_bound("first", 30) == "n1"
    first = cluster.get_pod("first") or {}
    claim = wait_for(lambda: _claim_of(cluster, "first"), 10, "the first pod's claim")
    status = claim.get("status") or {}
    # Written at PreBind as upstream's bindClaim writes it: the allocation with the
    # device and the node it is on, the pod in reservedFor, the finalizer.
    assert [(r["request"], r["driver"], r["pool"], r["device"])
            for r in status["allocation"]["devices"]["results"]] == [
        ("gpu", DRIVER, f"n1-{suffix}", "gpu-0")]
    terms = status["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    assert status["reservedFor"] == [{"resource": "pods", "name": "first",
                                      "uid": first["metadata"]["uid"]}]
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]

    # The one device is taken: the second pod waits, saying why (once its claim
    # exists; before, PreEnqueue holds it silently).
    cluster.pod("second", sched, resourceClaims=claims)

    def cannot_allocate() -> list[dict[str, Any]]:
        return [e for e in cluster.events(pod="second", reason="FailedScheduling")
                if "1 cannot allocate all claims" in e["message"]]

    wait_for(cannot_allocate, 30, "FailedScheduling for the second pod: cannot allocate")
    assert cluster.node_of("second") is None

    # Freed when the first pod goes (the resourceclaim controller takes it out of
    # reservedFor and deallocates or deletes its claim): the claim's event moves the
    # waiting pod within a second of the device being free, long before any periodic
    # flush or backoff.
    first_claim = _claim_of(cluster, "first")
    assert first_claim is not None
    claim_path = (f"{DRA}/namespaces/{cluster.ns}/resourceclaims/"
                  f"{first_claim['metadata']['name']}")
    cluster.delete_pod("first")

    def device_free() -> bool:
        current = cluster.get(claim_path)
        return current is None or not (current.get("status") or {}).get("allocation")

    wait_for(device_free, 30, "the first pod's claim deallocated or deleted", interval=0.02)
    freed = time.monotonic()
    assert cluster.wait_bound("second", 30) == "n1"
    assert time.monotonic() - freed < 1.5  # a second, and the polling of this test
    second = wait_for(lambda: _claim_of(cluster, "second"), 10, "the second pod's claim")
    results = second["status"]["allocation"]["devices"]["results"]
    assert [r["device"] for r in results] == ["gpu-0"]
