"""The scheduling queue: activeQ, backoffQ and the unschedulable pods (upstream's
PriorityQueue in pkg/scheduler/backend/queue).

- activeQ: pods ready to be tried, ordered by the profile's QueueSort (`less`), FIFO
  among equals.
- backoffQ: pods that failed and wait `podInitialBackoffSeconds * 2^(attempts-1)`
  (capped at `podMaxBackoffSeconds`) before going back to activeQ.
- unschedulable: pods no node fits. They return (to backoffQ if still backing off,
  else activeQ) on a cluster event that could make them fit (`move_all`), or after
  `max_in_unschedulable` seconds (upstream's podMaxInUnschedulablePodsDuration, 5 min)
  via `flush`.
- gated: pods with schedulingGates wait here until the gates are removed.

A pod that fails while a move event happened during its cycle goes to backoffQ, not
unschedulable (upstream's moveRequestCycle), so an event that came too late for the
cycle is not lost. Deleting a pod removes it wherever it is, including while it is
being scheduled (in flight), so it is never requeued.

The clock is injected: tests drive time by hand and never sleep.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from policyd.model.records import Pod

# Upstream's defaults (pkg/scheduler/backend/queue, apis/config/v1 defaults).
DEFAULT_INITIAL_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 10.0
DEFAULT_MAX_IN_UNSCHEDULABLE = 300.0  # DefaultPodMaxInUnschedulablePodsDuration
FLUSH_UNSCHEDULABLE_PERIOD = 30.0  # how often upstream checks that duration
FLUSH_BACKOFF_PERIOD = 1.0

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
IN_FLIGHT = "inFlight"


@dataclass(slots=True, eq=False)
class QueuedPod:
    """A pod in the queue plus its scheduling history (QueuedPodInfo)."""

    pod: Pod
    added: float  # first time it entered the queue: the start of e2e latency
    timestamp: float  # last time it (re-)entered a queue
    attempts: int = 0
    cycle: int = 0  # the scheduling cycle that last popped it
    where: str = ""
    deleted: bool = False  # deleted (or bound elsewhere) while in flight
    seq: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)

    @property
    def uid(self) -> str:
        return self.pod.uid


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


def backoff_duration(attempts: int, initial: float, maximum: float) -> float:
    """initial * 2^(attempts-1), capped at maximum (calculateBackoffDuration)."""
    duration = initial
    for _ in range(1, max(1, attempts)):
        if duration >= maximum:
            return maximum
        duration *= 2
    return min(duration, maximum)


class SchedulingQueue:
    def __init__(
        self,
        less: Callable[[Pod, Pod], bool],
        *,
        clock: Callable[[], float] = time.monotonic,
        initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE,
    ) -> None:
        self._less = less
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._pods: dict[str, QueuedPod] = {}  # every pod the queue knows, by uid
        self._active: list[_ActiveEntry] = []
        self._backoff: list[tuple[float, int, QueuedPod]] = []
        self._seq = itertools.count()
        self.scheduling_cycle = 0
        self.move_request_cycle = -1
        self._cond = threading.Condition()
        self._closed = False

    # -- ordering -----------------------------------------------------------------------

    def set_less(self, less: Callable[[Pod, Pod], bool]) -> None:
        """A reloaded profile may bring another QueueSort: re-heap activeQ with it."""
        with self._cond:
            self._less = less
            self._active = [_ActiveEntry(e.qp, e.seq, less) for e in self._active
                            if self._valid_active(e)]
            heapq.heapify(self._active)

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
            qp = QueuedPod(pod=pod, added=now, timestamp=now)
            self._pods[pod.uid] = qp
            if pod.scheduling_gates:
                qp.where = GATED
            else:
                self._push_active(qp)

    def _update(self, qp: QueuedPod, pod: Pod) -> None:
        old = qp.pod
        qp.pod = pod
        if qp.where == GATED and not pod.scheduling_gates:
            self._push_active(qp)
        elif qp.where == UNSCHEDULABLE and spec_changed(old, pod):
            # The pod itself changed (labels, tolerations...): it may fit now.
            self._move_one(qp)
        elif qp.where == ACTIVE and old.priority != pod.priority:
            self._push_active(qp)  # re-sorted; the old entry is now stale

    def delete(self, uid: str) -> bool:
        """Forget a pod (deleted, bound elsewhere, finished). True if it was queued."""
        with self._cond:
            qp = self._pods.pop(uid, None)
            if qp is None:
                return False
            qp.deleted = True
            qp.where = ""
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
                if qp is not None:
                    self.scheduling_cycle += 1
                    qp.cycle = self.scheduling_cycle
                    qp.attempts += 1
                    qp.where = IN_FLIGHT
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
                if self._backoff:
                    # Wake up when the first backoff expires.
                    wait = min(wait, max(0.001, self._backoff[0][0] - self.clock()))
                self._cond.wait(min(wait, 1.0))

    def _pop_active_locked(self) -> QueuedPod | None:
        while self._active:
            entry = heapq.heappop(self._active)
            if self._valid_active(entry):
                return entry.qp
        return None

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
                qp.where = ""

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
            self._pods[qp.uid] = qp
            qp.timestamp = self.clock()
            if plugins is not None:
                qp.unschedulable_plugins = set(plugins)
            if qp.pod.scheduling_gates:
                qp.where = GATED
            elif not unschedulable or self.move_request_cycle >= qp.cycle:
                # An error, or an event arrived while this pod was being scheduled:
                # the event may be what it needed, so only back off.
                self._push_backoff(qp)
            else:
                qp.where = UNSCHEDULABLE
            return qp.where

    def requeue_active(self, qp: QueuedPod) -> None:
        """Put back a pod that was popped but not tried (e.g. leadership was lost)."""
        with self._cond:
            if qp.deleted or self._pods.get(qp.uid) is not qp:
                return
            qp.attempts = max(0, qp.attempts - 1)
            self._push_active(qp)

    # -- moving ---------------------------------------------------------------------------

    def move_all(self, event: str = "") -> int:
        """A cluster event that could make unschedulable pods fit: move them all to
        backoffQ (still backing off) or activeQ. Returns how many moved."""
        with self._cond:
            moved = 0
            for qp in list(self._pods.values()):
                if qp.where == UNSCHEDULABLE:
                    self._move_one(qp)
                    moved += 1
            self.move_request_cycle = self.scheduling_cycle
            if moved:
                self._cond.notify_all()
            return moved

    def _move_one(self, qp: QueuedPod) -> None:
        if self.backoff_expiry(qp) > self.clock():
            self._push_backoff(qp)
        else:
            self._push_active(qp)

    def flush(self) -> None:
        """Periodic housekeeping: expired backoffs to activeQ, pods unschedulable for
        longer than `max_in_unschedulable` back into circulation."""
        with self._cond:
            now = self.clock()
            self._flush_backoff_locked(now)
            for qp in list(self._pods.values()):
                if qp.where == UNSCHEDULABLE and now - qp.timestamp >= self.max_in_unschedulable:
                    self._move_one(qp)

    def _flush_backoff_locked(self, now: float) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, qp = heapq.heappop(self._backoff)
            if qp.where == BACKOFF and qp.seq == seq and not qp.deleted:
                self._push_active(qp)

    def backoff_expiry(self, qp: QueuedPod) -> float:
        return qp.timestamp + backoff_duration(qp.attempts, self.initial_backoff,
                                               self.max_backoff)

    # -- internals ----------------------------------------------------------------------

    def _push_active(self, qp: QueuedPod) -> None:
        qp.seq = next(self._seq)
        qp.where = ACTIVE
        heapq.heappush(self._active, _ActiveEntry(qp, qp.seq, self._less))
        self._cond.notify()

    def _push_backoff(self, qp: QueuedPod) -> None:
        qp.seq = next(self._seq)
        qp.where = BACKOFF
        heapq.heappush(self._backoff, (self.backoff_expiry(qp), qp.seq, qp))
        self._cond.notify()

    # -- observing ------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Pending pods per queue (the `pending_pods{queue}` metric)."""
        with self._cond:
            out = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, IN_FLIGHT: 0}
            for qp in self._pods.values():
                if qp.where in out:
                    out[qp.where] += 1
            return out

    def where(self, uid: str) -> str | None:
        with self._cond:
            qp = self._pods.get(uid)
            return qp.where if qp is not None else None

    def pending(self) -> list[tuple[Pod, str, int, float, float, frozenset[str]]]:
        """Every pod the queue holds as (pod, queue, attempts, first added, last
        (re-)queued, plugins that rejected it), for /debug/queue; a copy taken under
        the lock."""
        with self._cond:
            return [(qp.pod, qp.where, qp.attempts, qp.added, qp.timestamp,
                     frozenset(qp.unschedulable_plugins)) for qp in self._pods.values()]


def spec_changed(old: Pod, new: Pod) -> bool:
    """Whether an update can change scheduling: anything but status and bookkeeping
    metadata (upstream's isPodUpdated strips the same)."""
    if old.labels != new.labels or old.annotations != new.annotations:
        return True
    return bool(old.raw.get("spec") != new.raw.get("spec"))
