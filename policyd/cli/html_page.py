"""One self-contained HTML page for explain, simulate and diff (`-o html`): the
command's JSON document embedded as data, rendered in the browser by
policyd/data/page/page.js with policyd/data/page/page.css, both inlined. No network,
no server: the file opens from disk, and nothing in it names another address.

The page escapes nothing by hand: the document goes in a `<script type=
"application/json">` (with `<` written as `\\u003c`, so no text in it can close the
element), and the script builds the DOM with text nodes only.
"""

from __future__ import annotations

import json
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
    data = json.dumps({"kind": kind, "document": document, "ui": ui},
                      separators=(",", ":"))
    # JSON allows \u003c for "<": nothing inside can end the script element.
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
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
        f"<script type=\"application/json\" id=\"policyd-data\">{data}</script>"
        f"<script>{script}</script></body></html>\n")
