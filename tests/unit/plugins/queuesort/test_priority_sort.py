"""PrioritySort, with the cases of upstream's queuesort/priority_sort_test.go."""

from __future__ import annotations

import pytest

from policyd.framework import PluginError
from policyd.plugins import names
from policyd.plugins.queuesort.priority_sort import PrioritySort, new
from tests.builders import make_pod

EARLY = "2026-01-01T00:00:00Z"
LATE = "2026-01-01T00:00:01Z"


@pytest.mark.parametrize(
    ("name", "p1", "t1", "p2", "t2", "want"),
    [
        ("p1 priority less than p2 priority", 1, EARLY, 2, EARLY, False),
        ("p1 priority greater than p2 priority", 2, EARLY, 1, EARLY, True),
        ("equal priority, p1 queued earlier", 1, EARLY, 1, LATE, True),
        ("equal priority, p2 queued earlier", 1, LATE, 1, EARLY, False),
        # Not upstream's table: a higher priority wins whatever the age; no priority is 0.
        ("higher priority but newer still first", 5, LATE, 0, EARLY, True),
        ("negative priority after default", -1, EARLY, 0, LATE, False),
        ("same pod is not before itself", 1, EARLY, 1, EARLY, False),
    ],
)
def test_less(name: str, p1: int, t1: str, p2: int, t2: str, want: bool) -> None:
    a = make_pod("a").priority(p1).created(t1).obj()
    b = make_pod("b").priority(p2).created(t2).obj()
    assert PrioritySort().less(a, b) is want


def test_missing_priority_is_zero() -> None:
    a = make_pod("a").created(EARLY).obj()
    b = make_pod("b").priority(0).created(LATE).obj()
    assert PrioritySort().less(a, b)


def test_factory() -> None:
    assert new(None).name == names.PRIORITY_SORT
    assert new({}).name == names.PRIORITY_SORT
    with pytest.raises(PluginError):
        new({"foo": 1})
