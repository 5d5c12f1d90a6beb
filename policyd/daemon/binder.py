"""Bindings out: each assumed pod bound in a bounded pool, retried, confirmed, or undone.

A pod is never bound twice: it is dropped from the queue once assumed, the loop skips
pods that are assumed or bound, the Binding carries the pod's uid as a precondition,
and a 409 is never retried (when an earlier attempt that timed out had in fact
succeeded, the pod is read back to confirm it is on our node). Temporary failures are
retried under `BIND_RETRIES` (at least the server's Retry-After); a permanent one, a
deadline passed, lost leadership or a shutdown undo the assumption and requeue the pod.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import Enum

from policyd.clock import Clock
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics, label_children
from policyd.daemon.queue import QueuedPod
from policyd.daemon.scheduling_state import LOGGER, SchedulingState
from policyd.framework.events import ASSIGNED_POD_DELETE
from policyd.kube import api
from policyd.kube.backoff import GiveUp, RetryPolicy
from policyd.kube.client import ApiError, KubeClient
from policyd.model.records import Pod

log = logging.getLogger(LOGGER)

# Give up retrying a bind after a minute, then requeue.
BIND_RETRIES = RetryPolicy(initial=0.2, maximum=5.0, deadline=60.0)


class BindFailure(Enum):
    """Why a bind was given up; the value starts the log line (and the event)."""

    REJECTED = "binding rejected"
    INTERNAL_ERROR = "internal error"
    LOST_LEADERSHIP = "lost leadership before binding"
    STOPPING = "scheduler stopping"

    @property
    def explained_to_the_pod(self) -> bool:
        """Whether the pod gets a FailedScheduling event: not when this replica is
        stepping down or stopping, which says nothing about the pod."""
        return self not in (BindFailure.LOST_LEADERSHIP, BindFailure.STOPPING)


class Binder:
    """`reserve()` under the state lock as a pod is assumed, then `submit()`."""

    def __init__(self, client: KubeClient, state: SchedulingState, *, metrics: Metrics,
                 events: EventSink, is_leader: Callable[[], bool], clock: Clock,
                 workers: int, verbosity: int, retries: RetryPolicy = BIND_RETRIES
                 ) -> None:
        self.client = client
        self.state = state
        self.metrics = metrics
        self.events = events
        self.is_leader = is_leader
        self.clock = clock
        self.verbosity = verbosity
        self.retries = retries
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="policyd-bind")
        self._in_flight = 0
        self._in_flight_cond = threading.Condition()
        self._abandon = threading.Event()  # the shutdown grace period is over
        self.bound_total = 0
        # Looked up once per bound pod otherwise.
        self._attempts = label_children(metrics.schedule_attempts)
        self._attempt_latency = label_children(metrics.attempt_latency)
        self._e2e_latency = label_children(metrics.e2e_latency)

    # -- in-flight binds ------------------------------------------------------------------

    def reserve(self) -> None:
        """Count a bind about to be submitted: a shutdown from now on waits for it."""
        with self._in_flight_cond:
            self._in_flight += 1

    def _release(self) -> None:
        with self._in_flight_cond:
            self._in_flight -= 1
            self._in_flight_cond.notify_all()

    def wait(self, timeout: float) -> bool:
        """Wait for in-flight binds (graceful shutdown). True if all finished."""
        deadline = self.clock.now() + timeout
        with self._in_flight_cond:
            while self._in_flight > 0:
                remaining = deadline - self.clock.now()
                if remaining <= 0:
                    return False
                self._in_flight_cond.wait(remaining)
        return True

    def shutdown(self) -> None:
        """The grace period is over: binds still retrying give up now."""
        self._abandon.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def submit(self, qp: QueuedPod, node: str, profile: str, start: float) -> None:
        """Bind `qp` to `node` in the pool (after `reserve()`); `start` is when its
        cycle began, for the attempt latency."""
        try:
            self._pool.submit(self._bind, qp, node, profile, start)
        except RuntimeError:  # pool shut down: we are stopping
            self._release()
            self._failed(qp, node, profile, BindFailure.STOPPING)

    # -- one bind -------------------------------------------------------------------------

    def _bind(self, qp: QueuedPod, node: str, profile: str, start: float) -> None:
        try:
            self._bind_with_retries(qp, node, profile, start)
        except Exception:
            log.exception("binding %s failed", qp.pod.key)
            self._failed(qp, node, profile, BindFailure.INTERNAL_ERROR)
        finally:
            self._release()

    def _bind_with_retries(self, qp: QueuedPod, node: str, profile: str, start: float
                           ) -> None:
        pod = qp.pod
        s = self.state
        retries = self.retries.begin(self.clock.now)
        t0 = self.clock.now()
        attempted = False
        while True:
            with s.lock:
                if s.assumed.get(pod.uid) != node:
                    # The informer replaced the assumption: deleted, bound by someone
                    # else, or bound here by an earlier attempt whose reply was lost.
                    if not (attempted and s.api_shows_bound(pod, node)):
                        return
                    outcome = api.BindOutcome.BOUND
                    break
            if not self.is_leader():
                self._failed(qp, node, profile, BindFailure.LOST_LEADERSHIP)
                return
            try:
                attempted = True
                outcome = api.bind_pod(self.client, pod.namespace, pod.name, pod.uid, node)
                break
            except ApiError as exc:
                self.metrics.bind_errors.labels(str(exc.status or exc.reason)).inc()
                delay = retries.after(exc)
                if isinstance(delay, GiveUp):
                    self._failed(qp, node, profile, BindFailure.REJECTED, str(exc))
                    return
                log.warning("binding %s to %s: attempt %d failed: %s; retrying in %.1fs",
                            pod.key, node, retries.attempts, exc, delay)
                # Retries go on during a graceful stop, until its grace period is over.
                if self.clock.wait(self._abandon, delay):
                    self._failed(qp, node, profile, BindFailure.STOPPING)
                    return
        self.metrics.binding_latency.observe(self.clock.now() - t0)
        if outcome is api.BindOutcome.ALREADY_BOUND:
            outcome = self._confirm(pod, node)
        if outcome is api.BindOutcome.BOUND:
            self._bound(qp, node, profile, start)
            return
        # Gone, or bound elsewhere: the informer brings the truth; drop the assumption
        # only if it is still ours (the informer may already have replaced it).
        with s.lock:
            if s.assumed.get(pod.uid) == node:
                del s.assumed[pod.uid]
                s.cluster.remove_pod(pod.uid)
        log.info("not binding %s: %s", pod.key,
                 "deleted" if outcome is api.BindOutcome.GONE else "already bound")

    def _bound(self, qp: QueuedPod, node: str, profile: str, start: float) -> None:
        pod = qp.pod
        self.bound_total += 1
        now = self.clock.now()
        self._attempts("scheduled", profile).inc()
        self._attempt_latency("scheduled", profile).observe(now - start)
        self._e2e_latency(profile).observe(now - qp.added)
        self.state.throttle.forget(pod.uid)
        if self.verbosity >= 1:
            log.info("bound %s to %s", pod.key, node, extra={"pod": pod.key, "node": node})
        self.events.scheduled(pod.namespace, pod.name, pod.uid, node, profile)

    def _confirm(self, pod: Pod, node: str) -> api.BindOutcome:
        """After a 409: did an earlier attempt of ours (that timed out) bind it here?"""
        try:
            current = api.get_pod(self.client, pod.namespace, pod.name)
        except ApiError:
            # Cannot ask: trust what the informer has shown so far.
            with self.state.lock:
                return (api.BindOutcome.BOUND if self.state.api_shows_bound(pod, node)
                        else api.BindOutcome.ALREADY_BOUND)
        if current is None:
            return api.BindOutcome.GONE
        meta, spec = current.get("metadata") or {}, current.get("spec") or {}
        if meta.get("uid") == pod.uid and spec.get("nodeName") == node:
            return api.BindOutcome.BOUND
        return api.BindOutcome.ALREADY_BOUND

    def _failed(self, qp: QueuedPod, node: str, profile: str, why: BindFailure,
                detail: str = "") -> None:
        """Undo the assumption and retry the pod after a backoff."""
        pod = qp.pod
        s = self.state
        with s.lock:
            if s.assumed.get(pod.uid) != node:
                return  # deleted or bound meanwhile: nothing to undo
            del s.assumed[pod.uid]
            s.cluster.forget(pod)
            self.metrics.schedule_attempts.labels("error", profile).inc()
            where = s.queue.requeue(qp, unschedulable=False)
            # The room it held is free again (upstream moves pods on this too).
            s.move(ASSIGNED_POD_DELETE, dataclasses.replace(pod, node_name=node, cache={}),
                   None)
        message = f"{why.value}: {detail}" if detail else why.value
        log.warning("binding %s to %s failed: %s; requeued (%s)", pod.key, node, message,
                    where)
        if why.explained_to_the_pod:
            self.events.failed(pod.namespace, pod.name, pod.uid, message, profile,
                               post_event=True, patch_condition=False)
