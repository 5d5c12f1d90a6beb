"""What the informer handlers, the scheduling loop and the binders share.

One `ClusterState`, the queue and the pods assumed on a node but not yet shown bound
by the API, all under one lock (lock order: this lock, then the queue's own lock; the
queue calls back only into the profiles' PreEnqueue plugins, which read the cluster
state and take no lock: every queue call that may run them is made under this lock,
so a claim cannot appear between a pod's refusal and the event that would move it;
with SchedulerPopFromBackoffQ off, a pod leaving backoffQ inside `pop` is the one
exception). A cycle holds the lock from decision to `assume`, so a placement counts on
its node before the next pod is considered; binding runs without it. The binding
cycles in PreBind that preemption may call off have a lock of their own
(`in_pre_bind`), taken under none of the others; so do the pods waiting at Permit
(`waiting_pods`), whose lock may be taken under this one, never the other way round.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from policyd.daemon.event_recorder import FailureThrottle
from policyd.daemon.pods_in_prebind import PodsInPreBind
from policyd.daemon.queue import UNSCHEDULABLE, QueuedPod, SchedulingQueue
from policyd.features import DEFAULTS, FeatureGates
from policyd.framework.events import ClusterEvent, ClusterEventWithHint
from policyd.framework.runtime import Framework
from policyd.framework.status import Status
from policyd.framework.waiting_pods import WaitingPods
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod

# Every piece of the daemon's scheduler logs under this one name, which predates its
# split into handlers, loop and binder: operators filter their logs on it.
LOGGER = "policyd.daemon.scheduler"
log = logging.getLogger(LOGGER)

MOVED_PODS_LOGGED = 10  # pod keys named per event in the -v 4 log line


class SchedulingState:
    """The shared state and the few questions every piece asks of it. Methods whose
    docstring says "under the lock" expect the caller to hold `lock`."""

    def __init__(self, frameworks: dict[str, Framework], *, now: Callable[[], float],
                 initial_backoff: float, max_backoff: float,
                 gates: FeatureGates = DEFAULTS) -> None:
        # The pods waiting at Permit, one map for every profile and every reload.
        self.waiting_pods = WaitingPods()
        for fw in frameworks.values():
            fw.use_waiting_pods(self.waiting_pods)
        self.frameworks = frameworks
        self.gates = gates
        self.lock = threading.RLock()
        self.cluster = ClusterState(features=gates)
        for fw in frameworks.values():
            fw.use_cluster(self.cluster)
        self.queue = SchedulingQueue(self._less, clock=now, initial_backoff=initial_backoff,
                                     max_backoff=max_backoff,
                                     pop_from_backoff=gates.enabled("SchedulerPopFromBackoffQ"),
                                     features=gates)
        self.queue.set_hints(hints_of(frameworks))
        self.queue.set_pre_enqueue(self._pre_enqueue)
        self.assumed: dict[str, str] = {}  # pod uid -> node, until the API shows it bound
        self.throttle = FailureThrottle(now)
        # Binding cycles in PreBind that preemption may still call off (its own lock).
        self.in_pre_bind = PodsInPreBind()

    def _less(self, a: Pod, b: Pod) -> bool:
        # Upstream requires every profile to share one QueueSort; take the first's.
        fw = next(iter(self.frameworks.values()), None)
        if fw is None:
            return a.creation_timestamp < b.creation_timestamp
        return fw.less(a, b)

    def _pre_enqueue(self, pod: Pod, gating: str) -> tuple[str, Status] | None:
        """The queue's PreEnqueue runner (called under the lock, see above)."""
        fw = self.frameworks.get(pod.scheduler_name)
        return fw.run_pre_enqueue(pod, self.cluster, gating) if fw is not None else None

    def set_frameworks(self, frameworks: dict[str, Framework]) -> None:
        """Swap profiles (hot reload) and give every waiting pod another chance."""
        for fw in frameworks.values():
            fw.use_waiting_pods(self.waiting_pods)
            fw.use_cluster(self.cluster)
        with self.lock:
            self.frameworks = frameworks
            self.queue.set_less(self._less)
            self.queue.set_hints(hints_of(frameworks))
            for uid, qp in list(self._queued_items()):
                if qp.pod.scheduler_name not in frameworks:
                    self.queue.delete(uid)
            for pod in self.cluster.pending_pods():
                if self.responsible(pod) and pod.uid not in self.queue:
                    self.queue.add(pod)
            self.queue.move_all("PolicyReload")
            self.queue.regate()

    def _queued_items(self) -> list[tuple[str, QueuedPod]]:
        out = []
        for pod in self.cluster.pending_pods():
            qp = self.queue.get(pod.uid)
            if qp is not None:
                out.append((pod.uid, qp))
        return out

    def responsible(self, pod: Pod) -> bool:
        """Whether one of our profiles should schedule `pod` now."""
        return (pod.scheduler_name in self.frameworks and not pod.node_name
                and not pod.finished)

    def counted_pod(self, uid: str) -> Pod | None:
        """Under the lock: the record of a pod counted on a node, as last seen."""
        node = self.cluster.node_of(uid)
        info = self.cluster.get(node) if node is not None else None
        return info.pods.get(uid) if info is not None else None

    def api_shows_bound(self, pod: Pod, node: str) -> bool:
        """Under the lock: the informer has shown this very pod bound to `node`."""
        return pod.uid not in self.assumed and self.cluster.node_of(pod.uid) == node

    def move(self, event: ClusterEvent, old: Any, new: Any) -> None:
        """Under the lock: hand a cluster event to the queue, and say at -v 4 what it
        moved (the line that tells why a pending pod was, or was not, retried)."""
        moved = self.queue.move(event, old, new)
        if log.isEnabledFor(logging.DEBUG):
            waiting = self.queue.counts()[UNSCHEDULABLE]
            if moved or waiting:
                keys = [p.key for p in moved[:MOVED_PODS_LOGGED]]
                more = len(moved) - len(keys)
                log.debug("event %s moved %d pod(s)%s%s; %d still unschedulable",
                          event.label, len(moved), f": {', '.join(keys)}" if keys else "",
                          f" (+{more} more)" if more > 0 else "", waiting,
                          extra={"event": event.label, "moved": len(moved)})


def hints_of(frameworks: dict[str, Framework]
             ) -> dict[str, list[tuple[str, ClusterEventWithHint]]]:
    """Each profile's registered events and hints, keyed by its schedulerName."""
    return {name: fw.queueing_hints() for name, fw in frameworks.items()}
