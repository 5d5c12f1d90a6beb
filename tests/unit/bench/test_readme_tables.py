"""docs/performance.md's generated tables are exactly what the committed results render:
a figure changed by hand, or a results file changed without regenerating, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import readme_tables


def test_the_page_matches_the_committed_results() -> None:
    assert readme_tables.PAGE.name == "performance.md"
    assert readme_tables.PAGE.parent.name == "docs"
    text = readme_tables.PAGE.read_text()
    assert readme_tables.rewrite(text, readme_tables.render_all()) == text, (
        "docs/performance.md's benchmark tables differ from bench/results: run "
        "python -m bench.readme_tables")


@pytest.mark.parametrize("name", sorted(readme_tables.RENDERERS))
def test_every_table_renders_rows_from_its_committed_results(name: str) -> None:
    # Whatever the JSON's shape (the engine's is a list, the others objects), its table
    # has a header, a separator and at least one row: an empty result is no result.
    renderer = readme_tables.RENDERERS[name]
    table = renderer.render(renderer.parsed())
    lines = table.splitlines()
    separator = next(i for i, line in enumerate(lines) if line.startswith("|--"))
    assert lines[separator + 1].startswith("| "), f"{name}: a table without rows"


@pytest.mark.parametrize("name", sorted(readme_tables.RENDERERS))
def test_every_table_is_on_the_page_once(name: str) -> None:
    text = readme_tables.PAGE.read_text()
    assert len(readme_tables.block_pattern(name).findall(text)) == 1


def test_the_readme_holds_no_stale_copy_of_a_table() -> None:
    assert "<!-- bench:" not in (readme_tables.ROOT / "README.md").read_text()


def test_rewrite_replaces_only_the_marked_block() -> None:
    text = "a\n<!-- bench:x:begin -->\nold\n<!-- bench:x:end -->\nb\n"
    assert readme_tables.rewrite(text, {"x": "new"}) == \
        "a\n<!-- bench:x:begin -->\nnew\n<!-- bench:x:end -->\nb\n"


@pytest.mark.parametrize("text", ["no markers\n",
                                  "<!-- bench:x:begin -->\n<!-- bench:x:end -->\n" * 2])
def test_missing_or_doubled_markers_are_an_error(text: str) -> None:
    with pytest.raises(readme_tables.MarkerError):
        readme_tables.rewrite(text, {"x": "new"})


def test_check_mode_exits_1_on_a_stale_page(tmp_path: Path) -> None:
    stale = readme_tables.PAGE.read_text().replace(
        readme_tables.markers("e2e")[1], "a hand-edited figure\n" + readme_tables.markers("e2e")[1])
    path = tmp_path / "performance.md"
    path.write_text(stale)
    assert readme_tables.main(["--check", "--page", str(path)]) == 1
    assert path.read_text() == stale  # --check never writes
    assert readme_tables.main(["--page", str(path)]) == 0
    assert readme_tables.main(["--check", "--page", str(path)]) == 0
