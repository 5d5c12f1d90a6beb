"""The daemon acting on a preemption decision, with a fixed test PostFilter plugin:
the nomination (in memory at once, in the same status patch as PodScheduled), the
asynchronous part (order of calls, `running` as upstream's IsPodRunningPreemption, the
preemptor held back meanwhile, activated after a failed call), and the nominator fed by
the pod informer. The API calls themselves are tested on the real API server
(tests/e2e/test_preemption.py)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from policyd.config.plugins import default_framework
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.daemon.preemption import PreemptionActions
from policyd.daemon.queue import ACTIVE, UNSCHEDULABLE
from policyd.framework.interfaces import PostFilterResult
from policyd.kube import api
from policyd.kube.client import ConnectionSettings, KubeClient
from policyd.model.records import Pod
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock
from tests.unit.daemon.fixed_preemption import PreemptOn

Obj = dict[str, Any]


class Recorded(PreemptionActions):
    """Records what the loop starts instead of calling the API server."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.started: list[tuple[str, PostFilterResult]] = []
        self.held: set[str] = set()

    def start(self, preemptor: Pod, result: PostFilterResult, component: str) -> bool:
        self.started.append((preemptor.key, result))
        return False  # nothing asynchronous here (the victims' metric stays unobserved)

    def running(self, uid: str) -> bool:
        return uid in self.held


@pytest.fixture
def setup() -> Iterator[tuple[Scheduler, ManualClock, list[dict[str, Any]], Recorded]]:
    kube = KubeClient(k8s.ApiClient(k8s.Configuration()), ConnectionSettings())
    metrics = Metrics()
    clock = ManualClock()
    fw = default_framework([])
    fw.post_filter_plugins = [PreemptOn("n1")]
    s = Scheduler(kube, {"policyd": fw}, metrics=metrics,
                  events=EventSink(kube, metrics, "test"), clock=clock)
    recorded = Recorded(kube, s.state, s.events)
    s.loop.preemption = recorded
    calls: list[dict[str, Any]] = []

    def failed(namespace: str, name: str, uid: str, message: str, component: str, *,
               post_event: bool, patch_condition: bool, reason: str = "Unschedulable",
               **kw: Any) -> None:
        calls.append({"pod": name, "message": message, "patch": patch_condition, **kw})

    s.events.failed = failed  # type: ignore[method-assign]
    s.on_node_add(make_node("n1").capacity(cpu="2", memory="4Gi", pods="10").raw())
    try:
        yield s, clock, calls, recorded
    finally:
        s.shutdown(0)
        kube.close()


def low(name: str, node: str = "n1", cpu: str = "2") -> Obj:
    return make_pod(name).uid(name).scheduler("other").priority(1).node(node).req(
        cpu=cpu).raw()


def high(name: str = "high", **status: Any) -> Obj:
    b = make_pod(name).uid(name).scheduler("policyd").priority(100).req(cpu="2")
    for key, value in status.items():
        b = b.set(f"status.{key}", value)
    return b.raw()


def attempt(s: Scheduler) -> None:
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    s.schedule(qp)


def test_a_preemption_nominates_at_once_and_patches_the_nomination_with_the_condition(
        setup: Any) -> None:
    s, _, calls, recorded = setup
    s.on_pod_add(low("victim"))
    s.on_pod_add(high())
    attempt(s)
    [(key, result)] = recorded.started
    assert key == "default/high" and result.nominated_node == "n1"
    assert [v.name for v in result.victims] == ["victim"]
    # In memory before the API shows it: the next cycle counts the nominee on n1.
    assert s.cluster.nominated_node("high") == "n1"
    assert calls == [{"pod": "high", "message": "0/1 nodes are available: 1 Insufficient "
                      "cpu.", "patch": True, "nominated_node": "n1"}]
    assert s.queue.where("high") == UNSCHEDULABLE


def test_a_lower_priority_pod_cannot_take_the_nominated_space(setup: Any) -> None:
    s, _, calls, _ = setup
    s.on_pod_add(low("victim"))
    s.on_pod_add(high())
    attempt(s)
    s.on_pod_delete(low("victim"))  # the victim is gone; the nominee backs off
    assert s.queue.where("high") != ACTIVE
    mid = make_pod("mid").uid("mid").scheduler("policyd").priority(50).req(cpu="1").raw()
    s.on_pod_add(mid)
    qp = s.queue.pop(timeout=0)
    assert qp is not None and qp.pod.name == "mid"
    s.schedule(qp)
    # n1 is empty, but its 2 cpus are held for the nominated pod of priority 100.
    assert s.cluster.node_of("mid") is None
    assert calls[-1]["pod"] == "mid"
    assert calls[-1]["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_the_nominee_waits_while_its_preemption_runs_and_then_binds_there(
        setup: Any) -> None:
    s, clock, calls, recorded = setup
    s.on_pod_add(low("victim"))
    s.on_pod_add(high())
    attempt(s)
    recorded.held.add("high")
    s.on_pod_delete(low("victim"))
    clock.advance(60)
    s.queue.flush()
    qp = s.queue.pop(timeout=0)
    assert qp is not None and qp.pod.name == "high"
    assert s.schedule(qp) is None  # held back: no cycle ran
    assert s.queue.where("high") == UNSCHEDULABLE and len(calls) == 1
    recorded.held.clear()
    s.queue.move_all()
    clock.advance(60)
    s.queue.flush()
    qp = s.queue.pop(timeout=0)
    assert qp is not None
    result = s.schedule(qp)
    assert result is not None and result.node == "n1"


def test_no_result_keeps_the_nomination_and_no_post_filter_clears_it(setup: Any) -> None:
    s, clock, calls, recorded = setup
    # Nominated to n1 by an earlier preemption, and nothing left to evict there.
    busy = low("busy")
    busy["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    s.on_pod_add(busy)
    s.on_pod_add(high(nominatedNodeName="n1"))
    assert s.cluster.nominated_node("high") == "n1"
    attempt(s)
    assert recorded.started == []
    assert s.cluster.nominated_node("high") == "n1"  # ModeNoop
    assert "nominated_node" not in calls[-1]
    # A profile without PostFilter plugins: upstream clears the nomination.
    s.frameworks["policyd"].post_filter_plugins = []
    s.queue.move_all()
    clock.advance(60)
    s.queue.flush()
    attempt(s)
    assert s.cluster.nominated_node("high") is None
    assert calls[-1]["nominated_node"] == ""


def test_the_informer_feeds_the_nominator(setup: Any) -> None:
    s, _, _, _ = setup
    pod = high(nominatedNodeName="n1")
    s.on_pod_add(pod)
    assert [p.name for p in s.cluster.nominated_pods("n1")] == ["high"]
    # Another scheduler's nominated pod is not ours to count (not in our queue).
    other = make_pod("other").uid("other").scheduler("else").set(
        "status.nominatedNodeName", "n1").raw()
    s.on_pod_add(other)
    assert s.cluster.nominated_node("other") is None
    # Our own nomination, ahead of the API: an unrelated update keeps it.
    plain = high("p2")
    s.on_pod_add(plain)
    with s.lock:
        s.cluster.nominate(s.cluster.pending_pods()[-1], "n1")
    relabelled = copy.deepcopy(plain)
    relabelled["metadata"]["labels"] = {"x": "y"}
    s.on_pod_update(plain, relabelled)
    assert s.cluster.nominated_node("p2") == "n1"
    # Bound, or deleted: gone from the nominator.
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = "n1"
    s.on_pod_update(pod, bound)
    assert s.cluster.nominated_node("high") is None
    s.on_pod_delete(relabelled)
    assert not s.cluster.has_nominations


# -- the asynchronous part ------------------------------------------------------------

class Scripted(PreemptionActions):
    """Each victim's preemption waits for its gate and is recorded; no API calls."""

    def __init__(self, *args: Any, fail: set[str] | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.order: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self.fail = fail or set()
        self.activated: list[str] = []
        self._activate = self.activated.append

    def _preempt(self, preemptor: Pod, victim: Pod, node: str, component: str) -> bool:
        self.gates.setdefault(victim.name, threading.Event()).wait(5)
        self.order.append(victim.name)
        return victim.name not in self.fail


def _victims(s: Scheduler, *names: str) -> tuple[Pod, ...]:
    for n in names:
        s.on_pod_add(low(n, cpu="100m"))
    with s.lock:
        info = s.cluster.get("n1")
        assert info is not None
        return tuple(info.pods[n] for n in names)


def test_the_last_victim_goes_alone_and_ends_the_hold_once_its_deletion_starts(
        setup: Any) -> None:
    s, _, _, _ = setup
    actions = Scripted(s.client, s.state, s.events)
    victims = _victims(s, "a", "b", "c")
    preemptor = make_pod("high").uid("high").priority(100).obj()
    actions.start(preemptor, PostFilterResult("n1", victims), "policyd")
    assert actions.running("high")
    for n in ("a", "b"):
        actions.gates.setdefault(n, threading.Event()).set()
    # The last victim is not touched before the others are done.
    deadline = threading.Event()
    while len(actions.order) < 2 and not deadline.wait(0.01):
        pass
    assert sorted(actions.order) == ["a", "b"]
    assert actions.running("high")
    # Its deletion has started (the informer shows a deletionTimestamp): done.
    c = low("c", cpu="100m")
    c_deleting = copy.deepcopy(c)
    c_deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    while actions._running["high"].last_victim is None and not deadline.wait(0.01):
        pass
    s.on_pod_update(c, c_deleting)
    assert not actions.running("high")
    actions.gates.setdefault("c", threading.Event()).set()
    assert actions.wait(5)
    assert actions.order[-1] == "c" and actions.activated == []
    assert not actions.running("high")


def test_a_failed_victim_spares_the_last_and_activates_the_preemptor(setup: Any) -> None:
    s, _, _, _ = setup
    actions = Scripted(s.client, s.state, s.events, fail={"a"})
    victims = _victims(s, "a", "b")
    for n in ("a", "b"):
        actions.gates[n] = threading.Event()
        actions.gates[n].set()
    actions.start(make_pod("high").uid("high").priority(100).obj(),
                  PostFilterResult("n1", victims), "policyd")
    assert actions.wait(5)
    assert actions.order == ["a"] and actions.activated == ["high"]
    assert not actions.running("high")


def test_victims_already_being_deleted_get_no_call(setup: Any) -> None:
    s, _, _, _ = setup
    actions = Scripted(s.client, s.state, s.events)
    going = low("going", cpu="100m")
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    s.on_pod_add(going)
    with s.lock:
        info = s.cluster.get("n1")
        assert info is not None
        victim = info.pods["going"]
    actions.start(make_pod("high").uid("high").priority(100).obj(),
                  PostFilterResult("n1", (victim,)), "policyd")
    assert not actions.running("high") and actions.wait(1) and actions.order == []


def test_the_activated_preemptor_goes_to_the_active_queue(setup: Any) -> None:
    s, _, _, _ = setup
    s.on_pod_add(low("victim"))
    s.on_pod_add(high())
    attempt(s)
    assert s.queue.where("high") == UNSCHEDULABLE
    s.preemption._activate_in_queue("high")
    assert s.queue.where("high") == ACTIVE


# -- the request bodies ---------------------------------------------------------------

def test_status_patches() -> None:
    patch = api.pod_scheduled_patch("m", nominated_node="n1")
    assert patch["status"]["nominatedNodeName"] == "n1"
    assert patch["status"]["conditions"][0]["type"] == "PodScheduled"
    # Clearing: null removes the field in a strategic merge patch.
    assert api.pod_scheduled_patch("m", condition=False, nominated_node="") == {
        "status": {"nominatedNodeName": None}}
    [cond] = api.disruption_target_patch("policyd")["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "DisruptionTarget", "True", "PreemptionByScheduler",
        "policyd: preempting to accommodate a higher priority pod")


def test_budgets_and_priority_classes_are_kept_from_their_informers(setup: Any) -> None:
    from policyd.model.disruption import POD_DISRUPTION_BUDGET, PRIORITY_CLASS

    s, _, _, _ = setup
    pdb: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "guard", "namespace": "shop"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}},
           "status": {"disruptionsAllowed": 0}}
    s.handlers.on_disruption(POD_DISRUPTION_BUDGET, pdb)
    allowed = copy.deepcopy(pdb)
    allowed["status"]["disruptionsAllowed"] = 1
    s.handlers.on_disruption_update(POD_DISRUPTION_BUDGET, pdb, allowed)
    [budget] = s.cluster.disruption_budgets.budgets()
    assert (budget.namespace, budget.name, budget.disruptions_allowed) == ("shop", "guard", 1)
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
          "metadata": {"name": "urgent"}, "value": 1000}
    s.handlers.on_disruption(PRIORITY_CLASS, pc)
    assert s.cluster.disruption_budgets.priority_value("urgent") == 1000
    s.handlers.on_disruption_delete(POD_DISRUPTION_BUDGET, allowed)
    s.handlers.on_disruption_delete(PRIORITY_CLASS, pc)
    assert s.cluster.disruption_budgets.budgets() == []
    assert s.cluster.disruption_budgets.priority_value("urgent") is None
