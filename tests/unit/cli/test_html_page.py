"""The HTML page's envelope: self-contained (no address anywhere, a policy forbidding
requests), and data that cannot end its script element, whatever it holds."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from policyd.cli.html_page import KINDS, html_page

HOSTILE = {"pod": "x</script><script>alert(1)</script>", "nodes": [
    {"name": "n<!--", "feasible": False, "filters": {"P": "a & b > c"}}]}


@pytest.mark.parametrize("kind", KINDS)
def test_the_page_names_no_other_address(kind: str) -> None:
    page = html_page(kind, HOSTILE)
    assert not re.search(r"(https?:)?//[a-z0-9]", page, re.I)
    assert not re.search(r"""\b(src|href)\s*=""", page, re.I)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "form-action 'none'" in page  # no form either: that is `policyd ui`'s


def test_policyd_ui_pages_may_post_back_to_their_own_server_only() -> None:
    page = html_page("explain", HOSTILE, ui={"error": "</script>", "policies": "a: <b>"})
    assert "form-action 'self'" in page and "default-src 'none'" in page
    assert page.count("</script>") == 3


def read_back(page: str) -> Any:
    """The page's data as page.js reads it: {"$s": i} is the i-th shared text."""
    def element(name: str) -> str:
        text = page.split(f'id="{name}">', 1)[1].split("</script>", 1)[0]
        assert "<" not in text and ">" not in text and "&" not in text
        return text

    strings = json.loads(element("policyd-strings"))
    return json.loads(element("policyd-data"), object_hook=lambda v: strings[v["$s"]]
                      if list(v) == ["$s"] and isinstance(v["$s"], int) else v)


@pytest.mark.parametrize("kind", KINDS)
def test_the_data_cannot_close_its_element_and_reads_back_whole(kind: str) -> None:
    page = html_page(kind, HOSTILE)
    assert read_back(page) == {"kind": kind, "document": HOSTILE, "ui": None}
    # The shared texts', the data's and the program's, nothing else.
    assert page.count("</script>") == 3


def test_a_long_text_repeated_on_every_node_is_written_once() -> None:
    message = "</script> node(s) are not in zone a & not in c " * 700  # 33,600 chars
    document = {"pod": "shop/web", "nodes": [
        {"name": f"n{i}", "feasible": False, "filters": {"ZoneA": message},
         "reasons": {"ZoneA": [message]}} for i in range(200)]}
    page = html_page("explain", document)
    assert len(page) < 200_000  # 400 copies would be 13 MB
    assert read_back(page) == {"kind": "explain", "document": document, "ui": None}


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="no page for 'audit'"):
        html_page("audit", {})
