"""The pods whose binding cycle is in PreBind and may still be called off: upstream's
podsInPreBind map (pkg/scheduler/framework/runtime/pods_in_prebind_map.go).

kube-scheduler v1.36 lets preemption take a victim that is assumed but not bound by
cancelling its binding cycle, in memory, instead of deleting the pod through the API:
the victim's PreBind ends at once, its Reserve is undone and it goes back to the queue.
The binder puts a pod here before PreBind and takes it out when the cycle ends; once
PreBind is over (`mark_prebound`), the bind goes ahead and preemption must delete the
pod like any bound one. Which of the two wins is decided under the entry's own lock,
so a pod is never both bound and requeued.
"""

from __future__ import annotations

import threading


class PodInPreBind:
    """One binding cycle in PreBind. `wake` is set when it is cancelled (and by the
    binder when it stops), so a PreBind that waits returns at once."""

    __slots__ = ("_finished", "_lock", "cause", "wake")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._finished = False
        self.cause: str | None = None  # why it was cancelled (None: it was not)
        self.wake = threading.Event()

    def cancel(self, message: str) -> bool:
        """Call the binding off with `message` as its cause (CancelPod). False when
        PreBind is already over: the pod will be bound, and must be deleted instead."""
        with self._lock:
            if self._finished:
                return False
            if self.cause is None:
                self.cause = message
            self.wake.set()
            return True

    def mark_prebound(self) -> bool:
        """PreBind is over: from now on the bind goes ahead (MarkPrebound). False when
        the cycle was cancelled first."""
        with self._lock:
            if self.cause is not None:
                return False
            self._finished = True
            return True

    @property
    def cancelled(self) -> bool:
        with self._lock:
            return self.cause is not None


class PodsInPreBind:
    """Pod uid -> its binding cycle in PreBind, shared by the binder (which adds and
    removes) and preemption (which cancels)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, PodInPreBind] = {}

    def add(self, uid: str) -> PodInPreBind:
        entry = PodInPreBind()
        with self._lock:
            self._pods[uid] = entry
        return entry

    def get(self, uid: str) -> PodInPreBind | None:
        with self._lock:
            return self._pods.get(uid)

    def remove(self, uid: str, entry: PodInPreBind) -> None:
        """Remove `entry`, not a newer binding cycle's of the same pod."""
        with self._lock:
            if self._pods.get(uid) is entry:
                del self._pods[uid]

    def wake_all(self) -> None:
        """Wake every PreBind that waits (the binder is stopping); cancels nothing."""
        with self._lock:
            entries = list(self._pods.values())
        for entry in entries:
            entry.wake.set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)
