"""freeze_startup_heap: start-up garbage is collected before the freeze, what was alive
is frozen, and what is allocated afterwards is still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from policyd.daemon.run import freeze_startup_heap


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def thawed() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()  # the rest of the test session collects everything again


@pytest.mark.usefixtures("thawed")
def test_start_up_garbage_is_collected_and_the_live_heap_frozen() -> None:
    kept = _Node()
    kept.other = kept
    before = _cycle()  # unreachable cycle from start-up
    assert gc.get_freeze_count() == 0
    freeze_startup_heap()
    assert before() is None  # collected first, not frozen forever
    assert gc.get_freeze_count() > 0
    # Frozen: no generation holds it any more, so no collection walks it.
    assert all(o is not kept for o in gc.get_objects())
    after = _cycle()
    gc.collect()
    assert after() is None  # later garbage is collected as usual
