"""A new leader schedules only once every cache has been listed again in its term."""

from __future__ import annotations

import threading

from policyd.daemon.freshness import CacheFreshness
from policyd.daemon.metrics import Metrics
from policyd.daemon.run import Daemon
from policyd.kube.leaderelection import LeaderElectionSettings, LeaderElector
from tests.clocks import ManualClock


class FakeInformer:
    """request_relist() hands out tokens; `list_done()` completes the pending list."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.wanted = 0
        self.listed = 0
        self.synced = threading.Event()
        self.synced.set()

    def request_relist(self) -> int:
        self.wanted += 1
        return self.wanted

    def listed_since(self, token: int) -> bool:
        return self.listed >= token

    def list_done(self) -> None:
        self.listed = self.wanted


def test_a_term_is_confirmed_only_after_every_cache_is_listed_again() -> None:
    pods, nodes = FakeInformer("pods"), FakeInformer("nodes")
    f = CacheFreshness(lambda: [pods, nodes])
    assert not f.confirmed(0) and not f.confirmed(1)  # no term begun
    f.begin(1)
    assert (pods.wanted, nodes.wanted) == (1, 1)
    assert not f.confirmed(1) and f.waiting_for() == ["pods", "nodes"]
    pods.list_done()
    assert not f.confirmed(1) and f.waiting_for() == ["nodes"]
    nodes.list_done()
    assert f.confirmed(1) and f.waiting_for() == []
    assert not f.confirmed(2)  # another term is not confirmed by this one's lists


def test_a_new_term_needs_new_lists() -> None:
    pods = FakeInformer("pods")
    f = CacheFreshness(lambda: [pods])
    f.begin(1)
    pods.list_done()
    assert f.confirmed(1)
    f.begin(2)
    assert not f.confirmed(2) and not f.confirmed(1)
    pods.list_done()
    assert f.confirmed(2)


def test_a_list_that_started_before_the_term_does_not_count() -> None:
    pods = FakeInformer("pods")
    f = CacheFreshness(lambda: [pods])
    pods.request_relist()  # a list in flight (say, the first one) ...
    f.begin(1)  # ... when the lease is taken
    pods.listed = 1  # that older list completes
    assert not f.confirmed(1)
    pods.list_done()
    assert f.confirmed(1)




def _daemon(elector: LeaderElector | None, informers: list[FakeInformer]) -> Daemon:
    d = Daemon.__new__(Daemon)
    d.elector = elector
    d.nodes, d.pods, *rest = informers  # type: ignore[assignment]
    d.extra_informers = rest  # type: ignore[assignment]
    d.freshness = CacheFreshness(d.informers)
    d.metrics = Metrics()
    d.le_settings = LeaderElectionSettings(identity="me")
    return d


def test_the_scheduling_gate_waits_for_fresh_caches_in_each_term() -> None:
    clock = ManualClock()
    informers = [FakeInformer("nodes"), FakeInformer("pods"), FakeInformer("Service")]
    settings = LeaderElectionSettings(identity="me", lease_duration=15, renew_deadline=10)
    elector = LeaderElector(None, settings, clock=clock)  # type: ignore[arg-type]
    d = _daemon(elector, informers)
    elector.on_started = d._became_leader
    assert not d.ready_to_schedule()  # standby: no term
    elector._after_attempt(True)
    assert elector.term == 1 and elector.is_leader()
    assert all(i.wanted == 1 for i in informers)  # every cache asked to list again
    assert not d.ready_to_schedule()
    for i in informers:
        i.list_done()
    assert d.ready_to_schedule()
    # Renewals keep the term (no new lists)...
    clock.advance(2)
    elector._after_attempt(True)
    assert elector.term == 1 and d.ready_to_schedule()
    # ... losing and taking the lease again starts another one.
    clock.advance(11)
    elector._after_attempt(False)
    assert not elector.is_leader()
    elector._after_attempt(True)
    assert elector.term == 2 and not d.ready_to_schedule()
    for i in informers:
        i.list_done()
    assert d.ready_to_schedule()


def test_between_taking_the_lease_and_asking_for_lists_the_gate_is_shut() -> None:
    """The elector counts itself leader before its callback asks for the lists: the
    gate reads the term, so it cannot pass on the previous term's lists meanwhile."""
    clock = ManualClock()
    informers = [FakeInformer("nodes"), FakeInformer("pods")]
    elector = LeaderElector(None, LeaderElectionSettings(identity="me"),  # type: ignore[arg-type]
                            clock=clock)
    d = _daemon(elector, informers)
    seen: list[bool] = []
    elector.on_started = lambda: seen.append(d.ready_to_schedule())
    d.freshness.begin(0)
    for i in informers:
        i.list_done()
    assert d.freshness.confirmed(0)
    elector._after_attempt(True)
    assert seen == [False]


def test_without_leader_election_synced_caches_are_enough() -> None:
    informers = [FakeInformer("nodes"), FakeInformer("pods")]
    d = _daemon(None, informers)
    assert d.ready_to_schedule()
    informers[1].synced.clear()
    assert not d.ready_to_schedule()


def test_the_first_sync_hook_runs_once_when_the_caches_first_sync() -> None:
    informers = [FakeInformer("nodes"), FakeInformer("pods")]
    d = _daemon(None, informers)
    calls: list[int] = []
    d._on_first_sync = lambda: calls.append(1)
    informers[1].synced.clear()
    assert not d.ready_to_schedule() and calls == []  # not synced: not yet
    informers[1].synced.set()
    assert d.ready_to_schedule() and d.ready_to_schedule()
    assert calls == [1]
