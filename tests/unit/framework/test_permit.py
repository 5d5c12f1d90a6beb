"""Permit (upstream's RunPermitPlugins and waitingPodsMap): what the plugins' answers
add up to, the engine's `permit` step after Reserve, and the waiting pods: the first
resolution wins, every plugin must allow, timeouts reject with upstream's text, a
parked binding cycle is told once."""

from __future__ import annotations

import pytest

from policyd.config.plugins import build_framework
from policyd.engine.cycle import permit, reserve, schedule_one
from policyd.framework import Code, Status
from policyd.framework.cycle_state import CycleState
from policyd.framework.interfaces import EXTENSION_POINTS, extension_points
from policyd.framework.runtime import PERMIT_WAIT_REASON, Framework
from policyd.framework.waiting_pods import PERMIT_MAX_WAIT_S, WaitingPods, timeout_message
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from tests.builders import make_node, make_pod


class Permit:
    def __init__(self, name: str, answer: Status | None = None, seconds: float = 0.0,
                 boom: bool = False) -> None:
        self.name = name
        self.answer = answer
        self.seconds = seconds
        self.boom = boom
        self.asked: list[tuple[str, str]] = []

    def permit(self, state: CycleState, pod: Pod, node_name: str
               ) -> tuple[Status | None, float]:
        self.asked.append((pod.name, node_name))
        if self.boom:
            raise RuntimeError("bug")
        return self.answer, self.seconds


class Keeper:
    """A Reserve plugin that records what it holds."""

    name = "Keeper"

    def __init__(self) -> None:
        self.held: set[str] = set()

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.held.add(pod.name)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.held.discard(pod.name)


WAIT = Status(Code.WAIT, ("waiting for the gang",))


def _run(*plugins: Permit) -> tuple[Status | None, dict[str, float]]:
    fw = Framework("p", permit=list(plugins))
    return fw.run_permit(CycleState(), make_pod("x").obj(), "n1")


def test_all_allow() -> None:
    a, b = Permit("A"), Permit("B", Status(Code.SUCCESS))
    assert _run(a, b) == (None, {})
    assert a.asked == b.asked == [("x", "n1")]


def test_a_rejection_ends_it_at_once_with_its_plugin() -> None:
    later = Permit("C", WAIT, 5)
    status, waits = _run(Permit("A", WAIT, 5), Permit("B", Status.unschedulable("no")),
                         later)
    assert status is not None and waits == {}
    assert (status.code, status.reasons, status.plugin) == (Code.UNSCHEDULABLE, ("no",), "B")
    assert later.asked == []


@pytest.mark.parametrize("plugin", [Permit("B", Status.error("broken")),
                                    Permit("B", boom=True)])
def test_an_error_is_worded_as_upstreams(plugin: Permit) -> None:
    status, _ = _run(Permit("A"), plugin)
    assert status is not None and status.code is Code.ERROR and status.plugin == "B"
    assert status.message.startswith('running Permit plugin "B": ')


def test_waits_add_up_capped_at_fifteen_minutes() -> None:
    status, waits = _run(Permit("A", WAIT, 10), Permit("B"),
                         Permit("C", Status(Code.WAIT, ("C waits",)), 3600))
    assert status is not None and status.code is Code.WAIT
    assert status.reasons == ("C waits", PERMIT_WAIT_REASON)
    assert waits == {"A": 10, "C": PERMIT_MAX_WAIT_S}


def test_permit_is_an_extension_point_of_the_profile() -> None:
    assert EXTENSION_POINTS["permit"] is not None
    assert extension_points(Permit("A")) == frozenset({"permit"})
    fw = build_framework({"schedulerName": "p"})
    assert fw.permit_plugins == []  # none of the default profile's plugins permits


def _decided(fw: Framework) -> tuple[ClusterState, Pod]:
    cluster = ClusterState([make_node("n1").capacity(cpu="4").obj()])
    return cluster, make_pod("x").req(cpu="1").obj()


@pytest.mark.parametrize(("answer", "code", "message"), [
    (Status.unschedulable("quorum not reached"), Code.UNSCHEDULABLE,
     "0/1 nodes are available: 1 quorum not reached."),
    (Status.error("broken"), Code.ERROR, 'running Permit plugin "Gate": broken'),
])
def test_a_refused_pod_is_unreserved_and_told_why(answer: Status, code: Code,
                                                  message: str) -> None:
    keeper = Keeper()
    fw = Framework("p", reserve=[keeper], permit=[Permit("Gate", answer)])
    cluster, pod = _decided(fw)
    result = reserve(fw, schedule_one(fw, pod, cluster))
    assert keeper.held == {"x"}
    result = permit(fw, result)
    assert result.node is None and keeper.held == set()
    assert result.message == message
    if code is Code.UNSCHEDULABLE:
        assert result.diagnosis.unschedulable_plugins == {"Gate"}
        assert result.num_nodes == 1
    else:
        assert result.error is not None and result.error.code is Code.ERROR


def test_a_waiting_pod_keeps_its_node_and_says_how_long() -> None:
    keeper = Keeper()
    fw = Framework("p", reserve=[keeper], permit=[Permit("Gate", WAIT, 30)])
    cluster, pod = _decided(fw)
    result = permit(fw, reserve(fw, schedule_one(fw, pod, cluster)))
    assert result.node == "n1" and keeper.held == {"x"}
    assert result.permit_waits == {"Gate": 30}


# -- the waiting pods --------------------------------------------------------------------


def _waiting(waits: dict[str, float], now: float = 100.0
             ) -> tuple[WaitingPods, list[Status | None]]:
    pods = WaitingPods()
    told: list[Status | None] = []
    entry = pods.add(make_pod("x").uid("u1").obj(), "n1", waits, now)
    entry.on_resolved(told.append)
    return pods, told


def test_allowed_once_every_plugin_allows() -> None:
    pods, told = _waiting({"A": 10, "B": 10})
    entry = pods.get("u1")
    assert entry is not None and entry.pending_plugins() == ["A", "B"]
    entry.allow("A")
    assert told == [] and entry.pending_plugins() == ["B"]
    entry.allow("B")
    assert told == [None] and entry.resolved and entry.outcome is None
    # The first resolution wins: nothing after it changes the outcome or tells again.
    assert not entry.reject("A", "too late")
    assert told == [None]


def test_a_rejection_wins_over_later_allows() -> None:
    pods, told = _waiting({"A": 10, "B": 10})
    assert pods.reject("u1", "B", "the gang broke up")
    entry = pods.get("u1")
    assert entry is not None
    entry.allow("A")
    entry.allow("B")
    assert len(told) == 1 and told[0] is not None
    assert (told[0].code, told[0].message, told[0].plugin) == (
        Code.UNSCHEDULABLE, "the gang broke up", "B")
    assert not pods.reject("nobody", "B", "x")


def test_preempted_is_an_error() -> None:
    pods, told = _waiting({"A": 10})
    entry = pods.get("u1")
    assert entry is not None and entry.preempt("DefaultPreemption", "preempted")
    assert told[0] is not None and told[0].code is Code.ERROR


def test_the_first_timeout_rejects_with_upstreams_text() -> None:
    pods, told = _waiting({"A": 90, "B": 10}, now=100.0)
    assert pods.next_deadline() == 110.0
    assert pods.expire(109.9) == 0 and told == []
    assert pods.expire(110.0) == 1
    assert told[0] is not None and told[0].message == timeout_message("B", 10)
    assert told[0].message == "rejected due to timeout after waiting 10s at plugin B"
    assert pods.next_deadline() is None  # resolved: nothing left to time out


def test_a_listener_added_after_the_end_is_told_at_once() -> None:
    pods = WaitingPods()
    entry = pods.add(make_pod("x").uid("u1").obj(), "n1", {"A": 1}, 0.0)
    entry.allow("A")
    told: list[Status | None] = []
    entry.on_resolved(told.append)
    assert told == [None]


def test_remove_takes_only_the_same_wait() -> None:
    pods = WaitingPods()
    old = pods.add(make_pod("x").uid("u1").obj(), "n1", {"A": 1}, 0.0)
    new = pods.add(make_pod("x").uid("u1").obj(), "n2", {"A": 1}, 1.0)
    pods.remove("u1", old)
    assert pods.get("u1") is new and len(pods) == 1
    pods.remove("u1", new)
    assert pods.get("u1") is None and pods.all() == []


class Gang:
    """A plugin that acts on waiting pods: gets the framework's map when built."""

    name = "Gang"

    def __init__(self) -> None:
        self.waiting: WaitingPods | None = None

    def permit(self, state: CycleState, pod: Pod, node_name: str
               ) -> tuple[Status | None, float]:
        return None, 0.0

    def use_waiting_pods(self, waiting: WaitingPods) -> None:
        self.waiting = waiting


def test_plugins_get_the_frameworks_waiting_pods() -> None:
    shared = WaitingPods()
    gang = Gang()
    fw = Framework("p", permit=[gang], waiting_pods=shared)
    assert fw.waiting_pods is shared and gang.waiting is shared
