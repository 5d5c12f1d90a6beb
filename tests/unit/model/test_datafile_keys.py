"""Duplicate and merge keys in data files (snapshots, pod files) at file:line:column,
as the policy loader reports them: JSON (where Python keeps the last of two equal keys)
and YAML (where the fast parser names the key but not its place), in small files, in a
7 MB kubectl List read by the parallel path, and in large multi-document files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policyd.errors import InputDecodeError
from policyd.model import yaml_keys
from policyd.model.datafile import iter_objects
from policyd.sourcefile import load_bytes

NODE = """\
- apiVersion: v1
  kind: Node
  metadata:
    name: n{i}
    labels:
      kubernetes.io/hostname: n{i}
      topology.kubernetes.io/zone: z{z}
    annotations:
      note: "{pad}"
  status:
    allocatable: {{cpu: "4", memory: 8Gi, pods: "110"}}
"""
NODE_LINES = NODE.count("\n")
HEADER = "apiVersion: v1\nitems:\n"


def kubectl_list(n: int, broken: int | None = None, line: str = "",
                 trailer: str = "kind: List\nmetadata:\n  resourceVersion: \"\"\n") -> str:
    """A List in kubectl's layout; item `broken` gets `line` after its `name:` line."""
    parts = [HEADER]
    for i in range(n):
        item = NODE.format(i=i, z=i % 3, pad="x" * 1200)
        if i == broken:
            item = item.replace(f"    name: n{i}\n", f"    name: n{i}\n{line}")
        parts.append(item)
    parts.append(trailer)
    return "".join(parts)


def load(path: Path) -> list[Any]:
    return [obj for _, obj in iter_objects(path)]


def refused(path: Path) -> InputDecodeError:
    with pytest.raises(InputDecodeError) as e:
        load(path)
    return e.value


# JSON -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "column", "key", "first"), [
    ('{"kind": "Pod", "kind": "Node"}', 1, 17, "kind", 1),
    ('{"kind": "List",\n "items": [],\n "items": [{"kind": "Node"}]}', 3, 2, "items", 2),
    ('{"kind": "List", "items": [\n {"kind": "Node", "metadata": {"name": "a",\n'
     '  "name": "b"}}]}', 3, 3, "name", 2),
    ('[{"kind": "Pod"}, {"kind": "Pod", "spec": {"x": {"y": 1, "y": 2}}}]', 1, 58, "y", 1),
    ('{"kind": "Pod", "metadata": {"labels": {"a": "1", "a": "1"}}}', 1, 51, "a", 1),
])
def test_json_duplicate_keys_are_refused_at_their_place(
        tmp_path: Path, text: str, line: int, column: int, key: str, first: int) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    e = refused(path)
    assert (e.line, e.column, e.rule) == (line, column, "yaml-duplicate-key")
    assert str(e) == f"{path}:{line}:{column}: duplicate key {key!r} (first defined at " \
                     f"line {first})"


def test_json_same_key_in_different_objects_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "a"}}, {"kind": "Node", "metadata": {"name": "b"}}]}))
    assert [o["metadata"]["name"] for o in load(path)] == ["a", "b"]


@pytest.mark.parametrize(("name", "text", "where"), [
    ("s.json", '{"kind": "Pod",\n "kind": "Node"}', (2, 2, "kind", 1)),
    ("p.yaml", "kind: Pod\nmetadata:\n  name: p\n  labels: {a: b, a: c}\n", (4, 18, "a", 4)),
    ("m.yaml", "kind: Pod\n<<: {a: b}\n", (2, 1, None, 0)),
])
def test_the_data_file_reader_and_the_policy_loader_say_the_same(
        tmp_path: Path, name: str, text: str, where: tuple[int, int, str | None, int]) -> None:
    """The same problem from the data-file reader (yaml-rs, json) and from the policy
    loader (ruamel, positions kept): one rule, message, line and column."""
    path = tmp_path / name
    path.write_text(text)
    e = refused(path)
    [p] = load_bytes(text.encode(), str(path)).problems
    line, column, key, first = where
    message = yaml_keys.MERGE_KEY_MESSAGE if key is None else \
        f"duplicate key {key!r} (first defined at line {first})"
    assert (e.line, e.column, e.message) == (line, column, message)
    assert (p.line, p.column, p.rule, p.message) == (e.line, e.column, e.rule, e.message)


# YAML -----------------------------------------------------------------------------------

def test_a_duplicate_in_a_7_mb_kubectl_list_has_its_line(tmp_path: Path) -> None:
    """The parallel path: the failing batch of items is located, not the whole file."""
    broken = 4000
    text = kubectl_list(5000, broken, "    name: again\n")
    assert len(text) > 7_000_000
    path = tmp_path / "big.yaml"
    path.write_text(text)
    e = refused(path)
    name_line = 2 + broken * NODE_LINES + 4
    assert (e.line, e.column) == (name_line + 1, 5)
    assert e.message == f"duplicate key 'name' (first defined at line {name_line})"


def test_a_top_level_duplicate_of_a_big_list_has_its_line(tmp_path: Path) -> None:
    text = kubectl_list(400, trailer="kind: List\nkind: NodeList\n")
    path = tmp_path / "big.yaml"
    path.write_text(text)
    e = refused(path)
    last = text.count("\n")
    assert (e.line, e.column, e.message) == (
        last, 1, f"duplicate key 'kind' (first defined at line {last - 1})")


def test_a_duplicate_in_a_large_multi_document_file_has_its_line(tmp_path: Path) -> None:
    docs = [NODE.format(i=i, z=0, pad="y" * 1000).replace("\n  ", "\n")[2:]
            for i in range(400)]
    docs[250] = docs[250].replace("kind: Node\n", "kind: Node\nkind: Node\n")
    text = "---\n" + "---\n".join(docs)
    assert len(text) > yaml_keys.LOCATE_MAX_CHARS
    path = tmp_path / "docs.yaml"
    path.write_text(text)
    e = refused(path)
    first = text.splitlines().index("kind: Node", 1 + 250 * (NODE_LINES + 1)) + 1
    assert (e.line, e.column) == (first + 1, 1)
    assert "duplicate key 'kind'" in e.message


@pytest.mark.parametrize(("line", "column"), [
    ("    <<: {zone: a}\n", 5),
    ("    extra: {<<: {zone: a}}\n", 13),
])
def test_merge_keys_are_refused_in_big_lists_too(tmp_path: Path, line: str,
                                                 column: int) -> None:
    text = kubectl_list(3500, 3000, line)
    path = tmp_path / "big.yaml"
    path.write_text(text)
    e = refused(path)
    assert (e.line, e.column, e.rule) == (2 + 3000 * NODE_LINES + 5, column, "yaml-merge-key")
    assert e.message == yaml_keys.MERGE_KEY_MESSAGE


def test_merge_key_with_an_alias_in_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("kind: Pod\nmetadata:\n  labels: &l {a: b}\n  annotations:\n"
                    "    <<: *l\n")
    e = refused(path)
    assert (e.line, e.column) == (5, 5)


@pytest.mark.parametrize("value", [
    '"cat <<EOF\\nhi\\nEOF"',  # a heredoc in a command
    "'a <<: b'",  # quoted: a string, not a key
    "|\n        cat <<: x",  # a block scalar holding the characters
])
def test_text_that_only_looks_like_a_merge_key_is_fine(tmp_path: Path, value: str) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(kubectl_list(50, 10, f"    script: {value}\n"))
    assert len(load(path)) == 50


def test_a_quoted_merge_like_key_is_an_ordinary_key(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text('kind: Pod\nmetadata:\n  annotations: {"<<": x}\n')
    [pod] = load(path)
    assert pod["metadata"]["annotations"] == {"<<": "x"}
