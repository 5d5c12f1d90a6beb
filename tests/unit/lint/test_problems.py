"""The one line every command prints for a problem."""

from __future__ import annotations

from policyd.problems import ERROR, WARNING, Problem, format_problem


def test_with_position_level_rule_and_path() -> None:
    p = Problem("a.yaml", 3, 7, "schema", ERROR, "unknown field 'x'", "spec.x")
    assert format_problem(p) == "a.yaml:3:7: error: unknown field 'x' [schema] (at spec.x)"
    assert str(p) == format_problem(p)
    assert format_problem(p, with_level=False) == (
        "a.yaml:3:7: unknown field 'x' [schema] (at spec.x)")


def test_without_position_or_path() -> None:
    p = Problem("dir/link.yaml", 0, 0, "file-unreadable", WARNING, "dangling symlink")
    assert format_problem(p) == "dir/link.yaml: warning: dangling symlink [file-unreadable]"
