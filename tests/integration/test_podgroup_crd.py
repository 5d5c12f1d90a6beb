"""deploy/crds/scheduling.x-k8s.io_podgroups.yaml on the real API server: it becomes
Established, a PodGroup as Kubeflow's training operator writes one is accepted, a
wrongly typed one is refused with a 422 naming the field, and status is written through
its subresource only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ruamel.yaml import YAML

from policyd.kube.client import ApiError, ConnectionSettings, KubeClient
from tests.polling import wait_for

if TYPE_CHECKING:
    from policyd.devcluster import ControlPlane

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "deploy" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAME = "podgroups.scheduling.x-k8s.io"


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> Iterator[KubeClient]:
    client = KubeClient.connect(ConnectionSettings(
        kubeconfig=str(control_plane.kubeconfig_path), qps=-1))
    body = YAML(typ="safe").load(CRD_PATH.read_text())
    try:
        client.request("POST", CRDS, body=body)
    except ApiError as exc:
        if exc.status != 409:
            raise

    def established() -> bool:
        conditions = client.request("GET", f"{CRDS}/{NAME}").get("status", {}).get(
            "conditions") or []
        assert not any(c["type"] == "NonStructuralSchema" for c in conditions), conditions
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for(established, 60, "the PodGroup CRD Established")
    try:
        yield client
    finally:
        client.request("DELETE", f"{CRDS}/{NAME}")
        client.close()


@pytest.fixture
def namespace(kube: KubeClient) -> Iterator[str]:
    ns = f"pg-{uuid.uuid4().hex[:8]}"
    kube.request("POST", "/api/v1/namespaces", body={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    yield ns
    kube.request("DELETE", f"/api/v1/namespaces/{ns}")


def _path(ns: str, name: str = "") -> str:
    base = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"
    return f"{base}/{name}" if name else base


def _group(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": spec}


def test_a_valid_podgroup_is_accepted_and_its_status_is_a_subresource(
    kube: KubeClient, namespace: str
) -> None:
    spec = {"minMember": 16, "scheduleTimeoutSeconds": 60,
            "minResources": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": 16}}
    created = kube.request("POST", _path(namespace), body=_group("train", **spec))
    assert created["spec"] == spec
    # Status in the main resource is ignored ...
    created["status"] = {"phase": "Running", "running": 16}
    updated = kube.request("PUT", _path(namespace, "train"), body=created)
    assert "status" not in updated
    # ... and written through /status, as the PodGroup controller does.
    status = {"phase": "Scheduling", "occupiedBy": "8c1e1d4e-0000-4000-8000-000000000000",
              "running": 3, "succeeded": 0, "failed": 0,
              "scheduleStartTime": "2026-01-02T03:04:05Z"}
    updated["status"] = status
    written = kube.request("PUT", _path(namespace, "train") + "/status", body=updated)
    assert written["status"] == status


@pytest.mark.parametrize(("spec", "field"), [
    ({"minMember": "x"}, "spec.minMember"),
    ({"minMember": 0}, "spec.minMember"),
    ({"minMember": 2, "scheduleTimeoutSeconds": "soon"}, "spec.scheduleTimeoutSeconds"),
    ({"minMember": 2, "minResources": {"cpu": "lots"}}, "spec.minResources.cpu"),
])
def test_a_wrongly_typed_podgroup_is_refused(
    kube: KubeClient, namespace: str, spec: dict[str, Any], field: str
) -> None:
    with pytest.raises(ApiError) as err:
        kube.request("POST", _path(namespace), body=_group("bad", **spec))
    assert err.value.status == 422
    assert field in err.value.message, err.value.message
