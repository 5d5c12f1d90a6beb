"""The daemon's BindingHandle: a PreBind plugin's write goes out as a PUT to the path of
its kind and returns what the server stored, a refusal comes back as BindingApiError
with the server's message, `locked` holds the state lock, and `wait` ends early when
the grace period is over or the bind can no longer happen."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from policyd.daemon.binding_handle import DaemonBindingHandle
from policyd.daemon.scheduling_state import SchedulingState
from policyd.framework.interfaces import BindingApiError
from policyd.kube.client import ApiError, KubeClient
from policyd.model.cluster import ClusterState
from tests.clocks import ManualClock

Obj = dict[str, Any]


class Server:
    """Records each request; answers a PUT with the body at the next resourceVersion
    (a GET with resourceVersion 9), or raises `error`."""

    def __init__(self, error: ApiError | None = None) -> None:
        self.error = error
        self.requests: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Obj:
        self.requests.append((method, path, body))
        if self.error is not None:
            raise self.error
        if method == "GET":
            return {"metadata": {"resourceVersion": "9"}}
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "8"}}


def _handle(server: Server, clock: ManualClock | None = None,
            abandon: threading.Event | None = None, worth: list[bool] | None = None
            ) -> tuple[DaemonBindingHandle, SchedulingState]:
    state = SchedulingState({}, now=lambda: 0.0, initial_backoff=1, max_backoff=1)
    flag = worth if worth is not None else [True]
    handle = DaemonBindingHandle(cast(KubeClient, server), state, clock or ManualClock(),
                                 abandon=abandon or threading.Event(),
                                 worth_waiting=lambda: flag[0])
    return handle, state


def _claim() -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-0", "namespace": "db", "resourceVersion": "7",
                         "annotations": {"volume.kubernetes.io/selected-node": "n1"}},
            "spec": {"resources": {"requests": {"storage": "1Gi"}}}}


def test_update_puts_the_whole_object_at_its_kinds_path_and_returns_the_stored_one(
        ) -> None:
    server = Server()
    handle, _ = _handle(server)
    stored = handle.update(_claim())
    assert server.requests == [
        ("PUT", "/api/v1/namespaces/db/persistentvolumeclaims/data-0", _claim())]
    assert stored["metadata"]["resourceVersion"] == "8"
    pv = {"apiVersion": "v1", "kind": "PersistentVolume",
          "metadata": {"name": "local pv", "resourceVersion": "3"}}
    handle.update(pv)
    assert server.requests[-1][:2] == ("PUT", "/api/v1/persistentvolumes/local%20pv")


def test_a_refused_update_raises_the_server_message() -> None:
    message = ('Operation cannot be fulfilled on persistentvolumeclaims "data-0": the '
               "object has been modified; please apply your changes to the latest version "
               "and try again")
    handle, _ = _handle(Server(ApiError(409, "Conflict", message)))
    with pytest.raises(BindingApiError) as err:
        handle.update(_claim())
    assert str(err.value) == message
    assert err.value.conflict  # worth reading again and retrying
    # No reply at all: the client's own description, and no conflict.
    handle, _ = _handle(Server(ApiError(0, "ConnectionRefused")))
    with pytest.raises(BindingApiError, match="0 ConnectionRefused") as err:
        handle.update(_claim())
    assert not err.value.conflict


def test_get_reads_the_object_at_its_kinds_path() -> None:
    server = Server()
    handle, _ = _handle(server)
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "gpu", "namespace": "ml", "resourceVersion": "3"}}
    assert handle.get(claim)["metadata"]["resourceVersion"] == "9"
    assert server.requests == [("GET", "/apis/resource.k8s.io/v1/namespaces/ml/"
                                       "resourceclaims/gpu", None)]


@pytest.mark.parametrize("obj, problem", [
    ({"kind": "Pod", "metadata": {"name": "p", "namespace": "d"}}, "kind 'Pod'"),
    ({"metadata": {"name": "x"}}, "kind None"),
    ({"kind": "PersistentVolume", "metadata": {}}, "without metadata.name"),
    ({"kind": "PersistentVolumeClaim", "metadata": {"name": "c"}},
     "without metadata.namespace"),
])
def test_an_object_the_scheduler_never_writes_is_refused_without_a_request(
        obj: Obj, problem: str) -> None:
    server = Server()
    handle, _ = _handle(server)
    with pytest.raises(BindingApiError, match=problem):
        handle.update(obj)
    assert server.requests == []


def test_locked_runs_under_the_state_lock_with_the_cluster() -> None:
    handle, state = _handle(Server())
    seen: list[Any] = []

    def probe(cluster: ClusterState) -> str:
        # Another thread cannot take the lock meanwhile.
        other = threading.Thread(target=lambda: seen.append(state.lock.acquire(timeout=0)))
        other.start()
        other.join()
        seen.append(cluster)
        return "done"

    assert handle.locked(probe) == "done"
    assert seen == [False, state.cluster]


def test_wait_sleeps_on_the_clock_and_ends_early_when_the_bind_cannot_happen() -> None:
    clock = ManualClock()
    abandon = threading.Event()
    worth = [True]
    handle, _ = _handle(Server(), clock, abandon, worth)
    t0 = handle.now()
    assert handle.wait(2.5) is False
    assert handle.now() == t0 + 2.5 and clock.waits == [2.5]
    worth[0] = False  # the pod was deleted, or this replica stepped down
    assert handle.wait(1.0) is True
    worth[0] = True
    abandon.set()  # the shutdown grace period is over
    assert handle.wait(1.0) is True
    assert clock.waits == [2.5, 1.0]  # an abandoned wait does not even sleep
