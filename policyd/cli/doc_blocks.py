"""The generated blocks of docs/policy-language.md, rendered from the registries they
describe: the filter and score kind tables with an example of each kind (from the
declarations in policyd/policy/rules/*/schemas.py) and `policyd lint`'s rule table
(from policyd/lint/rules.py).

Each block sits between `<!-- generated:NAME:begin ... -->` and
`<!-- generated:NAME:end -->`. `python -m policyd.cli.doc_blocks` rewrites every block;
`--check` only compares and exits 1 when the file differs, so a hand edit inside a
block, or a registry changed without regenerating, fails `make check`. A new block is
one entry in BLOCKS and its two markers in the page.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from policyd.cli.generated_page import page_main
from policyd.lint import rules
from policyd.policy.rules.filters import schemas as filters
from policyd.policy.rules.scores import schemas as scores
from policyd.policy.schema_parts import RuleKind

PAGE = Path(__file__).resolve().parents[2] / "docs" / "policy-language.md"
COMMAND = "python -m policyd.cli.doc_blocks"


@dataclass(frozen=True, slots=True)
class Block:
    source: str  # what to edit instead of the block, named in its begin marker
    render: Callable[[], str]  # the block's markdown


def kind_block(section: str, columns: Sequence[str], kinds: Sequence[RuleKind]) -> str:
    """A kind table, then one example rule of each kind under `section:`."""
    head = ("kind", *columns)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += [k.table_row() for k in kinds]
    lines += ["", "```yaml", f"{section}:"]
    lines += [f"  {line}" for k in kinds for line in k.example.splitlines()]
    lines.append("```")
    return "\n".join(lines) + "\n"


BLOCKS: Mapping[str, Block] = {
    "filter-kinds": Block("policyd/policy/rules/filters/schemas.py",
                          lambda: kind_block("filters", filters.COLUMNS, filters.KINDS)),
    "score-kinds": Block("policyd/policy/rules/scores/schemas.py",
                         lambda: kind_block("scores", scores.COLUMNS, scores.KINDS)),
    "lint-rules": Block("policyd/lint/rules.py", rules.markdown),
}


def begin_marker(name: str, source: str) -> str:
    return f"<!-- generated:{name}:begin by `{COMMAND}`; edit {source} -->"


def end_marker(name: str) -> str:
    return f"<!-- generated:{name}:end -->"


def block_pattern(name: str) -> re.Pattern[str]:
    """A block with its markers; the begin marker's text after the name may be stale."""
    return re.compile(re.escape(f"<!-- generated:{name}:begin") + r"[^\n]*-->\n.*?"
                      + re.escape(end_marker(name)), re.DOTALL)


class MarkerError(ValueError):
    """The page does not hold a block's markers exactly once."""


def rewrite(text: str, blocks: Mapping[str, Block] = BLOCKS) -> str:
    """`text` with every block regenerated."""
    for name, block in blocks.items():
        found = list(block_pattern(name).finditer(text))
        if len(found) != 1:
            raise MarkerError(f"the page must hold <!-- generated:{name}:begin ... --> "
                              f"... {end_marker(name)} exactly once (found {len(found)})")
        span = found[0]
        body = f"{begin_marker(name, block.source)}\n{block.render()}{end_marker(name)}"
        text = text[:span.start()] + body + text[span.end():]
    return text


def main(argv: list[str] | None = None) -> int:
    return page_main(argv, command=COMMAND, description=__doc__.split("\n\n")[0],
                     page=PAGE, regenerate=rewrite, stale=": generated blocks are stale",
                     check_help="exit 1 if the page's generated blocks are stale")


if __name__ == "__main__":
    sys.exit(main())
