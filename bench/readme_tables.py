"""The benchmark tables of docs/performance.md, generated from committed results.

Each table lives in docs/performance.md between `<!-- bench:NAME:begin -->` and
`<!-- bench:NAME:end -->`; `RENDERERS` maps NAME to the results file it comes from and
the function that renders it. `python -m bench.readme_tables` rewrites every marked
block from its JSON; `--check` only compares and exits 1 when the page differs (the
unit test tests/unit/bench/test_readme_tables.py does the same), so a figure on the
page is always one a committed result produced. (The module keeps its name from when
the tables were in README.md.)

To add a table: a render function taking the parsed JSON (whatever its shape: the engine
bench writes a list of rows, the others an object) and returning markdown, one entry in
RENDERERS, then the two markers in docs/performance.md; run this module.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import diff_bench, snapshot_bench, soak
from bench.e2e import report as e2e_report
from bench.engine import report as engine_report
from bench.preemption import report as preemption_report

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "performance.md"
RESULTS = ROOT / "bench" / "results"


@dataclass(frozen=True)
class Renderer:
    # The committed JSON the table is made from; several files: render gets a list of
    # them parsed, in this order (one row each, say).
    results: Path | tuple[Path, ...]
    render: Callable[[Any], str]  # the parsed JSON -> markdown

    def parsed(self) -> Any:
        if isinstance(self.results, tuple):
            return [json.loads(p.read_text()) for p in self.results]
        return json.loads(self.results.read_text())


RENDERERS: Mapping[str, Renderer] = {
    "diff": Renderer((RESULTS / "diff-latest.json", RESULTS / "diff-10pct-pending.json"),
                     diff_bench.markdown),
    "e2e": Renderer(RESULTS / "e2e-latest.json", e2e_report.markdown),
    "e2e-dra": Renderer(RESULTS / "e2e-dra-latest.json", e2e_report.markdown),
    "engine": Renderer(RESULTS / "engine-latest.json", engine_report.readme),
    "preemption": Renderer(RESULTS / "preemption-latest.json", preemption_report.markdown),
    "snapshot": Renderer(RESULTS / "snapshot-latest.json", snapshot_bench.markdown),
    "soak": Renderer(RESULTS / "soak-latest.json", soak.markdown),
}


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"


def block_pattern(name: str) -> re.Pattern[str]:
    begin, end = markers(name)
    return re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.DOTALL)


class MarkerError(ValueError):
    """The page does not hold a table's markers exactly once."""


def rewrite(text: str, tables: Mapping[str, str]) -> str:
    """`text` with each marked block's content replaced by its table."""
    for name, table in tables.items():
        begin, end = markers(name)
        found = list(block_pattern(name).finditer(text))
        if len(found) != 1:
            raise MarkerError(f"the page must hold {begin} ... {end} exactly once "
                              f"(found {len(found)})")
        body = table if table.endswith("\n") else table + "\n"
        span = found[0]
        text = f"{text[:span.start()]}{begin}\n{body}{end}{text[span.end():]}"
    return text


def render_all(renderers: Mapping[str, Renderer] = RENDERERS) -> dict[str, str]:
    return {name: r.render(r.parsed()) for name, r in renderers.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the page differs from the committed results")
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    current = args.page.read_text()
    try:
        wanted = rewrite(current, render_all())
    except MarkerError as exc:
        print(exc, file=sys.stderr)
        return 2
    if wanted == current:
        return 0
    if args.check:
        print(f"{args.page}: the tables differ from bench/results; run "
              "python -m bench.readme_tables", file=sys.stderr)
        return 1
    args.page.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
