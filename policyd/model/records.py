"""Pod and Node records decoded from Kubernetes JSON, once, at the edge.

Decoding validates what the scheduler reads and raises `InvalidObjectError` naming the
object and the field, so a malformed pod is reported, never half-scheduled. Fields the
scheduler does not read stay only in `raw`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policyd.errors import InvalidObjectError
from policyd.model.int64 import INT32, INT64
from policyd.model.objectmeta import string_problem
from policyd.model.quantity import nano_value, resource_value
from policyd.model.spelling import show_value

DEFAULT_SCHEDULER_NAME = "default-scheduler"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # "Equal" (also when empty) or "Exists"
    value: str
    effect: str  # "" tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        """Toleration.ToleratesTaint: an empty key with Exists tolerates every taint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class HostPort:
    host_ip: str  # "0.0.0.0" when unset, as upstream defaults it
    protocol: str  # "TCP" when unset
    port: int


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One entry of `spec.resourceClaims` (a DRA ResourceClaim the pod needs)."""

    name: str  # the entry's name, which containers refer to
    claim: str  # the ResourceClaim's name; "" while a template's claim is not created
    template: str  # resourceClaimTemplateName, or "" for a claim named directly


@dataclass(slots=True, eq=False)
class Container:
    name: str
    image: str
    requests: dict[str, int]  # in billionths (nano units): summed exactly, rounded once
    restart_policy: str  # "Always" marks a sidecar (restartable init container)
    ports: tuple[HostPort, ...]
    # From the container's status, for in-place resize (nano units; None when absent):
    # what the kubelet reports the container runs with, and what it has allocated.
    status_requests: dict[str, int] | None = None
    allocated: dict[str, int] | None = None


@dataclass(slots=True, eq=False)
class Pod:
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    scheduler_name: str
    node_name: str
    phase: str
    priority: int
    creation_timestamp: float  # seconds since the epoch; 0 when absent
    node_selector: dict[str, str]
    affinity: dict[str, Any]  # raw spec.affinity; plugins compile it once (see `cache`)
    tolerations: tuple[Toleration, ...]
    topology_spread_constraints: tuple[dict[str, Any], ...]
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    overhead: dict[str, int]  # nano units, like container requests
    pod_requests: dict[str, int]  # spec.resources.requests (pod-level), nano units
    pvc_names: tuple[str, ...]
    resource_claims: tuple[PodResourceClaim, ...]
    scheduling_gates: tuple[str, ...]
    deleting: bool
    raw: dict[str, Any]
    # The PodResizePending condition says Infeasible: the resize will not happen.
    resize_infeasible: bool = False
    # Pod-level in-place resize (InPlacePodLevelResourcesVerticalScaling), nano units:
    # status.resources.requests ({} when status.resources has none, None when there is
    # no status.resources at all) and status.allocatedResources (None when absent).
    status_pod_requests: dict[str, int] | None = None
    allocated_pod: dict[str, int] | None = None
    # The claim names of `persistentVolumeClaim` volumes only (`pvc_names` less the
    # generic ephemeral ones): what upstream's PVCRefCounts count.
    persistent_claims: tuple[str, ...] = ()
    # spec.schedulingGroup.podGroupName: the scheduling.k8s.io PodGroup this pod is a
    # member of ("" for none); the API server keeps the field only under GenericWorkload.
    scheduling_group: str = ""
    # Per-pod memo for plugins (compiled selectors, request sums): filled on first use,
    # so an existing pod's terms are compiled once, not once per scheduling cycle.
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(slots=True, eq=False)
class Node:
    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: dict[str, int]  # cpu in millicores, everything else in units
    images: dict[str, int]  # every name of every image on the node -> size in bytes
    addresses: dict[str, str]  # address type (InternalIP, Hostname...) -> address
    raw: dict[str, Any]
    # status.declaredFeatures (the kubelet's; NodeDeclaredFeatures reads them): sorted,
    # unique, as the API server requires.
    declared_features: tuple[str, ...] = ()
    cache: dict[str, Any] = field(default_factory=dict)


class _Reader:
    """Typed access to a raw object's fields that reports the exact path on error."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name

    def fail(self, path: str, message: str) -> InvalidObjectError:
        return InvalidObjectError(self.kind, self.name, path, message)

    def mapping(self, obj: Any, path: str) -> dict[str, Any]:
        if obj is None:
            return {}
        if not isinstance(obj, dict):
            raise self.fail(path, f"must be an object, not {_type_name(obj)}")
        return obj

    def seq(self, obj: Any, path: str) -> list[Any]:
        if obj is None:
            return []
        if not isinstance(obj, list):
            raise self.fail(path, f"must be a list, not {_type_name(obj)}")
        return obj

    def string(self, obj: Any, path: str, default: str = "") -> str:
        if obj is None:
            return default
        if not isinstance(obj, str):
            raise self.fail(path, f"must be a string, not {_type_name(obj)}")
        return obj

    def integer(self, obj: Any, path: str, default: int = 0, bounds: range = INT64
                ) -> int:
        """An integer within `bounds` (Go's int64, or int32 where the field is one)."""
        if obj is None:
            return default
        if isinstance(obj, bool) or not isinstance(obj, int):
            raise self.fail(path, f"must be an integer, not {_type_name(obj)}")
        if obj not in bounds:
            bits = 32 if bounds == INT32 else 64
            raise self.fail(path, f"{show_value(obj)} is out of range for an int{bits} "
                                  f"({bounds.start} to {bounds.stop - 1})")
        return obj

    def string_map(self, obj: Any, path: str) -> dict[str, str]:
        out = self.mapping(obj, path)
        for k, v in out.items():
            problem = string_problem(v)
            if problem is not None:
                raise self.fail(f"{path}.{k}", problem)
        return out

    def resources(self, obj: Any, path: str, *, nano: bool = False) -> dict[str, int]:
        """Quantities by resource name: as the scheduler keeps them (millicores for cpu,
        units otherwise), or with `nano` in billionths for sums that round once."""
        out: dict[str, int] = {}
        for name, value in self.mapping(obj, path).items():
            if value is None:
                # The API server decodes a null Quantity as zero (Quantity.UnmarshalJSON):
                # present, so cpu/memory get no non-zero default.
                out[name] = 0
                continue
            try:
                out[name] = nano_value(value) if nano else resource_value(name, value)
            except ValueError as exc:
                raise self.fail(f"{path}.{name}", str(exc)) from None
            if out[name] < 0:
                raise self.fail(f"{path}.{name}",
                                f"must not be negative, got {show_value(value)}")
        return out


def _type_name(obj: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(obj), "a value")


def _timestamp(reader: _Reader, value: Any, path: str) -> float:
    text = reader.string(value, path)
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise reader.fail(path, f"invalid timestamp {text!r}") from None


def _check_kind(reader: _Reader, obj: dict[str, Any], kind: str) -> None:
    actual = obj.get("kind", kind)
    if actual != kind:
        raise reader.fail("kind", f"expected {kind!r}, got {actual!r}")


def _object_name(obj: Any, kind: str) -> tuple[str, str]:
    if not isinstance(obj, dict):
        raise InvalidObjectError(kind, "<unnamed>", "", f"must be an object, not {_type_name(obj)}")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise InvalidObjectError(kind, "<unnamed>", "metadata.name", "is required")
    if kind == "Pod":
        ns = namespace if isinstance(namespace, str) and namespace else "default"
        return ns, name
    return "", name


def _container(reader: _Reader, obj: Any, path: str) -> Container:
    c = reader.mapping(obj, path)
    name = reader.string(c.get("name"), f"{path}.name")
    if not name:
        raise reader.fail(f"{path}.name", "is required")
    resources = reader.mapping(c.get("resources"), f"{path}.resources")
    ports: list[HostPort] = []
    for i, p in enumerate(reader.seq(c.get("ports"), f"{path}.ports")):
        ppath = f"{path}.ports[{i}]"
        port = reader.mapping(p, ppath)
        container_port = reader.integer(port.get("containerPort"), f"{ppath}.containerPort",
                                        bounds=INT32)
        host_port = reader.integer(port.get("hostPort"), f"{ppath}.hostPort", bounds=INT32)
        if not 0 <= host_port <= 65535:
            raise reader.fail(f"{ppath}.hostPort", f"must be between 0 and 65535, not {host_port}")
        if container_port < 0 or container_port > 65535:
            raise reader.fail(f"{ppath}.containerPort", "must be between 1 and 65535")
        if host_port > 0:
            ports.append(HostPort(
                host_ip=reader.string(port.get("hostIP"), f"{ppath}.hostIP") or "0.0.0.0",
                protocol=reader.string(port.get("protocol"), f"{ppath}.protocol") or "TCP",
                port=host_port,
            ))
    return Container(
        name=name,
        image=reader.string(c.get("image"), f"{path}.image"),
        requests=reader.resources(resources.get("requests"), f"{path}.resources.requests",
                                  nano=True),
        restart_policy=reader.string(c.get("restartPolicy"), f"{path}.restartPolicy"),
        ports=tuple(ports),
    )


def _add_statuses(r: _Reader, containers: tuple[Container, ...], statuses: Any,
                  path: str) -> None:
    by_name = {c.name: c for c in containers}
    for i, st in enumerate(r.seq(statuses, path)):
        entry = r.mapping(st, f"{path}[{i}]")
        container = by_name.get(entry.get("name"))  # type: ignore[arg-type]
        if container is None:
            continue
        if entry.get("resources") is not None:
            # Present (even `{}`): upstream then takes the larger of spec, status and
            # allocated; absent, the spec alone counts.
            resources = r.mapping(entry["resources"], f"{path}[{i}].resources")
            container.status_requests = r.resources(
                resources.get("requests"), f"{path}[{i}].resources.requests", nano=True)
        if entry.get("allocatedResources") is not None:
            container.allocated = r.resources(
                entry["allocatedResources"], f"{path}[{i}].allocatedResources", nano=True)


def _resource_claims(r: _Reader, entries: Any, statuses: Any
                     ) -> tuple[PodResourceClaim, ...]:
    """`spec.resourceClaims`, each with its ResourceClaim's name: named directly, or for
    a template the name the claim controller generated (`status.resourceClaimStatuses`;
    "" until it exists)."""
    generated: dict[str, str] = {}
    for i, st in enumerate(r.seq(statuses, "status.resourceClaimStatuses")):
        path = f"status.resourceClaimStatuses[{i}]"
        entry = r.mapping(st, path)
        generated[r.string(entry.get("name"), f"{path}.name")] = r.string(
            entry.get("resourceClaimName"), f"{path}.resourceClaimName")
    out = []
    for i, c in enumerate(r.seq(entries, "spec.resourceClaims")):
        path = f"spec.resourceClaims[{i}]"
        entry = r.mapping(c, path)
        name = r.string(entry.get("name"), f"{path}.name")
        if not name:
            raise r.fail(f"{path}.name", "is required")
        claim = r.string(entry.get("resourceClaimName"), f"{path}.resourceClaimName")
        template = r.string(entry.get("resourceClaimTemplateName"),
                            f"{path}.resourceClaimTemplateName")
        if bool(claim) == bool(template):
            raise r.fail(path, "must set exactly one of resourceClaimName and "
                               "resourceClaimTemplateName")
        out.append(PodResourceClaim(name, claim or generated.get(name, ""), template))
    return tuple(out)


def pod_from_dict(obj: Any) -> Pod:
    """Decode a v1 Pod; raises InvalidObjectError naming the pod and the field."""
    namespace, name = _object_name(obj, "Pod")
    r = _Reader("Pod", f"{namespace}/{name}")
    _check_kind(r, obj, "Pod")
    meta = r.mapping(obj.get("metadata"), "metadata")
    spec = r.mapping(obj.get("spec"), "spec")
    status = r.mapping(obj.get("status"), "status")
    containers = tuple(
        _container(r, c, f"spec.containers[{i}]")
        for i, c in enumerate(r.seq(spec.get("containers"), "spec.containers"))
    )
    if not containers:
        raise r.fail("spec.containers", "must have at least one container")
    init_containers = tuple(
        _container(r, c, f"spec.initContainers[{i}]")
        for i, c in enumerate(r.seq(spec.get("initContainers"), "spec.initContainers"))
    )
    tolerations = []
    for i, t in enumerate(r.seq(spec.get("tolerations"), "spec.tolerations")):
        path = f"spec.tolerations[{i}]"
        tol = r.mapping(t, path)
        operator = r.string(tol.get("operator"), f"{path}.operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise r.fail(f"{path}.operator", f"unsupported operator {operator!r}")
        effect = r.string(tol.get("effect"), f"{path}.effect")
        if effect and effect not in TAINT_EFFECTS:
            raise r.fail(f"{path}.effect", f"unsupported effect {effect!r}")
        tolerations.append(Toleration(
            key=r.string(tol.get("key"), f"{path}.key"),
            operator=operator,
            value=r.string(tol.get("value"), f"{path}.value"),
            effect=effect,
        ))
    spread = tuple(
        r.mapping(c, f"spec.topologySpreadConstraints[{i}]")
        for i, c in enumerate(
            r.seq(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints"))
    )
    pvcs = []
    persistent = []
    for i, v in enumerate(r.seq(spec.get("volumes"), "spec.volumes")):
        vol = r.mapping(v, f"spec.volumes[{i}]")
        claim = vol.get("persistentVolumeClaim")
        if claim is not None:
            claim_name = r.mapping(claim, f"spec.volumes[{i}].persistentVolumeClaim").get(
                "claimName")
            pvcs.append(r.string(claim_name, f"spec.volumes[{i}].persistentVolumeClaim.claimName"))
            persistent.append(pvcs[-1])
        elif vol.get("ephemeral") is not None:
            pvcs.append(f"{name}-{r.string(vol.get('name'), f'spec.volumes[{i}].name')}")
    claims = _resource_claims(r, spec.get("resourceClaims"), status.get(
        "resourceClaimStatuses"))
    gates = tuple(
        r.string(r.mapping(g, f"spec.schedulingGates[{i}]").get("name"),
                 f"spec.schedulingGates[{i}].name")
        for i, g in enumerate(r.seq(spec.get("schedulingGates"), "spec.schedulingGates"))
    )
    pod_resources = r.mapping(spec.get("resources"), "spec.resources")
    group = r.mapping(spec.get("schedulingGroup"), "spec.schedulingGroup")
    _add_statuses(r, containers, status.get("containerStatuses"), "status.containerStatuses")
    _add_statuses(r, init_containers, status.get("initContainerStatuses"),
                  "status.initContainerStatuses")
    infeasible = _resize_infeasible(r, status.get("conditions"))
    status_pod_requests: dict[str, int] | None = None
    if status.get("resources") is not None:
        status_resources = r.mapping(status["resources"], "status.resources")
        status_pod_requests = r.resources(status_resources.get("requests"),
                                          "status.resources.requests", nano=True)
    allocated_pod = (r.resources(status["allocatedResources"], "status.allocatedResources",
                                 nano=True)
                     if status.get("allocatedResources") is not None else None)
    return Pod(
        namespace=namespace,
        name=name,
        uid=r.string(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
        labels=r.string_map(meta.get("labels"), "metadata.labels"),
        annotations=r.string_map(meta.get("annotations"), "metadata.annotations"),
        scheduler_name=r.string(spec.get("schedulerName"), "spec.schedulerName")
        or DEFAULT_SCHEDULER_NAME,
        node_name=r.string(spec.get("nodeName"), "spec.nodeName"),
        phase=r.string(status.get("phase"), "status.phase") or "Pending",
        priority=r.integer(spec.get("priority"), "spec.priority", bounds=INT32),
        creation_timestamp=_timestamp(r, meta.get("creationTimestamp"),
                                      "metadata.creationTimestamp"),
        node_selector=r.string_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        affinity=r.mapping(spec.get("affinity"), "spec.affinity"),
        tolerations=tuple(tolerations),
        topology_spread_constraints=spread,
        containers=containers,
        init_containers=init_containers,
        overhead=r.resources(spec.get("overhead"), "spec.overhead", nano=True),
        pod_requests=r.resources(pod_resources.get("requests"), "spec.resources.requests",
                                 nano=True),
        pvc_names=tuple(pvcs),
        persistent_claims=tuple(persistent),
        resource_claims=claims,
        scheduling_gates=gates,
        deleting=meta.get("deletionTimestamp") is not None,
        raw=obj,
        resize_infeasible=infeasible,
        status_pod_requests=status_pod_requests,
        allocated_pod=allocated_pod,
        scheduling_group=r.string(group.get("podGroupName"),
                                  "spec.schedulingGroup.podGroupName"),
    )


def _resize_infeasible(r: _Reader, conditions: Any) -> bool:
    """IsPodResizeInfeasible: the first PodResizePending condition says Infeasible (its
    `status` is not read, as upstream does not)."""
    for i, cond in enumerate(r.seq(conditions, "status.conditions")):
        entry = r.mapping(cond, f"status.conditions[{i}]")
        if r.string(entry.get("type"), f"status.conditions[{i}].type") == "PodResizePending":
            return r.string(entry.get("reason"),
                            f"status.conditions[{i}].reason") == "Infeasible"
    return False


# The API server's rule for a declared feature's name (ValidateNode, v1.36).
_FEATURE_NAME = re.compile(r"[A-Z][a-zA-Z0-9]*(/[a-zA-Z][a-zA-Z0-9]*)*")
_FEATURE_NAME_MAX = 253


def _declared_features(r: _Reader, value: Any) -> tuple[str, ...]:
    """status.declaredFeatures, refused where the API server refuses it: a bad name, or
    a list not sorted and unique (kube-scheduler's lookup relies on the order)."""
    path = "status.declaredFeatures"
    names = [r.string(f, f"{path}[{i}]") for i, f in enumerate(r.seq(value, path))]
    for i, name in enumerate(names):
        if len(name) > _FEATURE_NAME_MAX or not _FEATURE_NAME.fullmatch(name):
            raise r.fail(f"{path}[{i}]", f"invalid feature name {show_value(name)}: at most "
                         f"{_FEATURE_NAME_MAX} characters, an UpperCamelCase segment and "
                         "then segments after '/' (MyFeature, MyFeature/mySubFeature), "
                         "letters and digits only")
        if i and names[i - 1] >= name:
            raise r.fail(f"{path}[{i}]", f"duplicate {show_value(name)}" if names[i - 1] == name
                         else f"{show_value(name)} is out of order: the list must be "
                         "sorted alphabetically")
    return tuple(names)


def node_from_dict(obj: Any) -> Node:
    """Decode a v1 Node; raises InvalidObjectError naming the node and the field."""
    _, name = _object_name(obj, "Node")
    r = _Reader("Node", name)
    _check_kind(r, obj, "Node")
    meta = r.mapping(obj.get("metadata"), "metadata")
    spec = r.mapping(obj.get("spec"), "spec")
    status = r.mapping(obj.get("status"), "status")
    taints = []
    for i, t in enumerate(r.seq(spec.get("taints"), "spec.taints")):
        path = f"spec.taints[{i}]"
        taint = r.mapping(t, path)
        key = r.string(taint.get("key"), f"{path}.key")
        if not key:
            raise r.fail(f"{path}.key", "is required")
        effect = r.string(taint.get("effect"), f"{path}.effect")
        if effect not in TAINT_EFFECTS:
            raise r.fail(f"{path}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}")
        taints.append(Taint(key, r.string(taint.get("value"), f"{path}.value"), effect))
    # A node that reports no allocatable falls back to capacity, as the kubelet fills both.
    allocatable_raw = status.get("allocatable")
    alloc_path = "status.allocatable"
    if allocatable_raw is None:
        allocatable_raw, alloc_path = status.get("capacity"), "status.capacity"
    images: dict[str, int] = {}
    for i, img in enumerate(r.seq(status.get("images"), "status.images")):
        entry = r.mapping(img, f"status.images[{i}]")
        size = r.integer(entry.get("sizeBytes"), f"status.images[{i}].sizeBytes")
        for j, image_name in enumerate(r.seq(entry.get("names"), f"status.images[{i}].names")):
            images[r.string(image_name, f"status.images[{i}].names[{j}]")] = size
    addresses: dict[str, str] = {}
    for i, a in enumerate(r.seq(status.get("addresses"), "status.addresses")):
        entry = r.mapping(a, f"status.addresses[{i}]")
        addresses.setdefault(r.string(entry.get("type"), f"status.addresses[{i}].type"),
                             r.string(entry.get("address"), f"status.addresses[{i}].address"))
    return Node(
        name=name,
        uid=r.string(meta.get("uid"), "metadata.uid") or name,
        labels=r.string_map(meta.get("labels"), "metadata.labels"),
        annotations=r.string_map(meta.get("annotations"), "metadata.annotations"),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable", False)),
        allocatable=r.resources(allocatable_raw, alloc_path),
        images=images,
        addresses=addresses,
        raw=obj,
        declared_features=_declared_features(r, status.get("declaredFeatures")),
    )
