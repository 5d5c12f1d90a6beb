"""docs/policy-language.md's generated blocks are exactly what their registries render,
and `python -m policyd.cli.doc_blocks --check` fails on a page that differs."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.cli import doc_blocks
from policyd.policy.rules.filters import schemas as filters
from policyd.policy.rules.scores import schemas as scores


def test_the_page_matches_its_registries() -> None:
    text = doc_blocks.PAGE.read_text()
    assert doc_blocks.rewrite(text) == text, \
        "docs/policy-language.md is stale: run python -m policyd.cli.doc_blocks"


@pytest.mark.parametrize("name", sorted(doc_blocks.BLOCKS))
def test_every_block_is_on_the_page_once(name: str) -> None:
    assert len(doc_blocks.block_pattern(name).findall(doc_blocks.PAGE.read_text())) == 1


def test_kind_blocks_hold_every_kind_and_its_example() -> None:
    for name, kinds in (("filter-kinds", filters.KINDS), ("score-kinds", scores.KINDS)):
        block = doc_blocks.BLOCKS[name].render()
        lines = block.splitlines()
        for k in kinds:
            assert k.table_row() in lines
            example = [f"  {line}" for line in k.example.splitlines()]
            start = lines.index(example[0])
            assert lines[start:start + len(example)] == example


def test_rewrite_replaces_only_the_block_and_its_begin_marker() -> None:
    block = doc_blocks.Block("src.py", lambda: "new\n")
    text = "a\n<!-- generated:x:begin old hint -->\nold\n<!-- generated:x:end -->\nb\n"
    assert doc_blocks.rewrite(text, {"x": block}) == (
        "a\n<!-- generated:x:begin by `python -m policyd.cli.doc_blocks`; edit src.py -->\n"
        "new\n<!-- generated:x:end -->\nb\n")


def test_a_missing_or_doubled_block_is_an_error() -> None:
    block = doc_blocks.Block("src.py", lambda: "new\n")
    one = "<!-- generated:x:begin -->\nold\n<!-- generated:x:end -->\n"
    for text in ("no markers\n", one + one):
        with pytest.raises(doc_blocks.MarkerError):
            doc_blocks.rewrite(text, {"x": block})


def test_check_fails_on_a_hand_edited_block_and_writing_repairs_it(tmp_path: Path) -> None:
    page = tmp_path / "policy-language.md"
    good = doc_blocks.PAGE.read_text()
    page.write_text(good.replace("| `maxPodsPerNode` | at most N pods",
                                 "| `maxPodsPerNode` | at most M pods"))
    assert doc_blocks.main(["--check", "--page", str(page)]) == 1
    assert doc_blocks.main(["--page", str(page)]) == 0
    assert page.read_text() == good
    assert doc_blocks.main(["--check", "--page", str(page)]) == 0
