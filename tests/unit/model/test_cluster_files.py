from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyd.errors import InputFileError
from policyd.model.cluster_files import load_snapshot
from tests.builders import make_node, make_pod


def test_kubectl_list_json_and_multidoc_yaml(tmp_path: Path) -> None:
    items = [make_node("n1").raw(), make_pod("p1").node("n1").raw(), make_pod("p2").raw()]
    (tmp_path / "list.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                    "items": items}))
    snap = load_snapshot(tmp_path / "list.json")
    assert [n.name for n in snap.nodes] == ["n1"]
    assert [p.name for p in snap.pods] == ["p1", "p2"]
    from ruamel.yaml import YAML
    with (tmp_path / "multi.yaml").open("w") as f:
        YAML().dump_all(items, f)
    snap = load_snapshot(tmp_path / "multi.yaml")
    state = snap.cluster()
    assert [p.name for p in state.pending_pods()] == ["p2"]


@pytest.mark.parametrize(("content", "message"), [
    ("kind: Node\nmetadata: {name: n1\n", "invalid YAML"),
    ("{not json", "invalid JSON"),
    ("kind: Deployment\nmetadata: {name: d}\n", "unexpected kind 'Deployment'"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n", "spec.containers"),
    ("- just\n- a list\n", "expected a Kubernetes object"),
])
def test_bad_input_names_file_and_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputFileError) as e:
        load_snapshot(path)
    assert message in str(e.value)
    assert str(path) in str(e.value)


def test_binary_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InputFileError, match="not UTF-8"):
        load_snapshot(tmp_path / "bin")
    with pytest.raises(InputFileError, match="no such file"):
        load_snapshot(tmp_path / "missing.yaml")
