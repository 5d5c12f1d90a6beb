"""Writes SchedulingPolicy status (the `Accepted` condition) off the scheduling path.

One thread, one coalescing queue of wanted conditions by object name (a newer want
replaces an older one). Each write reads the object fresh, computes the status from
that copy (`cluster_policies.status_update`: nothing is written when it already says
so), and PUTs the status subresource; a 409 (someone wrote meanwhile) reads again and
retries a few times, a 404 (deleted meanwhile) drops the write, and a want for a
generation the object has moved past is dropped too (the watch brings the newer one).
Transient failures retry with the event writer's policy. Only the leader writes: a
standby's wants are dropped, and the leader's own are re-derived when it takes over.
A Warning event on the object accompanies a write that reports a newly refused
version.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from policyd.clock import REAL_CLOCK, Clock
from policyd.daemon.cluster_policies import (
    EVENT_REASONS,
    Condition,
    object_uid,
    refusal_news,
    status_update,
)
from policyd.daemon.event_recorder import WRITE_RETRIES, EventSink
from policyd.kube import api
from policyd.kube.backoff import GiveUp, RetryPolicy
from policyd.kube.client import ApiError, KubeClient
from policyd.policy.objects import object_generation

log = logging.getLogger("policyd.daemon.policy_status")

# Conflicting writers (another replica that still thinks it leads, kubectl edit
# --subresource status) are rare: a few fresh reads settle it.
CONFLICT_RETRIES = 5
COMPONENT = "policyd"


class StatusWriter:
    def __init__(self, client: KubeClient, events: EventSink, is_leader: Callable[[], bool],
                 *, clock: Clock = REAL_CLOCK, retries: RetryPolicy = WRITE_RETRIES) -> None:
        self.client = client
        self.events = events
        self.is_leader = is_leader
        self.clock = clock
        self.retries = retries
        self._wanted: dict[str, Condition] = {}  # by object name
        self._cond = threading.Condition()
        self.writes = 0  # successful PUTs (tests, debugging)

    def submit(self, wanted: dict[str, Condition]) -> None:
        """Queue conditions by object name; never blocks on the API server."""
        if not wanted:
            return
        with self._cond:
            self._wanted.update(wanted)
            self._cond.notify()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            with self._cond:
                if not self._wanted:
                    self._cond.wait(0.5)
                batch, self._wanted = self._wanted, {}
            for name, want in batch.items():
                if stop.is_set():
                    return
                try:
                    self.write(name, want)
                except Exception:  # a bug must not end the writer
                    log.exception("writing the status of schedulingpolicy/%s failed", name)

    def write(self, name: str, want: Condition) -> bool:
        """One status write with its retries; True if a PUT was made."""
        retries = self.retries.begin(self.clock.now)
        conflicts = 0
        while True:
            if not self.is_leader():
                return False
            try:
                obj = api.get_scheduling_policy(self.client, name)
                if obj is None or (want.uid and object_uid(obj) != want.uid) \
                        or object_generation(obj) != want.generation:
                    return False  # gone, re-created or newer: the watch brings the rest
                status = status_update(obj, want, api.now_rfc3339())
                if status is None:
                    return False
                news = refusal_news(obj, want)
                api.update_scheduling_policy_status(self.client, {**obj, "status": status})
            except ApiError as exc:
                if exc.status == 409 and conflicts < CONFLICT_RETRIES:
                    conflicts += 1
                    continue
                delay = retries.after(exc)
                if isinstance(delay, GiveUp) or exc.status == 409:
                    log.warning("could not write the status of schedulingpolicy/%s: %s",
                                name, exc)
                    return False
                self.clock.sleep(delay)
                continue
            self.writes += 1
            log.info("schedulingpolicy/%s: Accepted=%s (%s) for generation %s", name,
                     want.accepted, want.reason, want.generation)
            if news:
                self.events.event(api.scheduling_policy_ref(name, object_uid(obj)),
                                  "Warning", EVENT_REASONS.get(want.reason, want.reason),
                                  want.message, "Compile", COMPONENT)
            return True
