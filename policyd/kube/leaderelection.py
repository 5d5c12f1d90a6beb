"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection.

Only one replica schedules. Expiry is judged on the local monotonic clock from when
this replica last saw the lease record change (client-go's observedTime), never by
comparing the lease's timestamps with our wall clock, so clock skew between replicas
cannot give two leaders. A leader that cannot renew within `renew_deadline` (shorter
than the lease duration) stops leading on its own clock, before anyone else may take
over; `is_leader()` checks that deadline on every call, so a scheduler blocked on a
slow API server still stops at once.

Every lease request is bounded by `request_timeout` (3 s with the default 10 s renew
deadline and 2 s retry period): a renewal stuck on a frozen connection is abandoned
(the client then drops its idle connections) and the next attempt, a retry period
later, dials a new one and still ends before the renew deadline. `term` counts the
times this replica became leader, so a gate can tell one term from the next (a new
leader first confirms its caches are fresh).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from policyd.kube import api
from policyd.kube.backoff import RETRY_AFTER_MAX
from policyd.kube.client import ApiError, KubeClient

log = logging.getLogger("policyd.kube.leaderelection")


@dataclass(frozen=True, slots=True)
class LeaderElectionSettings:
    """The profile's `leaderElection` (upstream's defaults)."""

    namespace: str = "kube-system"
    name: str = "policyd"
    lease_duration: float = 15.0
    """Seconds a non-leader waits after the last renewal it saw before taking over."""
    renew_deadline: float = 10.0
    """Seconds the leader keeps leading without a successful renewal."""
    retry_period: float = 2.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4()}")


def lease_spec(identity: str, duration: float, previous: dict[str, Any] | None,
               now: str) -> dict[str, Any]:
    """The spec to write when `identity` acquires or renews: acquireTime and the
    transition count change only when the holder changes."""
    prev = previous or {}
    same = prev.get("holderIdentity") == identity
    transitions = int(prev.get("leaseTransitions") or 0)
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": max(1, int(duration)),
        "acquireTime": prev.get("acquireTime") if same and prev.get("acquireTime") else now,
        "renewTime": now,
        "leaseTransitions": transitions if same or not prev.get("holderIdentity")
        else transitions + 1,
    }


def released_spec(previous: dict[str, Any], now: str) -> dict[str, Any]:
    """What a leader writes when it steps down: no holder, so another replica can take
    the lease at once instead of waiting for it to expire."""
    return {"holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": now,
            "renewTime": now, "leaseTransitions": int(previous.get("leaseTransitions") or 0)}


def may_acquire(spec: dict[str, Any], identity: str, observed_age: float,
                lease_duration: float) -> bool:
    """Whether `identity` may write itself as holder: it holds the lease already, no
    one does, or the holder has not renewed for a full lease duration (measured from
    when we saw the record change)."""
    holder = spec.get("holderIdentity") or ""
    if not holder or holder == identity:
        return True
    duration = float(spec.get("leaseDurationSeconds") or lease_duration)
    return observed_age >= duration


class LeaderElector:
    """Acquire and renew the lease in `run(stop)`; `is_leader()` is the gate."""

    def __init__(self, client: KubeClient, settings: LeaderElectionSettings, *,
                 on_started: Callable[[], None] = lambda: None,
                 on_stopped: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.settings = settings
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.clock = clock
        self._leading = False
        self._last_renew = 0.0
        self._observed_spec: dict[str, Any] | None = None
        self._observed_rv = ""
        self._observed_time = 0.0
        self._lease: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self.lease_uid = ""
        self.term = 0

    @property
    def request_timeout(self) -> float:
        """Seconds one lease request may take. After the last renewal, the next
        attempt starts a retry period later; if it hangs on a frozen connection, the
        one after it (on a new connection) starts another retry period after it gave
        up, and must still end before the renew deadline: half of what the two retry
        periods leave, so the good attempt has as long as the frozen one. At most the
        client's read timeout."""
        s = self.settings
        return max(0.5, min((s.renew_deadline - 2 * s.retry_period) / 2,
                            self.client.settings.read_timeout))

    @property
    def identity(self) -> str:
        return self.settings.identity

    def is_leader(self) -> bool:
        with self._lock:
            return self._leading and (self.clock() - self._last_renew
                                      < self.settings.renew_deadline)

    def check(self, max_tolerable_expired: float) -> str | None:
        """A health problem, or None (client-go's LeaderElector.Check behind
        kube-scheduler's /healthz): still counting itself leader a lease duration plus
        `max_tolerable_expired` after its last renewal means the loop is stuck, since
        it should have stepped down after `renew_deadline`. A standby is healthy."""
        with self._lock:
            if not self._leading:
                return None
            age = self.clock() - self._last_renew
        if age <= self.settings.lease_duration + max_tolerable_expired:
            return None
        return (f"lease {self.settings.namespace}/{self.settings.name} not renewed for "
                f"{age:.0f}s")

    def run(self, stop: threading.Event) -> None:
        failures = 0
        not_before = 0.0  # the server's Retry-After: no attempt before this (clock)
        try:
            while not stop.is_set():
                ok = False
                if self.clock() >= not_before:
                    try:
                        ok = self.try_acquire_or_renew()
                        failures = 0
                    except ApiError as exc:
                        failures += 1
                        if exc.transient and exc.retry_after:
                            not_before = self.clock() + min(exc.retry_after,
                                                            RETRY_AFTER_MAX)
                        # One warning per outage; the retries go to debug.
                        (log.warning if failures == 1 else log.debug)(
                            "leader election: lease %s/%s: attempt %d failed: %s; "
                            "retrying in %.1fs", self.settings.namespace,
                            self.settings.name, failures, exc,
                            self._next_wait(not_before))
                self._after_attempt(ok)
                stop.wait(self._next_wait(not_before))
        finally:
            self.release()

    def _next_wait(self, not_before: float) -> float:
        """retryPeriod, or longer when the server asked for it (Retry-After), but a
        leader never sleeps past its renew deadline: it wakes up then to step down on
        time (`_after_attempt` without another attempt) instead of late."""
        now = self.clock()
        wait = max(self.settings.retry_period, not_before - now)
        with self._lock:
            if self._leading:
                left = self._last_renew + self.settings.renew_deadline - now
                wait = min(wait, max(left, 0.0) + 0.01)
        return wait

    def _after_attempt(self, ok: bool) -> None:
        started = stopped = False
        with self._lock:
            now = self.clock()
            if ok:
                self._last_renew = now
                if not self._leading:
                    self._leading = started = True
                    self.term += 1
            elif self._leading:
                held_by_other = (self._observed_spec or {}).get("holderIdentity") not in (
                    None, "", self.identity)
                if held_by_other or now - self._last_renew >= self.settings.renew_deadline:
                    self._leading = False
                    stopped = True
        if started:
            log.info("became leader (%s/%s as %s)", self.settings.namespace,
                     self.settings.name, self.identity)
            self.on_started()
        if stopped:
            log.warning("lost the lease %s/%s; stopped scheduling", self.settings.namespace,
                        self.settings.name)
            self.on_stopped()

    def try_acquire_or_renew(self) -> bool:
        s = self.settings
        now = api.now_rfc3339(micro=True)
        timeout = self.request_timeout
        lease = api.get_lease(self.client, s.namespace, s.name, timeout=timeout)
        if lease is None:
            try:
                created = api.create_lease(self.client, s.namespace, s.name,
                                           lease_spec(self.identity, s.lease_duration, None,
                                                      now), timeout=timeout)
            except ApiError as exc:
                if exc.status == 409:
                    return False  # someone else created it first
                raise
            self._observe(created)
            return True
        self._observe(lease)
        spec = lease.get("spec") or {}
        age = self.clock() - self._observed_time
        if not may_acquire(spec, self.identity, age, s.lease_duration):
            return False
        try:
            updated = api.update_lease(self.client, lease,
                                       lease_spec(self.identity, s.lease_duration, spec, now),
                                       timeout=timeout)
        except ApiError as exc:
            if exc.status == 409:
                return False  # another replica wrote in between
            raise
        self._observe(updated)
        return True

    def _observe(self, lease: dict[str, Any]) -> None:
        rv = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        self.lease_uid = str((lease.get("metadata") or {}).get("uid") or "")
        with self._lock:
            if rv != self._observed_rv:
                self._observed_rv = rv
                self._observed_spec = dict(lease.get("spec") or {})
                self._observed_time = self.clock()
            self._lease = lease

    def release(self) -> None:
        """Step down: stop leading now, then clear the holder if it is still us."""
        with self._lock:
            was_leading = self._leading
            self._leading = False
            lease = self._lease
        if not was_leading:
            return
        self.on_stopped()
        if lease is None:
            return
        try:
            current = api.get_lease(self.client, self.settings.namespace, self.settings.name,
                                    timeout=self.request_timeout)
            if current is None or (current.get("spec") or {}).get(
                    "holderIdentity") != self.identity:
                return
            api.update_lease(self.client, current,
                             released_spec(current.get("spec") or {},
                                           api.now_rfc3339(micro=True)),
                             timeout=self.request_timeout)
            log.info("released the lease %s/%s", self.settings.namespace, self.settings.name)
        except ApiError as exc:
            log.warning("could not release the lease: %s", exc)
