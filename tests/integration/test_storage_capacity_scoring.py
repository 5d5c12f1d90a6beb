"""StorageCapacityScoring turned on: kube-scheduler v1.36.3 started with
`--feature-gates=StorageCapacityScoring=true` and policyd's VolumeBinding built with the
gate place the same pod on the same node, with the same VolumeBinding score per node.

The scene is chosen so that the gate decides: two nodes, `roomy` with the larger CPU
(NodeResourcesFit and BalancedAllocation prefer it) and `pooled` whose zone's
CSIStorageCapacity is five times larger (capacity scoring prefers it by 40 points);
the pod's claim is provisioned by a CSI driver that tracks capacity. With the gate on
both schedulers pick `pooled`; policyd with v1.36's defaults picks `roomy`. kube-scheduler's
choice is read from the claim's `volume.kubernetes.io/selected-node` (its PreBind writes
it, then waits for a provisioner this test does not run), its scores from its log.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.config.plugins import default_framework
from policyd.devcluster import ControlPlane
from policyd.devcluster.controlplane import KubeScheduler
from policyd.engine.cycle import schedule_one
from policyd.features import FeatureGates, with_settings
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient
from policyd.kube.cluster_read import read_cluster
from policyd.model.cluster import ClusterState
from policyd.model.cluster_files import snapshot_from_objects
from policyd.model.records import pod_from_dict
from policyd.plugins.volumebinding import NAME as VOLUME_BINDING
from tests.integration.differential.runner import kube_scheduler_config
from tests.integration.differential.score_log import SCORE_LOG_ARGS, KubeScores, read_score_lines

pytestmark = pytest.mark.integration

GATES = with_settings([("StorageCapacityScoring", True)])
SCHEDULER = "policyd-capacity-scoring"
DRIVER = "capacity.csi.example.com"
ZONE = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@pytest.fixture(scope="module")
def client(control_plane: ControlPlane) -> Iterator[KubeClient]:
    c = KubeClient.connect(ConnectionSettings(kubeconfig=str(control_plane.kubeconfig_path),
                                              qps=200, burst=200, timeout=15))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def gated_scheduler(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[KubeScheduler]:
    path: Path = tmp_path_factory.mktemp("capacity-scoring") / "kube-scheduler.json"
    path.write_text(json.dumps(kube_scheduler_config(SCHEDULER), indent=2))
    scheduler = control_plane.start_kube_scheduler(
        path, extra_args=(*SCORE_LOG_ARGS, "--feature-gates=StorageCapacityScoring=true"))
    try:
        yield scheduler
    finally:
        scheduler.stop()


def policyd_decision(cluster: ClusterState, pod: dict[str, Any], gates: FeatureGates
                     ) -> tuple[str | None, dict[str, int]]:
    """policyd's node and VolumeBinding's weighted score per node (reference path)."""
    fw = default_framework(seed=1, features=gates)
    result = schedule_one(fw, pod_from_dict(pod), cluster, reference=True)
    volume_scores: dict[str, int] = {}
    if result.scores is not None:
        for ps in result.scores.plugins:
            if ps.plugin == VOLUME_BINDING:
                volume_scores = {n.name: s * ps.weight
                                 for n, s in zip(result.scores.nodes, ps.normalized,
                                                 strict=True)}
    return result.node, volume_scores


def post(client: KubeClient, path: str, obj: dict[str, Any]) -> None:
    client.request("POST", path, body=obj)


def test_storage_capacity_scoring_places_as_kube_scheduler(
        client: KubeClient, gated_scheduler: KubeScheduler) -> None:
    token = uuid.uuid4().hex[:6]
    case = f"capscore-{token}"
    ns, sc = case, case
    post(client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": ns}})
    nodes = {"roomy": ("8", f"{case}-a"), "pooled": ("4", f"{case}-b")}
    for name, (cpu, zone) in nodes.items():
        post(client, "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"{case}-{name}", "labels": {
                "kubernetes.io/hostname": f"{case}-{name}", ZONE: zone, "case": case}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                       "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}})
    try:
        client.request("GET", f"/apis/storage.k8s.io/v1/csidrivers/{DRIVER}")
    except ApiError as err:
        if err.status != 404:
            raise
        post(client, "/apis/storage.k8s.io/v1/csidrivers", {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
            "metadata": {"name": DRIVER},
            "spec": {"attachRequired": False, "storageCapacity": True}})
    post(client, "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": sc},
        "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer"})
    for zone, size in ((f"{case}-a", "20Gi"), (f"{case}-b", "100Gi")):
        post(client, f"/apis/storage.k8s.io/v1/namespaces/{ns}/csistoragecapacities", {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": zone}, "storageClassName": sc, "capacity": size,
            "nodeTopology": {"matchLabels": {ZONE: zone}}})
    post(client, f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                 "resources": {"requests": {"storage": "10Gi"}}}})
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "app", "namespace": ns},
           "spec": {"schedulerName": SCHEDULER, "nodeSelector": {"case": case},
                    "containers": [{"name": "c", "image": "pause",
                                    "resources": {"requests": {"cpu": "1"}}}],
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}

    # policyd first, on the cluster as the API server holds it before the pod exists
    # (kube-scheduler's PreBind then changes the claim).
    snap = snapshot_from_objects(read_cluster(client).objects, "test")
    cluster = snap.cluster()
    on_node, on_scores = policyd_decision(cluster, pod, GATES)
    off_node, off_scores = policyd_decision(snap.cluster(), pod, with_settings([]))

    post(client, f"/api/v1/namespaces/{ns}/pods", pod)
    deadline = time.monotonic() + 60
    selected = None
    while selected is None and time.monotonic() < deadline:
        claim = client.request("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
        selected = claim["metadata"].get("annotations", {}).get(SELECTED_NODE)
        time.sleep(0.2)
    assert selected is not None, "kube-scheduler chose no node for the claim in 60 s"

    assert selected == on_node == f"{case}-pooled"
    assert off_node == f"{case}-roomy", "the scene must make the gate decide"
    assert off_scores == {}  # gate off: VolumeBinding's PreScore skips
    assert on_scores == {f"{case}-pooled": 90, f"{case}-roomy": 50}

    logged: dict[str, KubeScores] = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        logged.clear()
        read_score_lines(gated_scheduler.log_path.read_text(), logged)
        if f"{ns}/app" in logged:
            break
        time.sleep(0.2)
    kube = logged[f"{ns}/app"]
    assert {node: plugins.get(VOLUME_BINDING) for node, plugins in kube.plugins.items()} \
        == on_scores
