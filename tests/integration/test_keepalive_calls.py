"""Binds and events through `KubeClient`'s own keep-alive HTTP/1.1 path against the
real API server, with the two kinds of credentials a kubeconfig gives policyd: the
dev cluster's admin client certificate (TLS) and a ServiceAccount's bearer token."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from policyd.devcluster import ControlPlane
from policyd.kube import api
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient


def _connect(kubeconfig: Path) -> KubeClient:
    client = KubeClient.connect(ConnectionSettings(kubeconfig=str(kubeconfig), qps=-1))
    pool, _ = client._keepalive.get(client._conn)
    assert pool is not None, "the keep-alive path was not taken"
    return client


@pytest.fixture
def admin(control_plane: ControlPlane) -> Iterator[KubeClient]:
    client = _connect(control_plane.kubeconfig_path)
    yield client
    client.close()


@pytest.fixture
def namespace(admin: KubeClient) -> Iterator[str]:
    name = f"keepalive-{uuid.uuid4().hex[:8]}"
    admin.request("POST", "/api/v1/namespaces",
                  body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    admin.request("DELETE", f"/api/v1/namespaces/{name}")


def _pod(client: KubeClient, ns: str, name: str) -> str:
    pod = client.request("POST", f"/api/v1/namespaces/{ns}/pods", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]}})
    return str(pod["metadata"]["uid"])


def _bind_and_record(client: KubeClient, reader: KubeClient, ns: str) -> None:
    uid = _pod(client, ns, "p")
    assert api.bind_pod(client, ns, "p", uid, "node-1") is api.BindOutcome.BOUND
    assert api.bind_pod(client, ns, "p", uid, "node-2") is api.BindOutcome.ALREADY_BOUND
    assert api.bind_pod(client, ns, "gone", "", "node-1") is api.BindOutcome.GONE
    ref = api.pod_ref(ns, "p", uid)
    api.post_event(client, api.event_body(
        ref, event_type="Normal", reason="Scheduled", message="assigned to node-1",
        action="Binding", component="policyd", instance="test"))
    assert reader.request("GET", f"/api/v1/namespaces/{ns}/pods/p")["spec"]["nodeName"] \
        == "node-1"
    events = reader.request("GET", f"/api/v1/namespaces/{ns}/events")["items"]
    assert [(e["reason"], e["involvedObject"]["uid"]) for e in events] == [
        ("Scheduled", uid)]


def test_bind_and_event_with_the_admin_client_certificate(
        admin: KubeClient, namespace: str) -> None:
    _bind_and_record(admin, admin, namespace)
    pool, _ = admin._keepalive.get(admin._conn)
    assert pool is not None and pool.dialled == 1  # every call on one connection


def test_bind_and_event_with_a_service_account_token(
        control_plane: ControlPlane, admin: KubeClient, namespace: str,
        tmp_path: Path) -> None:
    admin.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body={
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "binder"}})
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    # A Role of its own: the aggregated "admin" ClusterRole stays empty without the
    # controller manager.
    admin.request("POST", f"{rbac}/roles", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "binder"},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/binding", "events"],
                   "verbs": ["create", "get", "list"]}]})
    admin.request("POST", f"{rbac}/rolebindings", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "binder"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "binder"},
        "subjects": [{"kind": "ServiceAccount", "name": "binder",
                      "namespace": namespace}]})
    token = admin.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/binder/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 600}})["status"]["token"]
    client = _connect(control_plane.write_token_kubeconfig(tmp_path / "kc", token))
    try:
        _bind_and_record(client, admin, namespace)
    finally:
        client.close()
    wrong = _connect(control_plane.write_token_kubeconfig(tmp_path / "bad", "not-a-token"))
    try:
        with pytest.raises(ApiError) as caught:
            api.bind_pod(wrong, namespace, "p", "", "node-1")
        assert caught.value.status == 401  # the token is what authenticated the others
    finally:
        wrong.close()
