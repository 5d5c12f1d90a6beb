"""The SchedulingPolicy CRD against the real API server: it installs and becomes
Established, the repository's policies are accepted, invalid objects are refused with a
422 naming the problem (OpenAPI and the CEL rules both), `kubectl get` shows the printer
columns, and a status written through /status fills the ACCEPTED column."""

from __future__ import annotations

import copy
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from ruamel.yaml import YAML

from policyd.policy import crd

if TYPE_CHECKING:
    from policyd.devcluster import ControlPlane

REPO = Path(__file__).resolve().parents[2]
# Unique per run: the control plane is shared by the session's tests.
SUFFIX = uuid.uuid4().hex[:6]


def install_crd(api_client: Any) -> None:
    """Create or update the CRD and wait until the API server serves it."""
    # The client takes a plain dict for its typed body (it serializes either).
    api: Any = client.ApiextensionsV1Api(api_client)
    body = crd.build_crd()
    try:
        api.create_custom_resource_definition(body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        current = api.read_custom_resource_definition(crd.CRD_NAME)
        body["metadata"]["resourceVersion"] = current.metadata.resource_version
        api.replace_custom_resource_definition(crd.CRD_NAME, body)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = api.read_custom_resource_definition(crd.CRD_NAME).status
        conditions = {c.type: c for c in (status.conditions or [])} if status else {}
        if "NonStructuralSchema" in conditions:
            pytest.fail(f"not structural: {conditions['NonStructuralSchema'].message}")
        if getattr(conditions.get("Established"), "status", None) == "True":
            return
        time.sleep(0.2)
    pytest.fail("the CRD did not become Established within 60 s")


@pytest.fixture(scope="module")
def objects(api_client: Any) -> Iterator[client.CustomObjectsApi]:
    install_crd(api_client)
    api = client.CustomObjectsApi(api_client)
    yield api
    listed = cast(dict[str, Any], api.list_cluster_custom_object(crd.GROUP, crd.VERSION,
                                                                 crd.PLURAL))
    for item in listed["items"]:
        if item["metadata"]["name"].endswith(SUFFIX):
            api.delete_cluster_custom_object(crd.GROUP, crd.VERSION, crd.PLURAL,
                                             item["metadata"]["name"])


def create(api: client.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    created = api.create_cluster_custom_object(crd.GROUP, crd.VERSION, crd.PLURAL, body)
    return cast(dict[str, Any], created)


def repo_policies() -> list[dict[str, Any]]:
    yaml = YAML(typ="safe")
    out = []
    for path in sorted((REPO / "policies").glob("*.yaml")):
        for doc in yaml.load_all(path.read_text()):
            doc["metadata"]["name"] = f"{doc['metadata']['name']}-{SUFFIX}"
            out.append(doc)
    return out


def valid(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{crd.GROUP}/{crd.VERSION}", "kind": "SchedulingPolicy",
        "metadata": {"name": f"{name}-{SUFFIX}"},
        "spec": {"pluginName": "Probe", "filters": [
            {"id": "prod", "message": "node(s) are not production nodes",
             "nodeLabels": {"matchLabels": {"env": "prod"}}}],
            "scores": [{"id": "zone", "weight": 5, "normalize": "max",
                        "labelValue": {"label": "zone", "values": {"a": 10}}}]},
    }


def kubectl(cp: ControlPlane, *args: str) -> str:
    binary = cp.binaries.kubectl
    assert binary is not None, "the dev control plane has no kubectl"
    result = subprocess.run([str(binary), "--kubeconfig", str(cp.kubeconfig_path), *args],
                            capture_output=True, text=True, timeout=60, check=True)
    return result.stdout


def test_the_repository_policies_are_accepted(objects: client.CustomObjectsApi) -> None:
    policies = repo_policies()
    assert len(policies) >= 4
    for body in policies:
        created = create(objects, body)
        assert created["spec"]["pluginName"] == body["spec"]["pluginName"]
        # Defaulted by the schema, so the MODE column says it.
        assert created["spec"]["mode"] == body["spec"].get("mode", "Enforce")


def _breaks(change: str) -> dict[str, Any]:
    body = valid(change)
    spec = body["spec"]
    if change == "plugin-name":
        spec["pluginName"] = "lowercase"
    elif change == "duplicate-filter-id":
        spec["filters"].append(copy.deepcopy(spec["filters"][0]))
    elif change == "duplicate-score-id":
        spec["scores"].append(copy.deepcopy(spec["scores"][0]))
    elif change == "id-across-lists":
        spec["scores"][0]["id"] = "prod"
    elif change == "filter-without-kind":
        del spec["filters"][0]["nodeLabels"]
    elif change == "weight":
        spec["scores"][0]["weight"] = 101
    elif change == "mode":
        spec["mode"] = "Dryrun"
    elif change == "both-label-values":
        spec["filters"][0] = {"id": "enc", "message": "m", "annotationToNodeLabel": {
            "annotation": "a", "label": "l", "labelValue": "v", "useAnnotationValue": True}}
    elif change == "fractional-quantity":
        spec["filters"][0] = {"id": "room", "message": "m",
                              "headroom": {"resource": "cpu", "quantity": 1.5}}
    elif change == "max-pods-int32":
        spec["filters"][0] = {"id": "cap", "message": "m", "maxPodsPerNode": 2**31}
    return body


@pytest.mark.parametrize(("change", "path", "says"), [
    ("plugin-name", "spec.pluginName", "should match '^[A-Z][A-Za-z0-9]*$'"),
    ("duplicate-filter-id", "spec.filters",
     "filter rule ids must be unique within the policy"),
    ("duplicate-score-id", "spec.scores", "score rule ids must be unique within the policy"),
    ("id-across-lists", "spec", "rule ids must be unique within the policy, across filters"),
    ("filter-without-kind", "spec.filters[0]", "must validate one and only one schema"),
    ("weight", "spec.scores[0].weight", "should be less than or equal to 100"),
    ("mode", "spec.mode", 'Unsupported value: "Dryrun"'),
    ("both-label-values", "spec.filters[0].annotationToNodeLabel",
     "set either labelValue or useAnnotationValue: true, not both"),
    ("fractional-quantity", "spec.filters[0].headroom.quantity", "integer,string"),
    ("max-pods-int32", "spec.filters[0].maxPodsPerNode",
     "should be less than or equal to 2147483647"),
])
def test_invalid_objects_are_refused_naming_the_problem(
        objects: client.CustomObjectsApi, change: str, path: str, says: str) -> None:
    create(objects, valid(f"ok-{change}"))  # the same object without the change is fine
    with pytest.raises(ApiException) as refused:
        create(objects, _breaks(change))
    assert refused.value.status == 422
    status = json.loads(cast(str, refused.value.body))
    causes = status["details"]["causes"]
    assert any(says in c["message"] for c in causes), causes
    assert path in status["message"], status["message"]


def test_kubectl_shows_the_columns_and_the_status_fills_accepted(
        objects: client.CustomObjectsApi, control_plane: ControlPlane) -> None:
    name = f"columns-{SUFFIX}"
    body = valid("columns")
    body["spec"]["mode"] = "Audit"
    created = create(objects, body)
    header, row = _row(control_plane, name)
    assert header.split() == ["NAME", "PLUGINNAME", "MODE", "ACCEPTED", "AGE"]
    assert row.split()[:3] == [name, "Probe", "Audit"]
    assert len(row.split()) == 4  # no ACCEPTED yet: nothing wrote a status

    created["status"] = {"observedGeneration": created["metadata"]["generation"],
                         "conditions": [{
                             "type": "Accepted", "status": "True", "reason": "Compiled",
                             "message": "the policy runs",
                             "lastTransitionTime": "2026-01-01T00:00:00Z",
                             "observedGeneration": created["metadata"]["generation"]}]}
    objects.replace_cluster_custom_object_status(crd.GROUP, crd.VERSION, crd.PLURAL, name,
                                                 created)
    _, row = _row(control_plane, name)
    assert row.split()[:4] == [name, "Probe", "Audit", "True"]
    # A status through the main resource is ignored (the status subresource owns it).
    current = cast(dict[str, Any], objects.get_cluster_custom_object(
        crd.GROUP, crd.VERSION, crd.PLURAL, name))
    current["status"]["conditions"][0]["status"] = "False"
    objects.replace_cluster_custom_object(crd.GROUP, crd.VERSION, crd.PLURAL, name, current)
    _, row = _row(control_plane, name)
    assert row.split()[3] == "True"


def test_a_status_that_is_not_a_condition_is_refused(
        objects: client.CustomObjectsApi) -> None:
    name = f"status-{SUFFIX}"
    created = create(objects, valid("status"))
    created["status"] = {"conditions": [{"type": "Accepted", "status": "Maybe",
                                         "reason": "x", "message": "",
                                         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    with pytest.raises(ApiException) as refused:
        objects.replace_cluster_custom_object_status(crd.GROUP, crd.VERSION, crd.PLURAL,
                                                     name, created)
    assert refused.value.status == 422
    assert 'Unsupported value: "Maybe"' in json.loads(cast(str, refused.value.body))["message"]


def _row(cp: ControlPlane, name: str) -> tuple[str, str]:
    lines = kubectl(cp, "get", "schedulingpolicies", name).splitlines()
    assert len(lines) == 2, lines
    return lines[0], lines[1]
