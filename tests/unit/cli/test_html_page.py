"""The HTML page's envelope: self-contained (no address anywhere, a policy forbidding
requests), and data that cannot end its script element, whatever it holds."""

from __future__ import annotations

import json
import re

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
    assert page.count("</script>") == 2


@pytest.mark.parametrize("kind", KINDS)
def test_the_data_cannot_close_its_element_and_reads_back_whole(kind: str) -> None:
    page = html_page(kind, HOSTILE)
    data = page.split('id="policyd-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data and "&" not in data
    assert json.loads(data) == {"kind": kind, "document": HOSTILE, "ui": None}
    assert page.count("</script>") == 2  # the data's and the program's, nothing else


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="no page for 'audit'"):
        html_page("audit", {})
