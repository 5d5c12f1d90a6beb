"""Bindings out: each assumed pod bound in a bounded pool, retried, confirmed, or undone.

The binding cycle of upstream, per pod: PreBind (the profile's PreBind plugins, e.g.
VolumeBinding writing the volume bindings it reserved and waiting for the PV
controller), then the Binding itself. A pod is never bound twice: it is dropped from
the queue once assumed, the loop skips pods that are assumed or bound, the Binding
carries the pod's uid as a precondition, and a 409 is never retried (when an earlier
attempt that timed out had in fact succeeded, the pod is read back to confirm it is on
our node). Temporary bind failures are retried under `BIND_RETRIES` (at least the
server's Retry-After); a failed PreBind, a permanent failure, a deadline passed, lost
leadership or a shutdown undo the assumption and requeue the pod.

Whenever the pod ends up not bound by us (any of those, or the pod deleted or bound by
someone else while in flight), the Reserve plugins' `unreserve` runs exactly once,
under the state lock, before the assumption goes: nothing a Reserve plugin assumed (a
PV's claimRef, a claim's selected node) outlives the attempt.

Before PreBind, as kube-scheduler v1.36's bindingCycle:
- with NominatedNodeNameForExpectation (beta, on by default since 1.35), the PreBind
  plugins' pre-flights say whether PreBind will have work (VolumeBinding: a claim to
  bind or provision, which can wait up to bindTimeoutSeconds); if so the pod's
  `status.nominatedNodeName` is set to the node first, in a status patch of its own,
  so that cluster autoscalers see where it is going. A failed patch is logged and the
  bind goes on; a failed bind clears the nomination with its PodScheduled condition;
  a bind clears it on the API server's side (ClearingNominatedNodeNameAfterBinding).
- the pod is entered in `SchedulingState.in_pre_bind` (with the gate: only when a
  pre-flight said PreBind has work; without it: always), where preemption may call
  the binding off instead of deleting the pod (`policyd.daemon.pods_in_prebind`): its
  PreBind ends at once, and it fails as any failed PreBind does, with the
  cancellation's cause in place of Go's "context canceled".
- a pod Permit told to wait (`SchedulingState.waiting_pods`) is nominated to its node
  first (so an autoscaler sees where a held gang is going), then parked: its binding
  cycle gives its worker back and resumes in the pool once the wait ends. Allowed, it
  goes on to PreBind; rejected or timed out, it is unreserved and goes back to the
  queue as unschedulable, with upstream's FitError over the one node; preempted, it
  is retried after a backoff ("waiting on permit for pod: preempted"). A timer thread
  rejects the waits whose time is up.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum

from policyd import features
from policyd.clock import Clock
from policyd.daemon.binding_handle import DaemonBindingHandle
from policyd.daemon.event_recorder import EventSink
from policyd.daemon.metrics import Metrics, label_children
from policyd.daemon.pods_in_prebind import PodInPreBind
from policyd.daemon.queue import QueuedPod
from policyd.daemon.scheduling_state import LOGGER, SchedulingState
from policyd.daemon.thread_names import name_current_thread
from policyd.engine.cycle import wait_refusal
from policyd.framework.cycle_state import CycleState
from policyd.framework.events import ASSIGNED_POD_DELETE
from policyd.framework.runtime import Framework
from policyd.framework.status import Code, Status
from policyd.framework.waiting_pods import WaitingPod
from policyd.kube import api
from policyd.kube.backoff import GiveUp, RetryPolicy
from policyd.kube.client import ApiError, KubeClient
from policyd.model.cluster import nominated_node_name
from policyd.model.records import Pod

log = logging.getLogger(LOGGER)

# Give up retrying a bind after a minute, then requeue.
BIND_RETRIES = RetryPolicy(initial=0.2, maximum=5.0, deadline=60.0)

# The nomination patch before PreBind is retried as upstream's PatchPodStatus
# (retry.DefaultBackoff: four tries, 10 ms then five times longer each time) after a
# 409, a 500, a 503 or a refused connection (util.Retriable).
NOMINATION_RETRY_DELAYS = (0.01, 0.05, 0.25)
NOMINATION_RETRIABLE = frozenset({409, 500, 503})

# Go's context.Canceled text, which ends a PreBind plugin's error when its wait was
# called off; upstream reports the cancellation's cause in its place.
CONTEXT_CANCELED = "context canceled"

# The longest the Permit timer sleeps before looking at the clock again: its deadlines
# are read off the scheduler's clock, which a test may move by hand.
PERMIT_TIMER_MAX_SLEEP_S = 1.0


class BindFailure(Enum):
    """Why a bind was given up; the value starts the log line (and the event)."""

    REJECTED = "binding rejected"
    PERMIT = "not permitted"  # the event carries the wait's outcome alone
    PRE_BIND = "PreBind failed"  # the event carries the PreBind status's message alone
    INTERNAL_ERROR = "internal error"
    LOST_LEADERSHIP = "lost leadership before binding"
    STOPPING = "scheduler stopping"

    @property
    def explained_to_the_pod(self) -> bool:
        """Whether the pod gets a FailedScheduling event: not when this replica is
        stepping down or stopping, which says nothing about the pod."""
        return self not in (BindFailure.LOST_LEADERSHIP, BindFailure.STOPPING)


@dataclass(slots=True)
class BindRequest:
    """One assumed pod on its way to `node`: the Framework (profile) and the cycle
    state its Reserve ran with, which PreBind and Unreserve need."""

    qp: QueuedPod
    node: str
    fw: Framework
    state: CycleState | None
    start: float  # when its scheduling cycle began, for the attempt latency
    unreserved: bool = False  # Unreserve has run: it never runs twice
    # The nomination patch before PreBind was sent: a failed bind clears it.
    nominated: bool = False
    # Its entry in `SchedulingState.in_pre_bind`, while it is there.
    in_pre_bind: PodInPreBind | None = None
    # The handle its PreBind plugins wrote through (None before PreBind), and whether
    # what they wrote has been undone after a failure (once, as Unreserve).
    handle: DaemonBindingHandle | None = None
    undone: bool = False
    # Its wait at Permit, while it has one; once the wait ended, how (None: allowed).
    waiting: WaitingPod | None = None
    past_permit: bool = False
    permit_outcome: Status | None = None
    # PreBindPreFlight's answer, kept across the wait (None: PreBind has work).
    pre_flight: Status | None = None

    @property
    def profile(self) -> str:
        return self.fw.profile_name


class Binder:
    """`reserve()` under the state lock as a pod is assumed, then `submit()`."""

    def __init__(self, client: KubeClient, state: SchedulingState, *, metrics: Metrics,
                 events: EventSink, is_leader: Callable[[], bool], clock: Clock,
                 workers: int, verbosity: int, retries: RetryPolicy = BIND_RETRIES,
                 gates: features.FeatureGates = features.DEFAULTS) -> None:
        self.client = client
        self.state = state
        self.metrics = metrics
        self.events = events
        self.is_leader = is_leader
        self.clock = clock
        self.verbosity = verbosity
        self.retries = retries
        self.nominate_for_expectation = gates.enabled("NominatedNodeNameForExpectation")
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="policyd-bind",
                                        initializer=name_current_thread)
        self._in_flight = 0
        self._in_flight_cond = threading.Condition()
        self._abandon = threading.Event()  # the shutdown grace period is over
        self._stopping = threading.Event()  # no new waits: the scheduler is stopping
        self._timer: threading.Thread | None = None
        self._timer_lock = threading.Lock()
        self.bound_total = 0
        # Looked up once per bound pod otherwise.
        self._attempts = label_children(metrics.schedule_attempts)
        self._attempt_latency = label_children(metrics.attempt_latency)
        self._sli = label_children(metrics.sli_duration)

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
        self.stop_waiting()
        self.state.in_pre_bind.wake_all()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def stop_waiting(self) -> None:
        """The scheduler is stopping: every pod waiting at Permit is given up (and
        requeued on the API's side by whoever leads next), and the timer ends."""
        self._stopping.set()
        waiting = self.state.waiting_pods
        for entry in waiting.all():
            entry.reject("", BindFailure.STOPPING.value)
        waiting.changed.set()

    # -- waits at Permit ------------------------------------------------------------------

    def watch_permit_timeouts(self) -> None:
        """Start the thread that rejects waits whose time is up (once; called as the
        first pod is told to wait)."""
        with self._timer_lock:
            if self._timer is None and not self._stopping.is_set():
                self._timer = threading.Thread(target=self._permit_timer, daemon=True,
                                               name="policyd-permit-timeouts")
                self._timer.start()

    def expire_waits(self) -> int:
        """Reject every wait whose time is up by the clock now; how many."""
        return self.state.waiting_pods.expire(self.clock.now())

    def _permit_timer(self) -> None:
        waiting = self.state.waiting_pods
        while not self._stopping.is_set():
            waiting.changed.clear()
            self.expire_waits()
            deadline = waiting.next_deadline()
            sleep = PERMIT_TIMER_MAX_SLEEP_S if deadline is None else min(
                max(deadline - self.clock.now(), 0.0), PERMIT_TIMER_MAX_SLEEP_S)
            waiting.changed.wait(sleep)

    def _park(self, req: BindRequest) -> None:
        """Give the worker back until `req`'s wait ends; then resume in the pool."""
        assert req.waiting is not None
        req.waiting.on_resolved(lambda outcome: self._resume(req, outcome))

    def _resume(self, req: BindRequest, outcome: Status | None) -> None:
        """The wait ended (in whichever thread ended it): the rest of the binding
        cycle goes back to the pool."""
        if req.waiting is not None:
            self.state.waiting_pods.remove(req.qp.pod.uid, req.waiting)
        req.past_permit = True
        req.permit_outcome = outcome
        try:
            self._pool.submit(self._bind, req)
        except RuntimeError:  # pool shut down: we are stopping
            self._failed(req, BindFailure.STOPPING)
            self._end(req)

    def _permit_failed(self, req: BindRequest, outcome: Status) -> None:
        """The wait ended in a rejection (a plugin's, or its timeout) or an error
        (preempted), told as upstream's bindingCycle tells it after WaitOnPermit."""
        if self._stopping.is_set() or self._abandon.is_set():
            self._failed(req, BindFailure.STOPPING, outcome.message)
            return
        told, diagnosis = wait_refusal(req.node, outcome)
        self._failed(req, BindFailure.PERMIT, told.message, status=told,
                     plugins=diagnosis.unschedulable_plugins if diagnosis else None)

    def submit(self, req: BindRequest) -> None:
        """Run `req`'s binding cycle in the pool (after `reserve()`)."""
        try:
            self._pool.submit(self._bind, req)
        except RuntimeError:  # pool shut down: we are stopping
            self._release()
            self._failed(req, BindFailure.STOPPING)

    # -- one bind -------------------------------------------------------------------------

    def _bind(self, req: BindRequest) -> None:
        parked = False
        try:
            parked = self._bind_with_retries(req)
        except Exception:
            log.exception("binding %s failed", req.qp.pod.key)
            self._failed(req, BindFailure.INTERNAL_ERROR)
        finally:
            if not parked:
                self._end(req)

    def _end(self, req: BindRequest) -> None:
        """The binding cycle is over, bound or not."""
        if req.unreserved:
            self._undo_pre_bind(req)  # given up without a requeue (deleted, ...)
        if req.waiting is not None and not req.past_permit:
            # Failed before its wait began: nothing will end that wait now.
            req.waiting.reject("", "the binding cycle ended")
            self.state.waiting_pods.remove(req.qp.pod.uid, req.waiting)
        # Out of the PreBind map once the cycle is over (bound or not), as
        # upstream's deferred RemovePodInPreBind.
        if req.in_pre_bind is not None:
            self.state.in_pre_bind.remove(req.qp.pod.uid, req.in_pre_bind)
        self._release()

    def _still_assumed(self, req: BindRequest) -> bool:
        """Under the lock: the assumption this bind serves is still in place."""
        return self.state.assumed.get(req.qp.pod.uid) == req.node

    def _still_ours(self, req: BindRequest) -> bool:
        """The pod is still assumed on its node and this replica still leads; when
        not, it is unreserved (and requeued if it is still pending)."""
        with self.state.lock:
            if not self._still_assumed(req):
                self._unreserve(req)  # deleted, or bound by someone else
                return False
        if not self.is_leader():
            self._failed(req, BindFailure.LOST_LEADERSHIP)
            return False
        return True

    def _pre_flight(self, req: BindRequest) -> bool:
        """Before Permit's wait and PreBind: the pod still ours, still leading, and,
        with NominatedNodeNameForExpectation, PreBind's pre-flights and the
        nomination when PreBind will work or the pod will wait. True when the cycle
        goes on; on failure the pod is undone and requeued."""
        pod = req.qp.pod
        if not self._still_ours(req):
            return False
        assert req.state is not None
        req.pre_flight = None  # upstream's nil status without the gate
        if not self.nominate_for_expectation:
            return True
        pre_flight = (req.fw.run_pre_bind_pre_flight(req.state, pod, req.node)
                      if req.fw.pre_bind_plugins else Status.skip())
        if pre_flight is not None and not pre_flight.is_skip:
            # An error, or a rejection (which a pre-flight may not give).
            failed = (pre_flight if pre_flight.code is Code.ERROR
                      else Status.error(pre_flight.message))
            self._failed(req, BindFailure.PRE_BIND, failed.message, status=failed)
            return False
        req.pre_flight = pre_flight
        if pre_flight is None or req.waiting is not None:
            self._nominate(req)
        return True

    def _pre_bind(self, req: BindRequest) -> bool:
        """The profile's PreBind plugins; True when the bind may go ahead. On failure
        the pod is undone and requeued (with PreBind's message, as upstream's
        handleBindingCycleError explains it)."""
        pod = req.qp.pod
        s = self.state
        assert req.state is not None
        if req.pre_flight is None:
            # PreBind will work (or, without the gate, may): preemption may call it off.
            req.in_pre_bind = s.in_pre_bind.add(pod.uid)

        def worth_waiting() -> bool:
            if not self.is_leader():
                return False
            with s.lock:
                return self._still_assumed(req)

        handle = DaemonBindingHandle(
            self.client, s, self.clock, abandon=self._abandon, worth_waiting=worth_waiting,
            wake=req.in_pre_bind.wake if req.in_pre_bind is not None else None)
        req.handle = handle
        status = req.fw.run_pre_bind(req.state, pod, req.node, handle)
        entry = req.in_pre_bind
        if status is None:
            if entry is None or entry.mark_prebound():
                return True
            # Preempted while PreBind finished: not bound (upstream's MarkPrebound
            # check), and told why as the cause alone.
            status = Status.error(entry.cause or CONTEXT_CANCELED)
        elif (entry is not None and entry.cause is not None and status.code is Code.ERROR
              and status.message.endswith(CONTEXT_CANCELED)):
            # The wait was called off by preemption: RunPreBindPlugins reports the
            # cancellation's cause in place of context.Canceled.
            status = Status(Code.ERROR, (
                f'running PreBind plugin "{status.plugin}": {entry.cause}',), status.plugin)
        # Why it failed, as far as the pod is concerned: a replica stopping or stepping
        # down gave up on it, which says nothing about the pod.
        if self._abandon.is_set():
            self._failed(req, BindFailure.STOPPING, status.message)
        elif entry is not None and entry.cause is not None:
            self._failed(req, BindFailure.PRE_BIND, status.message, status=status)
        elif not self.is_leader():
            self._failed(req, BindFailure.LOST_LEADERSHIP, status.message)
        else:
            self._failed(req, BindFailure.PRE_BIND, status.message, status=status)
        return False

    def _nominate(self, req: BindRequest) -> None:
        """Tell the API where the pod is going before PreBind works (upstream's
        bindingCycle with NominatedNodeNameForExpectation): only `nominatedNodeName`,
        only when the pod does not show that node already. Not critical: a failure is
        logged and the binding cycle goes on."""
        pod, node = req.qp.pod, req.node
        if nominated_node_name(pod) == node:
            return
        req.nominated = True
        delays = iter(NOMINATION_RETRY_DELAYS)
        while True:
            try:
                api.patch_nominated_node(self.client, pod.namespace, pod.name, node)
                break
            except ApiError as exc:
                delay = next(delays, None)
                if ((exc.status in NOMINATION_RETRIABLE
                     or (exc.status == 0 and "Refused" in exc.reason))
                        and delay is not None and not self.clock.wait(self._abandon, delay)):
                    continue
                log.error("failed to update the nominated node name of %s to %s in the "
                          "binding cycle: %s", pod.key, node, exc,
                          extra={"pod": pod.key, "node": node})
                return
        if self.verbosity >= 3:
            log.info("nominated %s to %s before PreBind", pod.key, node,
                     extra={"v": 3, "pod": pod.key, "node": node})

    def _bind_with_retries(self, req: BindRequest) -> bool:
        """The binding cycle from where `req` is; True when it parked on its wait at
        Permit (the worker is free, `_resume` goes on later)."""
        qp, node = req.qp, req.node
        pod = qp.pod
        s = self.state
        if not req.past_permit:
            req.waiting = s.waiting_pods.get(pod.uid)
            needs_pre_flight = bool(req.fw.pre_bind_plugins) or req.waiting is not None
            if req.state is not None and needs_pre_flight and not self._pre_flight(req):
                return False
            if req.waiting is not None:
                self._park(req)
                return True
        elif req.permit_outcome is not None:
            self._permit_failed(req, req.permit_outcome)
            return False
        elif not self._still_ours(req):  # after a wait, which may have been long
            return False
        if req.fw.pre_bind_plugins and req.state is not None and not self._pre_bind(req):
            return False
        retries = self.retries.begin(self.clock.now)
        t0 = self.clock.now()
        attempted = False
        while True:
            with s.lock:
                if not self._still_assumed(req):
                    # The informer replaced the assumption: deleted, bound by someone
                    # else, or bound here by an earlier attempt whose reply was lost.
                    if not (attempted and s.api_shows_bound(pod, node)):
                        self._unreserve(req)
                        return False
                    outcome = api.BindOutcome.BOUND
                    break
            if not self.is_leader():
                self._failed(req, BindFailure.LOST_LEADERSHIP)
                return False
            try:
                attempted = True
                outcome = api.bind_pod(self.client, pod.namespace, pod.name, pod.uid, node)
                break
            except ApiError as exc:
                self.metrics.bind_errors.labels(str(exc.status or exc.reason)).inc()
                delay = retries.after(exc)
                if isinstance(delay, GiveUp):
                    self._failed(req, BindFailure.REJECTED, str(exc))
                    return False
                log.warning("binding %s to %s: attempt %d failed: %s; retrying in %.1fs",
                            pod.key, node, retries.attempts, exc, delay)
                # Retries go on during a graceful stop, until its grace period is over.
                if self.clock.wait(self._abandon, delay):
                    self._failed(req, BindFailure.STOPPING)
                    return False
        self.metrics.binding_latency.observe(self.clock.now() - t0)
        if outcome is api.BindOutcome.ALREADY_BOUND:
            outcome = self._confirm(pod, node)
        if outcome is api.BindOutcome.BOUND:
            self._bound(req)
            return False
        # Gone, or bound elsewhere: the informer brings the truth; drop the assumption
        # only if it is still ours (the informer may already have replaced it).
        with s.lock:
            self._unreserve(req)
            if self._still_assumed(req):
                del s.assumed[pod.uid]
                s.cluster.remove_pod(pod.uid)
        log.info("not binding %s: %s", pod.key,
                 "deleted" if outcome is api.BindOutcome.GONE else "already bound")
        return False

    def _bound(self, req: BindRequest) -> None:
        pod, node, profile = req.qp.pod, req.node, req.profile
        now = self.clock.now()
        self._attempts("scheduled", profile).inc()
        self._attempt_latency("scheduled", profile).observe(now - req.start)
        # Upstream's SLI starts at the pod's first attempt, labelled by the attempts it
        # took (capped at "15+", so the label stays bounded).
        attempts = req.qp.attempts
        self.metrics.pod_attempts.observe(attempts)
        first = req.qp.first_attempt if req.qp.first_attempt is not None else req.qp.added
        self._sli("15+" if attempts >= 15 else str(attempts)).observe(now - first)
        self.state.throttle.forget(pod.uid)
        if self.verbosity >= 1:
            log.info("bound %s to %s", pod.key, node,
                     extra={"v": 1, "pod": pod.key, "node": node})
        self.events.scheduled(pod.namespace, pod.name, pod.uid, node, profile)
        # Counted last, once the bind's metrics and event are handed over: whoever
        # waits on the count (tests, the debug page) sees the whole bind.
        self.bound_total += 1

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

    def _undo_pre_bind(self, req: BindRequest) -> None:
        """Outside the lock, once: the API writes of PreBind undone (Unreserve's API
        half, `Framework.run_undo_pre_bind`), before a failed pod is requeued so its
        next attempt never races them."""
        if req.undone or req.handle is None or req.state is None:
            return
        req.undone = True
        req.fw.run_undo_pre_bind(req.state, req.qp.pod, req.node, req.handle)

    def _unreserve(self, req: BindRequest) -> None:
        """Under the lock: the Reserve plugins release what they took for this pod,
        once whatever path gets here first (upstream's unreserveAndForget)."""
        if req.unreserved or req.state is None:
            return
        req.unreserved = True
        if req.fw.reserve_plugins:
            req.fw.run_unreserve(req.state, req.qp.pod, req.node)

    def _failed(self, req: BindRequest, why: BindFailure, detail: str = "", *,
                status: Status | None = None, plugins: set[str] | None = None) -> None:
        """Unreserve, undo the assumption and retry the pod after a backoff, or, with
        `plugins` (the rejectors of a wait at Permit), park it as unschedulable until
        an event they care about. `status`: the failed PreBind's or wait's, whose
        message the pod is told as upstream tells it (the FailedScheduling event and
        the PodScheduled condition)."""
        pod, node, profile = req.qp.pod, req.node, req.profile
        s = self.state
        rejected = status is not None and status.is_rejected
        logged = f"{why.value}: {detail}" if detail else why.value
        with s.lock:
            self._unreserve(req)
        # Unreserve's API half, before the pod is requeued (and outside the lock).
        self._undo_pre_bind(req)
        with s.lock:
            if not self._still_assumed(req):
                # Deleted or bound meanwhile: nothing else to undo, nobody to tell, but
                # said in the log: a pod deleted during a long PreBind wait (volumes)
                # would otherwise leave no trace of what became of its bind.
                log.info("binding %s to %s given up: %s; the pod was deleted or bound "
                         "elsewhere meanwhile", pod.key, node, logged)
                return
            del s.assumed[pod.uid]
            s.cluster.forget(pod)
            self.metrics.schedule_attempts.labels(
                "unschedulable" if rejected else "error", profile).inc()
            where = s.queue.requeue(req.qp, unschedulable=plugins is not None,
                                    plugins=plugins)
            # The room it held is free again (upstream moves pods on this too).
            s.move(ASSIGNED_POD_DELETE, dataclasses.replace(pod, node_name=node, cache={}),
                   None)
        log.warning("binding %s to %s failed: %s; requeued (%s)", pod.key, node, logged,
                    where)
        if not why.explained_to_the_pod:
            return
        # Upstream's binding-cycle failure clears the pod's nomination (the room it
        # was nominated to went unused); sent only when the API shows one: as the pod
        # was popped, or as this cycle wrote it before PreBind.
        cleared = ({"nominated_node": ""} if nominated_node_name(pod) or req.nominated
                   else {})
        if status is None:
            self.events.failed(pod.namespace, pod.name, pod.uid, logged, profile,
                               post_event=True, patch_condition=False, **cleared)
            return
        self.events.failed(pod.namespace, pod.name, pod.uid, status.message, profile,
                           post_event=True, patch_condition=True,
                           reason="Unschedulable" if rejected else "SchedulerError",
                           **cleared)
