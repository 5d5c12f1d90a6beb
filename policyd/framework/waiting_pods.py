"""Pods that Permit told to wait: upstream's waitingPodsMap and waitingPod
(pkg/scheduler/framework/runtime/waiting_pods_map.go).

A Permit plugin answers Wait with a timeout; the pod keeps its node (assumed, its
Reserve done) and its binding cycle stops before PreBind until every plugin that asked
it to wait has allowed it, or one rejects it, or a plugin's timeout passes. Other
plugins reach the waiting pods through this map (a gang's last member allows the
others), preemption takes a waiting victim by preempting it here instead of deleting
it, and a waiting pod deleted from the API server is rejected.

The first resolution wins, as upstream's one-slot channel makes it: an allow after a
rejection, or a rejection after the last allow, changes nothing. Whoever parked the
binding cycle (`on_resolved`) is called once, outside the map's lock, in the thread
that resolved it; it must hand the rest of the cycle to its own workers.

Time is the caller's: `expire(now)` rejects what timed out by then (the daemon calls it
from a timer thread, `next_deadline` says when; tests and offline runs pass their own
clock's time).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from policyd.framework.status import Code, Status
from policyd.model.duration import format_duration
from policyd.model.records import Pod

# Upstream's maxTimeout: no plugin makes a pod wait longer than 15 minutes.
PERMIT_MAX_WAIT_S = 15 * 60.0

# What a binding cycle parked on a waiting pod is told: None when every plugin
# allowed it, else the status that ended the wait (Unschedulable: rejected or timed
# out; Error: preempted).
Resolution = Callable[[Status | None], None]


def timeout_message(plugin: str, seconds: float) -> str:
    """The rejection a plugin's timeout gives (upstream's wording, Go's %v)."""
    return f"rejected due to timeout after waiting {format_duration(seconds)} at plugin {plugin}"


class WaitingPod:
    """One pod waiting at Permit on its chosen node (fwk.WaitingPod)."""

    def __init__(self, pod: Pod, node: str, waits: Mapping[str, float], now: float,
                 lock: threading.RLock, changed: threading.Event) -> None:
        self.pod = pod
        self.node = node
        self.since = now
        self._lock = lock
        self._changed = changed
        # Pending plugin -> (deadline, the wait it asked for).
        self._pending = {name: (now + seconds, seconds) for name, seconds in waits.items()}
        self._resolved = False
        self._outcome: Status | None = None
        self._listener: Resolution | None = None

    def pending_plugins(self) -> list[str]:
        with self._lock:
            return sorted(self._pending)

    @property
    def resolved(self) -> bool:
        with self._lock:
            return self._resolved

    @property
    def outcome(self) -> Status | None:
        """How the wait ended (None: allowed, or not ended yet: see `resolved`)."""
        with self._lock:
            return self._outcome

    def allow(self, plugin: str) -> None:
        """`plugin` lets the pod go; once no plugin is pending, the pod is allowed."""
        with self._lock:
            self._pending.pop(plugin, None)
            if self._pending or self._resolved:
                return
            listener = self._resolve(None)
        if listener is not None:
            listener(None)

    def reject(self, plugin: str, message: str) -> bool:
        """End the wait as Unschedulable (the pod goes back to the queue as rejected by
        `plugin`); False when it had ended already."""
        return self._stop(Status(Code.UNSCHEDULABLE, (message,), plugin))

    def preempt(self, plugin: str, message: str) -> bool:
        """End the wait as an Error: the pod was taken as a preemption victim, and is
        retried after a backoff rather than parked as unschedulable."""
        return self._stop(Status(Code.ERROR, (message,), plugin))

    def on_resolved(self, listener: Resolution) -> None:
        """Call `listener` once the wait ends (at once, here, if it has)."""
        with self._lock:
            if not self._resolved:
                self._listener = listener
                return
            outcome = self._outcome
        listener(outcome)

    def next_deadline(self) -> float | None:
        with self._lock:
            if self._resolved or not self._pending:
                return None
            return min(deadline for deadline, _ in self._pending.values())

    def expire(self, now: float) -> bool:
        """Reject the pod for the first plugin whose timeout passed by `now`."""
        with self._lock:
            due = sorted((deadline, name, seconds)
                         for name, (deadline, seconds) in self._pending.items()
                         if deadline <= now)
        if not due:
            return False
        _, name, seconds = due[0]
        return self.reject(name, timeout_message(name, seconds))

    def _stop(self, status: Status) -> bool:
        with self._lock:
            if self._resolved:
                return False
            listener = self._resolve(status)
        if listener is not None:
            listener(status)
        return True

    def _resolve(self, status: Status | None) -> Resolution | None:
        """Under the lock: record the outcome; the listener to call outside it."""
        self._resolved = True
        self._outcome = status
        self._pending.clear()
        listener, self._listener = self._listener, None
        self._changed.set()
        return listener


class WaitingPods:
    """Pod uid -> its WaitingPod, shared by the frameworks of every profile (and
    across policy reloads), the binder, preemption and the event handlers."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._pods: dict[str, WaitingPod] = {}
        # Set whenever a wait starts or ends: the timer thread recomputes its sleep.
        self.changed = threading.Event()

    def add(self, pod: Pod, node: str, waits: Mapping[str, float], now: float) -> WaitingPod:
        """`pod` waits on `node` for each plugin of `waits` (seconds, capped at
        PERMIT_MAX_WAIT_S), from `now` (AddWaitingPod)."""
        capped = {name: min(seconds, PERMIT_MAX_WAIT_S) for name, seconds in waits.items()}
        entry = WaitingPod(pod, node, capped, now, self._lock, self.changed)
        with self._lock:
            self._pods[pod.uid] = entry
        self.changed.set()
        return entry

    def get(self, uid: str) -> WaitingPod | None:
        with self._lock:
            return self._pods.get(uid)

    def remove(self, uid: str, entry: WaitingPod) -> None:
        """Remove `entry`, not a newer wait of the same pod."""
        with self._lock:
            if self._pods.get(uid) is entry:
                del self._pods[uid]

    def all(self) -> list[WaitingPod]:
        """The waiting pods now (IterateOverWaitingPods), oldest first."""
        with self._lock:
            return sorted(self._pods.values(), key=lambda w: w.since)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)

    def reject(self, uid: str, plugin: str, message: str) -> bool:
        """RejectWaitingPod: False when `uid` is not waiting (or its wait ended)."""
        entry = self.get(uid)
        return entry is not None and entry.reject(plugin, message)

    def next_deadline(self) -> float | None:
        deadlines = [d for w in self.all() if (d := w.next_deadline()) is not None]
        return min(deadlines, default=None)

    def expire(self, now: float) -> int:
        """Reject every pod one of whose plugins' timeouts passed by `now`; how many."""
        return sum(w.expire(now) for w in self.all())
