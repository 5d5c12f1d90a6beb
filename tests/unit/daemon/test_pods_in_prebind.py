"""The PreBind map: a binding cycle is either called off or bound, never both, and an
entry is removed only by the cycle that added it."""

from __future__ import annotations

from policyd.daemon.pods_in_prebind import PodsInPreBind


def test_a_cancel_before_pre_bind_ends_wins_and_wakes_the_wait() -> None:
    pods = PodsInPreBind()
    entry = pods.add("uid-a")
    assert pods.get("uid-a") is entry
    assert entry.cancel("preempted by DefaultPreemption")
    assert entry.wake.is_set() and entry.cancelled
    assert entry.cancel("preempted by Other")  # still called off; the first cause stays
    assert entry.cause == "preempted by DefaultPreemption"
    assert not entry.mark_prebound()


def test_once_pre_bind_is_over_the_cancel_is_refused() -> None:
    entry = PodsInPreBind().add("uid-a")
    assert entry.mark_prebound()
    assert not entry.cancel("preempted by DefaultPreemption")
    assert not entry.wake.is_set() and entry.cause is None


def test_an_entry_is_removed_only_by_its_own_cycle() -> None:
    pods = PodsInPreBind()
    old = pods.add("uid-a")
    new = pods.add("uid-a")  # the pod's next binding cycle
    pods.remove("uid-a", old)
    assert pods.get("uid-a") is new and len(pods) == 1
    pods.remove("uid-a", new)
    assert pods.get("uid-a") is None and len(pods) == 0


def test_wake_all_wakes_without_cancelling() -> None:
    pods = PodsInPreBind()
    a, b = pods.add("uid-a"), pods.add("uid-b")
    pods.wake_all()
    assert a.wake.is_set() and b.wake.is_set()
    assert a.mark_prebound() and b.mark_prebound()
