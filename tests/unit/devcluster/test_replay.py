"""Snapshot reading: multi-document YAML and Lists flatten; server fields are stripped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.replay import (
    LoadResult,
    check_objects,
    clean_for_create,
    flatten,
    read_objects,
)
from policyd.errors import InputFileError


def test_kubectl_list_output(tmp_path: Path) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n"
        "- {apiVersion: v1, kind: Pod, metadata: {name: p1, namespace: ns}}\n"
        "metadata: {resourceVersion: ''}\n"
    )
    assert [o["metadata"]["name"] for o in read_objects(path)] == ["n1", "p1"]


def test_multi_document_with_typed_lists_and_empty_docs() -> None:
    docs = [
        {"kind": "Node", "metadata": {"name": "a"}},
        None,
        {"kind": "PodList", "items": [{"kind": "Pod", "metadata": {"name": "b"}}]},
    ]
    assert [o["metadata"]["name"] for o in flatten(docs)] == ["a", "b"]


def test_not_an_object_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(DevClusterError, match="document 1 is not a Kubernetes object"):
        read_objects(path)
    path.write_text("key: [unclosed\n")
    with pytest.raises(InputFileError, match="invalid YAML"):
        read_objects(path)


def test_server_fields_are_stripped_without_touching_the_input() -> None:
    original: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "uid": "u",
            "resourceVersion": "7",
            "managedFields": [],
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "a": "b"},
        },
        "spec": {"nodeName": "n"},
    }
    clean = clean_for_create(original)
    assert clean["metadata"] == {"name": "p", "annotations": {"a": "b"}}
    assert clean["spec"] == {"nodeName": "n"}
    assert original["metadata"]["uid"] == "u"


def test_load_result_summary() -> None:
    result = LoadResult()
    result.count("Node", created=True)
    result.count("Pod", created=True)
    result.count("Pod", created=True)
    result.count("Pod", created=False)
    assert result.summary() == "created 1 Node, 2 Pods (already present: 1 Pod)"
    assert LoadResult().summary() == "created nothing"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "Secret", "metadata": {"name": "s"}}, "Secret s: unsupported kind"),
        ({"kind": "Pod", "metadata": {"namespace": "ns"}}, "Pod ns/?: metadata.name is missing"),
        ({"kind": "Node", "metadata": "n1"}, "Node ?: metadata.name is missing"),
    ],
)
def test_check_objects(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(DevClusterError, match=re.escape(message)):
        check_objects([clean_for_create(obj)])
