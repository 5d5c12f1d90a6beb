"""A new leader confirms its caches are fresh before it schedules.

A standby keeps its caches up to date through its watches, but nothing proves a watch
is current: one stuck on a frozen connection holds a cache minutes old until its
silence bound ends it, and a replica that took the lease then would place pods on
nodes it believes empty. So each term starts with every informer listing again. A list
without a resourceVersion is a consistent read (served from etcd's latest revision, or
from a watch cache the API server has first brought up to that revision), and it
starts after the lease was written, so the cache it yields holds everything committed
before this replica became leader — including every binding of the previous leader,
which stopped binding when it could no longer renew. The alternative, comparing watch
bookmarks with the Lease's resourceVersion, would rely on resourceVersions of
different resources being comparable, which the API does not promise (they may live
in different etcd clusters).

The cost is one list per informer per leadership change, paged like the first one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from policyd.clock import REAL_CLOCK

log = logging.getLogger("policyd.daemon")


class Relistable(Protocol):
    name: str

    def request_relist(self) -> int: ...
    def listed_since(self, token: int) -> bool: ...


class CacheFreshness:
    """`begin(term)` when a term starts; `confirmed(term)` once every cache has been
    listed again since. Another term (or none begun) is never confirmed, so a gate
    that reads the elector's current term cannot pass on an earlier term's lists."""

    def __init__(self, informers: Callable[[], Sequence[Relistable]], *,
                 clock: Callable[[], float] = REAL_CLOCK.now) -> None:
        self._informers = informers
        self._clock = clock
        self._lock = threading.Lock()
        self._term = -1
        self._pending: list[tuple[Relistable, int]] = []
        self._began = 0.0

    def begin(self, term: int) -> None:
        pending = [(inf, inf.request_relist()) for inf in self._informers()]
        with self._lock:
            self._term = term
            self._pending = pending
            self._began = self._clock()
        log.info("took the lease: listing %d caches again before scheduling, so none "
                 "is older than the lease", len(pending))

    def confirmed(self, term: int) -> bool:
        with self._lock:
            if term != self._term:
                return False
            if not self._pending:
                return True
            self._pending = [(inf, token) for inf, token in self._pending
                             if not inf.listed_since(token)]
            if self._pending:
                return False
            took = self._clock() - self._began
        log.info("caches confirmed fresh %.1fs after taking the lease; scheduling", took)
        return True

    def waiting_for(self) -> list[str]:
        """The informers whose fresh list is still outstanding (for diagnostics)."""
        with self._lock:
            return [inf.name for inf, token in self._pending if not inf.listed_since(token)]
