"""Events and the PodScheduled condition, posted off the scheduling path.

The scheduling loop and the binders only enqueue (never blocking: a full queue drops
the write); a few worker threads post, through a client with its own QPS token bucket
(as kube-scheduler's separate event client), so an event flood never spends the tokens
binds need. Writes are best effort: transient failures are retried with backoff — at
least the server's Retry-After — for up to `RETRY_FOR` seconds (an event keeps its name
across retries, so a retry after a lost reply is a harmless 409), then dropped with a
log line and counted in `policyd_events_dropped_total{reason}`: they explain
decisions, they do not make them.

Flood control: a pod that keeps failing with the same message gets its condition
patched once (it is state, not news) and a FailedScheduling event when the message
changes or after a growing interval (`FailureThrottle`), in the spirit of client-go's
event correlator. A violation of a policy in Audit mode is news once: the throttle also
remembers which (policy, rule) each pod was told of, so a pod retried in a loop gets
one `PolicyViolation` event, not one per attempt.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from policyd.clock import REAL_CLOCK, Clock
from policyd.daemon.metrics import Metrics
from policyd.daemon.thread_names import name_current_thread
from policyd.framework.fit_error import truncate_event_message
from policyd.kube import api
from policyd.kube.backoff import GiveUp, RetryPolicy
from policyd.kube.client import ApiError, KubeClient
from policyd.model.pod_groups import PodGroup, scheduled_condition_patch

log = logging.getLogger("policyd.daemon.event_recorder")

# The reason of the event that reports violations of policies in Audit mode: the word
# Kyverno's audit mode uses for its events, and the metric's
# (policyd_policy_violations_total), so one search finds both. Type Normal: nothing
# failed.
POLICY_VIOLATION = "PolicyViolation"
# A Normal event when a pod was placed with a policy rule an exception exempts it from.
POLICY_EXCEPTION = "PolicyException"

REPEAT_INITIAL = 60.0
# How long a transient failure (no connection, 429, 5xx) is retried before an event or
# condition is given up: long enough for an API server restart.
RETRY_FOR = 30.0
WRITE_RETRIES = RetryPolicy(initial=0.2, maximum=5.0, deadline=RETRY_FOR)
REPEAT_MAX = 600.0
# At most one "dropping" warning per this many seconds: a flood would otherwise turn
# into a log flood (the metric counts every drop).
DROP_LOG_INTERVAL = 10.0


@dataclass(slots=True)
class _Seen:
    message: str
    last_event: float
    interval: float
    condition_message: str


def condition_shown(pod: Mapping[str, Any], reason: str, message: str) -> bool:
    """Whether `pod` (as the API server last showed it) already carries PodScheduled
    False with this reason and message, so that patching it would change nothing."""
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") == "PodScheduled":
            return (c.get("status"), c.get("reason"), c.get("message")) == (
                "False", reason, message)
    return False


class FailureThrottle:
    """Decides, per pod, whether a failure needs a new event and/or condition patch,
    and which audited violations are news. What it remembers of a pod goes with
    `forget`, which runs when the pod is bound or deleted, so it stays bounded."""

    def __init__(self, clock: Callable[[], float] = REAL_CLOCK.now,
                 initial: float = REPEAT_INITIAL, maximum: float = REPEAT_MAX) -> None:
        self.clock = clock
        self.initial = initial
        self.maximum = maximum
        self._seen: dict[str, _Seen] = {}
        self._audited: dict[str, set[tuple[str, str]]] = {}
        self._lock = threading.Lock()

    def check(self, uid: str, message: str) -> tuple[bool, bool]:
        """(post an event, patch the condition) for this failure of pod `uid`."""
        now = self.clock()
        with self._lock:
            seen = self._seen.get(uid)
            if seen is None or seen.message != message:
                self._seen[uid] = _Seen(message, now, self.initial, message)
                return True, seen is None or seen.condition_message != message
            if now - seen.last_event >= seen.interval:
                seen.last_event = now
                seen.interval = min(self.maximum, seen.interval * 2)
                return True, False
            return False, False

    def audit_news(self, uid: str, violations: Iterable[tuple[str, str]]
                   ) -> list[tuple[str, str]]:
        """Of pod `uid`'s `violations` (policy, rule), those it has not been told of
        yet, in order; from now on they are no longer news."""
        with self._lock:
            told = self._audited.setdefault(uid, set())
            news = [v for v in dict.fromkeys(violations) if v not in told]
            told.update(news)
            return news

    def forget(self, uid: str) -> None:
        with self._lock:
            self._seen.pop(uid, None)
            self._audited.pop(uid, None)

    def last_message(self, uid: str) -> str | None:
        """The pod's last failure message (for /debug/queue), None if it never failed."""
        with self._lock:
            seen = self._seen.get(uid)
            return seen.message if seen is not None else None

    def __len__(self) -> int:
        """Pods it remembers anything about."""
        with self._lock:
            return len(self._seen.keys() | self._audited.keys())


class EventSink:
    """A bounded queue of writes and the thread that performs them."""

    def __init__(self, client: KubeClient, metrics: Metrics, instance: str,
                 maxsize: int = 10000, workers: int = 4, *,
                 retries: RetryPolicy = WRITE_RETRIES, clock: Clock = REAL_CLOCK) -> None:
        # `client` should have a token bucket of its own (`KubeClient.with_own_limiter`):
        # events must not queue binds behind them.
        self.client = client
        self.metrics = metrics
        self.instance = instance
        self.retries = retries
        self.clock = clock
        # (what it writes, for log lines; the write)
        self._q: queue.Queue[tuple[str, Callable[[], None]] | None] = queue.Queue(maxsize)
        # A few writers: one POST at a time would cap events (and so binds' Scheduled
        # events) at the round-trip rate.
        self._stopping = False
        self._last_drop_log = -DROP_LOG_INTERVAL
        self._drops_unlogged = 0
        self._drop_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, name=f"policyd-events-{i}",
                                          daemon=True) for i in range(workers)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Post what is queued (within `timeout`), then stop."""
        self._stopping = True
        deadline = self.clock.now() + timeout
        for _ in self._threads:
            try:
                self._q.put(None, timeout=max(0.0, deadline - self.clock.now()))
            except queue.Full:
                return
        for t in self._threads:
            if t.is_alive():
                t.join(max(0.0, deadline - self.clock.now()))

    def _submit(self, what: str, work: Callable[[], None]) -> None:
        try:
            self._q.put_nowait((what, work))
        except queue.Full:
            self._dropped("queue_full", what, "event queue full")

    def _dropped(self, reason: str, what: str, why: str) -> None:
        """Count a write given up; log it, at most once per DROP_LOG_INTERVAL."""
        self.metrics.events_dropped.labels(reason).inc()
        now = self.clock.now()
        with self._drop_lock:
            if now - self._last_drop_log < DROP_LOG_INTERVAL:
                self._drops_unlogged += 1
                return
            self._last_drop_log = now
            others, self._drops_unlogged = self._drops_unlogged, 0
        more = f" ({others} more dropped since the last such line)" if others else ""
        log.warning("%s; dropping the %s%s", why, what, more)

    def _run(self) -> None:
        name_current_thread()
        while True:
            item = self._q.get()
            if item is None:
                return
            what, work = item
            self._write(what, work)

    def _write(self, what: str, work: Callable[[], None]) -> None:
        """One write with its retries; past the policy's window the write is stale
        anyway, and a stopping sink retries nothing."""
        retries = self.retries.begin(self.clock.now)
        while True:
            try:
                work()
                return
            except ApiError as exc:
                delay = retries.after(exc)
                if isinstance(delay, GiveUp) or self._stopping:
                    reason = delay if isinstance(delay, GiveUp) else GiveUp.OUT_OF_TIME
                    self._dropped(reason.value, what, f"could not write it: {exc}")
                    return
                log.debug("writing the %s: attempt %d failed: %s; retrying in %.1fs",
                          what, retries.attempts, exc, delay)
                self.clock.sleep(delay)
            except Exception:
                log.exception("event writer failed")
                return

    # -- what the scheduler records ---------------------------------------------------

    def event(self, ref: api.ObjectRef, event_type: str, reason: str, message: str,
              action: str, component: str, related: api.ObjectRef | None = None) -> None:
        body = api.event_body(ref, event_type=event_type, reason=reason,
                              message=truncate_event_message(message), action=action,
                              component=component, instance=self.instance,
                              related=related)

        def post() -> None:
            try:
                api.post_event(self.client, body)
            except ApiError as exc:
                # The same event (same name) from an attempt whose reply was lost.
                if exc.status != 409:
                    raise
            self.metrics.events_emitted.labels(reason).inc()

        self._submit(f"{reason} event on {ref.kind} {ref.namespace}/{ref.name}", post)

    def scheduled(self, namespace: str, name: str, uid: str, node: str,
                  component: str) -> None:
        self.event(api.pod_ref(namespace, name, uid), "Normal", "Scheduled",
                   f"Successfully assigned {namespace}/{name} to {node}", "Binding", component)

    def policy_violation(self, namespace: str, name: str, uid: str, message: str,
                         component: str) -> None:
        """A Normal `PolicyViolation` event: what policies in Audit mode would have
        rejected for this pod (news, not a failure: the pod was scheduled as if they
        were absent)."""
        self.event(api.pod_ref(namespace, name, uid), "Normal", POLICY_VIOLATION, message,
                   "Scheduling", component)

    def policy_exception(self, namespace: str, name: str, uid: str, message: str,
                         component: str) -> None:
        """A Normal `PolicyException` event: the filter rules a policy exception exempted
        this pod from when it was placed (which exception, its reason and expiry)."""
        self.event(api.pod_ref(namespace, name, uid), "Normal", POLICY_EXCEPTION, message,
                   "Scheduling", component)

    def failed(self, namespace: str, name: str, uid: str, message: str, component: str,
               *, post_event: bool, patch_condition: bool,
               reason: str = "Unschedulable", nominated_node: str | None = None) -> None:
        """FailedScheduling and the PodScheduled condition; `nominated_node` (set, or
        "" to clear) goes into the same status patch, as upstream's updatePod."""
        if post_event:
            self.event(api.pod_ref(namespace, name, uid), "Warning", "FailedScheduling",
                       message, "Scheduling", component)
        if patch_condition or nominated_node is not None:
            def patch() -> None:
                try:
                    api.patch_pod_scheduled_false(self.client, namespace, name, message,
                                                  reason, condition=patch_condition,
                                                  nominated_node=nominated_node)
                except ApiError as exc:
                    if exc.status != 404:  # deleted meanwhile: nothing to explain
                        raise
            self._submit(f"PodScheduled condition of Pod {namespace}/{name}", patch)

    def pod_group_condition(self, group: PodGroup, status: str, reason: str,
                            message: str) -> None:
        """PodGroupScheduled on a scheduling.k8s.io PodGroup, when it changes."""
        patch = scheduled_condition_patch(group, status, reason, message, api.now_rfc3339())
        if patch is None:
            return
        namespace, name = group.key.namespace, group.key.name

        def write() -> None:
            try:
                api.patch_pod_group_status(self.client, namespace, name, patch)
            except ApiError as exc:
                if exc.status != 404:  # deleted meanwhile
                    raise
        self._submit(f"PodGroupScheduled condition of PodGroup {namespace}/{name}", write)
