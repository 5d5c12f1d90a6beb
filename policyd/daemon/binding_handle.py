"""What a PreBind plugin may do in the daemon: write a volume binding or a claim's
allocation to the API server, read the informer-fed state under its lock, and wait
without blocking a shutdown.

One handle per bind. Its waits end early ("give up now") when the shutdown grace
period is over, when preemption calls the bind off (`pods_in_prebind`), and also when
waiting cannot lead to a bind any more: the pod was deleted (or bound by someone else)
meanwhile, or this replica no longer leads. The
plugin then fails its PreBind, and the binder undoes the reservation once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from policyd.clock import Clock
from policyd.daemon.scheduling_state import SchedulingState
from policyd.framework.interfaces import BindingApiError
from policyd.kube import api
from policyd.kube.client import ApiError, KubeClient
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod

T = TypeVar("T")
CONFLICT = 409


class DaemonBindingHandle:
    """`policyd.framework.interfaces.BindingHandle` over the daemon's client, state
    lock and clock. `abandon` is the binder's "grace period over" event; `worth_waiting`
    says whether the bind this handle serves can still happen."""

    def __init__(self, client: KubeClient, state: SchedulingState, clock: Clock, *,
                 abandon: threading.Event, worth_waiting: Callable[[], bool],
                 wake: threading.Event | None = None) -> None:
        self._client = client
        self._state = state
        self._clock = clock
        self._abandon = abandon
        self._worth_waiting = worth_waiting
        # The bind's own "stop waiting" (preemption called it off, or the binder is
        # stopping and woke it): a wait ends at once, not at its next poll.
        self._wake = wake

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT `obj`; what the server stored. The server's own message on failure
        (a 409 reads "Operation cannot be fulfilled on persistentvolumes ...", as
        upstream's binder reports it)."""
        return self._write(api.update_object, obj)

    def _write(self, call: Callable[[KubeClient, dict[str, Any]], dict[str, Any]],
               obj: dict[str, Any]) -> dict[str, Any]:
        return _translated(call, self._client, obj)

    def patch_status(self, obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        """A strategic-merge patch of `obj`'s status subresource (DynamicResources'
        Unreserve taking the pod out of a claim's reservedFor)."""
        return self._write(lambda client, o: api.patch_status(client, o, patch), obj)

    def get(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` as the API server has it now (a claim re-read after a conflict)."""
        return self._write(api.get_object, obj)

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT `obj`'s status subresource (DynamicResources' claim allocation and
        reservation); what the server stored, or the server's message."""
        return self._write(api.update_status, obj)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """POST `obj` named by generateName (DynamicResources' claim for a pod's
        extended resources); what the server stored."""
        return self._write(api.create_object, obj)

    def delete(self, obj: dict[str, Any]) -> None:
        """DELETE `obj` (that claim, when the pod's attempt is given up)."""
        self._write(_deleted, obj)

    def patch_pod_status(self, pod: Pod, patch: dict[str, Any]) -> None:
        """A strategic-merge patch of the pod's status (its
        extendedResourceClaimStatus)."""
        try:
            api.patch_pod_status(self._client, pod.namespace, pod.name, patch)
        except ApiError as exc:
            raise BindingApiError(exc.message or str(exc),
                                  conflict=exc.status == CONFLICT) from exc

    def locked(self, fn: Callable[[ClusterState], T]) -> T:
        with self._state.lock:
            return fn(self._state.cluster)

    def wait(self, seconds: float) -> bool:
        if self._wake is not None:
            if (self._abandon.is_set() or self._wake.is_set()
                    or self._clock.wait(self._wake, seconds)):
                return True
        elif self._clock.wait(self._abandon, seconds):
            return True
        return not self._worth_waiting()

    def now(self) -> float:
        return self._clock.now()


def _deleted(client: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    api.delete_object(client, obj)
    return obj


class ApiClaimWriter:
    """A claim's reads, updates and deletion straight through the client, for the
    scheduling loop's writes after a cycle (DynamicResources' PostFilter deleting the
    claim of a pod's extended resources from an earlier attempt), where no bind and
    so no binding handle exists."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def get(self, obj: dict[str, Any]) -> dict[str, Any]:
        return _translated(api.get_object, self._client, obj)

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        return _translated(api.update_object, self._client, obj)

    def delete(self, obj: dict[str, Any]) -> None:
        _translated(_deleted, self._client, obj)


def _translated(call: Callable[[KubeClient, dict[str, Any]], dict[str, Any]],
                client: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    try:
        return call(client, obj)
    except ApiError as exc:
        raise BindingApiError(exc.message or str(exc),
                              conflict=exc.status == CONFLICT) from exc
    except ValueError as exc:  # a kind the scheduler never writes
        raise BindingApiError(str(exc)) from exc
