"""Load a cluster snapshot (Nodes and Pods) into a running control plane.

Demos and benchmarks replay a real cluster's state — typically the output of
``kubectl get nodes,pods -A -o yaml`` — into the local API server, where no kubelet
runs. Two API server behaviours make that possible without a kubelet: a Node created
by POST keeps the status it was sent (so its allocatable resources count), and a Pod
created with ``spec.nodeName`` is bound from the start.

Objects exported from a live cluster carry server-owned fields (resourceVersion, uid,
managedFields, ...) that a create would reject; they are stripped. Pods reference
PriorityClasses that may not exist here; those are created with the priority the pod
reports, because the Priority admission plugin refuses pods naming a missing class.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.kubeconfig import kube_client_from
from policyd.kube.api import STRATEGIC_MERGE
from policyd.kube.client import ApiError
from policyd.model.datafile import read_documents

# Creation order: what others refer to first. Workload kinds matter to kube-scheduler's
# default topology spreading, which selects pods through Services and ReplicaSets; with
# no controller manager running, creating them starts no pods.
SUPPORTED_KINDS = (
    "Namespace",
    "PriorityClass",
    "Node",
    "Service",
    "ReplicationController",
    "ReplicaSet",
    "StatefulSet",
    "Pod",
)
_SERVER_FIELDS = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
# Priority classes every API server creates itself.
_BUILTIN_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")


@dataclass
class LoadResult:
    """How many objects of each kind were created (existing ones are counted as skipped)."""

    created: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str, created: bool) -> None:
        target = self.created if created else self.skipped
        target[kind] = target.get(kind, 0) + 1

    def summary(self) -> str:
        parts = [f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in self.created.items()]
        text = "created " + (", ".join(parts) if parts else "nothing")
        if self.skipped:
            text += (
                " (already present: "
                + ", ".join(f"{n} {kind}" for kind, n in self.skipped.items())
                + ")"
            )
        return text


def flatten(docs: Iterable[Any], where: str = "snapshot") -> list[dict[str, Any]]:
    """Objects of YAML documents, expanding `List` kinds (`kind: List`, `NodeList`, ...)."""
    objects: list[dict[str, Any]] = []
    for index, doc in enumerate(docs):
        if doc is None:
            continue  # empty document, e.g. a trailing `---`
        if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
            raise DevClusterError(f"{where}: document {index + 1} is not a Kubernetes object")
        if doc["kind"].endswith("List") and isinstance(doc.get("items"), list):
            objects.extend(flatten(doc["items"], where))
        else:
            objects.append(doc)
    return objects


def read_objects(path: Path) -> list[dict[str, Any]]:
    """The Kubernetes objects of a YAML/JSON file (multi-document, or a List).

    File-level problems (missing, not UTF-8, invalid YAML/JSON) raise the model's
    `InputFileError`, exactly as for every other snapshot policyd reads.
    """
    return flatten(read_documents(path), str(path))


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name', '?')}"


def clean_for_create(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `obj` without the fields only the server may set."""
    clean = copy.deepcopy(dict(obj))
    meta = clean.get("metadata")
    if not isinstance(meta, dict):
        return clean  # check_objects reports it
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        # Megabytes of last-applied JSON in big snapshots, and meaningless here.
        annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return clean


def check_objects(objects: Iterable[Mapping[str, Any]], source: str = "") -> None:
    """Refuse kinds the loader does not handle and nameless objects, before any create;
    the message names `source` (the file) and the object's place in it."""
    where = f"{source} " if source else ""
    for i, obj in enumerate(objects):
        if obj.get("kind") not in SUPPORTED_KINDS:
            raise DevClusterError(
                f"{where}object {i + 1}: {_name(obj)}: unsupported kind (a snapshot holds "
                f"{', '.join(SUPPORTED_KINDS)})")
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            raise DevClusterError(f"{where}object {i + 1}: {_name(obj)}: metadata.name is "
                                  "missing")


def load_snapshot(kubeconfig: Path | str, objects: Iterable[Mapping[str, Any]]) -> LoadResult:
    """Create the objects of `objects` (kinds in `SUPPORTED_KINDS`) in the cluster.

    Order matters and is enforced: namespaces and priority classes first, then nodes,
    then workloads, then pods (a bound pod whose node does not exist yet would look
    orphaned). Objects that already exist are skipped, so loading twice is harmless.
    Pods keep their phase (Succeeded/Failed pods no longer use resources), set through
    the status subresource because a create always starts a pod as Pending.
    """
    items = [clean_for_create(o) for o in objects]
    check_objects(items)

    kube = kube_client_from(Path(kubeconfig))
    result = LoadResult()
    try:
        def create(kind: str, collection: str, obj: dict[str, Any]) -> bool:
            try:
                kube.request("POST", collection, body=obj)
            except ApiError as err:
                if err.status == 0:
                    raise  # no reply at all: not the object's fault
                if err.status == 409:
                    result.count(kind, created=False)
                    return False
                raise DevClusterError(
                    f"{_name(obj)}: the API server refused it: {err.status} {_reason(err)}"
                ) from err
            result.count(kind, created=True)
            return True

        pods = [o for o in items if o["kind"] == "Pod"]
        namespaced = [o for o in items if o["kind"] not in ("Namespace", "PriorityClass", "Node")]
        namespaces = {o["metadata"]["name"]: o for o in items if o["kind"] == "Namespace"}
        for obj in namespaced:
            ns = obj["metadata"].setdefault("namespace", "default")
            namespaces.setdefault(
                ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
        for ns_obj in namespaces.values():
            ns_obj.pop("status", None)  # phase Terminating would make it unusable
            create("Namespace", "/api/v1/namespaces", ns_obj)

        classes = {o["metadata"]["name"]: o for o in items if o["kind"] == "PriorityClass"}
        for pod in pods:
            spec = pod.get("spec") or {}
            name = spec.get("priorityClassName")
            if name and name not in classes and name not in _BUILTIN_PRIORITY_CLASSES:
                classes[name] = {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": spec.get("priority", 0),
                }
        for pc in classes.values():
            create("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses", pc)

        for node in (o for o in items if o["kind"] == "Node"):
            create("Node", "/api/v1/nodes", node)

        collections = {
            "Service": "/api/v1/namespaces/{ns}/services",
            "ReplicationController": "/api/v1/namespaces/{ns}/replicationcontrollers",
            "ReplicaSet": "/apis/apps/v1/namespaces/{ns}/replicasets",
            "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets",
        }
        for kind, collection in collections.items():
            for obj in (o for o in items if o["kind"] == kind):
                obj.pop("status", None)
                if kind == "Service":
                    # The source cluster's IPs are not in this cluster's service range.
                    spec = obj.get("spec") or {}
                    for key in ("clusterIP", "clusterIPs"):
                        if spec.get(key) not in (None, "None"):
                            spec.pop(key)
                    # Node ports may clash here; the allocator picks new ones.
                    spec.pop("healthCheckNodePort", None)
                    for port in spec.get("ports") or []:
                        port.pop("nodePort", None)
                ns = obj["metadata"].setdefault("namespace", "default")
                create(kind, collection.format(ns=quote(ns, safe="")), obj)

        for pod in pods:
            status = pod.pop("status", None) or {}
            ns = quote(pod["metadata"]["namespace"], safe="")
            pods_path = f"/api/v1/namespaces/{ns}/pods"
            if create("Pod", pods_path, pod):
                phase = status.get("phase")
                if phase and phase != "Pending":
                    name = quote(pod["metadata"]["name"], safe="")
                    try:
                        kube.request("PATCH", f"{pods_path}/{name}/status",
                                     body={"status": {"phase": phase}},
                                     content_type=STRATEGIC_MERGE)
                    except ApiError as err:
                        if err.status == 0:
                            raise
                        raise DevClusterError(
                            f"{_name(pod)}: cannot set phase {phase}: {err.status} {_reason(err)}"
                        ) from err
    finally:
        kube.close()
    return result


def _reason(err: ApiError) -> str:
    """The `message` of a Kubernetes Status body, else the reason."""
    return err.message or err.reason
