"""The benchmark's side of the API server: filling a fresh control plane, listing it
back page by page, and a watch that records when each pod is first seen bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench import dra_workload
from bench.e2e.shapes import (
    DYNAMIC_RESOURCES,
    NAMESPACE,
    Obj,
    default_init_pods,
    measured_pod_name,
    node_body,
    node_name,
    pod_body,
    priority_class_body,
)
from policyd.devcluster import ControlPlane
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient

PODS_PATH = f"/api/v1/namespaces/{NAMESPACE}/pods"
RESOURCE_API = "/apis/resource.k8s.io/v1"
CLAIMS_PATH = f"{RESOURCE_API}/namespaces/{NAMESPACE}/resourceclaims"
# Core events: kube-scheduler posts events.k8s.io/v1 Events, policyd core v1 ones; the
# API server stores both as one resource and serves each through either API, so one
# watch here sees every scheduler's Scheduled events alike.
EVENTS_PATH = f"/api/v1/namespaces/{NAMESPACE}/events"
SCHEDULED_REASON = "Scheduled"
# Setup writes (nodes, init pods, the capacity backlog) happen before the scheduler runs,
# so how fast they go does not touch a measurement: enough threads to keep the API
# server busy on two cores.
SETUP_THREADS = 16
LIST_PAGE = 500


def bench_client(cp: ControlPlane) -> KubeClient:
    """The benchmark's own client: unthrottled, it only sets up and observes."""
    return KubeClient.connect(ConnectionSettings(
        kubeconfig=str(cp.kubeconfig_path), qps=1e6, burst=1_000_000, timeout=60))


def each(fn: Callable[[Any], Any], items: Iterable[Any], threads: int = SETUP_THREADS) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(fn, list(items)))


def populate(client: KubeClient, workload: str, scheduler: str, nodes: int,
             init_pods: int | None = None, measured: int = 0) -> int:
    """Namespace, warm-up PriorityClass, nodes and bound init pods; for
    DynamicResources also the DeviceClass, a ResourceSlice per node and the claims
    of the `measured` pods (before any pod, so a pod never waits for its claim, and
    the rate mode's paced POSTs are pods alone). Returns the init pod count."""
    init = default_init_pods(nodes) if init_pods is None else init_pods
    client.request("POST", "/api/v1/namespaces", body={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    client.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                   body=priority_class_body())
    each(lambda i: client.request("POST", "/api/v1/nodes", body=node_body(i)), range(nodes))
    if workload == DYNAMIC_RESOURCES:
        client.request("POST", f"{RESOURCE_API}/deviceclasses",
                       body=dra_workload.device_class())
        each(lambda i: client.request("POST", f"{RESOURCE_API}/resourceslices",
                                      body=dra_workload.resource_slice(node_name(i))),
             range(nodes))
        each(lambda i: client.request("POST", CLAIMS_PATH, body=dra_workload.resource_claim(
            measured_pod_name(i), NAMESPACE)), range(measured))
    each(lambda i: client.request("POST", PODS_PATH, body=pod_body(
        f"init-{i}", workload, scheduler=scheduler, node=node_name(i % nodes))),
        range(init))
    return init


def list_all(client: KubeClient, path: str, page: int = LIST_PAGE) -> Iterator[Obj]:
    """Every object at `path`, `page` at a time (limit/continue): a 15,000-node list
    never arrives as one reply."""
    token = ""
    while True:
        query: dict[str, Any] = {"limit": page}
        if token:
            query["continue"] = token
        reply = client.request("GET", path, query=query)
        yield from reply.get("items") or []
        token = str((reply.get("metadata") or {}).get("continue") or "")
        if not token:
            return


class BindWatch:
    """A watch on the benchmark namespace recording when each pod is first seen, and
    first seen bound (monotonic seconds), and calling `on_bound(name)` in the watch thread as it is:
    what must be read at the moment of a bind (the scheduler's CPU time) is read there,
    not a poll interval later."""

    def __init__(self, client: KubeClient,
                 on_bound: Callable[[str, float], None] | None = None) -> None:
        self.client = client
        self.on_bound = on_bound
        self.bound: dict[str, float] = {}
        # When each pod first appeared on the watch: latency measured between two
        # events of the same stream leaves out how long the creating POST queued.
        self.added: dict[str, float] = {}
        self._stream: Any = None
        self._stop = threading.Event()
        listed = client.request("GET", self.path, query={"limit": 1})
        self._rv = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    path = PODS_PATH
    thread_name = "bind-watch"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._stream = self.client.stream(self.path, query={
                    "watch": True, "resourceVersion": self._rv,
                    "allowWatchBookmarks": True, "timeoutSeconds": 30})
                for event in self._stream.events():
                    self._apply(event)
            except ApiError:
                if self._stop.is_set():
                    return
                time.sleep(0.2)

    def _apply(self, event: Obj) -> None:
        obj = event.get("object") or {}
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self._rv = rv
        if event.get("type") in ("ADDED", "MODIFIED"):
            self._seen(obj, time.monotonic())

    def _seen(self, obj: Obj, now: float) -> None:
        """An added or modified pod: when it first appeared, and when it was bound."""
        name = (obj.get("metadata") or {}).get("name")
        if name and name not in self.added:
            self.added[name] = now
        if name and (obj.get("spec") or {}).get("nodeName"):
            self._record(name, now)

    def _record(self, name: str, now: float) -> None:
        if name not in self.bound:
            self.bound[name] = now
            if self.on_bound is not None:
                self.on_bound(name, now)

    def wait_for(self, names: Iterable[str], timeout: float,
                 alive: Callable[[], bool] = lambda: True) -> bool:
        """Whether all `names` were bound within `timeout` (False early when `alive()`
        says the scheduler died)."""
        wanted = list(names)
        deadline = time.monotonic() + timeout
        while True:
            if all(n in self.bound for n in wanted):
                return True
            if time.monotonic() > deadline or not alive():
                return False
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.interrupt()


class ScheduledEventWatch(BindWatch):
    """A watch on the benchmark namespace's events recording when each pod's first
    Scheduled event is seen (`bound` here means: its Scheduled event arrived), calling
    `on_bound(name, at)` in the watch thread. Only events that a scheduler posted for a
    pod count (reason Scheduled, involved object a Pod)."""

    path = EVENTS_PATH
    thread_name = "event-watch"

    def _seen(self, obj: Obj, now: float) -> None:
        name = scheduled_pod(obj)
        if name:
            self._record(name, now)


def scheduled_pod(event: Obj) -> str | None:
    """The pod a core v1 Event says was scheduled, or None for any other event."""
    involved = event.get("involvedObject") or event.get("regarding") or {}
    if event.get("reason") != SCHEDULED_REASON or involved.get("kind") != "Pod":
        return None
    return str(involved.get("name") or "") or None
