"""CycleState.clone: values with `clone` are copied, the rest shared; Skip sets copied."""

from __future__ import annotations

from policyd.framework.cycle_state import CycleState


class _Counts:
    def __init__(self, n: dict[str, int]) -> None:
        self.n = n

    def clone(self) -> _Counts:
        return _Counts(dict(self.n))


def test_a_clone_updates_without_touching_the_original() -> None:
    state = CycleState()
    frozen = ("immutable",)
    state.write("A/counts", _Counts({"x": 1}))
    state.write("B/frozen", frozen)
    state.skip_filter.add("C")
    state.framework = object()
    copy = state.clone()
    copy.read("A/counts").n["x"] = 5
    copy.skip_filter.add("D")
    copy.write("B/frozen", ("other",))
    assert state.read("A/counts").n == {"x": 1}
    assert state.read("B/frozen") is frozen
    assert state.skip_filter == {"C"} and copy.skip_filter == {"C", "D"}
    assert copy.framework is state.framework
    assert state.clone().read("B/frozen") is frozen  # shared, not copied
