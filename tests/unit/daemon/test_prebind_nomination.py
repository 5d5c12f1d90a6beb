"""Before PreBind, as kube-scheduler v1.36's bindingCycle: the nomination written when
PreBind will have work (NominatedNodeNameForExpectation), and a victim still in
PreBind preempted by calling its binding off instead of deleting it.

A test PreBind plugin of this file's own, shaped like VolumeBinding (Reserve assumes a
PV, PreBind writes it, then waits for the test), with a pre-flight whose answer the
test sets. The API is a recording fake; the clock is the fake one.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from policyd import features
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.daemon.queue import BACKOFF
from policyd.framework.cycle_state import CycleState
from policyd.framework.interfaces import BindingHandle, PostFilterResult
from policyd.framework.status import Status
from policyd.kube.client import ApiError, KubeClient
from policyd.model.records import Pod
from tests.binding_plugins import default_profile_with
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock
from tests.polling import wait_for

Obj = dict[str, Any]
STATUS_PATH = "/api/v1/namespaces/default/pods/p/status"
NO_GATE = features.with_settings([("NominatedNodeNameForExpectation", False)])


class WakeableClock(ManualClock):
    """The fake clock, but a wait on an event blocks (up to 5 s, never 600) until the
    event is set: what a PreBind wait that only a wake-up can end needs."""

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(min(seconds, 5.0))


class FakeAPI:
    """Every call recorded; PUTs echo the object with the next resourceVersion; the
    nomination PATCH answers `patch_errors` in turn (then 200)."""

    def __init__(self, patch_errors: tuple[int, ...] = ()) -> None:
        self.calls: list[tuple[str, str]] = []
        self.bodies: list[tuple[str, Any]] = []
        self.patch_errors = list(patch_errors)
        self.binds = 0

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        self.calls.append((method, path))
        self.bodies.append((path, copy.deepcopy(body)))
        if method == "PATCH" and path == STATUS_PATH and self.patch_errors:
            raise ApiError(self.patch_errors.pop(0), "Nope", "refused")
        if method == "PUT":
            stored = copy.deepcopy(body)
            stored["metadata"]["resourceVersion"] = "6"
            return stored
        if path.endswith("/binding"):
            self.binds += 1
        return {}

    def count(self, method: str, path: str) -> int:
        return self.calls.count((method, path))


class HoldsVolumes:
    """Reserve + PreBind with a pre-flight answering `pre_flight`; PreBind PUTs the
    PV, then `then(handle)` (the test's behaviour)."""

    name = "Volumes"

    def __init__(self, pre_flight: Status | None,
                 then: Callable[[BindingHandle], Status | None] | None) -> None:
        self.pre_flight = pre_flight
        self.then = then
        self.calls: list[str] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.calls.append("reserve")
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.calls.append("unreserve")

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str
                            ) -> Status | None:
        self.calls.append("pre_flight")
        return self.pre_flight

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                 handle: BindingHandle) -> Status | None:
        self.calls.append("pre_bind")
        handle.update({"apiVersion": "v1", "kind": "PersistentVolume",
                       "metadata": {"name": "pv-1", "resourceVersion": "5"}})
        return self.then(handle) if self.then is not None else None


@dataclass
class Rig:
    s: Scheduler
    api: FakeAPI
    plugin: HoldsVolumes
    failed: list[tuple[str, str, str | None]] = field(default_factory=list)
    scheduled: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)

    def schedule(self, name: str = "p", *, nominated: str = "", priority: int = 0) -> Pod:
        raw = make_pod(name).uid(f"uid-{name}").scheduler("policyd").priority(priority).raw()
        if nominated:
            raw.setdefault("status", {})["nominatedNodeName"] = nominated
        self.s.on_pod_add(raw)
        qp = self.s.queue.pop(timeout=0)
        assert qp is not None
        self.s.schedule(qp)
        return qp.pod

    def done(self) -> None:
        assert self.s.binder.wait(5)

    def unreserves(self) -> int:
        return self.plugin.calls.count("unreserve")


@pytest.fixture
def rig() -> Iterator[Callable[..., Rig]]:
    made: list[Scheduler] = []

    def build(*, pre_flight: Status | None = None,
              then: Callable[[BindingHandle], Status | None] | None = None,
              api: FakeAPI | None = None,
              gates: features.FeatureGates = features.DEFAULTS) -> Rig:
        api = api or FakeAPI()
        metrics = Metrics()
        sink = EventSink(cast(KubeClient, api), metrics, "test")  # never started
        plugin = HoldsVolumes(pre_flight, then)
        fw = default_profile_with(reserve=[plugin], pre_bind=[plugin])
        s = Scheduler(cast(KubeClient, api), {"policyd": fw}, metrics=metrics, events=sink,
                      clock=WakeableClock())
        # The gate reaches the binder through its constructor; here, as a test would
        # build one with it.
        s.binder.nominate_for_expectation = gates.enabled("NominatedNodeNameForExpectation")
        r = Rig(s, api, plugin)

        def failed(ns: str, name: str, uid: str, message: str, component: str, *,
                   post_event: bool, patch_condition: bool,
                   reason: str = "Unschedulable", nominated_node: str | None = None
                   ) -> None:
            r.failed.append((message, reason, nominated_node))

        def scheduled(ns: str, name: str, uid: str, node: str, *_: Any) -> None:
            r.scheduled.append(node)

        def event(ref: Any, event_type: str, reason: str, message: str, *_: Any,
                  **__: Any) -> None:
            r.events.append((ref.name, reason, message))

        setattr(sink, "failed", failed)  # noqa: B010 (the writer is never started)
        setattr(sink, "scheduled", scheduled)  # noqa: B010
        setattr(sink, "event", event)  # noqa: B010
        made.append(s)
        s.on_node_add(make_node("n1").capacity(cpu="8", pods="10").raw())
        return r

    yield build
    for s in made:
        s.shutdown(0)


# -- the nomination before PreBind ------------------------------------------------------

def test_the_pod_is_nominated_before_pre_bind_when_pre_bind_will_work(rig: Any) -> None:
    r = rig()
    r.schedule()
    wait_for(lambda: r.scheduled == ["n1"], 5, "the bind")
    # The nomination patch first, carrying nothing else; then PreBind's write; then
    # the Binding.
    assert [m for m, _ in r.api.calls] == ["PATCH", "PUT", "POST"]
    assert r.api.bodies[0] == (STATUS_PATH, {"status": {"nominatedNodeName": "n1"}})
    assert r.plugin.calls == ["reserve", "pre_flight", "pre_bind"]
    assert r.unreserves() == 0


def test_no_nomination_and_no_pre_bind_when_the_pre_flight_says_skip(rig: Any) -> None:
    r = rig(pre_flight=Status.skip())
    r.schedule()
    wait_for(lambda: r.scheduled == ["n1"], 5, "the bind")
    assert [m for m, _ in r.api.calls] == ["POST"]
    assert r.plugin.calls == ["reserve", "pre_flight"]  # PreBind skipped


def test_with_the_gate_off_no_pre_flight_and_no_nomination(rig: Any) -> None:
    r = rig(gates=NO_GATE)
    r.schedule()
    wait_for(lambda: r.scheduled == ["n1"], 5, "the bind")
    assert [m for m, _ in r.api.calls] == ["PUT", "POST"]
    assert r.plugin.calls == ["reserve", "pre_bind"]


def test_a_pod_already_nominated_there_is_not_patched_again(rig: Any) -> None:
    r = rig()
    r.schedule(nominated="n1")
    wait_for(lambda: r.scheduled == ["n1"], 5, "the bind")
    assert r.api.count("PATCH", STATUS_PATH) == 0


@pytest.mark.parametrize(("errors", "patches"), [
    ((500, 500), 3),           # retried (upstream's util.Retriable), then it lands
    ((409, 503, 500, 500), 4),  # four tries at most, then given up
    ((403,), 1),               # not retriable
])
def test_a_failed_nomination_is_logged_and_the_bind_goes_on(
        rig: Any, caplog: pytest.LogCaptureFixture, errors: tuple[int, ...],
        patches: int) -> None:
    r = rig(api=FakeAPI(patch_errors=errors))
    with caplog.at_level(logging.ERROR):
        r.schedule()
        wait_for(lambda: r.scheduled == ["n1"], 5, "the bind")
    assert r.api.count("PATCH", STATUS_PATH) == patches
    assert r.api.binds == 1
    gave_up = [m for m in caplog.messages if "failed to update the nominated node" in m]
    assert len(gave_up) == (0 if patches == 3 else 1)


def test_a_pre_flight_error_fails_the_binding_cycle_before_any_write(rig: Any) -> None:
    r = rig(pre_flight=Status.error('no pod volume found for node "n1"'))
    r.schedule()
    r.done()
    assert r.api.calls == []
    assert "pre_bind" not in r.plugin.calls and r.unreserves() == 1
    assert r.failed == [('running PreBindPreFlight "Volumes": no pod volume found for node '
                         '"n1"', "SchedulerError", None)]
    assert r.s.queue.where("uid-p") == BACKOFF


def test_a_failed_pre_bind_clears_the_nomination_it_wrote(rig: Any) -> None:
    r = rig(then=lambda handle: Status.error("binding volumes: context deadline exceeded"))
    r.schedule()
    r.done()
    assert r.unreserves() == 1 and r.api.binds == 0
    # PodScheduled and the cleared nomination in one status patch, as updatePod.
    assert r.failed == [('running PreBind plugin "Volumes": binding volumes: context '
                         "deadline exceeded", "SchedulerError", "")]
    with r.s.lock:  # and the nominator holds nothing for it
        assert r.s.cluster.nominated_node("uid-p") is None


def test_the_echo_of_the_nomination_leaves_an_assumed_pod_alone(rig: Any) -> None:
    """The informer shows our own patch while the pod is assumed: the nominator must
    not count it a second time on its node (upstream skips assumed pods' updates)."""
    entered, release = threading.Event(), threading.Event()

    def hold(handle: BindingHandle) -> Status | None:
        entered.set()
        release.wait(5)
        return None

    r = rig(then=hold)
    pod = r.schedule()
    assert entered.wait(5)
    echoed = copy.deepcopy(pod.raw)
    echoed["status"]["nominatedNodeName"] = "n1"
    r.s.on_pod_update(pod.raw, echoed)
    with r.s.lock:
        assert r.s.cluster.nominated_node("uid-p") is None
        assert r.s.cluster.node_of("uid-p") == "n1"
    release.set()
    wait_for(lambda: r.scheduled == ["n1"], 5, "the bind")


# -- a victim in PreBind ----------------------------------------------------------------

def _preempt(r: Rig, victim: Pod) -> None:
    preemptor = make_pod("high").uid("uid-high").scheduler("policyd").priority(100).obj()
    assert r.s.preemption.start(preemptor, PostFilterResult("n1", (victim,)), "policyd")
    assert r.s.preemption.wait(5)


def _waiting_in_pre_bind(r: Rig) -> threading.Event:
    entered = threading.Event()

    def wait_for_volumes(handle: BindingHandle) -> Status | None:
        entered.set()
        # As VolumeBinding's poll: gives up with Go's words when told to.
        if handle.wait(600.0):
            return Status.error("binding volumes: context canceled")
        return Status.error("binding volumes: context deadline exceeded")

    r.plugin.then = wait_for_volumes
    return entered


def test_a_victim_in_pre_bind_is_called_off_not_deleted(rig: Any) -> None:
    r = rig()
    entered = _waiting_in_pre_bind(r)
    victim = r.schedule()
    assert entered.wait(5)
    _preempt(r, victim)
    r.done()
    # No API call for the victim beyond its own binding cycle's (the nomination, the
    # PV): no DisruptionTarget, no delete, no Binding.
    assert [m for m, _ in r.api.calls] == ["PATCH", "PUT"]
    assert r.api.binds == 0 and r.unreserves() == 1
    assert r.events == [("p", "Preempted",
                         "Preempted by pod uid-high on node n1 (in kube-scheduler memory).")]
    # Requeued with the cancellation's cause, its nomination cleared.
    assert r.failed == [('running PreBind plugin "Volumes": preempted by DefaultPreemption',
                         "SchedulerError", "")]
    assert r.s.queue.where("uid-p") == BACKOFF
    with r.s.lock:
        assert "uid-p" not in r.s.assumed and r.s.cluster.node_of("uid-p") is None
    assert len(r.s.state.in_pre_bind) == 0


def test_a_victim_whose_pre_bind_finished_is_deleted_through_the_api(rig: Any) -> None:
    entered, release = threading.Event(), threading.Event()
    r = rig()
    original_bind = r.api.request

    def slow_binding(method: str, path: str, **kw: Any) -> Any:
        if path.endswith("/binding"):
            entered.set()
            release.wait(5)
        return original_bind(method, path, **kw)

    r.api.request = slow_binding
    victim = r.schedule()
    assert entered.wait(5)  # PreBind over, the Binding on its way
    threading.Timer(0.2, release.set).start()
    _preempt(r, victim)
    r.done()
    assert r.api.binds == 1 and r.scheduled == ["n1"] and r.unreserves() == 0
    paths = [p for m, p in r.api.calls if m in ("PATCH", "DELETE")]
    assert paths[-2:] == [STATUS_PATH, "/api/v1/namespaces/default/pods/p"]
    assert r.events == [("p", "Preempted", "Preempted by pod uid-high on node n1")]


def test_a_victim_with_nothing_to_pre_bind_is_deleted_with_the_gate_on(rig: Any) -> None:
    """The pre-flight said Skip: the pod never enters the PreBind map (upstream puts it
    there only when PreBind will work), so preemption deletes it."""
    r = rig(pre_flight=Status.skip())
    entered, release = threading.Event(), threading.Event()
    original = r.api.request

    def slow_binding(method: str, path: str, **kw: Any) -> Any:
        if path.endswith("/binding"):
            entered.set()
            release.wait(5)
        return original(method, path, **kw)

    r.api.request = slow_binding
    victim = r.schedule()
    assert entered.wait(5)
    assert r.s.state.in_pre_bind.get("uid-p") is None
    release.set()
    _preempt(r, victim)
    assert r.api.count("DELETE", "/api/v1/namespaces/default/pods/p") == 1


def test_a_victim_in_pre_bind_is_called_off_with_the_gate_off_too(rig: Any) -> None:
    """Without the gate every binding cycle enters the PreBind map (upstream's nil
    pre-flight status counts as Success), and nothing was nominated to clear."""
    r = rig(gates=NO_GATE)
    entered = _waiting_in_pre_bind(r)
    victim = r.schedule()
    assert entered.wait(5)
    _preempt(r, victim)
    r.done()
    assert [m for m, _ in r.api.calls] == ["PUT"]
    assert r.failed == [('running PreBind plugin "Volumes": preempted by DefaultPreemption',
                         "SchedulerError", None)]
    assert r.unreserves() == 1


def test_cancelled_as_pre_bind_succeeds_the_pod_is_not_bound(rig: Any) -> None:
    """PreBind returned Success, but preemption called the bind off first: upstream's
    MarkPrebound check fails the cycle with the cause alone."""
    def called_off_meanwhile(handle: BindingHandle) -> Status | None:
        entry = r.s.state.in_pre_bind.get("uid-p")
        assert entry is not None and entry.cancel("preempted by DefaultPreemption")
        return None

    r = rig(then=called_off_meanwhile)
    r.schedule()
    r.done()
    assert r.api.binds == 0 and r.unreserves() == 1
    assert r.failed == [("preempted by DefaultPreemption", "SchedulerError", "")]


def test_a_stopping_binder_wakes_a_pre_bind_wait_at_once(rig: Any) -> None:
    r = rig()
    entered = _waiting_in_pre_bind(r)
    r.schedule()
    assert entered.wait(5)
    r.s.binder.shutdown()
    r.done()
    assert r.unreserves() == 1 and r.failed == []  # stopping tells the pod nothing
