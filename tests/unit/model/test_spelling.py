"""Values in messages are spelled as YAML/JSON spell them, and stay short."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.model.spelling import SHOWN_VALUE_MAX, closest, show_value


@pytest.mark.parametrize(("value", "shown"), [
    (None, "null"), (True, "true"), (False, "false"), (12, "12"), (1.5, "1.5"),
    (float("inf"), ".inf"), (float("-inf"), "-.inf"), (float("nan"), ".nan"),
    ("fast", "'fast'"), ([1, None], "[1, null]"), ({"a": True}, '{"a": true}'),
    # Python refuses to print integers of over 4300 digits; a message must not try
    (10**400, "a very long integer"), (-(10**4400), "a very long integer"),
], ids=lambda v: "huge" if isinstance(v, int) and abs(v) > 10**100 else None)
def test_values_are_spelled_as_yaml(value: Any, shown: str) -> None:
    assert show_value(value) == shown


@pytest.mark.parametrize("value", ["x" * 500, ["y" * 50] * 20, {"k": "v" * 900}])
def test_long_values_are_cut_short(value: Any) -> None:
    shown = show_value(value)
    assert len(shown) <= SHOWN_VALUE_MAX
    assert "..." in shown


@pytest.mark.parametrize(("name", "n", "found"), [
    ("Default", 1, ["default"]),  # case first, even before a nearer spelling
    ("web-x", 2, ["web-c", "web-a"]),
    ("web-c", 3, ["web-a"]),  # the name itself is not a suggestion
    ("zzzz", 3, []),
    ("DEFAULT", 3, ["default", "Default"]),
])
def test_closest_suggests_case_variants_then_near_spellings(name: str, n: int,
                                                           found: list[str]) -> None:
    assert closest(name, ["default", "Default", "web-a", "web-c", "api"], n=n) == found


def test_closest_among_many_candidates_still_finds_the_near_one() -> None:
    # More candidates than difflib is given: the near spelling must survive the cut.
    keys = [f"ns{i % 50}/web-{i}" for i in range(20000)]
    assert closest("ns3/wbe-7753", keys, n=1) == ["ns3/web-7753"]
    assert closest("ns3/web-7753", [*keys, "NS3/WEB-7753"], n=2)[0] == "NS3/WEB-7753"
