"""The scheduling queue: activeQ, backoffQ and the unschedulable pods (upstream's
PriorityQueue in pkg/scheduler/backend/queue).

- activeQ: pods ready to be tried, ordered by the profile's QueueSort (`less`), FIFO
  among equals.
- backoffQ: pods that failed and wait `podInitialBackoffSeconds * 2^(attempts-1)`
  (capped at `podMaxBackoffSeconds`) before going back to activeQ. As upstream, two
  heaps: pods some plugin rejected, and pods that failed with an error (no plugin
  named: an API error, a failed bind). With SchedulerPopFromBackoffQ (beta, on by
  default since v1.33, `pop_from_backoff`) an idle scheduler does not wait: when
  activeQ is empty, `pop` takes the head of the rejected pods' heap at once (never an
  errored pod: those keep their backoff). Under the same gate upstream rounds every
  expiry down to a 1 s window (`BACKOFF_WINDOW`), a pod backs off until the window
  after its expiry's has begun, and a window's pods leave in activeQ's order.
- unschedulable: pods no node fits, with the plugins that rejected them. A cluster
  event (`move`) returns a pod (to backoffQ if still backing off, else activeQ) only
  when one of *its* rejecting plugins registered that event and that plugin's
  queueing hint says QUEUE (upstream's isPodWorthRequeuing): a pod refused by
  NodeAffinity alone is not retried when a pod is deleted. A pod rejected with no
  plugin named (no nodes at all) moves on any event. Every pod also returns after
  `max_in_unschedulable` seconds (upstream's podMaxInUnschedulablePodsDuration,
  5 min) via `flush`, and on a wildcard move (`move_all`, e.g. a policy reload).
- gated: pods with schedulingGates wait here until the gates are removed; and pods a
  PreEnqueue plugin refused (upstream's gating plugin, e.g. DynamicResources while a
  claim does not exist). PreEnqueue runs whenever a pod is about to enter activeQ, or
  backoffQ with SchedulerPopFromBackoffQ (then not again when it leaves backoffQ), as
  upstream's moveToActiveQ/moveToBackoffQ run it. A refused pod waits among the
  unschedulable pods, counted and shown as gated; only an event its gating plugin
  registered can move it (not the 5-minute flush, not a wildcard move), and it then
  meets PreEnqueue again. A policy reload asks PreEnqueue again for every such pod.

Events that arrive while pods are being scheduled (in flight) are kept until those
pods are back; a pod that then fails goes to backoffQ instead of unschedulable if one
of those events could have helped it (upstream's inFlightEvents), so an event that came
too late for the cycle is not lost. Deleting a pod removes it wherever it is,
including while it is in flight, so it is never requeued.

The clock is injected: tests drive time by hand and never sleep.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policyd.clock import REAL_CLOCK
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework.events import (
    FORCE_ACTIVATE,
    QUEUE,
    UNSCHEDULABLE_TIMEOUT,
    ClusterEvent,
    ClusterEventWithHint,
    matches,
    pod_update_events,
)
from policyd.framework.status import Status
from policyd.model.records import Pod

log = logging.getLogger("policyd.daemon.queue")

# Per profile (schedulerName): every (plugin, registration) of its plugins that can
# gate or reject a pod (PreEnqueue, PreFilter and Filter), as Framework.queueing_hints
# builds it.
HintMap = Mapping[str, Sequence[tuple[str, ClusterEventWithHint]]]
# The pod's profile's PreEnqueue plugins (Framework.run_pre_enqueue): given the pod and
# the plugin that gated it last (or ""), the plugin that refuses it now and its status,
# or None to let it in.
PreEnqueue = Callable[[Pod, str], tuple[str, Status] | None]

# Upstream's defaults (pkg/scheduler/backend/queue, apis/config/v1 defaults).
DEFAULT_INITIAL_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 10.0
DEFAULT_MAX_IN_UNSCHEDULABLE = 300.0  # DefaultPodMaxInUnschedulablePodsDuration
FLUSH_UNSCHEDULABLE_PERIOD = 30.0  # how often upstream checks that duration
BACKOFF_WINDOW = 1.0  # backoffQOrderingWindowDuration

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
IN_FLIGHT = "inFlight"
# The `queue` label of a pod arriving in each place: upstream keeps gated pods among
# the unschedulable ones, and counts them arriving there.
_INCOMING_QUEUE = {ACTIVE: ACTIVE, BACKOFF: BACKOFF, UNSCHEDULABLE: UNSCHEDULABLE,
                   GATED: UNSCHEDULABLE}


@dataclass(slots=True, eq=False)
class QueuedPod:
    """A pod in the queue plus its scheduling history (QueuedPodInfo)."""

    pod: Pod
    added: float  # first time it entered the queue
    timestamp: float  # last time it (re-)entered a queue
    attempts: int = 0
    cycle: int = 0  # the scheduling cycle that last popped it
    where: str = ""
    deleted: bool = False  # deleted (or bound elsewhere) while in flight
    seq: int = 0
    order: int = 0  # when it entered the queue's set of pods: moves keep this order
    unschedulable_plugins: set[str] = field(default_factory=set)
    in_flight_since: int = 0  # id of the first cluster event seen while in flight
    gating_plugin: str = ""  # the PreEnqueue plugin holding it back, "" when none
    # When it first entered the active queue, PreEnqueue passed (upstream's
    # InitialAttemptTimestamp): the start of the SLI metric, and a pod group's member
    # order after priority.
    first_attempt: float | None = None
    first_seq: int = 0  # its place in the queue then: the order of equal first attempts

    @property
    def uid(self) -> str:
        return self.pod.uid


# Longer than any wait at Permit (15 minutes): a remembered activation older than this
# belongs to a pod that bound or was deleted.
ACTIVATE_ON_RETURN_S = 16 * 60.0


class _ActiveEntry:
    __slots__ = ("less", "qp", "seq")

    def __init__(self, qp: QueuedPod, seq: int, less: Callable[[Pod, Pod], bool]) -> None:
        self.qp = qp
        self.seq = seq
        self.less = less

    def __lt__(self, other: _ActiveEntry) -> bool:
        if self.less(self.qp.pod, other.qp.pod):
            return True
        if self.less(other.qp.pod, self.qp.pod):
            return False
        return self.seq < other.seq


class _BackoffEntry:
    """A pod's place in a backoff heap: by expiry; with SchedulerPopFromBackoffQ, pods
    of one window in activeQ's order (lessBackoffCompletedWithPriority), then FIFO."""

    __slots__ = ("expiry", "less", "qp", "seq")

    def __init__(self, expiry: float, qp: QueuedPod, seq: int,
                 less: Callable[[Pod, Pod], bool] | None) -> None:
        self.expiry = expiry
        self.qp = qp
        self.seq = seq
        self.less = less

    def __lt__(self, other: _BackoffEntry) -> bool:
        if self.expiry != other.expiry:
            return self.expiry < other.expiry
        if self.less is not None:
            if self.less(self.qp.pod, other.qp.pod):
                return True
            if self.less(other.qp.pod, self.qp.pod):
                return False
        return self.seq < other.seq


def backoff_duration(attempts: int, initial: float, maximum: float) -> float:
    """initial * 2^(attempts-1), capped at maximum (calculateBackoffDuration); none
    for a pod never tried (one PreEnqueue held back from the start)."""
    if attempts <= 0:
        return 0.0
    duration = initial
    for _ in range(1, attempts):
        if duration >= maximum:
            return maximum
        duration *= 2
    return min(duration, maximum)


class SchedulingQueue:
    def __init__(
        self,
        less: Callable[[Pod, Pod], bool],
        *,
        clock: Callable[[], float] = REAL_CLOCK.now,
        initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE,
        pop_from_backoff: bool = True,
        features: FeatureGates = DEFAULTS,
    ) -> None:
        self._less = less
        self.pop_from_backoff = pop_from_backoff
        self.features = features  # what a pod update means (e.g. a resize's status)
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._pods: dict[str, QueuedPod] = {}  # every pod the queue knows, by uid
        # The unschedulable and in-flight pods again, by uid: a cluster event looks only
        # at these (a scan of every pending pod per event was quadratic in a backlog).
        self._unschedulable: dict[str, QueuedPod] = {}
        self._in_flight: dict[str, QueuedPod] = {}
        # Pods asked to be activated while in their binding cycle (waiting at Permit),
        # by uid, with when: upstream's Activate of an in-flight pod, which moves it
        # once it comes back. Forgotten after ACTIVATE_ON_RETURN_S (it bound).
        self._activate_on_return: dict[str, float] = {}
        self._order = itertools.count()
        self._active: list[_ActiveEntry] = []
        self._backoff: list[_BackoffEntry] = []  # pods some plugin rejected
        self._error_backoff: list[_BackoffEntry] = []  # pods that failed with an error
        self._seq = itertools.count()
        self.scheduling_cycle = 0
        self._hints: HintMap = {}
        self._pre_enqueue: PreEnqueue | None = None
        # Events seen while any pod was in flight: (id, event, old, new), ids rising.
        self._in_flight_events: list[tuple[int, ClusterEvent, Any, Any]] = []
        self._event_ids = itertools.count()
        self._next_event_id = 0
        self._cond = threading.Condition()
        self._closed = False
        # (queue, event) of every pod entering activeQ, backoffQ or the unschedulable
        # pods (scheduler_queue_incoming_pods_total); `_event` is the event the public
        # method now running (under the lock) moves pods for, "" to count nothing.
        self.on_incoming: Callable[[str, str], None] | None = None
        self._event = ""

    def set_hints(self, hints: HintMap) -> None:
        """The profiles' registered events and queueing hints (at start and reload)."""
        with self._cond:
            self._hints = dict(hints)

    def set_pre_enqueue(self, pre_enqueue: PreEnqueue | None) -> None:
        """The PreEnqueue plugins' runner. It is called under the queue's lock; the
        caller of every queue method that may run it (adding, moving, requeueing,
        activating, flushing) holds whatever it reads consistent."""
        with self._cond:
            self._pre_enqueue = pre_enqueue

    def regate(self) -> int:
        """Ask PreEnqueue again for every gated pod (a reload may have changed the
        plugins): those now let in move. Returns how many moved."""
        with self._cond:
            gated = [qp for qp in self._unschedulable.values() if qp.gating_plugin]
            self._event = FORCE_ACTIVATE.label
            moved = 0
            for qp in _in_queue_order(gated):
                self._move_one(qp)
                moved += not qp.gating_plugin
            if moved:
                self._cond.notify_all()
            return moved

    # -- ordering -----------------------------------------------------------------------

    def set_less(self, less: Callable[[Pod, Pod], bool]) -> None:
        """A reloaded profile may bring another QueueSort: re-heap activeQ with it."""
        with self._cond:
            self._less = less
            self._active = [_ActiveEntry(e.qp, e.seq, less) for e in self._active
                            if self._valid_active(e)]
            heapq.heapify(self._active)
            if self.pop_from_backoff:
                self._backoff = [_BackoffEntry(e.expiry, e.qp, e.seq, less)
                                 for e in self._backoff if self._valid_backoff(e)]
                heapq.heapify(self._backoff)

    def set_backoff(self, initial: float, maximum: float) -> None:
        """A reloaded profile's podInitialBackoffSeconds/podMaxBackoffSeconds: every
        backoff computed from now on uses them (a pod already in backoffQ keeps the
        expiry it was given)."""
        with self._cond:
            self.initial_backoff = initial
            self.max_backoff = maximum

    # -- adding, updating, deleting -----------------------------------------------------

    def add(self, pod: Pod) -> None:
        """A new pending pod (or a known one updated): queue it once."""
        with self._cond:
            qp = self._pods.get(pod.uid)
            if qp is not None:
                self._update(qp, pod)
                return
            now = self.clock()
            self._event = "UnschedulablePodAdd"
            qp = QueuedPod(pod=pod, added=now, timestamp=now)
            self._hold(qp)
            if pod.scheduling_gates:
                self._set_where(qp, GATED)
            else:
                self._enqueue_active(qp)

    def _update(self, qp: QueuedPod, pod: Pod) -> None:
        old = qp.pod
        self._event = "UnschedulablePodUpdate"
        qp.pod = pod
        if qp.where == GATED and not pod.scheduling_gates:
            self._enqueue_active(qp)
        elif qp.where == UNSCHEDULABLE and spec_changed(old, pod):
            # The pod itself changed: it moves if a rejecting plugin registered that
            # kind of change (a new toleration, its labels...) and its hint agrees.
            for event in pod_update_events(old, pod, self.features):
                if self._worth_requeuing(qp, event, old, pod):
                    self._move_one(qp)
                    break
        elif qp.where == IN_FLIGHT and spec_changed(old, pod):
            for event in pod_update_events(old, pod, self.features):
                self._record_in_flight(event, old, pod)
        elif qp.where == ACTIVE and old.priority != pod.priority:
            self._push_active(qp)  # re-sorted; the old entry is now stale

    def delete(self, uid: str) -> bool:
        """Forget a pod (deleted, bound elsewhere, finished). True if it was queued."""
        with self._cond:
            qp = self._pods.pop(uid, None)
            if qp is None:
                return False
            qp.deleted = True
            self._set_where(qp, "")
            self._prune_in_flight_events()
            return True

    def __contains__(self, uid: str) -> bool:
        with self._cond:
            return uid in self._pods

    def get(self, uid: str) -> QueuedPod | None:
        with self._cond:
            return self._pods.get(uid)

    # -- popping ------------------------------------------------------------------------

    def pop(self, timeout: float | None = 0.0) -> QueuedPod | None:
        """The next pod to schedule, moved in flight; None if none within `timeout`
        (0: do not wait; None: wait until one comes or the queue is closed)."""
        with self._cond:
            deadline = None if timeout is None else self.clock() + timeout
            while True:
                self._flush_backoff_locked(self.clock())
                qp = self._pop_active_locked()
                if qp is None and self.pop_from_backoff:
                    # activeQ is empty: the next rejected pod need not wait out its
                    # backoff (SchedulerPopFromBackoffQ).
                    qp = self._pop_heap_locked(self._backoff)
                    if qp is not None:
                        self._count_incoming(ACTIVE, "PopFromBackoffQ")
                if qp is not None:
                    self.scheduling_cycle += 1
                    qp.cycle = self.scheduling_cycle
                    qp.attempts += 1
                    if qp.first_attempt is None:  # popped from backoffQ, never active
                        qp.first_attempt, qp.first_seq = self.clock(), qp.seq
                    self._set_where(qp, IN_FLIGHT)
                    qp.in_flight_since = self._next_event_id
                    return qp
                if self._closed:
                    return None
                if deadline is not None:
                    remaining = deadline - self.clock()
                    if remaining <= 0:
                        return None
                    wait = remaining
                else:
                    wait = 1.0
                for heap in (self._error_backoff, self._backoff):
                    if heap:
                        # Wake up when the first backoff expires.
                        wait = min(wait, max(0.001, self._backoff_ends(heap[0].expiry)
                                             - self.clock()))
                self._cond.wait(min(wait, 1.0))

    def pop_specific(self, uid: str) -> QueuedPod | None:
        """Take one waiting pod out of the queue now, in flight (upstream's
        PopSpecificPod, for the other pending members of a pod group being scheduled):
        a pod backing off or unschedulable is activated first, so PreEnqueue may still
        hold it back. None if the pod is not waiting (in flight, gated, unknown)."""
        with self._cond:
            qp = self._pods.get(uid)
            if qp is None or qp.deleted or qp.where not in (ACTIVE, BACKOFF, UNSCHEDULABLE):
                return None
            if qp.where != ACTIVE and self._gated(qp):
                return None
            qp.cycle = self.scheduling_cycle
            self._set_where(qp, IN_FLIGHT)  # its heap entry is stale from now on
            qp.in_flight_since = self._next_event_id
            return qp

    def _pop_active_locked(self) -> QueuedPod | None:
        while self._active:
            entry = heapq.heappop(self._active)
            if self._valid_active(entry):
                return entry.qp
        return None

    def _pop_heap_locked(self, heap: list[_BackoffEntry]) -> QueuedPod | None:
        while heap:
            entry = heapq.heappop(heap)
            if self._valid_backoff(entry):
                return entry.qp
        return None

    def _valid_backoff(self, entry: _BackoffEntry) -> bool:
        qp = entry.qp
        return (not qp.deleted and qp.where == BACKOFF and qp.seq == entry.seq
                and self._pods.get(qp.uid) is qp)

    def _valid_active(self, entry: _ActiveEntry) -> bool:
        qp = entry.qp
        return (not qp.deleted and qp.where == ACTIVE and qp.seq == entry.seq
                and self._pods.get(qp.uid) is qp)

    def close(self) -> None:
        """Wake every waiting `pop` (shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- after a cycle ------------------------------------------------------------------

    def done(self, uid: str) -> None:
        """The pod was assumed on a node: the queue lets go of it."""
        with self._cond:
            qp = self._pods.get(uid)
            if qp is not None and qp.where == IN_FLIGHT:
                del self._pods[uid]
                self._set_where(qp, "")
                self._prune_in_flight_events()

    def requeue(self, qp: QueuedPod, *, unschedulable: bool,
                plugins: set[str] | None = None) -> str | None:
        """Put back a pod whose attempt failed: no node fits (`unschedulable`), or an
        error (or a failed bind), which always backs off. Returns where it went, None
        if the pod was deleted meanwhile."""
        with self._cond:
            if qp.deleted:
                return None
            current = self._pods.get(qp.uid)
            if current is not None and current is not qp:
                return None  # re-added as a new entry meanwhile
            self._hold(qp)
            self._event = "ScheduleAttemptFailure"
            qp.timestamp = self.clock()
            qp.unschedulable_plugins = set(plugins) if plugins is not None else set()
            if qp.pod.scheduling_gates:
                self._set_where(qp, GATED)
            elif (not unschedulable or self._helped_while_in_flight(qp)
                  or self._activate_on_return.pop(qp.uid, None) is not None):
                # An error, or an event arrived while this pod was being scheduled
                # that may be what it needed: only back off.
                self._enqueue_backoff(qp)
            else:
                self._set_where(qp, UNSCHEDULABLE)
            self._prune_in_flight_events()
            return qp.where

    def requeue_active(self, qp: QueuedPod) -> None:
        """Put back a pod that was popped but not tried (e.g. leadership was lost)."""
        with self._cond:
            if qp.deleted or self._pods.get(qp.uid) is not qp:
                return
            qp.attempts = max(0, qp.attempts - 1)
            self._event = ""  # never left: not an arrival
            self._push_active(qp)

    # -- moving ---------------------------------------------------------------------------

    def move(self, event: ClusterEvent, old: Any = None, new: Any = None) -> list[Pod]:
        """A cluster event (`old`/`new`: the changed Pod or Node record, None for an add
        or a delete): move the unschedulable pods it can help to backoffQ (still
        backing off) or activeQ (MoveAllToActiveOrBackoffQueue). Returns the pods
        moved."""
        with self._cond:
            self._event = event.label
            worth = [qp for qp in list(self._unschedulable.values())
                     if self._gate_hears(qp, event)
                     and self._worth_requeuing(qp, event, old, new)]
            moved: list[Pod] = []
            for qp in _in_queue_order(worth):
                self._move_one(qp)
                moved.append(qp.pod)
            self._record_in_flight(event, old, new)
            if moved:
                self._cond.notify_all()
            return moved

    def move_all(self, label: str = "ForceActivate") -> int:
        """Move every unschedulable pod, whatever rejected it (a wildcard event, such
        as a policy reload that may have changed every plugin). Returns how many."""
        event = ClusterEvent(FORCE_ACTIVATE.resource, FORCE_ACTIVATE.action, label)
        return len(self.move(event))

    def _gate_hears(self, qp: QueuedPod, event: ClusterEvent) -> bool:
        """A gated pod moves only on an event its gating plugin registered, whatever
        else rejected it before (GatingPluginEvents). A wildcard event is none of
        them: upstream matches it against a registration, not the other way round."""
        if not qp.gating_plugin:
            return True
        registered = self._hints.get(qp.pod.scheduler_name)
        if registered is None:
            return True  # a profile we know nothing about: never strand its pods
        return any(plugin == qp.gating_plugin and matches(reg.event, event)
                   for plugin, reg in registered)

    def _worth_requeuing(self, qp: QueuedPod, event: ClusterEvent, old: Any,
                         new: Any) -> bool:
        """Whether `event` can help `qp` (isPodWorthRequeuing): only the hints of the
        plugins that rejected it count; a hint that raises counts as QUEUE."""
        rejectors = qp.unschedulable_plugins
        if not rejectors or event.is_wildcard:
            return True
        registered = self._hints.get(qp.pod.scheduler_name)
        if registered is None:
            return True  # a profile we know nothing about: never strand its pods
        for plugin, reg in registered:
            if plugin not in rejectors or not matches(reg.event, event):
                continue
            if reg.hint is None:
                return True
            try:
                if reg.hint(qp.pod, old, new) is QUEUE:
                    return True
            except Exception:
                log.exception("queueing hint of %s failed on %s for %s; requeueing",
                              plugin, event.label, qp.pod.key)
                return True
        return False

    def _record_in_flight(self, event: ClusterEvent, old: Any, new: Any) -> None:
        """Keep `event` for the pods being scheduled now (addEventIfAnyInFlight)."""
        event_id = next(self._event_ids)
        self._next_event_id = event_id + 1
        if self._in_flight:
            self._in_flight_events.append((event_id, event, old, new))

    def _helped_while_in_flight(self, qp: QueuedPod) -> bool:
        """determineSchedulingHintForInFlightPod: did an event seen during its cycle
        possibly help? A pod no plugin rejected always goes back after backoff."""
        if not qp.unschedulable_plugins:
            return True
        return any(self._worth_requeuing(qp, event, old, new)
                   for event_id, event, old, new in self._in_flight_events
                   if event_id >= qp.in_flight_since)

    def _prune_in_flight_events(self) -> None:
        """Drop the events no pod still in flight can need."""
        if not self._in_flight_events:
            return
        oldest = min((qp.in_flight_since for qp in self._in_flight.values()), default=None)
        if oldest is None:
            self._in_flight_events.clear()
        elif self._in_flight_events[0][0] < oldest:
            self._in_flight_events = [e for e in self._in_flight_events if e[0] >= oldest]

    def _move_one(self, qp: QueuedPod) -> None:
        if self.clock() < self._backoff_ends(self.backoff_expiry(qp)):
            self._enqueue_backoff(qp)
        else:
            self._enqueue_active(qp)

    def activate(self, uid: str) -> bool:
        """Move a waiting pod (unschedulable or backing off) straight to activeQ
        (upstream's Activate). True if it was waiting."""
        with self._cond:
            qp = self._pods.get(uid)
            if qp is None or qp.where not in (UNSCHEDULABLE, BACKOFF):
                return False
            self._event = FORCE_ACTIVATE.label
            self._enqueue_active(qp)
            return True

    def activate_or_remember(self, uid: str) -> None:
        """`activate`, or for a pod the queue does not hold now (in its binding cycle,
        waiting at Permit), remember to move it when it comes back rejected: upstream's
        Activate of an in-flight pod (its binding cycle is in flight there too)."""
        with self._cond:
            if not (self.activate(uid) or uid in self._pods):
                self._remember_activation(uid)

    def retry_on_return(self, uid: str) -> None:
        """When the in-flight pod `uid` comes back rejected, back it off (retried at
        once by an idle queue, with SchedulerPopFromBackoffQ) instead of waiting for
        an event."""
        with self._cond:
            self._remember_activation(uid)

    def _remember_activation(self, uid: str) -> None:
        """`requeue` backs `uid` off when it comes back; entries too old to belong to a
        pod still in its cycle are dropped."""
        now = self.clock()
        self._activate_on_return = {
            u: t for u, t in self._activate_on_return.items()
            if now - t < ACTIVATE_ON_RETURN_S}
        self._activate_on_return[uid] = now

    def flush(self) -> None:
        """Periodic housekeeping: expired backoffs to activeQ, pods unschedulable for
        longer than `max_in_unschedulable` back into circulation."""
        with self._cond:
            now = self.clock()
            self._flush_backoff_locked(now)
            self._event = UNSCHEDULABLE_TIMEOUT.label
            for qp in _in_queue_order(list(self._unschedulable.values())):
                if now - qp.timestamp >= self.max_in_unschedulable \
                        and self._gate_hears(qp, UNSCHEDULABLE_TIMEOUT):
                    log.debug("%s: %s", UNSCHEDULABLE_TIMEOUT.label, qp.pod.key)
                    self._move_one(qp)

    def _flush_backoff_locked(self, now: float) -> None:
        self._event = "BackoffComplete"
        for heap in (self._backoff, self._error_backoff):
            while heap and self._backoff_ends(heap[0].expiry) <= now:
                entry = heapq.heappop(heap)
                if self._valid_backoff(entry):
                    if self.pop_from_backoff:
                        # PreEnqueue ran when it entered backoffQ.
                        self._push_active(entry.qp)
                    else:
                        self._enqueue_active(entry.qp)

    def backoff_expiry(self, qp: QueuedPod) -> float:
        """When the pod's backoff expires; with SchedulerPopFromBackoffQ rounded down to
        its window (getBackoffTime). No backoff at all when podMaxBackoffSeconds is 0."""
        if self.max_backoff <= 0:
            return float("-inf")
        expiry = qp.timestamp + backoff_duration(qp.attempts, self.initial_backoff,
                                                 self.max_backoff)
        if self.pop_from_backoff:
            return math.floor(expiry / BACKOFF_WINDOW) * BACKOFF_WINDOW
        return expiry

    def _backoff_ends(self, expiry: float) -> float:
        """The first moment a pod with this expiry no longer backs off: the expiry
        itself, or with windows the start of the next window (isPodBackingoff: backing
        off while the expiry is not before the current window's start)."""
        return expiry + BACKOFF_WINDOW if self.pop_from_backoff else expiry

    # -- internals ----------------------------------------------------------------------

    def _enqueue_active(self, qp: QueuedPod) -> None:
        """To activeQ if PreEnqueue lets it in (moveToActiveQ)."""
        if not self._gated(qp):
            self._push_active(qp)

    def _enqueue_backoff(self, qp: QueuedPod) -> None:
        """To backoffQ; with SchedulerPopFromBackoffQ only if PreEnqueue lets it in
        (moveToBackoffQ: such a pod may be popped before its backoff ends)."""
        if not (self.pop_from_backoff and self._gated(qp)):
            self._push_backoff(qp)

    def _gated(self, qp: QueuedPod) -> bool:
        """Run PreEnqueue (runPreEnqueuePlugins): True when a plugin refused `qp`,
        which then waits among the unschedulable pods with that plugin as its gate
        (and among its rejecting plugins, for the hints)."""
        if self._pre_enqueue is None:
            return False
        found = self._pre_enqueue(qp.pod, qp.gating_plugin)
        if found is None:
            qp.gating_plugin = ""
            return False
        plugin, status = found
        if qp.gating_plugin != plugin or qp.where != UNSCHEDULABLE:
            log.debug("%s gated by PreEnqueue plugin %s: %s", qp.pod.key, plugin,
                      status.message, extra={"pod": qp.pod.key, "plugin": plugin})
        qp.gating_plugin = plugin
        qp.unschedulable_plugins.add(plugin)
        self._set_where(qp, UNSCHEDULABLE)
        return True

    def _push_active(self, qp: QueuedPod) -> None:
        qp.seq = next(self._seq)
        if qp.first_attempt is None:
            qp.first_attempt, qp.first_seq = self.clock(), qp.seq
        self._set_where(qp, ACTIVE)
        heapq.heappush(self._active, _ActiveEntry(qp, qp.seq, self._less))
        self._cond.notify()

    def _push_backoff(self, qp: QueuedPod) -> None:
        qp.seq = next(self._seq)
        self._set_where(qp, BACKOFF)
        # No plugin named: it failed with an error, and waits in the heap an idle
        # scheduler does not pop early (upstream's podErrorBackoffQ).
        rejected = bool(qp.unschedulable_plugins)
        less = self._less if rejected and self.pop_from_backoff else None
        heapq.heappush(self._backoff if rejected else self._error_backoff,
                       _BackoffEntry(self.backoff_expiry(qp), qp, qp.seq, less))
        self._cond.notify()

    def _hold(self, qp: QueuedPod) -> None:
        """Count `qp` among the queue's pods (a pod it already holds keeps its place)."""
        if self._pods.get(qp.uid) is not qp:
            qp.order = next(self._order)
            self._pods[qp.uid] = qp

    def _set_where(self, qp: QueuedPod, where: str) -> None:
        """Every change of a pod's place goes through here, keeping the indexes true."""
        for place, index in ((UNSCHEDULABLE, self._unschedulable),
                             (IN_FLIGHT, self._in_flight)):
            if qp.where == place and index.get(qp.uid) is qp:
                del index[qp.uid]
            if where == place:
                index[qp.uid] = qp
        if where != qp.where and where in _INCOMING_QUEUE and self._event:
            self._count_incoming(_INCOMING_QUEUE[where], self._event)
        qp.where = where

    def _count_incoming(self, queue: str, event: str) -> None:
        if self.on_incoming is not None:
            self.on_incoming(queue, event)

    # -- observing ------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Pending pods per queue (the `pending_pods{queue}` metric)."""
        with self._cond:
            out = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, IN_FLIGHT: 0}
            for qp in self._pods.values():
                place = _shown_place(qp)
                if place in out:
                    out[place] += 1
            return out

    def unschedulable_plugins(self) -> dict[tuple[str, str], int]:
        """(plugin, profile) -> how many unschedulable (or PreEnqueue-gated) pods that
        plugin rejected: a pod counts once for each of its plugins, as upstream's
        scheduler_unschedulable_pods gauge does."""
        with self._cond:
            out: dict[tuple[str, str], int] = {}
            for qp in self._unschedulable.values():
                for plugin in qp.unschedulable_plugins:
                    key = (plugin, qp.pod.scheduler_name)
                    out[key] = out.get(key, 0) + 1
            return out

    def in_flight_events(self) -> dict[str, int]:
        """The events kept for pods in flight, by label, and the pods in flight as
        PodPopped (upstream's scheduler_inflight_events)."""
        with self._cond:
            out = {"PodPopped": len(self._in_flight)}
            for _, event, _, _ in self._in_flight_events:
                out[event.label] = out.get(event.label, 0) + 1
            return out

    def where(self, uid: str) -> str | None:
        """The queue a pod is shown in (a pod PreEnqueue refused: gated)."""
        with self._cond:
            qp = self._pods.get(uid)
            return _shown_place(qp) if qp is not None else None

    def pending(self) -> list[tuple[Pod, str, int, float, float, frozenset[str]]]:
        """Every pod the queue holds as (pod, queue, attempts, first added, last
        (re-)queued, plugins that rejected it), for /debug/queue; a copy taken under
        the lock."""
        with self._cond:
            return [(qp.pod, _shown_place(qp), qp.attempts, qp.added, qp.timestamp,
                     frozenset(qp.unschedulable_plugins)) for qp in self._pods.values()]


def _shown_place(qp: QueuedPod) -> str:
    """Where metrics and /debug/queue show a pod: one PreEnqueue refused waits among
    the unschedulable pods but is gated, as upstream counts it."""
    return GATED if qp.gating_plugin and qp.where == UNSCHEDULABLE else qp.where


def _in_queue_order(pods: list[QueuedPod]) -> list[QueuedPod]:
    """`pods` in the order they entered the queue, as a scan of every queued pod meets
    them: pods moved together keep their FIFO order among equals."""
    return sorted(pods, key=lambda qp: qp.order)


# The status fields upstream's isPodUpdated keeps: the claims the resourceclaim
# controller generated for the pod's templates (and for DRA-backed extended resources).
_SCHEDULING_STATUS = ("resourceClaimStatuses", "extendedResourceClaimStatus")


def spec_changed(old: Pod, new: Pod) -> bool:
    """Whether an update can change scheduling: anything but status and bookkeeping
    metadata, except the generated claims' names in status (upstream's isPodUpdated
    strips the same)."""
    if old.labels != new.labels or old.annotations != new.annotations:
        return True
    if old.raw.get("spec") != new.raw.get("spec"):
        return True
    old_status = old.raw.get("status") or {}
    new_status = new.raw.get("status") or {}
    return any(old_status.get(f) != new_status.get(f) for f in _SCHEDULING_STATUS)
