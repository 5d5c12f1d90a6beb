"""One read-only look at a live cluster: everything a snapshot holds, listed page by page.

`policyd explain` and `policyd simulate` answer about the cluster as it is when they are
given no snapshot file. They list what the daemon's informers list (the same resources,
500 objects a page, list items given back their `kind` and `apiVersion`), plus the
SchedulingPolicy objects, and hand the objects to `snapshot_from_objects`: a live read
and a snapshot file then go through one decoder.

What a user may not read is said plainly, since a person (not the daemon's service
account) runs these commands: a 403 names the resource and the ClusterRole to bind
(`deploy/explain-clusterrole.yaml`). A kind an older API server does not serve (404) is
skipped with a warning; a missing SchedulingPolicy CRD means no cluster policies.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from policyd.errors import PolicydError
from policyd.kube.backoff import GiveUp, RetryPolicy
from policyd.kube.client import ApiError
from policyd.kube.official import kubeconfig_contexts
from policyd.model import disruption, dra_objects, pod_groups, storage
from policyd.policy import crd, policy_schema

if TYPE_CHECKING:
    from policyd.kube.client import KubeClient

Obj = dict[str, Any]

# Objects per list request, as the informers ask (client-go's reflector pages by 500).
PAGE_SIZE = 500
# The ClusterRole in deploy/ granting exactly the reads below; errors name it.
EXPLAIN_CLUSTER_ROLE = "policyd-explain"


@dataclass(frozen=True, slots=True)
class Resource:
    """A list path and the kind of its items."""

    path: str
    kind: str

    @property
    def api_version(self) -> str:
        """`/api/v1/...` -> v1, `/apis/apps/v1/...` -> apps/v1."""
        parts = self.path.strip("/").split("/")
        return f"{parts[1]}/{parts[2]}" if parts[0] == "apis" else parts[1]

    @property
    def name(self) -> str:
        """The resource as RBAC and kubectl name it (`persistentvolumes`)."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def group(self) -> str:
        """The API group ("" for the core group), as a ClusterRole rule names it."""
        parts = self.path.strip("/").split("/")
        return parts[1] if parts[0] == "apis" else ""


# What the scheduler reads: the daemon's informers (policyd/daemon/informers.py) and a one-off
# read list the same resources from here.
# The workloads behind default topology spreading (their selectors).
WORKLOAD_RESOURCES = (
    Resource("/api/v1/services", "Service"),
    Resource("/api/v1/replicationcontrollers", "ReplicationController"),
    Resource("/apis/apps/v1/replicasets", "ReplicaSet"),
    Resource("/apis/apps/v1/statefulsets", "StatefulSet"),
)
# What the volume plugins read: the kinds kube-scheduler watches for them.
STORAGE_RESOURCES = (
    Resource("/api/v1/persistentvolumes", storage.PERSISTENT_VOLUME),
    Resource("/api/v1/persistentvolumeclaims", storage.PERSISTENT_VOLUME_CLAIM),
    Resource("/apis/storage.k8s.io/v1/storageclasses", storage.STORAGE_CLASS),
    Resource("/apis/storage.k8s.io/v1/csinodes", storage.CSI_NODE),
    Resource("/apis/storage.k8s.io/v1/csidrivers", storage.CSI_DRIVER),
    Resource("/apis/storage.k8s.io/v1/csistoragecapacities", storage.CSI_STORAGE_CAPACITY),
    Resource("/apis/storage.k8s.io/v1/volumeattachments", storage.VOLUME_ATTACHMENT),
)
# What DynamicResources reads: the kinds kube-scheduler watches for it.
DRA_RESOURCES = (
    Resource("/apis/resource.k8s.io/v1/deviceclasses", dra_objects.DEVICE_CLASS),
    Resource("/apis/resource.k8s.io/v1/resourceslices", dra_objects.RESOURCE_SLICE),
    Resource("/apis/resource.k8s.io/v1/resourceclaims", dra_objects.RESOURCE_CLAIM),
)
# The pod groups gangs are scheduled by: upstream's (GenericWorkload, alpha: served only
# when the API server enables scheduling.k8s.io/v1alpha2) and scheduler-plugins' CRD.
POD_GROUP_RESOURCES = (
    Resource(f"/apis/{pod_groups.WORKLOAD_API}/podgroups", "PodGroup"),
    Resource(f"/apis/{pod_groups.COSCHEDULING_API}/podgroups", "PodGroup"),
)
# What preemption reads.
DISRUPTION_RESOURCES = (
    Resource("/apis/policy/v1/poddisruptionbudgets", disruption.POD_DISRUPTION_BUDGET),
    Resource("/apis/scheduling.k8s.io/v1/priorityclasses", disruption.PRIORITY_CLASS),
)
SNAPSHOT_RESOURCES = (
    Resource("/api/v1/nodes", "Node"),
    Resource("/api/v1/pods", "Pod"),
    Resource("/api/v1/namespaces", "Namespace"),
    *WORKLOAD_RESOURCES, *STORAGE_RESOURCES, *DRA_RESOURCES, *DISRUPTION_RESOURCES,
)
# The CRD's own list path and kind (policyd.policy.crd generates the CRD from them).
POLICY_RESOURCE = Resource(crd.LIST_PATH, policy_schema.KIND)
# Every resource the read lists: what the explain ClusterRole must grant, no more.
READ_RESOURCES = (*SNAPSHOT_RESOURCES, POLICY_RESOURCE)
# A read is one command's answer: a server that stays overloaded longer than this is
# reported, not waited out.
READ_RETRY = RetryPolicy(initial=0.5, maximum=5.0, deadline=30.0)


class ClusterReadError(PolicydError):
    """The cluster could not be read (forbidden, unreachable, an unexpected answer):
    the input is unreadable, exit 2."""


@dataclass(slots=True)
class ClusterRead:
    """What one read found."""

    host: str
    objects: list[Obj] = field(default_factory=list)
    """Every snapshot object, each with kind and apiVersion."""
    policies: list[Obj] | None = None
    """SchedulingPolicy objects; None when the CRD is not installed."""
    warnings: list[str] = field(default_factory=list)


def forbidden_message(resource: Resource, exc: ApiError) -> str:
    """What a 403 means for the person who ran the command, and the fix."""
    group = f" in API group {resource.group!r}" if resource.group else ""
    return (f"not allowed to list {resource.name}{group} ({exc.message or exc.reason}); "
            f"explain and simulate read it: bind the ClusterRole {EXPLAIN_CLUSTER_ROLE} "
            "(deploy/explain-clusterrole.yaml) to your user or group")


def list_all(client: KubeClient, resource: Resource, *, page_size: int = PAGE_SIZE,
             retry: RetryPolicy | None = READ_RETRY,
             sleep: Callable[[float], None] = time.sleep,
             now: Callable[[], float] = time.monotonic) -> list[Obj]:
    """Every object of `resource`, page by page, each given its kind and apiVersion
    (list items carry neither). A continue token that expired mid-list (410) starts
    the list again, as the informers do; a temporary failure (no reply, 429, 5xx) is
    retried under `retry`, at least as late as the server's Retry-After (None: the
    caller retries, the error is raised). ApiError for anything else."""
    items: list[Obj] = []
    token = ""
    retries = retry.begin(now) if retry is not None else None
    while True:
        query: dict[str, Any] = {"limit": page_size}
        if token:
            query["continue"] = token
        try:
            page = client.request("GET", resource.path, query=query)
        except ApiError as exc:
            if exc.status == 410 and token:
                items, token = [], ""
                continue
            if retries is None:
                raise
            wait = retries.after(exc)
            if isinstance(wait, GiveUp):
                raise
            if exc.status == 0:
                client.connection_failed(exc)
            sleep(wait)
            continue
        for obj in page.get("items") or []:
            if isinstance(obj, dict):
                obj.setdefault("kind", resource.kind)
                obj.setdefault("apiVersion", resource.api_version)
                items.append(obj)
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return items


def read_cluster(client: KubeClient, *, page_size: int = PAGE_SIZE,
                 sleep: Callable[[float], None] = time.sleep) -> ClusterRead:
    """List every resource a snapshot holds and the SchedulingPolicy objects.

    Raises ClusterReadError on a 403 (naming the resource and the ClusterRole to bind)
    or on a failure retrying did not cure. A snapshot kind the server does not serve
    (404) is skipped with a warning; no SchedulingPolicy CRD (404) leaves `policies`
    None."""
    read = ClusterRead(client.host)
    for resource in READ_RESOURCES:
        try:
            found = list_all(client, resource, page_size=page_size, sleep=sleep)
        except ApiError as exc:
            if exc.status == 403:
                raise ClusterReadError(forbidden_message(resource, exc),
                                       where=read.host) from None
            if exc.status == 404:
                if resource is not POLICY_RESOURCE:
                    read.warnings.append(f"{read.host}: the API server does not serve "
                                         f"{resource.path}; read without {resource.name}")
                continue
            raise ClusterReadError(f"cannot list {resource.name}: {exc}",
                                   where=read.host) from None
        if resource is POLICY_RESOURCE:
            read.policies = found
        else:
            read.objects.extend(found)
    return read


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace the kubeconfig context sets (what kubectl uses without -n), or None
    (no such file or context, none set, or in-cluster credentials). The file is the one
    the connection reads: --kubeconfig, else the first existing $KUBECONFIG entry, else
    ~/.kube/config."""
    paths = [kubeconfig] if kubeconfig else \
        [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if not paths and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        paths = [os.path.expanduser("~/.kube/config")]
    path = next((p for p in paths if os.path.exists(p)), None)
    if path is None:
        return None
    try:
        contexts, current = kubeconfig_contexts(path)
    except (OSError, ValueError):
        return None  # the connection reports what is wrong with the file
    chosen = next((c for c in contexts if c.get("name") == context), None) \
        if context else current
    ns = ((chosen or {}).get("context") or {}).get("namespace")
    return ns if isinstance(ns, str) and ns else None


__all__ = ["EXPLAIN_CLUSTER_ROLE", "PAGE_SIZE", "POLICY_RESOURCE", "READ_RESOURCES",
           "SNAPSHOT_RESOURCES", "ClusterRead",
           "ClusterReadError", "Resource", "context_namespace", "forbidden_message",
           "list_all", "read_cluster"]
