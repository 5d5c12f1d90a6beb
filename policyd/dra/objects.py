"""resource.k8s.io/v1 DeviceClass, ResourceSlice and ResourceClaim as frozen values.

Decoded once from the API server's JSON (`decode_device_class`, `decode_resource_slice`,
`decode_resource_claim`), with the fields the structured allocator reads. Each Device
keeps its raw JSON (`Device.raw`) because CEL selectors are evaluated on the device as
the API shows it. Quantities keep their text (written back unchanged into allocation
results, as upstream copies them) beside their exact value in billionths.

Defaults the API server applies on create are applied here too, so a hand-written
snapshot reads as the stored object would: a request's allocationMode is ExactCount
and its count 1 when unset; a toleration's operator is Equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.dra.decoding import Fields, QuantityParser, join
from policyd.dra.nodes import NodeSelector, decode_node_selector

EXACT_COUNT = "ExactCount"
ALL = "All"
EFFECT_NO_SCHEDULE = "NoSchedule"
EFFECT_NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Quantity:
    """A resource.Quantity: exact value in billionths and the text it was given as."""

    nanos: int
    text: str


# ---------------------------------------------------------------- devices and slices


@dataclass(frozen=True, slots=True)
class Attribute:
    """One typed device attribute; `kind` is int, bool, string or version, or "" for a
    value of a type this version does not know (never equal to anything)."""

    kind: str
    value: str | int | bool | None


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    default: Quantity | None
    valid_values: tuple[Quantity, ...] | None
    valid_range: ValidRange | None


@dataclass(frozen=True, slots=True)
class ValidRange:
    min: Quantity | None
    max: Quantity | None
    step: Quantity | None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    value: Quantity
    request_policy: RequestPolicy | None = None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str
    raw: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str
    raw: Mapping[str, Any]

    def tolerates(self, taint: DeviceTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True, eq=False)
class Device:
    name: str
    attributes: Mapping[str, Attribute]
    capacity: Mapping[str, DeviceCapacity]
    consumes_counters: tuple[CounterConsumption, ...]
    node_name: str | None
    node_selector: NodeSelector | None
    all_nodes: bool | None
    taints: tuple[DeviceTaint, ...]
    binds_to_node: bool
    binding_conditions: tuple[str, ...] | None
    binding_failure_conditions: tuple[str, ...] | None
    allow_multiple_allocations: bool | None
    raw: Mapping[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    resource_slice_count: int
    node_name: str | None
    node_selector: NodeSelector | None
    all_nodes: bool | None
    per_device_node_selection: bool | None
    devices: tuple[Device, ...]
    shared_counters: tuple[CounterSet, ...]


def decode_resource_slice(obj: object, quantity: QuantityParser) -> ResourceSlice:
    fields, meta, name = _object(obj, "ResourceSlice", quantity)
    spec = fields.mapping(meta.get("spec"), "spec")
    pool = fields.mapping(spec.get("pool"), "spec.pool")
    devices = tuple(
        _device(fields, raw, f"spec.devices[{i}]")
        for i, raw in enumerate(fields.items(spec.get("devices"), "spec.devices")))
    shared = []
    for i, raw in enumerate(fields.items(spec.get("sharedCounters"), "spec.sharedCounters")):
        p = f"spec.sharedCounters[{i}]"
        m = fields.mapping(raw, p)
        shared.append(CounterSet(fields.text(m, "name", p, required=True),
                                 _counters(fields, m.get("counters"), join(p, "counters"))))
    return ResourceSlice(
        name=name,
        driver=fields.text(spec, "driver", "spec", required=True),
        pool=fields.text(pool, "name", "spec.pool", required=True),
        generation=fields.integer(pool, "generation", "spec.pool"),
        resource_slice_count=fields.integer(pool, "resourceSliceCount", "spec.pool"),
        node_name=fields.optional_text(spec, "nodeName", "spec"),
        node_selector=decode_node_selector(fields, spec.get("nodeSelector"),
                                           "spec.nodeSelector"),
        all_nodes=fields.flag(spec, "allNodes", "spec"),
        per_device_node_selection=fields.flag(spec, "perDeviceNodeSelection", "spec"),
        devices=devices,
        shared_counters=tuple(shared),
    )


def _device(fields: Fields, raw: object, path: str) -> Device:
    m = fields.mapping(raw, path)
    attributes = {}
    attrs_path = join(path, "attributes")
    for key, value in fields.mapping(m.get("attributes"), attrs_path).items():
        attributes[key] = _attribute(fields, value, f"{attrs_path}.{key}")
    capacity = {}
    cap_path = join(path, "capacity")
    for key, value in fields.mapping(m.get("capacity"), cap_path).items():
        capacity[key] = _capacity(fields, value, f"{cap_path}.{key}")
    consumes = []
    cc_path = join(path, "consumesCounters")
    for i, item in enumerate(fields.items(m.get("consumesCounters"), cc_path)):
        p = f"{cc_path}[{i}]"
        c = fields.mapping(item, p)
        consumes.append(CounterConsumption(
            fields.text(c, "counterSet", p, required=True),
            _counters(fields, c.get("counters"), join(p, "counters"))))
    taints = []
    taints_path = join(path, "taints")
    for i, item in enumerate(fields.items(m.get("taints"), taints_path)):
        p = f"{taints_path}[{i}]"
        t = fields.mapping(item, p)
        taints.append(DeviceTaint(fields.text(t, "key", p), fields.text(t, "value", p),
                                  fields.text(t, "effect", p), t))
    return Device(
        name=fields.text(m, "name", path, required=True),
        attributes=attributes,
        capacity=capacity,
        consumes_counters=tuple(consumes),
        node_name=fields.optional_text(m, "nodeName", path),
        node_selector=decode_node_selector(fields, m.get("nodeSelector"),
                                           join(path, "nodeSelector")),
        all_nodes=fields.flag(m, "allNodes", path),
        taints=tuple(taints),
        binds_to_node=bool(fields.flag(m, "bindsToNode", path)),
        binding_conditions=fields.texts(m, "bindingConditions", path),
        binding_failure_conditions=fields.texts(m, "bindingFailureConditions", path),
        allow_multiple_allocations=fields.flag(m, "allowMultipleAllocations", path),
        raw=m,
    )


_ATTRIBUTE_KINDS = (("int", int), ("bool", bool), ("string", str), ("version", str))


def _attribute(fields: Fields, value: object, path: str) -> Attribute:
    m = fields.mapping(value, path)
    for kind, python_type in _ATTRIBUTE_KINDS:
        v = m.get(kind)
        if v is None:
            continue
        ok = isinstance(v, python_type) and (kind == "bool" or not isinstance(v, bool))
        if not ok:
            fields.fail(join(path, kind), f"must be {_KIND_WORDS[kind]}")
        return Attribute(kind, v)
    return Attribute("", None)


_KIND_WORDS = {"int": "an integer", "bool": "a boolean", "string": "a string",
               "version": "a string"}


def _capacity(fields: Fields, value: object, path: str) -> DeviceCapacity:
    m = fields.mapping(value, path)
    policy = None
    if m.get("requestPolicy") is not None:
        pp = join(path, "requestPolicy")
        p = fields.mapping(m["requestPolicy"], pp)
        valid_values = None
        if p.get("validValues") is not None:
            vp = join(pp, "validValues")
            valid_values = tuple(_quantity(fields, v, f"{vp}[{i}]")
                                 for i, v in enumerate(fields.items(p["validValues"], vp)))
        valid_range = None
        if p.get("validRange") is not None:
            rp = join(pp, "validRange")
            r = fields.mapping(p["validRange"], rp)
            valid_range = ValidRange(*(
                _quantity(fields, r[k], join(rp, k)) if r.get(k) is not None else None
                for k in ("min", "max", "step")))
        default = (_quantity(fields, p["default"], join(pp, "default"))
                   if p.get("default") is not None else None)
        policy = RequestPolicy(default, valid_values, valid_range)
    return DeviceCapacity(_quantity(fields, m.get("value"), join(path, "value")), policy)


def _counters(fields: Fields, value: object, path: str) -> Mapping[str, Quantity]:
    out = {}
    for name, counter in fields.mapping(value, path).items():
        p = f"{path}.{name}"
        c = fields.mapping(counter, p)
        out[name] = _quantity(fields, c.get("value"), join(p, "value"))
    return out


def _quantity(fields: Fields, value: object, path: str) -> Quantity:
    nanos = fields.nanos(value, path)
    return Quantity(nanos, value if isinstance(value, str) else str(value))


# ---------------------------------------------------------------- classes


@dataclass(frozen=True, slots=True)
class Selector:
    """A device selector; `expression` is None for a selector of a kind this version
    does not know (no `cel`), which upstream refuses at allocation."""

    expression: str | None


@dataclass(frozen=True, slots=True, eq=False)
class DeviceClass:
    name: str
    selectors: tuple[Selector, ...]
    # Each spec.config entry's DeviceConfiguration (e.g. `{"opaque": {...}}`), copied
    # into allocation results as is.
    config: tuple[Mapping[str, Any], ...]
    extended_resource_name: str | None


def decode_device_class(obj: object) -> DeviceClass:
    fields, meta, name = _object(obj, "DeviceClass", None)
    spec = fields.mapping(meta.get("spec"), "spec")
    config = tuple(
        fields.mapping(c, f"spec.config[{i}]")
        for i, c in enumerate(fields.items(spec.get("config"), "spec.config")))
    return DeviceClass(
        name=name,
        selectors=_selectors(fields, spec, "spec"),
        config=config,
        extended_resource_name=fields.optional_text(spec, "extendedResourceName", "spec"),
    )


def _selectors(fields: Fields, m: Mapping[str, Any], path: str) -> tuple[Selector, ...]:
    out = []
    list_path = join(path, "selectors")
    for i, raw in enumerate(fields.items(m.get("selectors"), list_path)):
        p = f"{list_path}[{i}]"
        s = fields.mapping(raw, p)
        if s.get("cel") is None:
            out.append(Selector(None))
            continue
        cel = fields.mapping(s["cel"], join(p, "cel"))
        out.append(Selector(fields.text(cel, "expression", join(p, "cel"), required=True)))
    return tuple(out)


# ---------------------------------------------------------------- claims


@dataclass(frozen=True, slots=True)
class Request:
    """An exact request or one of a request's firstAvailable sub-requests: the fields
    both have (upstream's requestAccessor). A sub-request never has admin access."""

    name: str
    device_class_name: str
    selectors: tuple[Selector, ...]
    allocation_mode: str
    count: int
    admin_access: bool | None
    tolerations: tuple[Toleration, ...]
    # capacity.requests, or None when the request has no capacity stanza
    capacity: Mapping[str, Quantity] | None


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: Request | None
    first_available: tuple[Request, ...]


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...]
    match_attribute: str | None
    distinct_attribute: str | None


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    requests: tuple[str, ...]
    # The DeviceConfiguration part of the entry (everything but `requests`).
    configuration: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One entry of status.allocation.devices.results: what makes a device in use."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None
    share_id: str | None
    consumed_capacity: Mapping[str, Quantity] | None


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    api_group: str
    resource: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True, eq=False)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[Constraint, ...]
    config: tuple[ClaimConfig, ...]
    # None when not allocated; the results otherwise.
    allocated: tuple[AllocatedDevice, ...] | None
    allocation: Mapping[str, Any] | None  # status.allocation as the API returned it
    reserved_for: tuple[ConsumerReference, ...]

    @property
    def key(self) -> str:
        """`namespace/name`, as upstream's klog.KObj prints a claim in its errors."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def decode_resource_claim(obj: object, quantity: QuantityParser) -> ResourceClaim:
    fields, meta, name = _object(obj, "ResourceClaim", quantity)
    metadata = fields.mapping(meta.get("metadata"), "metadata")
    spec = fields.mapping(meta.get("spec"), "spec")
    devices = fields.mapping(spec.get("devices"), "spec.devices")
    requests = []
    for i, raw in enumerate(fields.items(devices.get("requests"), "spec.devices.requests")):
        p = f"spec.devices.requests[{i}]"
        m = fields.mapping(raw, p)
        request_name = fields.text(m, "name", p, required=True)
        exactly = (_request(fields, m["exactly"], join(p, "exactly"), request_name,
                            sub=False)
                   if m.get("exactly") is not None else None)
        subs = tuple(
            _request(fields, s, f"{p}.firstAvailable[{j}]", None, sub=True)
            for j, s in enumerate(fields.items(m.get("firstAvailable"),
                                               join(p, "firstAvailable"))))
        requests.append(DeviceRequest(request_name, exactly, subs))
    constraints = []
    for i, raw in enumerate(fields.items(devices.get("constraints"),
                                         "spec.devices.constraints")):
        p = f"spec.devices.constraints[{i}]"
        m = fields.mapping(raw, p)
        constraints.append(Constraint(fields.texts(m, "requests", p) or (),
                                      fields.optional_text(m, "matchAttribute", p),
                                      fields.optional_text(m, "distinctAttribute", p)))
    config = []
    for i, raw in enumerate(fields.items(devices.get("config"), "spec.devices.config")):
        p = f"spec.devices.config[{i}]"
        m = fields.mapping(raw, p)
        config.append(ClaimConfig(fields.texts(m, "requests", p) or (),
                                  {k: v for k, v in m.items() if k != "requests"}))
    status = fields.mapping(meta.get("status"), "status")
    allocation = None
    allocated = None
    if status.get("allocation") is not None:
        allocation = fields.mapping(status["allocation"], "status.allocation")
        allocated = _allocated(fields, allocation)
    reserved = []
    for i, raw in enumerate(fields.items(status.get("reservedFor"), "status.reservedFor")):
        p = f"status.reservedFor[{i}]"
        m = fields.mapping(raw, p)
        reserved.append(ConsumerReference(fields.text(m, "apiGroup", p),
                                          fields.text(m, "resource", p),
                                          fields.text(m, "name", p),
                                          fields.text(m, "uid", p)))
    return ResourceClaim(
        namespace=fields.text(metadata, "namespace", "metadata"),
        name=name,
        uid=fields.text(metadata, "uid", "metadata"),
        requests=tuple(requests),
        constraints=tuple(constraints),
        config=tuple(config),
        allocated=allocated,
        allocation=allocation,
        reserved_for=tuple(reserved),
    )


def _request(fields: Fields, raw: object, path: str, name: str | None, *,
             sub: bool) -> Request:
    m = fields.mapping(raw, path)
    if name is None:
        name = fields.text(m, "name", path, required=True)
    mode = fields.text(m, "allocationMode", path) or EXACT_COUNT
    count = fields.integer(m, "count", path, default=1 if mode == EXACT_COUNT else 0)
    tolerations = []
    tp = join(path, "tolerations")
    for i, item in enumerate(fields.items(m.get("tolerations"), tp)):
        p = f"{tp}[{i}]"
        t = fields.mapping(item, p)
        tolerations.append(Toleration(fields.text(t, "key", p),
                                      fields.text(t, "operator", p) or "Equal",
                                      fields.text(t, "value", p),
                                      fields.text(t, "effect", p), t))
    capacity = None
    if m.get("capacity") is not None:
        cp = join(path, "capacity")
        c = fields.mapping(m["capacity"], cp)
        rp = join(cp, "requests")
        capacity = {k: _quantity(fields, v, f"{rp}.{k}")
                    for k, v in fields.mapping(c.get("requests"), rp).items()}
    return Request(
        name=name,
        device_class_name=fields.text(m, "deviceClassName", path),
        selectors=_selectors(fields, m, path),
        allocation_mode=mode,
        count=count,
        admin_access=None if sub else fields.flag(m, "adminAccess", path),
        tolerations=tuple(tolerations),
        capacity=capacity,
    )


def _allocated(fields: Fields, allocation: Mapping[str, Any]) -> tuple[AllocatedDevice, ...]:
    devices = fields.mapping(allocation.get("devices"), "status.allocation.devices")
    out = []
    rp = "status.allocation.devices.results"
    for i, raw in enumerate(fields.items(devices.get("results"), rp)):
        p = f"{rp}[{i}]"
        m = fields.mapping(raw, p)
        consumed = None
        if m.get("consumedCapacity") is not None:
            cp = join(p, "consumedCapacity")
            consumed = {k: _quantity(fields, v, f"{cp}.{k}")
                        for k, v in fields.mapping(m["consumedCapacity"], cp).items()}
        out.append(AllocatedDevice(
            request=fields.text(m, "request", p),
            driver=fields.text(m, "driver", p, required=True),
            pool=fields.text(m, "pool", p, required=True),
            device=fields.text(m, "device", p, required=True),
            admin_access=fields.flag(m, "adminAccess", p),
            share_id=fields.optional_text(m, "shareID", p),
            consumed_capacity=consumed,
        ))
    return tuple(out)


def _object(obj: object, kind: str,
            quantity: QuantityParser | None) -> tuple[Fields, Mapping[str, Any], str]:
    if not isinstance(obj, dict):
        Fields(kind, "<unnamed>").fail("", f"must be an object, not {type(obj).__name__}")
    outer = Fields(kind, "<unnamed>")
    metadata = outer.mapping(obj.get("metadata"), "metadata")
    name = outer.text(metadata, "name", "metadata", required=True)
    namespace = metadata.get("namespace")
    shown = f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name
    return Fields(kind, shown, quantity), obj, name
