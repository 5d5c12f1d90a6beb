"""The daemon's watches: one Informer per kind the scheduler reads, each wired to its
event handlers and to the watch-error and skipped-object metrics (node and pod handlers
timed as kube-scheduler times its event handlers)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from policyd.daemon.event_handlers import EventHandlers
from policyd.daemon.metrics import Metrics, label_children
from policyd.daemon.pod_group_status import PodGroupStatusController
from policyd.kube import api
from policyd.kube.client import ApiError, KubeClient
from policyd.kube.cluster_read import (
    DISRUPTION_RESOURCES,
    DRA_RESOURCES,
    POD_GROUP_RESOURCES,
    STORAGE_RESOURCES,
    WORKLOAD_RESOURCES,
    Resource,
)
from policyd.kube.informer import Handler as InformerHandler
from policyd.kube.informer import Informer
from policyd.model.pod_groups import COSCHEDULING_API

Obj = dict[str, Any]


@dataclass(slots=True)
class ClusterWatches:
    """What scheduling waits for (`synced`): nodes, pods, and `extra`, what the plugins
    read besides them (namespaces, workloads, storage, DRA and disruption kinds)."""

    nodes: Informer
    pods: Informer
    extra: list[Informer]


class Handler:
    """Adapts three callbacks to the informer's handler protocol."""

    def __init__(self, add: Callable[[Obj], None], update: Callable[[Obj, Obj], None],
                 delete: Callable[[Obj], None]) -> None:
        self._add, self._update, self._delete = add, update, delete

    def on_add(self, obj: Obj) -> None:
        self._add(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._update(old, new)

    def on_delete(self, obj: Obj) -> None:
        self._delete(obj)


class Tee:
    """Two handlers told of every change, in order (the scheduler's state first)."""

    def __init__(self, first: InformerHandler, second: InformerHandler) -> None:
        self._first, self._second = first, second

    def on_add(self, obj: Obj) -> None:
        self._first.on_add(obj)
        self._second.on_add(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._first.on_update(old, new)
        self._second.on_update(old, new)

    def on_delete(self, obj: Obj) -> None:
        self._first.on_delete(obj)
        self._second.on_delete(obj)


def _pod_group_handler(sch: EventHandlers, r: Resource,
                       status: PodGroupStatusController | None) -> InformerHandler:
    handler: InformerHandler = Handler(partial(sch.on_pod_group, r.api_version),
                                       partial(sch.on_pod_group_update, r.api_version),
                                       partial(sch.on_pod_group_delete, r.api_version))
    if status is not None and r.api_version == COSCHEDULING_API:
        handler = Tee(handler, Handler(status.on_group, status.on_group_update,
                                       status.on_group_delete))
    return handler


def _pod_label(obj: Obj, action: str) -> str:
    """kube-scheduler's event label of a pod event: assigned pods and pods still to be
    scheduled are handled apart (AssignedPodAdd, UnschedulablePodAdd, ...)."""
    spec = obj.get("spec")
    assigned = isinstance(spec, dict) and bool(spec.get("nodeName"))
    return f"{'AssignedPod' if assigned else 'UnschedulablePod'}{action}"


def timed_handler(metrics: Metrics, add: Callable[[Obj], None],
                  update: Callable[[Obj, Obj], None], delete: Callable[[Obj], None],
                  label: Callable[[Obj, str], str]) -> Handler:
    """A Handler whose calls are timed into scheduler_event_handling_duration_seconds,
    each under `label(object, "Add" | "Update" | "Delete")`."""
    child = label_children(metrics.event_handling)

    def timed(action: str, fn: Callable[..., None], *objs: Obj) -> None:
        t0 = time.perf_counter()
        try:
            fn(*objs)
        finally:
            child(label(objs[-1], action)).observe(time.perf_counter() - t0)

    return Handler(partial(timed, "Add", add), partial(timed, "Update", update),
                   partial(timed, "Delete", delete))


def watch_error_counter(metrics: Metrics, resource: str) -> Callable[[ApiError], None]:
    """An informer's `on_error`: policyd_watch_errors_total{resource}."""
    return lambda exc: metrics.watch_errors.labels(resource).inc()


def skip_counter(metrics: Metrics, resource: str) -> Callable[[str], None]:
    """An informer's `on_skip`: policyd_objects_skipped_total{resource, reason}."""
    return lambda reason: metrics.objects_skipped.labels(resource, reason).inc()


def cluster_watches(client: KubeClient, sch: EventHandlers, metrics: Metrics,
                    watch_timeout: float,
                    pod_group_status: PodGroupStatusController | None = None
                    ) -> ClusterWatches:
    """An informer per kind the scheduling state is built from, not started;
    `pod_group_status` is told of every pod and scheduler-plugins PodGroup too."""
    def informer(path: str, handler: InformerHandler, name: str, counted_as: str, *,
                 errors_counted: bool = True, optional: bool = False) -> Informer:
        return Informer(client, path, handler, name=name, watch_timeout=watch_timeout,
                        on_error=watch_error_counter(metrics, counted_as)
                        if errors_counted else None,
                        on_skip=skip_counter(metrics, counted_as), optional=optional)

    def kind_informer(r: Resource, add: Callable[[str, Obj], None],
                      update: Callable[[str, Obj, Obj], None],
                      delete: Callable[[str, Obj], None], *,
                      optional: bool = False) -> Informer:
        # Each handler is told the kind; metrics count under the resource's name.
        return informer(r.path, Handler(partial(add, r.kind), partial(update, r.kind),
                                        partial(delete, r.kind)), r.kind, r.name,
                        optional=optional)

    nodes = informer("/api/v1/nodes", timed_handler(
        metrics, sch.on_node_add, sch.on_node_update, sch.on_node_delete,
        lambda _, action: f"Node{action}"), "nodes", "nodes")
    pod_handler: InformerHandler = timed_handler(
        metrics, sch.on_pod_add, sch.on_pod_update, sch.on_pod_delete, _pod_label)
    if pod_group_status is not None:
        pod_handler = Tee(pod_handler, Handler(pod_group_status.on_pod,
                                               pod_group_status.on_pod_update,
                                               pod_group_status.on_pod_delete))
    pods = informer("/api/v1/pods", pod_handler, "pods", "pods")
    # What the plugins read besides nodes and pods: namespace labels (affinity
    # namespaceSelector) and the workloads behind default topology spreading. Their
    # watch errors were never counted; that stays so.
    extra = [informer("/api/v1/namespaces", Handler(
        sch.on_namespace, lambda old, new: sch.on_namespace(new),
        lambda o: sch.on_namespace(o, deleted=True)), "namespaces", "namespaces",
        errors_counted=False)]
    extra += [informer(r.path, Handler(
        partial(sch.on_workload, r.kind), partial(sch.on_workload_update, r.kind),
        partial(sch.on_workload, r.kind, deleted=True)), r.kind, r.name,
        errors_counted=False) for r in WORKLOAD_RESOURCES]
    extra += [kind_informer(r, sch.on_storage, sch.on_storage_update, sch.on_storage_delete)
              for r in STORAGE_RESOURCES]
    # What DynamicResources reads. resource.k8s.io may be turned off on a server
    # (--runtime-config): then these stay empty rather than hold scheduling back.
    extra += [kind_informer(r, sch.on_dra, sch.on_dra_update, sch.on_dra_delete,
                            optional=True) for r in DRA_RESOURCES]
    # Pod groups of either API; each may not be served (an alpha version, a CRD).
    extra += [informer(r.path, _pod_group_handler(sch, r, pod_group_status),
                       f"{r.name}.{r.group}", r.name, optional=True)
              for r in POD_GROUP_RESOURCES]
    extra += [kind_informer(r, sch.on_disruption, sch.on_disruption_update,
                            sch.on_disruption_delete) for r in DISRUPTION_RESOURCES]
    return ClusterWatches(nodes, pods, extra)


def policy_informer(client: KubeClient, handler: InformerHandler, metrics: Metrics,
                    watch_timeout: float) -> Informer:
    """The SchedulingPolicy watch (`clusterPolicies: true`), not started."""
    resource = api.SCHEDULING_POLICIES.rsplit("/", 1)[-1]
    return Informer(client, api.SCHEDULING_POLICIES, handler, name=resource,
                    watch_timeout=watch_timeout,
                    on_error=watch_error_counter(metrics, resource),
                    on_skip=skip_counter(metrics, resource))
