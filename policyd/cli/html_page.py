"""One self-contained HTML page for explain, simulate and diff (`-o html`): the
command's JSON document embedded as data, rendered in the browser by
policyd/data/page/page.js with policyd/data/page/page.css, both inlined. No network,
no server: the file opens from disk, and nothing in it names another address.

The page escapes nothing by hand: the document goes in a `<script type=
"application/json">` (with `<` written as `\\u003c`, so no text in it can close the
element), and the script builds the DOM with text nodes only.

A long text repeated in the document (a rule's message on each of 5,000 nodes: policy
messages may be 32,768 characters) is written once, in `#policyd-strings`, and
referred to as `{"$s": index}` (no Kubernetes name or key holds a `$`); the script
puts the text back as it parses.
"""

from __future__ import annotations

import json
from collections import Counter
from html import escape
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).resolve().parent.parent / "data" / "page"
KINDS = ("explain", "simulate", "diff")


def html_page(kind: str, document: dict[str, Any], title: str = "",
              ui: dict[str, Any] | None = None) -> str:
    """The page for `kind` (one of KINDS) showing `document` (the command's JSON).
    `ui`: `policyd ui`'s navigation and what-if editor (`ui_server`), whose form posts
    back to the page's own server; without it the page has no form and no link out."""
    if kind not in KINDS:
        raise ValueError(f"no page for {kind!r}")
    strings, document = _shared(document)
    data, table = (_script_json(d) for d in (
        {"kind": kind, "document": document, "ui": ui}, strings))
    css = (ASSETS / "page.css").read_text()
    script = (ASSETS / "page.js").read_text()
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        # No request leaves the page, whatever a future edit of page.js tries.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
        + "; form-action " + ("'self'" if ui is not None else "'none'") + "\">"
        f"<title>{escape(title or 'policyd ' + kind)}</title>"
        f"<style>{css}</style></head><body><div id=\"app\"></div>"
        f"<script type=\"application/json\" id=\"policyd-strings\">{table}</script>"
        f"<script type=\"application/json\" id=\"policyd-data\">{data}</script>"
        f"<script>{script}</script></body></html>\n")


# Texts at least this long that occur more than once are written once.
SHARED_MIN = 40


def _shared(document: Any) -> tuple[list[str], Any]:
    """(the repeated long texts, `document` with each of them as {"$s": index})."""
    counts: Counter[str] = Counter()
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if len(value) >= SHARED_MIN:
                counts[value] += 1
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    index = {text: i for i, text in enumerate(t for t, n in counts.items() if n > 1)}

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            i = index.get(value)
            return value if i is None else {"$s": i}
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    return list(index), swap(document) if index else document


def _script_json(value: Any) -> str:
    # JSON allows \u003c for "<": nothing inside can end the script element.
    return (json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")
            .replace(">", "\\u003e").replace("&", "\\u0026"))
