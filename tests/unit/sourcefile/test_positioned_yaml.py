"""The positioned YAML loader: data, positions, and one clear problem per bad input,
in bounded time and memory."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyd.sourcefile import Limits, format_path, load_bytes, load_file


def test_documents_data_and_positions() -> None:
    text = b"""# comment
a: 1
b:
  - x
  - {c: "d", e: [1, 2.5, true, null, ~]}
---
f: yes   # a string in YAML 1.2
g: 0x1F
"""
    src = load_bytes(text, "t.yaml")
    assert [p.rule for p in src.problems] == ["yaml-ambiguous"]  # f: yes
    assert [d.data for d in src.documents] == [
        {"a": 1, "b": ["x", {"c": "d", "e": [1, 2.5, True, None, None]}]},
        {"f": "yes", "g": 31},
    ]
    doc = src.documents[0]
    assert doc.position(("a",)) == (2, 4)
    assert doc.position(("a",), key=True) == (2, 1)
    assert doc.position(("b", 1, "e", 2)) == (5, 26)
    assert doc.position(("b", 1, "c"), key=True) == (5, 6)
    # A path below a missing field falls back to its closest ancestor.
    assert doc.position(("b", 1, "zzz", 3)) == doc.position(("b", 1))
    assert src.documents[1].position(("g",)) == (8, 4)
    assert src.documents[1].index == 1


def test_column_in_scalar_accounts_for_quotes_and_block_scalars() -> None:
    src = load_bytes(b'a: "xyz"\nb: xyz\nc: |\n  xyz\n', "t.yaml")
    doc = src.documents[0]
    assert doc.column_in_scalar(("a",), 1) == (1, 6)
    assert doc.column_in_scalar(("b",), 1) == (2, 5)
    assert doc.column_in_scalar(("c",), 1) is None


@pytest.mark.parametrize(("path", "expected"), [
    ((), ""),
    (("spec", "filters", 0, "id"), "spec.filters[0].id"),
    (("metadata", "labels", "a.b/c"), 'metadata.labels["a.b/c"]'),
    ((0, "x"), "[0].x"),
])
def test_format_path(path: tuple[str | int, ...], expected: str) -> None:
    assert format_path(path) == expected


def _billion_laughs() -> bytes:
    lines = [b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, cur = chr(96 + i).encode(), chr(97 + i).encode()
        lines.append(cur + b": &" + cur + b" [" + b",".join([b"*" + prev] * 9) + b"]")
    return b"\n".join(lines) + b"\n"


BAD_INPUTS = [
    # (name, bytes, rule, line, column)
    ("syntax", b"a: [1, 2\n", "yaml-syntax", 2, 1),
    ("unclosed quote", b"key: 'x\n", "yaml-syntax", 2, 1),
    ("tab indentation", b"a:\n  b: 1\n\tc: 2\n", "yaml-tab", 3, 1),
    ("duplicate key", b"a: 1\nb: 2\na: 3\n", "yaml-duplicate-key", 3, 1),
    ("nested duplicate", b"a:\n  x: 1\n  x: 2\n", "yaml-duplicate-key", 3, 3),
    ("merge key", b"base: &b {x: 1}\nc:\n  <<: *b\n", "yaml-merge-key", 3, 3),
    ("complex key", b"? [a, b]\n: 1\n", "yaml-complex-key", 1, 3),
    ("unknown tag", b"a: !!binary aGk=\n", "yaml-tag", 1, 4),
    ("custom tag", b"a: !thing {b: 1}\n", "yaml-tag", 1, 4),
    ("control character", b"a: \x07\n", "yaml-syntax", 1, 4),
    ("binary", b"a: 1\n\x00\x01\x02", "file-binary", 2, 1),
    ("utf-16", "a: 1\n".encode("utf-16"), "file-binary", 1, 4),
    ("latin-1", b"a: caf\xe9\n", "file-encoding", 1, 7),
    ("empty", b"", "file-empty", 1, 1),
    ("whitespace only", b"  \n\n", "file-empty", 1, 1),
    ("comments only", b"# nothing\n---\n", "file-empty", 1, 1),
    ("null document", b"--- null\n", "file-empty", 1, 1),
    ("flow nesting", b"a: " + b"[" * 5000 + b"]" * 5000, "yaml-depth", 1, 68),
    ("flow nesting unclosed", b"[" * 1_000_00, "yaml-depth", 1, 65),
    ("block nesting", b"".join(b" " * i + b"k:\n" for i in range(100)) + b" " * 100 + b"v\n",
     "yaml-depth", 65, 65),
    ("sequence nesting", b"- " * 3000 + b"x\n", "yaml-depth", 1, 129),
    ("billion laughs", _billion_laughs(), "yaml-too-big", 5, 11),
    ("huge", b"a: " + b"x" * 200_000 + b"\n", "file-too-large", 1, 1),
]


@pytest.mark.parametrize(("name", "data", "rule", "line", "column"), BAD_INPUTS,
                         ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_problem_with_location(
        name: str, data: bytes, rule: str, line: int, column: int) -> None:
    src = load_bytes(data, "bad.yaml")
    assert [(p.rule, p.line, p.column) for p in src.problems] == [(rule, line, column)]
    assert all(p.level == "error" and p.file == "bad.yaml" for p in src.problems)


def test_billion_laughs_is_cheap() -> None:
    data = _billion_laughs()
    assert len(data) < 1024
    tracemalloc.start()
    start = time.perf_counter()
    src = load_bytes(data, "bomb.yaml")
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert src.problems[0].rule == "yaml-too-big"
    assert elapsed < 0.5
    assert peak < 20 * 1024 * 1024


def test_small_aliases_are_allowed_and_shared() -> None:
    src = load_bytes(b"a: &x {b: [1, 2]}\nc: *x\n", "t.yaml")
    assert src.problems == []
    data = src.documents[0].data
    assert data["a"] == data["c"] == {"b": [1, 2]}
    assert src.documents[0].position(("c", "b", 0)) == (2, 4)  # the alias itself


def test_alias_expansion_counts_against_the_budget() -> None:
    data = b"a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n" + b"".join(
        b"k%d: *a\n" % i for i in range(20))
    assert load_bytes(data, "t.yaml", Limits(max_nodes=100)).problems[0].rule == "yaml-too-big"
    assert load_bytes(data, "t.yaml", Limits(max_nodes=1000)).problems == []


def test_duplicate_keys_are_all_reported() -> None:
    src = load_bytes(b"a: 1\na: 2\nb: {c: 1, c: 2}\n", "t.yaml")
    assert [(p.line, p.path) for p in src.problems] == [(2, "a"), (3, "b.c")]


def test_bom_is_accepted() -> None:
    assert load_bytes(b"\xef\xbb\xbfa: 1\n", "t.yaml").documents[0].data == {"a": 1}


def test_timestamps_stay_text() -> None:
    assert load_bytes(b"a: 2024-01-02\n", "t.yaml").documents[0].data == {"a": "2024-01-02"}


def test_unreadable_file(tmp_path: Path) -> None:
    src = load_file(tmp_path / "missing.yaml")
    assert src.unreadable
    assert src.problems[0].rule == "file-unreadable"


def test_file_reads_only_up_to_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: " + b"x" * 10_000_000)
    start = time.perf_counter()
    src = load_file(big, limits=Limits(max_bytes=1000))
    assert time.perf_counter() - start < 0.5
    assert src.problems[0].rule == "file-too-large"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    src = load_bytes(data, "fuzz.yaml")
    assert src.documents or src.problems


YAMLISH = st.text(alphabet=st.sampled_from(list("ab:- \n\t[]{},&*!|>'\"#?<%@`0.~")),
                  max_size=200)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(YAMLISH)
def test_yaml_like_text_never_raises(text: str) -> None:
    src = load_bytes(text.encode(), "fuzz.yaml")
    for p in src.problems:
        assert p.line >= 1 and p.column >= 1


def test_yaml_11_booleans_are_strings_with_a_warning() -> None:
    src = load_bytes(b'a: yes\nb: "no"\nc: [on, Off]\nd: true\n', "t.yaml")
    assert src.documents[0].data == {"a": "yes", "b": "no", "c": ["on", "Off"], "d": True}
    assert [(p.rule, p.level, p.line, p.column, p.path) for p in src.problems] == [
        ("yaml-ambiguous", "warning", 1, 4, "a"),
        ("yaml-ambiguous", "warning", 3, 5, "c[0]"),
        ("yaml-ambiguous", "warning", 3, 9, "c[1]"),
    ]


def test_problem_str_is_one_line() -> None:
    [p] = load_bytes(b"a: 1\na: 2\n", "t.yaml").problems
    assert str(p) == ("t.yaml:2:1: error: duplicate key 'a' (first defined at line 1) "
                      "[yaml-duplicate-key] (at a)")
