"""Acting on a preemption decision (a `PostFilterResult`): upstream's preemption
Executor with SchedulerAsyncPreemption, which kube-scheduler v1.36 has on by default
(Beta and default-on since 1.33, pkg/features/kube_features.go).

What is synchronous and what is not, as upstream:
- in the scheduling cycle (the loop, under the state lock): the preemptor is nominated
  in the ClusterState at once (handleSchedulingFailure's AddNominatedPod), so the next
  cycle already counts it on that node; it is requeued as unschedulable; its status
  patch carries the PodScheduled condition and `nominatedNodeName` together (updatePod);
- in a background thread (prepareCandidateAsync), never blocking the loop: the
  nominations of lower-priority pods on that node are cleared, then every victim gets
  the DisruptionTarget condition (reason PreemptionByScheduler) through a pods/status
  patch and is deleted, all but the last in parallel, then the last; each victim gets
  a `Preempted` event. Victims already being deleted get no call.
A victim still in PreBind (assumed by this daemon, not bound) is not deleted: its
binding is called off in memory and it goes back to the queue (v1.36's executor; see
`policyd.daemon.pods_in_prebind`), with a `Preempted` event all the same.
While that runs the preemptor is not tried again (DefaultPreemption's PreEnqueue,
IsPodRunningPreemption): it waits among the unschedulable pods, and the deletions'
pod events move it as its rejecting plugins' hints say. Once the last victim's
deletion has started, the preemption no longer holds it back. If a call failed, the
preemptor is moved to the active queue at the end (upstream activates it on error).

A daemon that stops between the deletions and the bind loses nothing: the nomination
is on the API (status.nominatedNodeName), and a restarted daemon's informer puts it
back in the nominator.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from policyd.daemon.event_recorder import EventSink
from policyd.daemon.scheduling_state import LOGGER, SchedulingState
from policyd.framework.interfaces import PostFilterResult
from policyd.kube import api
from policyd.kube.client import ApiError, KubeClient
from policyd.model.records import Pod
from policyd.plugins import names

log = logging.getLogger(LOGGER)

# Victims deleted at once per preemption (upstream's parallelizer, 16 by default).
PARALLEL_VICTIMS = 16
CALL_TIMEOUT = 30.0
# What the Preempted event of a victim whose binding was called off ends with:
# upstream's words, kept as they are (tools match kube-scheduler's events).
IN_MEMORY = "(in kube-scheduler memory)."


@dataclass(slots=True)
class _Running:
    """A preemption in flight: once `last_victim` is set, the preemption is over as
    soon as that pod is gone or being deleted (isRunningPreemption)."""

    last_victim: Pod | None = None


class PreemptionActions:
    """Starts and tracks the asynchronous part of each preemption."""

    def __init__(self, client: KubeClient, state: SchedulingState, events: EventSink, *,
                 activate: Callable[[str], None] | None = None,
                 plugin: str = names.DEFAULT_PREEMPTION, verbosity: int = 0) -> None:
        self.client = client
        self.state = state
        self.events = events
        self.plugin = plugin  # the PostFilter plugin that preempts (a cancel's cause)
        # As kube-scheduler, the preemptions' progress is logged from -v 2; failures
        # at any verbosity.
        self.verbosity = verbosity
        self._activate = activate or self._activate_in_queue
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}
        self._threads: list[threading.Thread] = []

    # -- from the scheduling loop ---------------------------------------------------------

    def start(self, preemptor: Pod, result: PostFilterResult, component: str) -> bool:
        """The asynchronous part of preempting for `preemptor` on
        `result.nominated_node` (prepareCandidateAsync). Returns at once: False when
        every victim is already being deleted, so there is nothing to start."""
        victims = [v for v in result.victims if not v.deleting]
        if not victims:
            return False
        with self._lock:
            self._running[preemptor.uid] = _Running()
        thread = threading.Thread(
            target=self._run, args=(preemptor, result, victims, component),
            name=f"preempt-{preemptor.name}", daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return True

    def running(self, uid: str) -> bool:
        """Whether a preemption for pod `uid` still holds it back
        (IsPodRunningPreemption)."""
        with self._lock:
            run = self._running.get(uid)
            if run is None:
                return False
            last = run.last_victim
        if last is None:
            return True
        with self.state.lock:
            node = self.state.cluster.node_of(last.uid)
            info = self.state.cluster.get(node) if node is not None else None
            now = info.pods.get(last.uid) if info is not None else None
        # Gone from the cache, or its deletion started: the preemption is done.
        return now is not None and not now.deleting

    def wait(self, timeout: float) -> bool:
        """Wait for the preemptions in flight (tests, shutdown); True if all ended."""
        for t in list(self._threads):
            t.join(timeout)
        return not any(t.is_alive() for t in self._threads)

    # -- the background part ----------------------------------------------------------

    def _run(self, preemptor: Pod, result: PostFilterResult, victims: list[Pod],
             component: str) -> None:
        node = result.nominated_node
        failed = False
        if self.verbosity >= 2:
            log.info("preempting %d pod(s) on %s for %s", len(victims), node,
                     preemptor.key, extra={"v": 2, "pod": preemptor.key, "node": node})
        try:
            for pod in result.clear_nominations:
                try:
                    api.clear_nominated_node(self.client, pod.namespace, pod.name,
                                             timeout=CALL_TIMEOUT)
                except ApiError as exc:
                    if exc.status != 404:
                        log.warning("cannot clear the nominated node of %s: %s",
                                    pod.key, exc)
                        failed = True  # not critical: the preemption goes on
            # All but the last in parallel; the last alone, once the others are done,
            # so that `running` can tell when its deletion has started.
            *first, last = victims
            first_ok = True
            if first:
                with ThreadPoolExecutor(min(PARALLEL_VICTIMS, len(first))) as pool:
                    first_ok = all(list(pool.map(
                        lambda v: self._preempt(preemptor, v, node, component), first)))
                failed = failed or not first_ok
            # After a failed victim the last is spared: the preemptor is retried sooner.
            if first_ok:
                with self._lock:
                    self._running[preemptor.uid].last_victim = last
                if not self._preempt(preemptor, last, node, component):
                    failed = True
        finally:
            with self._lock:
                self._running.pop(preemptor.uid, None)
            if failed:
                # The preemptor may otherwise wait for events that never come.
                self._activate(preemptor.uid)
            if self.verbosity >= 2 or failed:
                log.info("preemption for %s on %s finished%s", preemptor.key, node,
                         " with errors" if failed else "",
                         extra={"v": 0 if failed else 2, "pod": preemptor.key, "node": node})

    def _preempt(self, preemptor: Pod, victim: Pod, node: str, component: str) -> bool:
        """DisruptionTarget, then delete, then the `Preempted` event (PreemptPod).
        True unless a call failed; a victim already gone is a success.

        A victim that is ours, assumed and waiting at Permit or still in PreBind, is
        not deleted: its binding is called off in memory (v1.36's executor: a waiting
        pod's Preempt, else GetPodInPreBind + CancelPod), and its binder unreserves it
        and sends it back to the queue. Its wait or PreBind may have ended meanwhile
        (the bind goes ahead): then it is deleted like a bound pod."""
        in_pre_bind = self.state.in_pre_bind.get(victim.uid)
        waiting = self.state.waiting_pods.get(victim.uid)
        if waiting is not None:
            taken = waiting.preempt(self.plugin, "preempted")
            where = "waiting at Permit"
        else:
            taken = in_pre_bind is not None and in_pre_bind.cancel(
                f"preempted by {self.plugin}")
            where = "in PreBind"
        if taken:
            if self.verbosity >= 2:
                log.info("preempted %s, %s on %s, for %s: its binding is called off",
                         victim.key, where, node, preemptor.key,
                         extra={"v": 2, "pod": victim.key, "node": node})
            self.events.event(
                api.pod_ref(victim.namespace, victim.name, victim.uid), "Normal",
                "Preempted", f"Preempted by pod {preemptor.uid} on node {node} "
                f"{IN_MEMORY}", "Preempting", component,
                related=api.pod_ref(preemptor.namespace, preemptor.name, preemptor.uid))
            return True
        try:
            if not _has_disruption_target(victim):
                api.patch_disruption_target(self.client, victim.namespace, victim.name,
                                            component, timeout=CALL_TIMEOUT)
            deleted = api.delete_pod(self.client, victim.namespace, victim.name,
                                     victim.uid, timeout=CALL_TIMEOUT)
        except ApiError as exc:
            if exc.status == 404:
                return True
            log.error("cannot preempt %s for %s: %s", victim.key, preemptor.key, exc)
            return False
        if deleted:
            if self.verbosity >= 2:
                log.info("preempted %s on %s for %s", victim.key, node, preemptor.key,
                         extra={"v": 2, "pod": victim.key, "node": node})
            self.events.event(
                api.pod_ref(victim.namespace, victim.name, victim.uid), "Normal",
                "Preempted", f"Preempted by pod {preemptor.uid} on node {node}",
                "Preempting", component,
                related=api.pod_ref(preemptor.namespace, preemptor.name, preemptor.uid))
        return True

    def _activate_in_queue(self, uid: str) -> None:
        with self.state.lock:
            self.state.queue.activate(uid)


def _has_disruption_target(pod: Pod) -> bool:
    """The victim already shows the condition we would write (UpdatePodCondition
    would change nothing, so upstream sends no patch)."""
    status = pod.raw.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return any(
        isinstance(c, dict) and c.get("type") == "DisruptionTarget"
        and c.get("status") == "True" and c.get("reason") == "PreemptionByScheduler"
        for c in (conditions if isinstance(conditions, list) else ()))
