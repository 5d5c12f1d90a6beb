"""Pods with DRA ResourceClaims that cannot be allocated on the real API server (issue
12, item 4; issue 28): the daemon leaves them Pending with a FailedScheduling event in
upstream's words (a template's claim not created yet, a DeviceClass that does not
exist), instead of binding them with their claims unallocated. Needs the daemon to
watch ResourceClaims and DeviceClasses (branch draobj)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from policyd.daemon.queue import UNSCHEDULABLE
from tests.e2e.helpers import Cluster, DaemonFactory, wait_for, write_profile

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

    # Upstream's PreEnqueue would hold gpu-job back silently; policyd has none, so its
    # PreFilter says why (the same text).
    expected = {
        "gpu-job": f'pod "{cluster.ns}/gpu-job": ResourceClaim not created yet',
        "shared": "request acc: device class accelerators.example.com does not exist"}
    for name, reason in expected.items():
        message = f"0/1 nodes are available: {reason}. {POST_FILTER}"
        events = wait_for(lambda n=name: cluster.events(pod=n, reason="FailedScheduling"),
                          15, f"FailedScheduling for {name}")
        assert [(e["type"], e["message"]) for e in events] == [("Warning", message)]
        assert events[0]["source"]["component"] == sched
        cond = wait_for(lambda n=name: cluster.condition(n), 10, "PodScheduled condition")
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "False", "Unschedulable", message)
        uid = cluster.get_pod(name)["metadata"]["uid"]  # type: ignore[index]
        wait_for(lambda u=uid: d.scheduler.queue.where(u) == UNSCHEDULABLE, 10,
                 "unschedulable")
    # Still Pending a while later: never bound with its claim unallocated.
    time.sleep(1.5)
    for name in expected:
        assert cluster.node_of(name) is None
        assert (cluster.get_pod(name) or {})["status"].get("phase") == "Pending"
