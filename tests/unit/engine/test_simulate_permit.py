"""Permit in `simulate`, which has no time: a waiting pod keeps its node while later
pods are tried, a plugin may allow or reject it meanwhile, and a wait still open when
the batch is done ends as its timeout would, its node given back."""

from __future__ import annotations

from policyd.engine.simulate import simulate
from policyd.framework.cycle_state import CycleState
from policyd.framework.runtime import Framework
from policyd.framework.status import Code, Status
from policyd.framework.waiting_pods import WaitingPods
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from tests.binding_plugins import default_profile_with
from tests.builders import make_node, make_pod

GROUP = "example.com/group"


class PairUp:
    """Holds each pod of a group until a second member arrives, then lets both go; a
    pod labelled cancel=yes rejects the waiting members of its group instead."""

    name = "PairUp"

    def __init__(self) -> None:
        self.waiting = WaitingPods()

    def use_waiting_pods(self, waiting: WaitingPods) -> None:
        self.waiting = waiting

    def permit(self, state: CycleState, pod: Pod, node_name: str
               ) -> tuple[Status | None, float]:
        group = pod.labels.get(GROUP)
        members = [w for w in self.waiting.all() if w.pod.labels.get(GROUP) == group]
        if pod.labels.get("cancel") == "yes":
            for w in members:
                w.reject(self.name, f"group {group} was cancelled")
            return Status.unschedulable(f"group {group} was cancelled"), 0.0
        if not members:
            return Status(Code.WAIT, (f"waiting for the rest of group {group}",)), 30.0
        for w in members:
            w.allow(self.name)
        return None, 0.0


def _framework(plugin: PairUp) -> Framework:
    return default_profile_with(permit=[plugin])


def _pod(name: str, group: str, **labels: str) -> Pod:
    b = make_pod(name).uid(f"uid-{name}").scheduler("policyd").req(cpu="1")
    for key, value in {GROUP: group, **labels}.items():
        b = b.label(key, value)
    return b.obj()


def _run(*pods: Pod) -> tuple[dict[str, tuple[str | None, str]], ClusterState]:
    cluster = ClusterState([make_node("n1").capacity(cpu="4", pods="10").obj()])
    out = simulate({"policyd": _framework(PairUp())}, cluster, list(pods))
    return {r.pod.name: (r.node, r.message) for r in out.results}, cluster


def test_a_pair_is_placed_once_both_are_there() -> None:
    placed, cluster = _run(_pod("a1", "a"), _pod("a2", "a"))
    assert placed == {"a1": ("n1", ""), "a2": ("n1", "")}
    assert cluster.node_of("uid-a1") == cluster.node_of("uid-a2") == "n1"


def test_a_wait_still_open_at_the_end_times_out_and_gives_its_node_back() -> None:
    placed, cluster = _run(_pod("a1", "a"), _pod("b1", "b"), _pod("a2", "a"))
    assert placed["a1"] == placed["a2"] == ("n1", "")
    assert placed["b1"] == (None, "0/1 nodes are available: 1 rejected due to timeout "
                                  "after waiting 30s at plugin PairUp.")
    assert cluster.node_of("uid-b1") is None


def test_a_rejected_waiting_pod_is_told_why_and_frees_its_node() -> None:
    placed, cluster = _run(_pod("c1", "c"), _pod("c2", "c", cancel="yes"))
    assert placed["c1"] == (None, "0/1 nodes are available: 1 group c was cancelled.")
    assert placed["c2"] == (None, "0/1 nodes are available: 1 group c was cancelled.")
    assert cluster.node_of("uid-c1") is None and cluster.node_of("uid-c2") is None
