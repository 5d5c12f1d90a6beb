"""load_snapshot's requests, through policyd's own client: what is created where, in
which order, and how refusals read (tests/integration covers a real API server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster import replay
from policyd.devcluster.errors import DevClusterError
from policyd.kube.api import STRATEGIC_MERGE
from policyd.kube.client import ApiError


class FakeKube:
    def __init__(self, refuse: dict[str, ApiError] | None = None) -> None:
        self.calls: list[tuple[str, str, Any, str | None]] = []
        self.refuse = refuse or {}
        self.closed = False

    def request(self, method: str, path: str, *, body: Any = None,
                content_type: str | None = None, **_: Any) -> dict[str, Any]:
        self.calls.append((method, path, body, content_type))
        error = self.refuse.get(path)
        if error is not None:
            raise error
        return {}

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube()
    monkeypatch.setattr(replay, "kube_client_from", lambda path: fake)
    return fake


SNAPSHOT: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "done", "namespace": "team-a", "uid": "u1"},
     "spec": {"nodeName": "n1", "priorityClassName": "batch", "priority": 7},
     "status": {"phase": "Succeeded"}},
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
    {"apiVersion": "apps/v1", "kind": "ReplicaSet",
     "metadata": {"name": "rs", "namespace": "team-a"}, "status": {"replicas": 1}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
     "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80, "nodePort": 30080}]}},
]


def test_objects_are_created_in_dependency_order(kube: FakeKube) -> None:
    result = replay.load_snapshot(Path("kubeconfig"), SNAPSHOT)
    assert [(m, p) for m, p, _, _ in kube.calls] == [
        ("POST", "/api/v1/namespaces"),
        ("POST", "/api/v1/namespaces"),
        ("POST", "/apis/scheduling.k8s.io/v1/priorityclasses"),
        ("POST", "/api/v1/nodes"),
        ("POST", "/api/v1/namespaces/default/services"),
        ("POST", "/apis/apps/v1/namespaces/team-a/replicasets"),
        ("POST", "/api/v1/namespaces/team-a/pods"),
        ("PATCH", "/api/v1/namespaces/team-a/pods/done/status"),
    ]
    bodies = {p: b for _, p, b, _ in kube.calls}
    assert bodies["/apis/scheduling.k8s.io/v1/priorityclasses"]["value"] == 7
    assert bodies["/api/v1/namespaces/default/services"]["spec"] == {"ports": [{"port": 80}]}
    assert "status" not in bodies["/api/v1/namespaces/team-a/pods"]
    assert "uid" not in bodies["/api/v1/namespaces/team-a/pods"]["metadata"]
    assert kube.calls[-1][2:] == ({"status": {"phase": "Succeeded"}}, STRATEGIC_MERGE)
    assert result.created == {"Namespace": 2, "PriorityClass": 1, "Node": 1, "Service": 1,
                              "ReplicaSet": 1, "Pod": 1}
    assert kube.closed


def test_existing_objects_are_skipped(kube: FakeKube) -> None:
    kube.refuse["/api/v1/nodes"] = ApiError(409, "AlreadyExists", "nodes \"n1\" exists")
    result = replay.load_snapshot(Path("kubeconfig"), SNAPSHOT)
    assert result.skipped == {"Node": 1}
    assert "Node" not in result.created


@pytest.mark.parametrize(("message", "shown"), [
    ("Node \"n1\" is invalid: metadata.name: bad", "Node \"n1\" is invalid: metadata.name: bad"),
    ("", "Invalid"),
])
def test_a_refusal_names_the_object_and_the_server_message(
        kube: FakeKube, message: str, shown: str) -> None:
    kube.refuse["/api/v1/nodes"] = ApiError(422, "Invalid", message)
    with pytest.raises(DevClusterError) as exc:
        replay.load_snapshot(Path("kubeconfig"), SNAPSHOT)
    assert str(exc.value) == f"Node n1: the API server refused it: 422 {shown}"
    assert kube.closed


def test_no_reply_is_not_blamed_on_the_object(kube: FakeKube) -> None:
    kube.refuse["/api/v1/namespaces"] = ApiError(0, "ConnectionRefusedError", "refused")
    with pytest.raises(ApiError):
        replay.load_snapshot(Path("kubeconfig"), SNAPSHOT)
