"""Reserve, PreBind and Unreserve in the daemon, with test plugins of this file's own.

The order is upstream's: Reserve right after the assumption (under the cycle's lock),
PreBind in the binder before the Binding. Every path on which the pod ends up not
bound by us runs Unreserve exactly once and leaves nothing assumed: no pod in
`assumed`, no pod counted on the node, no PersistentVolume assumption in
`cluster.storage`. The clock is the fake one: no test sleeps through a backoff.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from policyd.daemon.binder import BIND_RETRIES
from policyd.daemon.coordinator import Scheduler
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics
from policyd.daemon.queue import BACKOFF, UNSCHEDULABLE
from policyd.framework.cycle_state import CycleState
from policyd.framework.interfaces import BindingApiError, BindingHandle
from policyd.framework.status import Status
from policyd.kube.client import ApiError, KubeClient
from policyd.model.records import Pod
from tests.binding_plugins import default_profile_with
from tests.builders import make_node, make_pod
from tests.clocks import ManualClock
from tests.polling import wait_for

Obj = dict[str, Any]
PV = "pv-1"


def _pv(rv: str = "5") -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": PV, "resourceVersion": rv},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}}


class FakeAPI:
    """The API calls of one bind: PUTs of volume objects (stored with the next
    resourceVersion), the Binding (answered by `bind_status`: 0 is 201; an
    exception type is raised), GETs of the pod after a 409."""

    def __init__(self, bind_status: int | type[Exception] = 0, put_status: int = 0) -> None:
        self.bind_status = bind_status
        self.put_status = put_status
        self.calls: list[tuple[str, str]] = []
        self.bodies: list[Obj] = []
        self.binds = 0

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Obj:
        self.calls.append((method, path))
        if method == "PUT":
            if self.put_status:
                raise ApiError(self.put_status, "Conflict",
                               'Operation cannot be fulfilled on persistentvolumes "pv-1": '
                               "the object has been modified")
            stored = copy.deepcopy(body)
            meta = stored["metadata"]
            meta["resourceVersion"] = str(int(meta.get("resourceVersion") or "0") + 1)
            self.bodies.append(stored)
            return cast(Obj, stored)
        if path.endswith("/binding"):
            self.binds += 1
            if isinstance(self.bind_status, type):
                raise self.bind_status("not an API error")
            if self.bind_status:
                raise ApiError(self.bind_status, "Nope", "refused")
        return {}


@dataclass
class Journal:
    """What the test plugins were asked to do, in order."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    # Per undo_pre_bind call: whether the pod was already back in the queue.
    undo_seen_in_queue: list[bool] = field(default_factory=list)

    def count(self, plugin: str, point: str) -> int:
        return self.calls.count((plugin, point))


class VolumeLike:
    """A Reserve + PreBind plugin shaped like VolumeBinding: Reserve assumes PV pv-1
    bound to the pod, Unreserve drops that assumption, PreBind writes it through the
    handle and then runs `then(handle)` (the test's behaviour: wait, fail, ...)."""

    def __init__(self, name: str, journal: Journal, *, reject_reserve: bool = False,
                 then: Callable[[BindingHandle], Status | None] | None = None) -> None:
        self.name = name
        self.journal = journal
        self.reject_reserve = reject_reserve
        self.then = then
        self.where: Callable[[str], str | None] | None = None  # the queue's, once built

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.journal.calls.append((self.name, "reserve"))
        if self.reject_reserve:
            return Status.unschedulable("node(s) volume went elsewhere")
        assert state.cluster is not None
        pvs = state.cluster.storage.pvs
        current = pvs.get(PV)
        if current is not None and self.name == "Volumes":
            taken = copy.deepcopy(current)
            taken["spec"]["claimRef"] = {"namespace": pod.namespace, "name": pod.name}
            pvs.assume(taken)
            state.write("pv", taken)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.journal.calls.append((self.name, "unreserve"))
        if self.name == "Volumes" and state.cluster is not None:
            state.cluster.storage.pvs.restore(PV)

    def undo_pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                      handle: BindingHandle) -> None:
        """Unreserve's API half: recorded with where the pod was at that moment."""
        self.journal.calls.append((self.name, "undo_pre_bind"))
        self.journal.undo_seen_in_queue.append(self.where is not None and
                                               self.where(pod.uid) is not None)

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str,
                 handle: BindingHandle) -> Status | None:
        self.journal.calls.append((self.name, "pre_bind"))
        if self.name == "Volumes":
            try:
                handle.update(state.read("pv"))
            except BindingApiError as exc:
                return Status.error(f"binding volumes: {exc}")
        return self.then(handle) if self.then is not None else None


@dataclass
class Told:
    """What the pod was told: (message, reason, condition patched) per failure."""

    failed: list[tuple[str, str, bool]] = field(default_factory=list)
    scheduled: list[str] = field(default_factory=list)
    # Per failure, the nomination its status patch sets ("" clears, None leaves it).
    nominations: list[str | None] = field(default_factory=list)


@dataclass
class Rig:
    s: Scheduler
    api: FakeAPI
    journal: Journal
    told: Told
    clock: ManualClock
    leader: list[bool]

    def schedule(self) -> None:
        self.s.on_pod_add(make_pod("p").uid("uid-p").scheduler("policyd").raw())
        qp = self.s.queue.pop(timeout=0)
        assert qp is not None
        self.s.schedule(qp)

    def nothing_assumed(self) -> bool:
        with self.s.lock:
            return ("uid-p" not in self.s.assumed and self.s.cluster.node_of("uid-p") is None
                    and not self.s.cluster.storage.pvs.is_assumed(PV))


@pytest.fixture
def rig() -> Iterator[Callable[..., Rig]]:
    made: list[Scheduler] = []

    def build(api: FakeAPI | None = None, *, reject_reserve: bool = False,
              then: Callable[[BindingHandle], Status | None] | None = None) -> Rig:
        api = api or FakeAPI()
        clock = ManualClock()
        journal = Journal()
        told = Told()
        leader = [True]
        metrics = Metrics()
        sink = EventSink(cast(KubeClient, api), metrics, "test")  # never started

        def failed(ns: str, name: str, uid: str, message: str, component: str, *,
                   post_event: bool, patch_condition: bool,
                   reason: str = "Unschedulable", nominated_node: str | None = None
                   ) -> None:
            told.failed.append((message, reason, patch_condition))
            told.nominations.append(nominated_node)

        def scheduled(ns: str, name: str, uid: str, node: str, *_: Any) -> None:
            told.scheduled.append(node)

        setattr(sink, "failed", failed)  # noqa: B010 (the writer is never started)
        setattr(sink, "scheduled", scheduled)  # noqa: B010
        # Two plugins, to see the order: Reserve and PreBind forwards, Unreserve back.
        first = VolumeLike("Volumes", journal, then=then)
        second = VolumeLike("Other", journal, reject_reserve=reject_reserve)
        fw = default_profile_with(reserve=[first, second], pre_bind=[first, second])
        s = Scheduler(cast(KubeClient, api), {"policyd": fw}, metrics=metrics, events=sink,
                      clock=clock, is_leader=lambda: leader[0])
        made.append(s)
        first.where = second.where = s.queue.where
        s.on_node_add(make_node("n1").capacity(cpu="8", pods="10").raw())
        s.on_storage("PersistentVolume", _pv())
        return Rig(s, api, journal, told, clock, leader)

    yield build
    for s in made:
        s.shutdown(0)


def _undone(r: Rig) -> None:
    """Wait until the bind is over (its thread done), then check nothing is left."""
    wait_for(lambda: r.journal.count("Volumes", "unreserve") >= 1, 5, "Unreserve")
    assert r.s.binder.wait(5)
    assert r.nothing_assumed()


def test_a_bound_pod_ran_reserve_then_pre_bind_then_the_binding(rig: Any) -> None:
    r = rig()
    r.schedule()
    with r.s.lock:  # Reserve ran under the cycle's lock: the next cycle sees the PV taken
        assert r.s.cluster.storage.pvs.is_assumed(PV)
    wait_for(lambda: r.told.scheduled == ["n1"], 5, "the bind")
    assert r.journal.calls == [("Volumes", "reserve"), ("Other", "reserve"),
                               ("Volumes", "pre_bind"), ("Other", "pre_bind")]
    # The nomination (these plugins have no pre-flight: PreBind is taken to have
    # work), then PreBind's write, then the Binding, with the claimRef Reserve chose.
    assert [m for m, _ in r.api.calls] == ["PATCH", "PUT", "POST"]
    assert r.api.calls[0][1] == "/api/v1/namespaces/default/pods/p/status"
    assert r.api.calls[1][1] == "/api/v1/persistentvolumes/pv-1"
    assert r.api.bodies[0]["spec"]["claimRef"] == {"namespace": "default", "name": "p"}
    # Still assumed until the informer shows the written version.
    assert r.s.cluster.storage.pvs.is_assumed(PV)
    r.s.on_storage_update("PersistentVolume", _pv(), r.api.bodies[0])
    assert not r.s.cluster.storage.pvs.is_assumed(PV)
    assert r.s.cluster.storage.pvs.get(PV) is r.api.bodies[0]


def test_a_rejecting_reserve_unreserves_all_and_the_pod_waits_unschedulable(rig: Any
                                                                            ) -> None:
    r = rig(reject_reserve=True)
    r.schedule()
    assert r.journal.calls == [("Volumes", "reserve"), ("Other", "reserve"),
                               ("Other", "unreserve"), ("Volumes", "unreserve")]
    assert r.nothing_assumed()
    assert r.api.calls == []  # no PreBind, no Binding
    assert r.s.queue.where("uid-p") == UNSCHEDULABLE
    qp = r.s.queue.get("uid-p")
    assert qp is not None and qp.unschedulable_plugins == {"Other"}
    # As upstream's FitError over the one chosen node.
    assert r.told.failed == [
        ("0/1 nodes are available: 1 node(s) volume went elsewhere.", "Unschedulable", True)]


def test_a_failed_pre_bind_unreserves_once_and_tells_the_pod(rig: Any) -> None:
    r = rig(then=lambda handle: Status.unschedulable("node(s) had volume node affinity "
                                                     "conflict"))
    r.schedule()
    _undone(r)
    # Unreserve, then its API half (undo_pre_bind) in the same reverse order, both
    # before the pod is back in the queue.
    assert r.journal.calls == [("Volumes", "reserve"), ("Other", "reserve"),
                               ("Volumes", "pre_bind"),
                               ("Other", "unreserve"), ("Volumes", "unreserve"),
                               ("Other", "undo_pre_bind"), ("Volumes", "undo_pre_bind")]
    assert r.journal.undo_seen_in_queue == [False, False]
    assert r.api.binds == 0
    assert r.s.queue.where("uid-p") == BACKOFF
    # PreBind's own message, as handleBindingCycleError reports it.
    assert r.told.failed == [("node(s) had volume node affinity conflict", "Unschedulable",
                              True)]


def test_a_refused_write_fails_pre_bind_with_the_server_message(rig: Any) -> None:
    r = rig(FakeAPI(put_status=409))
    r.schedule()
    _undone(r)
    assert r.api.binds == 0
    assert r.journal.count("Volumes", "unreserve") == 1
    assert r.told.failed == [
        ('running PreBind plugin "Volumes": binding volumes: Operation cannot be fulfilled '
         'on persistentvolumes "pv-1": the object has been modified', "SchedulerError", True)]


def test_a_crashing_pre_bind_is_an_error_and_unreserves_once(rig: Any) -> None:
    def crash(handle: BindingHandle) -> Status | None:
        raise KeyError("spec")

    r = rig(then=crash)
    r.schedule()
    _undone(r)
    assert r.journal.count("Volumes", "unreserve") == 1
    assert r.told.failed == [('running PreBind plugin "Volumes": KeyError: \'spec\'',
                              "SchedulerError", True)]


@pytest.mark.parametrize("status", [403, 500])
def test_a_bind_given_up_unreserves_once(rig: Any, status: int) -> None:
    """403: permanent at once; 500: temporary until the retry deadline passes."""
    r = rig(FakeAPI(bind_status=status))
    r.schedule()
    _undone(r)
    assert r.journal.count("Volumes", "unreserve") == 1
    assert r.journal.count("Other", "unreserve") == 1
    assert r.told.failed[0][0].startswith(f"binding rejected: {status} Nope")
    if status == 500:
        assert sum(r.clock.waits) <= BIND_RETRIES.deadline


def test_a_bind_that_finds_the_pod_gone_unreserves_once(rig: Any) -> None:
    r = rig(FakeAPI(bind_status=404))
    r.schedule()
    _undone(r)
    assert r.journal.count("Volumes", "unreserve") == 1
    assert r.told.failed == []


def test_an_internal_error_in_the_binder_unreserves_once(rig: Any) -> None:
    r = rig(FakeAPI(bind_status=RuntimeError))
    r.schedule()
    _undone(r)
    assert r.journal.count("Volumes", "unreserve") == 1
    assert [m for m, _, _ in r.told.failed] == ["internal error"]


def test_lost_leadership_in_pre_bind_unreserves_once_and_tells_nobody(rig: Any) -> None:
    def step_down(handle: BindingHandle) -> Status | None:
        r.leader[0] = False
        # Waiting cannot lead to a bind any more: the handle says give up.
        return Status.error("timed out waiting for volumes") if handle.wait(1.0) else None

    r = rig(then=step_down)
    r.schedule()
    _undone(r)
    assert r.journal.count("Volumes", "unreserve") == 1
    assert r.api.binds == 0 and r.told.failed == []
    assert r.s.queue.get("uid-p") is not None


def test_a_pod_deleted_while_in_pre_bind_leaves_nothing_assumed(
        rig: Any, caplog: pytest.LogCaptureFixture) -> None:
    waits: list[bool] = []

    def deleted_meanwhile(handle: BindingHandle) -> Status | None:
        r.s.on_pod_delete(make_pod("p").uid("uid-p").scheduler("policyd").raw())
        # The wait ends at once: the pod this bind serves is gone.
        waits.append(handle.wait(30.0))
        return Status.error("timed out waiting for volumes") if waits[-1] else None

    r = rig(then=deleted_meanwhile)
    with caplog.at_level(logging.INFO):
        r.schedule()
        _undone(r)
    assert waits == [True]
    # Nobody to tell, but the log says what became of the bind.
    assert any("given up" in m and "timed out waiting for volumes" in m
               and "deleted or bound elsewhere" in m for m in caplog.messages)
    assert r.journal.count("Volumes", "unreserve") == 1
    assert r.journal.count("Other", "unreserve") == 1
    assert r.api.binds == 0 and r.told.failed == []
    assert r.s.queue.get("uid-p") is None  # deleted: not requeued


def test_a_pod_deleted_after_pre_bind_is_not_bound_and_unreserves_once(rig: Any) -> None:
    def deleted_after(handle: BindingHandle) -> Status | None:
        r.s.on_pod_delete(make_pod("p").uid("uid-p").scheduler("policyd").raw())
        return None

    r = rig(then=deleted_after)
    r.schedule()
    _undone(r)
    assert r.journal.count("Volumes", "unreserve") == 1
    assert r.api.binds == 0


def test_graceful_shutdown_finishes_a_bind_in_pre_bind(rig: Any) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(handle: BindingHandle) -> Status | None:
        entered.set()
        release.wait(10)
        return None

    r = rig(then=slow)
    r.schedule()
    assert entered.wait(5)
    threading.Timer(0.2, release.set).start()
    assert r.s.shutdown(5.0) is True  # waited for the in-flight bind, PreBind included
    assert r.told.scheduled == ["n1"] and r.api.binds == 1
    assert r.journal.count("Volumes", "unreserve") == 0


def test_grace_period_over_in_pre_bind_unreserves_once_and_tells_nobody(rig: Any) -> None:
    entered, release = threading.Event(), threading.Event()
    gave_up: list[bool] = []

    def waits_for_the_controller(handle: BindingHandle) -> Status | None:
        entered.set()
        release.wait(10)
        gave_up.append(handle.wait(1.0))
        return Status.error("timed out waiting for volumes") if gave_up[-1] else None

    r = rig(then=waits_for_the_controller)
    r.schedule()
    assert entered.wait(5)
    assert r.s.shutdown(0) is False  # no grace: the bind is abandoned
    release.set()
    _undone(r)
    assert gave_up == [True]
    assert r.journal.count("Volumes", "unreserve") == 1
    assert r.api.binds == 0 and r.told.failed == []
