"""The scheduling loop: pop a pod, run one cycle, assume it, run Reserve and hand it to
the binder, or requeue it and explain why (FailedScheduling, the PodScheduled
condition).

It drives the same engine as the offline commands (`policyd.engine.cycle.schedule_one`)
over the shared `ClusterState`, and never starts a cycle before the caches are ready
and this replica leads.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable

from policyd.clock import Clock
from policyd.daemon.binder import Binder, BindRequest
from policyd.daemon.binding_handle import ApiClaimWriter
from policyd.daemon.event_recorder import EventSink, condition_shown
from policyd.daemon.metrics import Metrics, label_children
from policyd.daemon.preemption import PreemptionActions
from policyd.daemon.queue import FLUSH_UNSCHEDULABLE_PERIOD, QueuedPod
from policyd.daemon.scheduling_state import LOGGER, SchedulingState
from policyd.engine.cycle import ScheduleResult, place, schedule_one
from policyd.engine.pod_group import GroupAttempt, try_pod_group
from policyd.framework import Status
from policyd.framework.cycle_state import PODS_TO_ACTIVATE
from policyd.framework.runtime import Framework
from policyd.kube import api
from policyd.kube.client import ApiError
from policyd.model.cluster import nominated_node_name
from policyd.model.pod_groups import WORKLOAD_API, GroupKey
from policyd.model.records import Pod
from policyd.plugins.defaultpreemption.plugin import preemption_report
from policyd.plugins.dynamicresources.extended import delete_claim
from policyd.plugins.dynamicresources.plugin import (
    claim_to_deallocate,
    extended_claim_to_delete,
)
from policyd.policy.compiler import CompiledPolicy, exemptions, profile_policies

log = logging.getLogger(LOGGER)

# How long the loop waits between checks while it may not schedule (caches not ready,
# not the leader), and at most for a pod to pop.
NOT_READY_WAIT = 0.1
POP_WAIT = 0.2


class SchedulingLoop:
    def __init__(self, state: SchedulingState, binder: Binder, *, metrics: Metrics,
                 events: EventSink, is_leader: Callable[[], bool], clock: Clock,
                 verbosity: int, preemption: PreemptionActions | None = None) -> None:
        self.state = state
        self.preemption = preemption
        self.binder = binder
        self.metrics = metrics
        self.events = events
        self.is_leader = is_leader
        self.clock = clock
        self.verbosity = verbosity
        self.stopping = threading.Event()
        self.heartbeat = clock.now()  # the loop's last round, for /healthz
        self._violations = label_children(metrics.policy_violations)
        # Per profile (a reload brings new Frameworks): its policies with exceptions.
        self._with_exceptions: weakref.WeakKeyDictionary[
            Framework, tuple[CompiledPolicy, ...]] = weakref.WeakKeyDictionary()

    def run(self, stop: threading.Event, ready: Callable[[], bool]) -> None:
        """Schedule until `stop` (or `self.stopping`) is set. Waits for the caches and
        for leadership; never starts a cycle without both."""
        queue = self.state.queue
        next_flush = self.clock.now() + FLUSH_UNSCHEDULABLE_PERIOD
        while not stop.is_set() and not self.stopping.is_set():
            self.heartbeat = self.clock.now()
            if not ready() or not self.is_leader():
                self.clock.wait(stop, NOT_READY_WAIT)
                continue
            if self.clock.now() >= next_flush:
                with self.state.lock:  # flushing may run PreEnqueue
                    queue.flush()
                next_flush = self.clock.now() + FLUSH_UNSCHEDULABLE_PERIOD
            qp = queue.pop(timeout=POP_WAIT)
            if qp is None:
                continue
            if stop.is_set() or self.stopping.is_set() or not self.is_leader():
                queue.requeue_active(qp)
                continue
            try:
                self.schedule(qp)
            except Exception:
                # A bug in one cycle must not stop the scheduler: back off this pod.
                log.exception("scheduling %s failed", qp.pod.key)
                with self.state.lock:
                    queue.requeue(qp, unschedulable=False)

    def schedule(self, qp: QueuedPod) -> ScheduleResult | None:
        """One cycle for one popped pod (or, for a member of a scheduling.k8s.io
        PodGroup under GenericWorkload, for its whole group: `_schedule_group`)."""
        pod = qp.pod
        s = self.state
        start = self.clock.now()
        if pod.scheduling_group:
            with s.lock:
                fw = s.frameworks.get(pod.scheduler_name)
                finish = None
                if (fw is not None and not self._skip(qp)
                        and fw.features.enabled("GenericWorkload")):
                    finish = self._schedule_group(qp, fw, start)
            if finish is not None:
                finish()
                return None
        with s.lock:
            fw = s.frameworks.get(pod.scheduler_name)
            if fw is None or self._skip(qp):
                s.queue.done(pod.uid)
                return None
            if self.preemption is not None and self.preemption.running(pod.uid):
                # DefaultPreemption's PreEnqueue: not tried while its victims are
                # still being preempted; it waits for the next event that moves it.
                s.queue.requeue(qp, unschedulable=True, plugins=qp.unschedulable_plugins)
                return None
            # CPU time of the algorithm alone, as upstream's metric: not the clock.
            t0 = time.perf_counter()
            result = schedule_one(fw, pod, s.cluster)
            self.metrics.algorithm_latency.observe(time.perf_counter() - t0)
            post_filter_ran = result.node is None and _post_filter_ran(fw, result)
            nominating: str | None = None
            if result.node is not None:
                result = self._place(fw, result)
                self._activate_requested(result)
            if result.node is None:
                nominating = self._act_on_post_filter(fw, pod, result, post_filter_ran)
        if post_filter_ran and result.cycle_state is not None:
            self._deallocate(pod, result)
        self._hand_over(qp, fw, result, start, nominating)
        return result

    def _skip(self, qp: QueuedPod) -> bool:
        """Under the lock: a popped pod not to schedule (deleted, being deleted,
        assumed or bound meanwhile): upstream's skipPodSchedule."""
        pod = qp.pod
        return (qp.deleted or pod.deleting or pod.uid in self.state.assumed
                or self.state.cluster.node_of(pod.uid) is not None)

    def _schedule_group(self, qp: QueuedPod, fw: Framework, start: float
                        ) -> Callable[[], None]:
        """The pod group scheduling cycle, run under the lock with `qp` popped:
        the group's other pending pods are taken out of the queue too, tried together
        (`try_pod_group`), then placed for real on the nodes the trial found, or all
        sent back. Members go back waiting for an event that could help any of them
        (upstream waits out a backoff instead: the same attempts, later). Returns what
        is left to do outside the lock: the hand-overs (binder, queue, events) and the
        PodGroupScheduled condition."""
        s, pod = self.state, qp.pod
        key = GroupKey(WORKLOAD_API, pod.namespace, pod.scheduling_group)
        members = [qp]
        for other in s.cluster.group_pending(key):
            if other.uid != pod.uid and (taken := s.queue.pop_specific(other.uid)):
                members.append(taken)
        live = []
        for member in members:
            if self._skip(member) or s.frameworks.get(member.pod.scheduler_name) is None:
                s.queue.done(member.uid)
            else:
                live.append(member)
        # Upstream's order: priority, then the first attempt (when PreEnqueue first let
        # the pod in: a member held for its group's quorum comes after the member that
        # completed it); a member never let in sorts first, as upstream's zero time.
        live.sort(key=lambda m: (-m.pod.priority,
                                 -math.inf if m.first_attempt is None else m.first_attempt,
                                 m.first_seq))
        t0 = time.perf_counter()
        names = sorted({m.pod.scheduler_name for m in live})
        if len(names) > 1:
            attempt = GroupAttempt(error=Status.error(
                "all pods in a single pod group should have the same .spec.schedulerName "
                f"set, got: \"{names[1]}\" and \"{names[0]}\""))
        else:
            attempt = try_pod_group(fw, [m.pod for m in live], s.cluster)
        self.metrics.algorithm_latency.observe(time.perf_counter() - t0)
        trials = {m.result.pod.uid: m for m in attempt.members}
        placed = {r.pod.uid for r in attempt.placed}
        # What rejected any member: an event that helps one may complete the group.
        plugins = set().union(*(m.result.diagnosis.unschedulable_plugins
                                for m in attempt.members))
        outcomes: list[tuple[QueuedPod, ScheduleResult]] = []
        for member in live:
            trial = trials.get(member.uid)
            if trial is not None and member.uid in placed:
                result = self._place(fw, trial.result)
                if result.node is not None:
                    outcomes.append((member, result))
                    continue
            else:
                result = attempt.unplaced(trial, member.pod, len(s.cluster))
            result.diagnosis.unschedulable_plugins = set(plugins)
            outcomes.append((member, result))
        if placed:
            # The members left out met the snapshot without their siblings just placed:
            # tried once more (upstream sends every member of a group cycle back
            # through the backoff queue), so what they are told counts those siblings.
            for member, result in outcomes:
                if result.node is None:
                    s.queue.retry_on_return(member.uid)
        condition = attempt.condition
        group = s.cluster.pod_groups.get(key)
        tell = group is not None and s.cluster.pod_groups.record_scheduled(
            group, condition[0] == "True")

        def finish() -> None:
            for member, result in outcomes:
                self._hand_over(member, fw, result, start)
            if group is not None and tell and self.is_leader():
                self.events.pod_group_condition(group, *condition)
            if self.verbosity >= 2:
                log.info("pod group %s: %s (%d of %d placed)", key, condition[1],
                         len(placed), len(live), extra={"v": 2, "podGroup": str(key)})
        return finish

    def _place(self, fw: Framework, result: ScheduleResult) -> ScheduleResult:
        """Under the state lock (schedulingCycle's order: the next cycle sees what
        Reserve took, a Permit plugin letting a gang go sees every member assumed so
        far): `place` the decided pod; a waiting pod joins the waiting pods; a placed
        pod leaves the queue."""
        s, pod = self.state, result.pod
        result = place(fw, s.cluster, result)
        if result.node is None:
            return result
        if result.permit_waits:
            s.waiting_pods.add(pod, result.node, result.permit_waits, self.clock.now())
            self.binder.watch_permit_timeouts()
        s.assumed[pod.uid] = result.node
        s.queue.done(pod.uid)
        self.binder.reserve()
        return result

    def _activate_requested(self, result: ScheduleResult) -> None:
        """Under the lock, after a pod passed Permit or waits there: the pods a plugin
        asked to bring back to activeQ (PodsToActivate; Coscheduling's siblings of
        the first member to wait), as upstream's schedulingCycle activates them."""
        state = result.cycle_state
        if state is None:
            return
        for uid in state.get(PODS_TO_ACTIVATE) or ():
            self.state.queue.activate_or_remember(uid)

    def _hand_over(self, qp: QueuedPod, fw: Framework, result: ScheduleResult,
                   start: float, nominating: str | None = None) -> None:
        """Outside the lock: a placed pod to the binder, else back to the queue with
        its explanation; audited policies' findings either way."""
        pod, profile = qp.pod, fw.profile_name
        if result.audits:
            # Before the bind is handed over: a bind that completes at once forgets
            # the pod in the throttle, which must not be undone by recording it after.
            self._report_violations(pod, result, profile)
        if result.node is not None:
            if self.verbosity >= 2:
                log.info("assumed %s on %s", pod.key, result.node,
                         extra={"v": 2, "pod": pod.key, "node": result.node})
            self._report_exemptions(pod, fw, result.node, profile)
            # The cycle state goes with it: PreBind and Unreserve read what Reserve kept.
            self.binder.submit(BindRequest(qp, result.node, fw, result.cycle_state, start))
            return
        self._failed(qp, result, profile, start, nominating)

    def _deallocate(self, pod: Pod, result: ScheduleResult) -> None:
        """DynamicResources' PostFilter chose an allocated claim nobody else uses to free
        (so the pod's next attempt may allocate it elsewhere): write that, as upstream's
        PostFilter does, with an UpdateStatus clearing allocation, reservedFor and
        devices. Outside the state lock; the informer's update then moves the pod. A
        failure is logged; the next unschedulable attempt decides again."""
        assert result.cycle_state is not None
        stale = extended_claim_to_delete(result.cycle_state)
        if stale is not None and self.is_leader():
            # The pod's claim for its extended resources from an earlier attempt:
            # deleted (finalizer first), so the next attempt allocates anew.
            problem = delete_claim(ApiClaimWriter(self.binder.client), stale)
            if problem is not None:
                log.error("deleting ResourceClaim %s/%s for %s failed: %s",
                          pod.namespace, stale["metadata"].get("name"), pod.key, problem,
                          extra={"pod": pod.key})
        claim = claim_to_deallocate(result.cycle_state)
        if claim is None or not self.is_leader():
            return
        cleared = dict(claim.obj)
        cleared["status"] = {k: v for k, v in (claim.obj.get("status") or {}).items()
                             if k not in ("allocation", "reservedFor", "devices")}
        try:
            api.update_status(self.binder.client, cleared)
        except (ApiError, ValueError) as exc:
            log.error("deallocating ResourceClaim %s for %s failed: %s", claim.key, pod.key,
                      exc, extra={"pod": pod.key, "claim": claim.key})
            return
        if self.verbosity >= 5:
            log.info("deallocated ResourceClaim %s for %s", claim.key, pod.key,
                     extra={"v": 5, "pod": pod.key, "claim": claim.key})

    def _report_violations(self, pod: Pod, result: ScheduleResult, profile: str) -> None:
        """Policies in Audit mode that would have rejected nodes for this pod: each
        (policy, rule) counted in `policyd_policy_violations_total` and told in one
        Normal event the first time this pod shows it, never again on a retry, so the
        metric counts pods that violate a rule, not attempts."""
        findings = {(f.policy, f.rule): f for f in result.findings}
        if not findings:
            return
        news = self.state.throttle.audit_news(pod.uid, findings)
        if not news:
            return
        for policy, rule in news:
            self._violations(policy, rule).inc()
        message = "; ".join(findings[v].describe(result.node) for v in news)
        if self.verbosity >= 2:
            log.info("%s: %s", pod.key, message, extra={"v": 2, "pod": pod.key})
        self.events.policy_violation(pod.namespace, pod.name, pod.uid, message, profile)

    def _report_exemptions(self, pod: Pod, fw: Framework, node: str, profile: str) -> None:
        """A pod placed while a policy exception exempted it from filter rules: one
        Normal `PolicyException` event naming each (policy, rule), the exception, its
        reason and expiry, so the pod's owners see what they were let off."""
        policies = self._with_exceptions.get(fw)
        if policies is None:  # once per profile (and reload): most have no exceptions
            policies = self._with_exceptions[fw] = tuple(
                p for p in profile_policies(fw) if p.scopes.exceptions)
        if not policies:
            return
        told = [f"rule {rule} of policy {p.policy_name}: {e.describe()}"
                for p, rule, e in exemptions(policies, pod)]
        if not told:
            return
        message = f"placed on {node} with exemptions: " + "; ".join(told)
        if self.verbosity >= 2:
            log.info("%s: %s", pod.key, message, extra={"v": 2, "pod": pod.key})
        self.events.policy_exception(pod.namespace, pod.name, pod.uid, message, profile)

    def _act_on_post_filter(self, fw: Framework, pod: Pod, result: ScheduleResult,
                            post_filter_ran: bool) -> str | None:
        """Under the lock, for a pod that did not get a node: the nomination upstream's
        cycle hands its failure handler, set in the nominator now (AddNominatedPod) and
        returned for the status patch; None leaves it as it is. A preemption's API
        work starts in the background (see `policyd.daemon.preemption`)."""
        if not post_filter_ran:
            # An error, no nodes, no PostFilter plugins, a failed Reserve: upstream's
            # clearNominatedNode.
            nominating: str | None = ""
        elif result.post_filter is None:
            nominating = None  # PostFilter found nothing: ModeNoop
        else:
            nominating = result.post_filter.nominated_node
            if nominating and self.preemption is not None and self.preemption.start(
                    pod, result.post_filter, fw.profile_name):
                # All the victims, as upstream's prepareCandidateAsync observes them
                # once it has any deletion to start.
                self.metrics.preemption_victims.observe(len(result.post_filter.victims))
        if post_filter_ran and result.cycle_state is not None \
                and preemption_report(result.cycle_state) is not None:
            self.metrics.preemption_attempts.inc()
        if nominating is not None:
            self.state.cluster.nominate(pod, nominating)
        return nominating

    def _failed(self, qp: QueuedPod, result: ScheduleResult, profile: str, start: float,
                nominating: str | None = None) -> None:
        """Requeue a pod no node fits (or whose cycle erred), and explain it."""
        pod = qp.pod
        unschedulable = result.error is None
        label = "unschedulable" if unschedulable else "error"
        self.metrics.schedule_attempts.labels(label, profile).inc()
        self.metrics.attempt_latency.labels(label, profile).observe(self.clock.now() - start)
        plugins = result.diagnosis.unschedulable_plugins if unschedulable else None
        message = result.message
        # Under the state lock, as a delete is handled: a pod deleted between its
        # requeue and the throttle's entry would otherwise leave that entry behind.
        with self.state.lock:
            where = self.state.queue.requeue(qp, unschedulable=unschedulable,
                                             plugins=plugins)
            if where is None:
                return
            post, patch = self.state.throttle.check(pod.uid, message)
        reason = "Unschedulable" if unschedulable else "SchedulerError"
        # Also decided by the condition the API server last showed: a patch that
        # never landed (403, an outage longer than the retries) is sent again.
        patch = patch or not condition_shown(pod.raw, reason, message)
        # As kube-scheduler: "no fit" is a decision, shown from -v 2 (the event and
        # the condition carry it anyway); an error is shown at any verbosity.
        if not unschedulable:
            log.error("error scheduling %s: %s; retrying (-> %s queue)", pod.key,
                      message, where,
                      extra={"pod": pod.key, "queue": where, "reason": message})
        elif self.verbosity >= 2:
            log.info("%s: %s (-> %s queue)", pod.key, message, where,
                     extra={"v": 2, "pod": pod.key, "queue": where, "reason": message})
        # The nomination goes in the same status patch, when the API shows another.
        nominated = ({"nominated_node": nominating}
                     if nominating is not None and nominating != nominated_node_name(pod)
                     else {})
        self.events.failed(pod.namespace, pod.name, pod.uid, message, profile,
                           post_event=post, patch_condition=patch, reason=reason,
                           **nominated)


def _post_filter_ran(fw: Framework, result: ScheduleResult) -> bool:
    """Whether this cycle ran PostFilter (a FitError with PostFilter plugins), the
    only case in which upstream's cycle does not clear the pod's nomination."""
    return (result.error is None and result.num_nodes > 0
            and bool(fw.post_filter_plugins))
