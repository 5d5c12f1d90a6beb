"""The live read's pure parts: one decoder for a file and a list of objects, and the
explain ClusterRole in step with what the read lists. (The read itself runs against the
real API server in tests/e2e/test_kubectl_plugin.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from policyd.errors import InputFileError
from policyd.kube.cluster_read import (
    EXPLAIN_CLUSTER_ROLE,
    POLICY_RESOURCE,
    READ_RESOURCES,
    SNAPSHOT_RESOURCES,
    Resource,
    context_namespace,
)
from policyd.model.cluster_files import (
    WORKLOAD_KINDS,
    Snapshot,
    load_snapshot,
    snapshot_from_objects,
)
from policyd.model.datafile import iter_objects
from policyd.model.disruption import DISRUPTION_KINDS
from policyd.model.dra_objects import DRA_KINDS
from policyd.model.storage import STORAGE_KINDS

ROOT = Path(__file__).resolve().parents[3]
DEMO = (ROOT / "demo" / "cluster.yaml", ROOT / "demo" / "pods.yaml")


def _view(snap: Snapshot) -> dict[str, Any]:
    """Everything a Snapshot holds, comparable (the records compare by identity)."""
    return {
        "nodes": [(n.name, n.labels, n.taints, n.unschedulable, n.allocatable, n.raw)
                  for n in snap.nodes],
        "pods": [(p.key, p.node_name, p.scheduler_name, p.priority, p.raw) for p in snap.pods],
        "namespaces": snap.namespaces,
        "workloads": snap.workloads,
        "storage": snap.storage,
        "disruption": snap.disruption,
        "warnings": snap.warnings,
    }


def test_objects_decode_exactly_as_the_same_objects_in_files() -> None:
    from_files = load_snapshot(*DEMO)
    objects = [obj for path in DEMO for _, obj in iter_objects(path)]
    from_objects = snapshot_from_objects(objects, "https://127.0.0.1:6443")
    assert len(from_objects.nodes) == 6 and len(from_objects.pods) > 0
    assert _view(from_objects) == _view(from_files)


def test_a_bad_object_is_named_with_where_it_came_from() -> None:
    bad = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
           "status": {"allocatable": {"cpu": "lots"}}}
    with pytest.raises(InputFileError) as caught:
        snapshot_from_objects([bad], "https://10.0.0.1:6443")
    assert str(caught.value).startswith("https://10.0.0.1:6443: Node n1: ")
    assert "invalid quantity 'lots'" in str(caught.value)


def test_the_read_lists_every_kind_the_snapshot_loader_takes() -> None:
    kinds = {r.kind for r in SNAPSHOT_RESOURCES}
    assert kinds == {"Node", "Pod", "Namespace", *WORKLOAD_KINDS, *STORAGE_KINDS,
                     *DRA_KINDS, *DISRUPTION_KINDS}
    assert POLICY_RESOURCE.path == "/apis/policyd.io/v1alpha1/schedulingpolicies"


@pytest.mark.parametrize(("path", "api_version", "group", "name"), [
    ("/api/v1/pods", "v1", "", "pods"),
    ("/apis/apps/v1/replicasets", "apps/v1", "apps", "replicasets"),
    ("/apis/policyd.io/v1alpha1/schedulingpolicies", "policyd.io/v1alpha1", "policyd.io",
     "schedulingpolicies"),
])
def test_resource_names(path: str, api_version: str, group: str, name: str) -> None:
    r = Resource(path, "X")
    assert (r.api_version, r.group, r.name) == (api_version, group, name)


def test_explain_cluster_role_grants_exactly_the_lists_the_read_makes() -> None:
    role = YAML(typ="safe").load((ROOT / "deploy" / "explain-clusterrole.yaml").read_text())
    assert role["kind"] == "ClusterRole"
    assert role["metadata"]["name"] == EXPLAIN_CLUSTER_ROLE
    granted = {(group, resource, verb) for rule in role["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]
               for verb in rule["verbs"]}
    assert granted == {(r.group, r.name, "list") for r in READ_RESOURCES}
    kustomization = YAML(typ="safe").load((ROOT / "deploy" / "kustomization.yaml").read_text())
    assert "explain-clusterrole.yaml" in kustomization["resources"]


def test_context_namespace_reads_the_kubeconfig_through_the_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: a, context: {cluster: k, user: u, namespace: team-a}},\n"
        "           {name: b, context: {cluster: k, user: u}}]\n")
    assert context_namespace(str(path), None) == "team-a"  # the current context's
    assert context_namespace(str(path), "b") is None  # none set
    assert context_namespace(str(path), "nope") is None
    assert context_namespace(str(tmp_path / "missing"), None) is None
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{path}")
    assert context_namespace(None, None) == "team-a"  # the first existing entry
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\n")  # no contexts: the client refuses
    assert context_namespace(str(broken), None) is None
