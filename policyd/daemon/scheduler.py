"""The scheduling loop: informer events in, bindings and events out.

Concurrency: informer threads, the scheduling loop and the binder pool share one
`ClusterState` under `self.lock` (lock order: `self.lock`, then the queue's own lock;
the queue never calls back). A cycle holds the lock from decision to `assume`, so a
placement counts on its node before the next pod is considered; binding then runs in
a bounded pool without the lock.

Requeueing follows upstream's queueing hints: every informer change that can matter is
turned into a cluster event (a bound pod added, confirmed, updated or deleted; a node
added, updated in the fields it changed, or deleted) and handed to the queue, which
moves only the unschedulable pods whose rejecting plugins registered that event and
whose hints say it may help (see `policyd.framework.events`). At `-v 4` every event
that finds unschedulable pods logs how many it moved, and which.

A pod is never bound twice: it is dropped from the queue once assumed, the loop skips
pods that are assumed or bound, the Binding carries the pod's uid as a precondition,
and a 409 is never retried (when an earlier attempt that timed out had in fact
succeeded, the pod is read back to confirm it is on our node).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from policyd.daemon.events import EventSink, FailureThrottle, condition_shown
from policyd.daemon.metrics import Metrics, instrument
from policyd.daemon.queue import (
    FLUSH_UNSCHEDULABLE_PERIOD,
    UNSCHEDULABLE,
    QueuedPod,
    SchedulingQueue,
)
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.errors import InvalidObjectError
from policyd.framework.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_DELETE,
    ClusterEvent,
    ClusterEventWithHint,
    node_update_events,
    pod_update_events,
)
from policyd.framework.runtime import Framework
from policyd.kube import api
from policyd.kube.backoff import Backoff
from policyd.kube.client import ApiError, KubeClient
from policyd.model.cluster import ClusterState
from policyd.model.records import Node, Pod, node_from_dict, pod_from_dict

log = logging.getLogger("policyd.daemon.scheduler")

Obj = dict[str, Any]

BIND_DEADLINE = 60.0  # give up retrying a bind after this long, then requeue
MOVED_PODS_LOGGED = 10  # pod keys named per event in the -v 4 log line


class Scheduler:
    def __init__(
        self,
        client: KubeClient,
        frameworks: dict[str, Framework],
        *,
        metrics: Metrics,
        events: EventSink,
        is_leader: Callable[[], bool] = lambda: True,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        binders: int = 16,
        verbosity: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.metrics = metrics
        for fw in frameworks.values():
            instrument(fw, metrics)
        self.frameworks = frameworks
        self.events = events
        self.is_leader = is_leader
        self.verbosity = verbosity
        self.clock = clock
        self.lock = threading.RLock()
        self.cluster = ClusterState()
        self.queue = SchedulingQueue(self._less, clock=clock, initial_backoff=initial_backoff,
                                     max_backoff=max_backoff)
        self.queue.set_hints(_hints_of(frameworks))
        self.assumed: dict[str, str] = {}  # pod uid -> node, until the API shows it bound
        self.throttle = FailureThrottle(clock)
        self._pool = ThreadPoolExecutor(max_workers=binders, thread_name_prefix="policyd-bind")
        self._binds_in_flight = 0
        self._binds_cond = threading.Condition()
        self._bad_objects: dict[str, str] = {}  # uid -> resourceVersion already reported
        self._workloads: dict[str, dict[str, Obj]] = {}  # kind -> ns/name -> object
        self.stopping = threading.Event()
        self._abandon = threading.Event()  # the shutdown grace period is over
        self.bound_total = 0
        self.heartbeat = clock()  # the loop's last round, for /healthz

    # -- profiles -----------------------------------------------------------------------

    def _less(self, a: Pod, b: Pod) -> bool:
        # Upstream requires every profile to share one QueueSort; take the first's.
        fw = next(iter(self.frameworks.values()), None)
        if fw is None:
            return a.creation_timestamp < b.creation_timestamp
        return fw.less(a, b)

    def set_frameworks(self, frameworks: dict[str, Framework]) -> None:
        """Swap profiles (hot reload) and give every waiting pod another chance."""
        for fw in frameworks.values():
            instrument(fw, self.metrics)
        with self.lock:
            self.frameworks = frameworks
            self.queue.set_less(self._less)
            self.queue.set_hints(_hints_of(frameworks))
            for uid, qp in list(self._queued_items()):
                if qp.pod.scheduler_name not in frameworks:
                    self.queue.delete(uid)
            for pod in self.cluster.pending_pods():
                if self._responsible(pod) and pod.uid not in self.queue:
                    self.queue.add(pod)
            self.queue.move_all("PolicyReload")

    def _queued_items(self) -> list[tuple[str, QueuedPod]]:
        out = []
        for pod in self.cluster.pending_pods():
            qp = self.queue.get(pod.uid)
            if qp is not None:
                out.append((pod.uid, qp))
        return out

    def debug_queue(self) -> dict[str, Any]:
        """Pending pods with their queue, attempts and last failure message, oldest
        first: what /debug/queue serves."""
        now = self.clock()
        pods: list[dict[str, Any]] = []
        for pod, where, attempts, added, requeued, plugins in self.queue.pending():
            pods.append({
                "pod": pod.key, "uid": pod.uid, "schedulerName": pod.scheduler_name,
                "queue": where, "attempts": attempts,
                "pendingSeconds": round(now - added, 3),
                "sinceRequeueSeconds": round(now - requeued, 3),
                "unschedulablePlugins": sorted(plugins),
                "lastFailure": self.throttle.last_message(pod.uid)})
        pods.sort(key=lambda p: -p["pendingSeconds"])
        return {"counts": self.queue.counts(), "pods": pods}

    def nodes_snapshot(self) -> list[Node]:
        """The current Node records (for node metric probes, from other threads)."""
        with self.lock:
            return [info.node for info in self.cluster.node_infos()]

    def _responsible(self, pod: Pod) -> bool:
        return (pod.scheduler_name in self.frameworks and not pod.node_name
                and not pod.finished)

    # -- informer handlers: pods --------------------------------------------------------

    def _decode_pod(self, obj: Obj) -> Pod | None:
        try:
            return pod_from_dict(obj)
        except InvalidObjectError as exc:
            raw_meta, raw_spec = obj.get("metadata"), obj.get("spec")
            meta: Obj = raw_meta if isinstance(raw_meta, dict) else {}
            spec: Obj = raw_spec if isinstance(raw_spec, dict) else {}
            uid = str(meta.get("uid") or "")
            rv = str(meta.get("resourceVersion") or "")
            self.metrics.objects_skipped.labels("pods", "invalid").inc()
            if self._bad_objects.get(uid) != rv:
                self._bad_objects[uid] = rv
                log.error("skipping malformed pod: %s", exc)
                if (self.is_leader() and spec.get("schedulerName") in self.frameworks
                        and meta.get("namespace") and meta.get("name")):
                    self.events.event(api.pod_ref(str(meta["namespace"]), str(meta["name"]),
                                                  uid), "Warning", "FailedScheduling",
                                      f"policyd cannot read this pod: {exc.message}",
                                      "Scheduling", str(spec["schedulerName"]))
            return None

    def on_pod_add(self, obj: Obj) -> None:
        pod = self._decode_pod(obj)
        if pod is not None:
            self._pod_changed(None, pod)

    def on_pod_update(self, old: Obj, new: Obj) -> None:
        pod = self._decode_pod(new)
        if pod is None:
            # Unreadable now: stop trying to schedule it (it stays counted as it was).
            uid = str((new.get("metadata") or {}).get("uid") or "")
            with self.lock:
                self.queue.delete(uid)
            return
        self._pod_changed(old, pod)

    def _pod_changed(self, old: Obj | None, pod: Pod) -> None:
        with self.lock:
            uid = pod.uid
            was_on = self.cluster.node_of(uid)
            if uid in self.assumed and not pod.node_name and not pod.finished:
                # Our binding is in flight; the API has not caught up. Keep the
                # assumption so the pod keeps counting on its node.
                return
            confirmed = self.assumed.pop(uid, None) is not None
            before = self._counted_pod(uid) if was_on else None
            self.cluster.upsert_pod(pod)
            if pod.node_name or pod.finished:
                # Bound (by us or anyone) or finished: nothing left to schedule.
                self.queue.delete(uid)
                self.throttle.forget(uid)
            elif self._responsible(pod) and not pod.deleting:
                self.queue.add(pod)
            else:
                self.queue.delete(uid)
            counted = self.cluster.node_of(uid) is not None
            if counted and (not was_on or confirmed):
                # Bound now: by another scheduler, created bound, or our own binding
                # confirmed (upstream's informer sees each as an assigned pod added).
                self._move(ASSIGNED_POD_ADD, None, pod)
            elif was_on and not counted:
                # Finished (or gone from its node): its resources are free now.
                self._move(ASSIGNED_POD_DELETE, before, None)
            elif was_on and counted and before is not None and old is not None:
                for event in pod_update_events(before, pod):
                    self._move(event, before, pod)

    def on_pod_delete(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        with self.lock:
            assumed_on = self.assumed.pop(uid, None)
            removed = self.cluster.remove_pod(uid)
            self.throttle.forget(uid)
            self._bad_objects.pop(uid, None)
            self.queue.delete(uid)
            if removed is not None and assumed_on is not None and not removed.node_name:
                removed = dataclasses.replace(removed, node_name=assumed_on, cache={})
            if removed is not None and removed.node_name:
                self._move(ASSIGNED_POD_DELETE, removed, None)

    def _counted_pod(self, uid: str) -> Pod | None:
        """Under the lock: the record of a pod counted on a node, as last seen."""
        node = self.cluster.node_of(uid)
        info = self.cluster.get(node) if node is not None else None
        return info.pods.get(uid) if info is not None else None

    def _move(self, event: ClusterEvent, old: Any, new: Any) -> None:
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

    # -- informer handlers: nodes -------------------------------------------------------

    def on_node_add(self, obj: Obj) -> None:
        self._node_changed(obj)

    def on_node_update(self, old: Obj, new: Obj) -> None:
        self._node_changed(new)

    def _node_changed(self, obj: Obj) -> None:
        try:
            node = node_from_dict(obj)
        except InvalidObjectError as exc:
            self.metrics.objects_skipped.labels("nodes", "invalid").inc()
            log.error("skipping malformed node: %s", exc)
            return
        with self.lock:
            known = self.cluster.get(node.name)
            before = known.node if known is not None else None
            self.cluster.upsert_node(node)
            if before is None:
                self._move(NODE_ADD, None, node)
                return
            # One event per kind of change (labels, taints, allocatable...); a status
            # heartbeat is none of them and moves nothing.
            for event in node_update_events(before, node):
                self._move(event, before, node)

    def on_node_delete(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        with self.lock:
            known = self.cluster.get(name)
            self.cluster.remove_node(name, str(meta.get("uid") or name))
            if known is not None and self.cluster.get(name) is None:
                self._move(NODE_DELETE, known.node, None)

    # -- informer handlers: namespaces and workloads -------------------------------------

    def on_namespace(self, obj: Obj, deleted: bool = False) -> None:
        """Namespace labels, for namespaceSelector in pod (anti-)affinity terms."""
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str):
            return
        labels = meta.get("labels") or {}
        with self.lock:
            if deleted:
                self.cluster.namespace_labels.pop(name, None)
            elif isinstance(labels, dict):
                self.cluster.namespace_labels[name] = {str(k): str(v)
                                                       for k, v in labels.items()}

    def on_workload(self, kind: str, obj: Obj, deleted: bool = False) -> None:
        """Services, ReplicaSets, StatefulSets, ReplicationControllers: the selectors
        behind PodTopologySpread's system default constraints."""
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        with self.lock:
            objs = self._workloads.setdefault(kind, {})
            if deleted:
                objs.pop(key, None)
            else:
                objs[key] = obj
            # Replaced, never edited in place: plugins memoize by object identity.
            self.cluster.workloads[kind] = list(objs.values())

    def on_workload_update(self, kind: str, old: Obj, new: Obj) -> None:
        self.on_workload(kind, new)

    # -- the loop -----------------------------------------------------------------------

    def run(self, stop: threading.Event, ready: Callable[[], bool]) -> None:
        """Schedule until `stop` (or `self.stopping`) is set. Waits for the caches and
        for leadership; never starts a cycle without both."""
        next_flush = self.clock() + FLUSH_UNSCHEDULABLE_PERIOD
        while not stop.is_set() and not self.stopping.is_set():
            self.heartbeat = self.clock()
            if not ready() or not self.is_leader():
                stop.wait(0.1)
                continue
            if self.clock() >= next_flush:
                self.queue.flush()
                next_flush = self.clock() + FLUSH_UNSCHEDULABLE_PERIOD
            qp = self.queue.pop(timeout=0.2)
            if qp is None:
                continue
            if stop.is_set() or self.stopping.is_set() or not self.is_leader():
                self.queue.requeue_active(qp)
                continue
            try:
                self.schedule(qp)
            except Exception:
                # A bug in one cycle must not stop the scheduler: back off this pod.
                log.exception("scheduling %s failed", qp.pod.key)
                self.queue.requeue(qp, unschedulable=False)

    def schedule(self, qp: QueuedPod) -> ScheduleResult | None:
        """One cycle for one popped pod."""
        pod = qp.pod
        start = self.clock()
        with self.lock:
            fw = self.frameworks.get(pod.scheduler_name)
            if (fw is None or qp.deleted or pod.deleting or pod.uid in self.assumed
                    or self.cluster.node_of(pod.uid) is not None):
                self.queue.done(pod.uid)
                return None
            t0 = time.perf_counter()
            result = schedule_one(fw, pod, self.cluster)
            self.metrics.algorithm_latency.labels(fw.profile_name).observe(
                time.perf_counter() - t0)
            if result.node is not None:
                self.cluster.assume(pod, result.node)
                self.assumed[pod.uid] = result.node
                self.queue.done(pod.uid)
                self._binds_started()
        profile = fw.profile_name
        if result.node is not None:
            if self.verbosity >= 2:
                log.info("assumed %s on %s", pod.key, result.node,
                         extra={"pod": pod.key, "node": result.node})
            try:
                self._pool.submit(self._bind, qp, result.node, profile, start)
            except RuntimeError:  # pool shut down: we are stopping
                self._binds_done()
                self._bind_failed(qp, result.node, profile, "scheduler stopping")
            return result
        unschedulable = result.error is None
        label = "unschedulable" if unschedulable else "error"
        self.metrics.schedule_attempts.labels(label, profile).inc()
        self.metrics.attempt_latency.labels(label, profile).observe(self.clock() - start)
        plugins = result.diagnosis.unschedulable_plugins if unschedulable else None
        where = self.queue.requeue(qp, unschedulable=unschedulable, plugins=plugins)
        message = result.message
        if where is not None:
            post, patch = self.throttle.check(pod.uid, message)
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
                         extra={"pod": pod.key, "queue": where, "reason": message})
            self.events.failed(pod.namespace, pod.name, pod.uid, message, profile,
                               post_event=post, patch_condition=patch, reason=reason)
        return result

    # -- binding --------------------------------------------------------------------------

    def _binds_started(self) -> None:
        with self._binds_cond:
            self._binds_in_flight += 1

    def _binds_done(self) -> None:
        with self._binds_cond:
            self._binds_in_flight -= 1
            self._binds_cond.notify_all()

    def wait_binds(self, timeout: float) -> bool:
        """Wait for in-flight binds (graceful shutdown). True if all finished."""
        deadline = time.monotonic() + timeout
        with self._binds_cond:
            while self._binds_in_flight > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._binds_cond.wait(remaining)
        return True

    def _bind(self, qp: QueuedPod, node: str, profile: str, start: float) -> None:
        try:
            self._bind_with_retries(qp, node, profile, start)
        except Exception:
            log.exception("binding %s failed", qp.pod.key)
            self._bind_failed(qp, node, profile, "internal error")
        finally:
            self._binds_done()

    def _bind_with_retries(self, qp: QueuedPod, node: str, profile: str, start: float
                           ) -> None:
        pod = qp.pod
        backoff = Backoff(initial=0.2, maximum=5.0)
        deadline = self.clock() + BIND_DEADLINE
        t0 = self.clock()
        attempted = False
        while True:
            with self.lock:
                if self.assumed.get(pod.uid) != node:
                    # The informer replaced the assumption: deleted, bound by someone
                    # else, or bound here by an earlier attempt whose reply was lost.
                    if not (attempted and self._api_shows_bound(pod, node)):
                        return
                    outcome = api.BindOutcome.BOUND
                    break
            if not self.is_leader():
                self._bind_failed(qp, node, profile, "lost leadership before binding")
                return
            try:
                attempted = True
                outcome = api.bind_pod(self.client, pod.namespace, pod.name, pod.uid, node)
                break
            except ApiError as exc:
                self.metrics.bind_errors.labels(str(exc.status or exc.reason)).inc()
                if not exc.transient or self.clock() >= deadline:
                    self._bind_failed(qp, node, profile, f"binding rejected: {exc}")
                    return
                # At least the server's Retry-After (a 429 or 5xx), bounded.
                delay = backoff.next_delay(exc.retry_after)
                if self.clock() + delay > deadline:
                    # Retrying sooner than asked would be throttled again: requeue.
                    self._bind_failed(qp, node, profile, f"binding rejected: {exc}")
                    return
                log.warning("binding %s to %s: attempt %d failed: %s; retrying in %.1fs",
                            pod.key, node, backoff.attempts, exc, delay)
                # Retries go on during a graceful stop, until its grace period is over.
                if self._abandon.wait(delay):
                    self._bind_failed(qp, node, profile, "scheduler stopping")
                    return
        self.metrics.binding_latency.observe(self.clock() - t0)
        if outcome is api.BindOutcome.ALREADY_BOUND:
            outcome = self._confirm(pod, node)
        if outcome is api.BindOutcome.BOUND:
            self.bound_total += 1
            self.metrics.schedule_attempts.labels("scheduled", profile).inc()
            self.metrics.attempt_latency.labels("scheduled", profile).observe(
                self.clock() - start)
            self.metrics.e2e_latency.labels(profile).observe(self.clock() - qp.added)
            self.throttle.forget(pod.uid)
            if self.verbosity >= 1:
                log.info("bound %s to %s", pod.key, node,
                         extra={"pod": pod.key, "node": node})
            self.events.scheduled(pod.namespace, pod.name, pod.uid, node, profile)
            return
        # Gone, or bound elsewhere: the informer brings the truth; drop the assumption
        # only if it is still ours (the informer may already have replaced it).
        with self.lock:
            if self.assumed.get(pod.uid) == node:
                del self.assumed[pod.uid]
                self.cluster.remove_pod(pod.uid)
        log.info("not binding %s: %s", pod.key,
                 "deleted" if outcome is api.BindOutcome.GONE else "already bound")

    def _confirm(self, pod: Pod, node: str) -> api.BindOutcome:
        """After a 409: did an earlier attempt of ours (that timed out) bind it here?"""
        try:
            current = api.get_pod(self.client, pod.namespace, pod.name)
        except ApiError:
            # Cannot ask: trust what the informer has shown so far.
            with self.lock:
                return (api.BindOutcome.BOUND if self._api_shows_bound(pod, node)
                        else api.BindOutcome.ALREADY_BOUND)
        if current is None:
            return api.BindOutcome.GONE
        meta, spec = current.get("metadata") or {}, current.get("spec") or {}
        if meta.get("uid") == pod.uid and spec.get("nodeName") == node:
            return api.BindOutcome.BOUND
        return api.BindOutcome.ALREADY_BOUND

    def _api_shows_bound(self, pod: Pod, node: str) -> bool:
        """Under the lock: the informer has shown this very pod bound to `node`."""
        return pod.uid not in self.assumed and self.cluster.node_of(pod.uid) == node

    def _bind_failed(self, qp: QueuedPod, node: str, profile: str, message: str) -> None:
        """Undo the assumption and retry the pod after a backoff."""
        pod = qp.pod
        with self.lock:
            if self.assumed.get(pod.uid) != node:
                return  # deleted or bound meanwhile: nothing to undo
            del self.assumed[pod.uid]
            self.cluster.forget(pod)
            self.metrics.schedule_attempts.labels("error", profile).inc()
            where = self.queue.requeue(qp, unschedulable=False)
            # The room it held is free again (upstream moves pods on this too).
            self._move(ASSIGNED_POD_DELETE, dataclasses.replace(pod, node_name=node, cache={}),
                       None)
        log.warning("binding %s to %s failed: %s; requeued (%s)", pod.key, node, message,
                    where)
        if "leadership" not in message and "stopping" not in message:
            self.events.failed(pod.namespace, pod.name, pod.uid, message, profile,
                               post_event=True, patch_condition=False)

    # -- lifecycle ------------------------------------------------------------------------

    def update_gauges(self) -> None:
        for name, n in self.queue.counts().items():
            self.metrics.pending_pods.labels(name).set(n)

    def shutdown(self, grace: float) -> bool:
        """Stop taking pods, let in-flight binds finish within `grace` seconds."""
        self.stopping.set()
        self.queue.close()
        finished = self.wait_binds(grace)
        self._abandon.set()  # binds still retrying give up now
        self._pool.shutdown(wait=False, cancel_futures=True)
        return finished


def _hints_of(frameworks: dict[str, Framework]
              ) -> dict[str, list[tuple[str, ClusterEventWithHint]]]:
    """Each profile's registered events and hints, keyed by its schedulerName."""
    return {name: fw.queueing_hints() for name, fw in frameworks.items()}
