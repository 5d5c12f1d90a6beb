"""Framework.run_pre_enqueue (upstream's runPreEnqueuePlugins): the first plugin that
refuses gates the pod, the last gating plugin is asked first, a plugin that raises
gates it with an Error, and each call is timed for the plugin latency metric."""

from __future__ import annotations

from policyd.framework import Code, Status
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.plugins.dynamicresources.plugin import new
from tests.builders import make_pod


class Gate:
    def __init__(self, name: str, refuse: bool = False, boom: bool = False) -> None:
        self.name = name
        self.refuse = refuse
        self.boom = boom
        self.asked: list[str] = []

    def pre_enqueue(self, pod: Pod, cluster: ClusterState) -> Status | None:
        self.asked.append(pod.name)
        if self.boom:
            raise RuntimeError("bug")
        return Status.unschedulable(f"{self.name} says no") if self.refuse else None


def test_every_plugin_lets_the_pod_in() -> None:
    a, b = Gate("A"), Gate("B")
    fw = Framework("p", pre_enqueue=[a, b])
    assert fw.run_pre_enqueue(make_pod("x").obj(), ClusterState()) is None
    assert a.asked == b.asked == ["x"]


def test_the_first_refusal_gates_and_the_rest_are_not_asked() -> None:
    a, b, c = Gate("A"), Gate("B", refuse=True), Gate("C", refuse=True)
    fw = Framework("p", pre_enqueue=[a, b, c])
    found = fw.run_pre_enqueue(make_pod("x").obj(), ClusterState())
    assert found is not None
    plugin, status = found
    assert (plugin, status.code, status.reasons, status.plugin) == (
        "B", Code.UNSCHEDULABLE, ("B says no",), "B")
    assert c.asked == []


def test_the_gating_plugin_is_asked_first() -> None:
    a, b, c = Gate("A", refuse=True), Gate("B"), Gate("C", refuse=True)
    fw = Framework("p", pre_enqueue=[a, b, c])
    found = fw.run_pre_enqueue(make_pod("x").obj(), ClusterState(), gating="C")
    assert found is not None and found[0] == "C"
    assert a.asked == b.asked == []


def test_a_plugin_that_raises_gates_with_an_error_and_is_timed() -> None:
    timed: list[tuple[str, str]] = []
    fw = Framework("p", pre_enqueue=[Gate("A"), Gate("Boom", boom=True)])
    fw.plugin_timer = lambda point, plugin, seconds, status: timed.append((point, plugin))
    found = fw.run_pre_enqueue(make_pod("x").obj(), ClusterState())
    assert found is not None
    plugin, status = found
    assert plugin == "Boom" and status.code is Code.ERROR
    assert "RuntimeError: bug" in status.message
    assert timed == [("PreEnqueue", "A")]


def test_pre_enqueue_plugins_register_their_events() -> None:
    """A gated pod must be movable: the queue's hints include PreEnqueue plugins."""
    dra = new()
    fw = Framework("p", pre_enqueue=[dra])
    assert {name for name, _ in fw.queueing_hints()} == {dra.name}
