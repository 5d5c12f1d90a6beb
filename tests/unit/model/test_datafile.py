"""Data files (snapshots, pod files): the fast paths give exactly what a whole parse gives,
and hostile files stop at a limit with a message naming the file, line and column."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

import policyd.model.datafile as datafile
from policyd.errors import InputFileError
from policyd.model.datafile import MAX_DEPTH, iter_objects, read_documents
from tests.builders import make_node, make_pod


def _objects(path: Path) -> list[tuple[str, Any]]:
    return list(iter_objects(path))


def _kubectl_yaml(items: list[dict[str, Any]]) -> str:
    """A List in the layout `kubectl get -o yaml` prints (sorted keys, items at column 0)."""
    import yaml  # type: ignore[import-untyped]

    return str(yaml.safe_dump({"apiVersion": "v1", "items": items, "kind": "List",
                               "metadata": {"resourceVersion": ""}},
                              default_flow_style=False, sort_keys=True))


def _items() -> list[dict[str, Any]]:
    pod = make_pod("p1").node("n1").raw()
    pod["metadata"]["annotations"] = {
        "script": "line one\n- not an item\nkind: not a key\n",  # block scalar content
        "quoted": "a\n\n- b  c",
        "json": '{"a": [1, {"b": "- c"}]}',
    }
    return [make_node("n1").raw(), pod, make_pod("p2").raw(), {"apiVersion": "v1",
            "kind": "Namespace", "metadata": {"name": "ns", "labels": {"a": "1"}}}]


@pytest.mark.parametrize("parallel", [False, True])
def test_kubectl_yaml_list_is_cut_into_items_exactly(tmp_path: Path, monkeypatch: Any,
                                                    parallel: bool) -> None:
    if parallel:  # small files take the serial path; force the thread pool here
        monkeypatch.setattr(datafile, "_PARALLEL_FROM_BYTES", 0)
        monkeypatch.setattr(datafile, "_BATCH_ITEMS", 1)
        monkeypatch.setattr(datafile, "_IN_FLIGHT", 2)
    items = [copy.deepcopy(item) for _ in range(5) for item in _items()]
    text = _kubectl_yaml(items)
    assert "\n    - not an item" not in text  # multi-line scalars are indented in YAML
    (tmp_path / "s.yaml").write_text(text)
    (tmp_path / "s.json").write_text(json.dumps({"apiVersion": "v1", "items": items,
                                                 "kind": "List"}, indent=4))
    from_yaml = _objects(tmp_path / "s.yaml")
    from_json = _objects(tmp_path / "s.json")
    assert [o for _, o in from_yaml] == items
    assert [o for _, o in from_json] == items
    assert from_yaml[3][0] == f"{tmp_path / 's.yaml'} (document 1) items[3]"


@pytest.mark.parametrize("text", [
    # comments at column 0 inside and between items
    "apiVersion: v1\nitems:\n- kind: Pod\n# a comment\n  metadata: {name: a}\n"
    "- kind: Pod\n  metadata: {name: b}\nkind: List\nmetadata: {}\n",
    # an empty entry marker followed by the item on the next lines
    "apiVersion: v1\nitems:\n-\n  kind: Pod\n  metadata: {name: a}\n- kind: Pod\n"
    "  metadata: {name: b}\nkind: List\n",
    # an anchor defined in one item and used in another: parsed whole
    "apiVersion: v1\nitems:\n- kind: Pod\n  metadata: &m {name: a}\n- kind: Pod\n"
    "  metadata: *m\nkind: List\n",
    # block scalars and multi-line quoted scalars whose lines look like items or keys
    "apiVersion: v1\nitems:\n- kind: Pod\n  script: |\n    - a\n    kind: b\n\n  q: 'x\n\n"
    "    - y'\n  f: >-\n   - z\n- kind: Pod\n  metadata: {name: b}\nkind: List\n",
    # no trailer at all
    "apiVersion: v1\nitems:\n- kind: Pod\n  metadata: {name: a}\n- kind: Pod\n"
    "  metadata: {name: b}\n",
])
def test_cut_and_whole_parse_agree(tmp_path: Path, text: str) -> None:
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(text)
    assert [o for _, o in _objects(path)] == yaml.safe_load(text)["items"]


def test_document_markers_are_parsed_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: v1\nitems:\n- kind: Pod\n  metadata: {name: a}\n"
                    "kind: List\n---\nkind: Pod\nmetadata: {name: b}\n")
    assert [o["metadata"]["name"] for _, o in _objects(path)] == ["a", "b"]


def test_a_list_that_is_not_a_list_kind_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"kind": "Pod", "items": [{"kind": "Pod"}]}')
    with pytest.raises(InputFileError, match="a Pod with items: expected a List"):
        _objects(tmp_path / "s.json")


@pytest.mark.parametrize(("text", "line"), [
    # a broken item in the middle of a kubectl List: the error's line is the file's line
    ("apiVersion: v1\nitems:\n- kind: Pod\n  metadata: {name: a}\n- kind: Pod\n"
     "  metadata: {name: [b}\nkind: List\n", 6),
    ("apiVersion: v1\nitems:\n- kind: Pod\n  metadata:\n    name: a\n\tbad: tab\n"
     "kind: List\n", 5),
])
def test_yaml_errors_name_the_file_line(tmp_path: Path, monkeypatch: Any, text: str,
                                       line: int) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(InputFileError) as e:
        _objects(path)
    message = str(e.value)
    assert re.match(rf"{re.escape(str(path))}:{line}:\d+: invalid YAML: ", message)
    assert "\n" not in message
    # the same report as when the file is parsed whole
    monkeypatch.setattr(datafile, "_KUBECTL_LIST", re.compile("(?!)"))
    with pytest.raises(InputFileError) as whole:
        _objects(path)
    assert str(whole.value) == message


@pytest.mark.parametrize("text", [
    '{"apiVersion": "v1", "items": [{"kind": "Pod"}, ] , "kind": "List"}',
    '{"apiVersion": "v1", "items": [{"kind": "Pod"} {"kind": "Pod"}]}',
    '{"apiVersion": "v1", "items": [{"kind": "Pod"}]} trailing',
    '{"apiVersion": "v1", "items": [{"kind": "Pod"}',
    '{"apiVersion": "v1" "kind": "List"}',
    '{"items": [], 7: 1}',
    '{',
])
def test_json_errors_name_the_file_line_column(tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(InputFileError) as e:
        _objects(path)
    assert str(e.value).startswith(f"{path}:1:")
    assert "invalid JSON" in str(e.value)


@pytest.mark.parametrize(("text", "message"), [
    ('{"kind": "Pod", "n": NaN}', "NaN is not a JSON value"),
    ('{"kind": "Pod", "n": -Infinity}', "-Infinity is not a JSON value"),
    ('{"kind": "List", "items": [{"kind": "Pod", "n": 1e400}]}', "1e400 is out of range"),
])
def test_python_only_json_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(InputFileError, match=message):
        _objects(path)


@pytest.mark.parametrize("text", ["", "\n\n", "# just a comment\n", "---\n---\n", "  \n"])
def test_empty_files_are_an_error_not_an_empty_cluster(tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(InputFileError, match="empty file"):
        _objects(path)


def test_json_single_objects_and_empty_lists(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    pod = make_pod("p").raw()
    path.write_text(json.dumps(pod))
    assert [o for _, o in _objects(path)] == [pod]
    path.write_text('{"kind": "List", "items": []}')
    assert _objects(path) == []
    path.write_text("{}")
    assert [o for _, o in _objects(path)] == [{}]


def _nested_json(depth: int) -> str:
    return '{"kind": "Pod", "x": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize(("name", "text"), [
    ("deep.json", _nested_json(20_000)),
    ("deep-objects.json", '{"a":' * 5000 + "1" + "}" * 5000),
    ("deep-items.json", '{"kind": "List", "items": [' + _nested_json(5000) + "]}"),
    ("flow.yaml", "kind: Pod\nx: " + "[" * 5000 + "]" * 5000 + "\n"),
    ("block.yaml", "kind: Pod\nx:\n" + "".join("  " * i + "- \n" for i in range(1, 400))),
    ("compact.yaml", "kind: Pod\nx:\n" + "- " * 5000 + "y\n"),
    ("list.yaml", "apiVersion: v1\nitems:\n- kind: Pod\n  x:\n  " + "- " * 5000 + "y\n"),
])
def test_deep_nesting_is_a_clear_error(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputFileError) as e:
        _objects(path)
    message = str(e.value)
    assert message.startswith(str(path))
    assert "nest" in message
    assert "\n" not in message


def test_nesting_within_the_limit_loads(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("kind: Pod\nx:\n" + "- " * (MAX_DEPTH - 5) + "y\n")
    assert len(_objects(path)) == 1


_BOMB = "".join(
    f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}" if i else '"lol"'] * 9)
    + "]\n" for i in range(9))


@pytest.mark.parametrize("prefix", ["", "kind: Pod\nmetadata: {name: p}\n",
                                    "apiVersion: v1\nitems:\n- kind: Pod\n  x: 1\n"])
def test_alias_bombs_are_refused_not_expanded(tmp_path: Path, prefix: str) -> None:
    path = tmp_path / "bomb.yaml"
    body = _BOMB if not prefix.startswith("apiVersion") else "".join(
        "  " + line + "\n" for line in _BOMB.splitlines())
    path.write_text(prefix + body)
    assert len(path.read_bytes()) < 2000
    with pytest.raises(InputFileError, match="alias"):
        _objects(path)


def test_small_aliases_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("kind: Pod\nmetadata: {name: p, labels: &l {a: b}}\nspec:\n"
                    "  nodeSelector: *l\n")
    [(_, pod)] = _objects(path)
    assert pod["spec"]["nodeSelector"] == {"a": "b"}


@pytest.mark.parametrize(("data", "message"), [
    (b"kind: Pod\nkind: Node\n", r"f.yaml:2:1: duplicate key 'kind' \(first defined at line 1\)"),
    (b"apiVersion: v1\nitems:\n- kind: Pod\n  a: 1\n  a: 2\nkind: List\n",
     r"f.yaml:5:3: duplicate key 'a' \(first defined at line 4\)"),
    (b"\xef\xbb\xbfkind: Pod\n", None),  # a BOM is not part of the first key
    (b"kind: Pod\n\x00", "binary"),
    (b"kind: \xff\n", "not UTF-8"),
    (b"created: 2024-01-01T00:00:00Z\nkind: Pod\n", None),  # timestamps stay text
])
def test_bytes_level_checks(tmp_path: Path, data: bytes, message: str | None) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(data)
    if message is None:
        [(_, obj)] = _objects(path)
        assert obj["kind"] == "Pod"
        assert all(isinstance(v, str) for v in obj.values())
    else:
        with pytest.raises(InputFileError, match=message):
            _objects(path)


def test_missing_dangling_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        _objects(tmp_path / "missing.yaml")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "gone.yaml")
    with pytest.raises(InputFileError, match="dangling symlink"):
        _objects(tmp_path / "link.yaml")
    with pytest.raises(InputFileError, match="is a directory"):
        _objects(tmp_path)


def test_read_documents_multi_and_single_list_documents(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text("---\n- a\n- b\n")
    assert read_documents(path) == [["a", "b"]]
    path.write_text("a: 1\n---\nb: 2\n---\n")
    assert read_documents(path) == [{"a": 1}, {"b": 2}]
    path.write_text("# only a comment\n")
    assert read_documents(path) == []
