"""The command line every page generator shares: rewrite the page, or with `--check`
only compare and exit 1 when it is stale (what `make check` runs)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def page_main(argv: Sequence[str] | None, *, command: str, description: str, page: Path,
              regenerate: Callable[[str], str], stale: str, check_help: str) -> int:
    """Run a generator: `regenerate` maps the page's current text ("" when it does not
    exist) to what it should be; `stale` follows the page's path in the --check error."""
    parser = argparse.ArgumentParser(prog=command, description=description)
    parser.add_argument("--check", action="store_true", help=check_help)
    parser.add_argument("--page", type=Path, default=page)
    args = parser.parse_args(argv)
    current = args.page.read_text() if args.page.exists() else ""
    wanted = regenerate(current)
    if wanted == current:
        return 0
    if args.check:
        print(f"{args.page}{stale}; run {command}", file=sys.stderr)
        return 1
    args.page.write_text(wanted)
    return 0
