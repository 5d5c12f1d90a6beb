"""The scheduler's writes: bindings, events, the PodScheduled condition, Leases, and
the volume bindings a PreBind plugin writes (a full PersistentVolume or claim, PUT).

Request bodies are built by pure functions (tested without a cluster); the calls are
single attempts that return an outcome or raise `ApiError` — the daemon decides what
to retry, since only it knows whether it is still the leader.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any
from urllib.parse import quote

from policyd.kube.client import ApiError, KubeClient
from policyd.kube.cluster_read import PAGE_SIZE, POLICY_RESOURCE, list_all
from policyd.policy import policy_schema

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
# Custom resources take no strategic-merge patch: a JSON merge patch (RFC 7386).
MERGE_PATCH = "application/merge-patch+json"


def now_rfc3339(micro: bool = False, now: datetime | None = None) -> str:
    t = now or datetime.now(UTC)
    if micro:
        return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=4)
def _rfc3339_second(epoch_seconds: int) -> str:
    """`now_rfc3339()` of a whole second: events come by the hundred per second, and
    strftime per event was a tenth of what recording one cost."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_path(ns: str, name: str, sub: str = "") -> str:
    path = f"/api/v1/namespaces/{quote(ns, safe='')}/pods/{quote(name, safe='')}"
    return f"{path}/{sub}" if sub else path


# -- binding --------------------------------------------------------------------------

class BindOutcome(Enum):
    BOUND = "bound"  # this call bound the pod to the node
    ALREADY_BOUND = "already-bound"  # 409: bound before (elsewhere, or by an earlier try)
    GONE = "gone"  # 404: deleted


def binding_body(namespace: str, name: str, uid: str, node: str) -> dict[str, Any]:
    """A v1 Binding. The uid is a precondition: a pod deleted and re-created under the
    same name is not bound by a decision made for the old one (409 instead)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


def bind_pod(client: KubeClient, namespace: str, name: str, uid: str, node: str,
             *, timeout: float | None = None) -> BindOutcome:
    """POST pods/NAME/binding. The reply is read as raw JSON: the official client's
    `create_namespaced_pod_binding` raises while decoding the server's Status reply to
    a successful bind (kubernetes-client/python issue 547). Transient failures raise
    ApiError; 404 and 409 are outcomes, never retried. The success reply is not even
    decoded (`decode=False`): nothing in it is used."""
    try:
        client.request("POST", _pod_path(namespace, name, "binding"),
                       body=binding_body(namespace, name, uid, node), timeout=timeout,
                       decode=False)
    except ApiError as exc:
        if exc.status == 404:
            return BindOutcome.GONE
        if exc.status == 409:
            return BindOutcome.ALREADY_BOUND
        raise
    return BindOutcome.BOUND


def get_pod(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return client.request("GET", _pod_path(namespace, name))
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


# -- volume bindings (PreBind) ------------------------------------------------------------

# Where a full object of each kind a PreBind plugin may write is PUT: exactly the kinds
# upstream's volume binder updates (and deploy/rbac.yaml grants `update` on).
# Kinds the scheduler writes (PreBind): kind -> (API prefix, resource, namespaced).
_UPDATABLE = {"PersistentVolume": ("/api/v1", "persistentvolumes", False),
              "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims", True),
              "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
              # The audit's OpenReports (daemon/reports.py).
              "Report": ("/apis/openreports.io/v1alpha1", "reports", True),
              "ClusterReport": ("/apis/openreports.io/v1alpha1", "clusterreports", False)}


def object_path(obj: dict[str, Any]) -> str:
    """The API path of `obj` by its kind, name and (for namespaced kinds) namespace.
    Raises ValueError for a kind the scheduler never writes or an object without a
    name."""
    kind = obj.get("kind")
    spec = _UPDATABLE.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise ValueError(f"the scheduler does not write objects of kind {kind!r}")
    prefix, resource, namespaced = spec
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind} without metadata.name")
    if not namespaced:
        return f"{prefix}/{resource}/{quote(name, safe='')}"
    ns = meta.get("namespace")
    if not isinstance(ns, str) or not ns:
        raise ValueError(f"{kind} {name} without metadata.namespace")
    return f"{prefix}/namespaces/{quote(ns, safe='')}/{resource}/{quote(name, safe='')}"


def collection_path(obj: dict[str, Any]) -> str:
    """Where an object of `obj`'s kind is created (POST): its namespace's collection.
    Raises ValueError for a kind the scheduler never writes."""
    kind = obj.get("kind")
    spec = _UPDATABLE.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise ValueError(f"the scheduler does not write objects of kind {kind!r}")
    prefix, resource, namespaced = spec
    if not namespaced:
        return f"{prefix}/{resource}"
    ns = (obj.get("metadata") or {}).get("namespace")
    if not isinstance(ns, str) or not ns:
        raise ValueError(f"{kind} without metadata.namespace")
    return f"{prefix}/namespaces/{quote(ns, safe='')}/{resource}"


def create_object(client: KubeClient, obj: dict[str, Any], *,
                  timeout: float | None = None) -> dict[str, Any]:
    """POST `obj` (named by the server from generateName, as DynamicResources' claim
    for a pod's extended resources); what the server stored."""
    return client.request("POST", collection_path(obj), body=obj, timeout=timeout)


def delete_object(client: KubeClient, obj: dict[str, Any], *,
                  timeout: float | None = None) -> None:
    """DELETE `obj` with no options, as upstream's deleteClaim."""
    client.request("DELETE", object_path(obj), timeout=timeout, decode=False)


def patch_pod_status(client: KubeClient, namespace: str, name: str, patch: dict[str, Any],
                     *, timeout: float | None = None) -> None:
    """A strategic-merge patch of a pod's status (DynamicResources' PreBind recording
    the claim of the pod's extended resources)."""
    client.request("PATCH", _pod_path(namespace, name, "status"), body=patch,
                   content_type=STRATEGIC_MERGE, timeout=timeout, decode=False)


def patch_status(client: KubeClient, obj: dict[str, Any], patch: dict[str, Any], *,
                 timeout: float | None = None) -> dict[str, Any]:
    """A strategic-merge patch of `obj`'s status subresource."""
    return client.request("PATCH", object_path(obj) + "/status", body=patch,
                          content_type=STRATEGIC_MERGE, timeout=timeout)


def get_object(client: KubeClient, obj: dict[str, Any], *,
               timeout: float | None = None) -> dict[str, Any]:
    """GET the current version of `obj` (by its kind, namespace and name)."""
    return client.request("GET", object_path(obj), timeout=timeout)


def update_object(client: KubeClient, obj: dict[str, Any], *,
                  timeout: float | None = None) -> dict[str, Any]:
    """PUT `obj` (carrying its resourceVersion: a concurrent writer makes this a 409)
    and return what the server stored. One attempt; ApiError on any failure, as
    upstream's binder makes one Update call and lets the caller retry the pod."""
    return client.request("PUT", object_path(obj), body=obj, timeout=timeout)


def update_status(client: KubeClient, obj: dict[str, Any], *,
                  timeout: float | None = None) -> dict[str, Any]:
    """`update_object` on the status subresource (a ResourceClaim's allocation and
    reservedFor, as upstream's bindClaim writes them with UpdateStatus)."""
    return client.request("PUT", object_path(obj) + "/status", body=obj, timeout=timeout)


# -- events ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ObjectRef:
    """What an event is about (core v1 ObjectReference)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    def as_dict(self) -> dict[str, Any]:
        ref = {"apiVersion": self.api_version, "kind": self.kind,
               "namespace": self.namespace, "name": self.name}
        if self.uid:
            ref["uid"] = self.uid
        return ref


def pod_ref(namespace: str, name: str, uid: str) -> ObjectRef:
    return ObjectRef("v1", "Pod", namespace, name, uid)


def lease_ref(namespace: str, name: str, uid: str = "") -> ObjectRef:
    return ObjectRef("coordination.k8s.io/v1", "Lease", namespace, name, uid)


def event_body(ref: ObjectRef, *, event_type: str, reason: str, message: str,
               action: str, component: str, instance: str,
               now: datetime | None = None, related: ObjectRef | None = None
               ) -> dict[str, Any]:
    """A core v1 Event, the form `kubectl describe` and `kubectl get events` show (the
    `From` column is `source.component`, the scheduler's name as upstream reports it)."""
    nanos = time.time_ns() if now is None else int(now.timestamp() * 1e9)
    # One clock read for the name and the timestamps; whole seconds, as they are shown.
    t = _rfc3339_second(nanos // 1_000_000_000)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # As client-go's recorder names them: the object's name and the time in
            # hexadecimal nanoseconds (unique per object; a random suffix cost a read
            # of the OS's entropy per event).
            "name": f"{ref.name}.{nanos:x}",
            "namespace": ref.namespace or "default",
        },
        "involvedObject": ref.as_dict(),
        "reason": reason,
        "message": message,
        "type": event_type,
        "action": action,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance[:128],
        "firstTimestamp": t,
        "lastTimestamp": t,
        "count": 1,
    } | ({"related": related.as_dict()} if related is not None else {})


def post_event(client: KubeClient, body: dict[str, Any]) -> None:
    """Create an Event; the created object the server echoes back is not decoded."""
    ns = quote(body["metadata"]["namespace"], safe="")
    client.request("POST", f"/api/v1/namespaces/{ns}/events", body=body, decode=False)


# -- PodScheduled condition -----------------------------------------------------------

def pod_scheduled_patch(message: str, reason: str = "Unschedulable",
                        now: datetime | None = None, *, condition: bool = True,
                        nominated_node: str | None = None) -> dict[str, Any]:
    """A strategic merge patch of status.conditions (merged by `type`): PodScheduled
    False with the full FitError message, as `kubectl describe pod` shows it. With
    `nominated_node`, the same patch sets status.nominatedNodeName (an empty name
    removes it), as upstream's updatePod writes both in one call; `condition=False`
    leaves the condition out (only the nomination changes)."""
    status: dict[str, Any] = {}
    if condition:
        status["conditions"] = [{
            "type": "PodScheduled", "status": "False", "reason": reason,
            "message": message, "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(now=now)}]
    if nominated_node is not None:
        status["nominatedNodeName"] = nominated_node or None
    return {"status": status}


def patch_pod_scheduled_false(client: KubeClient, namespace: str, name: str, message: str,
                              reason: str = "Unschedulable", *, condition: bool = True,
                              nominated_node: str | None = None) -> None:
    client.request("PATCH", _pod_path(namespace, name, "status"),
                   body=pod_scheduled_patch(message, reason, condition=condition,
                                            nominated_node=nominated_node),
                   content_type=STRATEGIC_MERGE)


def patch_pod_group_status(client: KubeClient, namespace: str, name: str,
                           patch: dict[str, Any]) -> None:
    """A strategic-merge patch of a scheduling.k8s.io/v1alpha2 PodGroup's status (its
    conditions merge by type)."""
    client.request("PATCH", f"/apis/scheduling.k8s.io/v1alpha2/namespaces/"
                            f"{quote(namespace, safe='')}/podgroups/{quote(name, safe='')}"
                            "/status", body=patch, content_type=STRATEGIC_MERGE, decode=False)


def merge_patch_coscheduling_pod_group_status(client: KubeClient, namespace: str, name: str,
                                              patch: dict[str, Any]) -> None:
    """A JSON merge patch of a scheduling.x-k8s.io/v1alpha1 PodGroup's status (a CRD's
    status subresource), as scheduler-plugins' PodGroup controller writes it."""
    client.request("PATCH", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/"
                            f"{quote(namespace, safe='')}/podgroups/{quote(name, safe='')}"
                            "/status", body=patch, content_type=MERGE_PATCH, decode=False)


def nominated_node_patch(node: str) -> dict[str, Any]:
    """The status patch that says where a pod is going and nothing else (upstream's
    updatePod with only a NominatingInfo: the two-way merge patch of the status)."""
    return {"status": {"nominatedNodeName": node}}


def patch_nominated_node(client: KubeClient, namespace: str, name: str, node: str, *,
                         timeout: float | None = None) -> None:
    client.request("PATCH", _pod_path(namespace, name, "status"),
                   body=nominated_node_patch(node), content_type=STRATEGIC_MERGE,
                   timeout=timeout, decode=False)


# -- preemption ---------------------------------------------------------------------

def preemption_message(scheduler_name: str) -> str:
    """The DisruptionTarget condition's message upstream's preemption writes on a
    victim (a single pod preempting, not a pod group)."""
    return f"{scheduler_name}: preempting to accommodate a higher priority pod"


def disruption_target_patch(scheduler_name: str, now: datetime | None = None
                            ) -> dict[str, Any]:
    """Status patch adding DisruptionTarget=True, reason PreemptionByScheduler, to a
    victim before it is deleted: what tells its owner (and PDB accounting) why."""
    return {"status": {"conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": preemption_message(scheduler_name),
        "lastTransitionTime": now_rfc3339(now=now)}]}}


def patch_disruption_target(client: KubeClient, namespace: str, name: str,
                            scheduler_name: str, *, timeout: float | None = None) -> None:
    client.request("PATCH", _pod_path(namespace, name, "status"),
                   body=disruption_target_patch(scheduler_name),
                   content_type=STRATEGIC_MERGE, timeout=timeout, decode=False)


def clear_nominated_node(client: KubeClient, namespace: str, name: str, *,
                         timeout: float | None = None) -> None:
    """Remove status.nominatedNodeName (a pod preemption took the node from)."""
    client.request("PATCH", _pod_path(namespace, name, "status"),
                   body={"status": {"nominatedNodeName": None}},
                   content_type=STRATEGIC_MERGE, timeout=timeout, decode=False)


def delete_pod(client: KubeClient, namespace: str, name: str, uid: str = "", *,
               timeout: float | None = None) -> bool:
    """DELETE a pod with its own grace period (upstream's DeletePod sends no options).
    With `uid`, a pod re-created under the same name is not deleted (the server
    answers 409). False when the pod was already gone (404) or replaced (409)."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions",
            "preconditions": {"uid": uid}} if uid else None
    try:
        client.request("DELETE", _pod_path(namespace, name), body=body, timeout=timeout,
                       decode=False)
    except ApiError as exc:
        if exc.status in (404, 409):
            return False
        raise
    return True


# -- Leases ---------------------------------------------------------------------------

def get_lease(client: KubeClient, namespace: str, name: str, *,
              timeout: float | None = None) -> dict[str, Any] | None:
    try:
        return client.request("GET", f"{LEASES.format(ns=quote(namespace, safe=''))}/"
                                     f"{quote(name, safe='')}", timeout=timeout)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def create_lease(client: KubeClient, namespace: str, name: str, spec: dict[str, Any],
                 *, timeout: float | None = None) -> dict[str, Any]:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    return client.request("POST", LEASES.format(ns=quote(namespace, safe="")), body=body,
                          timeout=timeout)


def update_lease(client: KubeClient, lease: dict[str, Any], spec: dict[str, Any],
                 *, timeout: float | None = None) -> dict[str, Any]:
    """PUT with the lease's resourceVersion: a concurrent writer makes this a 409."""
    meta = lease["metadata"]
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "resourceVersion": meta["resourceVersion"]},
            "spec": spec}
    return client.request("PUT", f"{LEASES.format(ns=quote(meta['namespace'], safe=''))}/"
                                 f"{quote(meta['name'], safe='')}", body=body,
                          timeout=timeout)


# -- SchedulingPolicy objects (clusterPolicies: true) ---------------------------------

SCHEDULING_POLICIES = POLICY_RESOURCE.path


def scheduling_policy_path(name: str) -> str:
    return f"{SCHEDULING_POLICIES}/{quote(name, safe='')}"


def list_scheduling_policies(client: KubeClient, page_size: int = PAGE_SIZE
                             ) -> list[dict[str, Any]] | None:
    """Every SchedulingPolicy (paged, one attempt per page), or None when the API
    server does not serve the resource (404: the CRD is not installed)."""
    try:
        return list_all(client, POLICY_RESOURCE, page_size=page_size, retry=None)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def scheduling_policies_served(client: KubeClient) -> bool:
    """Whether the API server serves the resource now (one GET of at most one
    object; 404: the CRD is not installed)."""
    try:
        client.request("GET", SCHEDULING_POLICIES, query={"limit": 1})
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def list_own_reports(client: KubeClient, label_selector: str
                     ) -> list[dict[str, Any]] | None:
    """Every OpenReports Report (all namespaces) and ClusterReport the selector picks,
    or None when the API server does not serve them (404: the CRD is not installed).
    Unpaged: one object per namespace at most."""
    out: list[dict[str, Any]] = []
    for kind, resource in (("Report", "reports"), ("ClusterReport", "clusterreports")):
        try:
            reply = client.request("GET", f"/apis/openreports.io/v1alpha1/{resource}",
                                   query={"labelSelector": label_selector})
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        for item in reply.get("items") or []:
            item.setdefault("apiVersion", "openreports.io/v1alpha1")
            item.setdefault("kind", kind)
            out.append(item)
    return out


def get_scheduling_policy(client: KubeClient, name: str) -> dict[str, Any] | None:
    """The object as stored now, or None if it is gone."""
    try:
        return client.request("GET", scheduling_policy_path(name))
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def update_scheduling_policy_status(client: KubeClient, obj: dict[str, Any]
                                    ) -> dict[str, Any]:
    """PUT the status subresource (`obj` carries its resourceVersion: a concurrent
    writer makes this a 409). One attempt."""
    name = obj["metadata"]["name"]
    return client.request("PUT", f"{scheduling_policy_path(name)}/status", body=obj)


def scheduling_policy_ref(name: str, uid: str = "") -> ObjectRef:
    """A cluster-scoped object: its events go to the `default` namespace, as client-go's
    recorder puts them (`event_body` does so for an empty namespace)."""
    return ObjectRef(policy_schema.API_VERSION, policy_schema.KIND, "", name, uid)
