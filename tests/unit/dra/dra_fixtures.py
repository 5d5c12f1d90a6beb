"""Builders for DRA test objects (raw resource.k8s.io/v1 JSON, decoded as the daemon
would), a fake CEL backend with a tiny test-only syntax, and a one-call allocation.

The fake CEL syntax: clauses joined by ` && `, each one of
  `true`, `false`             constant
  `driver=NAME`               the device's driver (also `device.driver == "NAME"`)
  `attr:NAME=VALUE`           attribute NAME (as stored) printed equals VALUE
  `cap:NAME>=QUANTITY`        capacity NAME at least QUANTITY
  `multi`                     allowMultipleAllocations is true
  `boom`                      compiles, fails when evaluated
Anything else does not compile. The texts of its errors are its own; the allocator's
wrapping of them (class/claim, selector index) is what the tests check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from policyd.dra.allocator import Allocator
from policyd.dra.errors import AllocationError, NodeAllocationError
from policyd.dra.features import AllocatorFeatures
from policyd.dra.nodes import Node
from policyd.dra.objects import (
    decode_device_class,
    decode_resource_claim,
    decode_resource_slice,
)
from policyd.dra.results import AllocationResult
from policyd.dra.selectors import CelBackend, SelectorCache
from policyd.dra.state import gather_allocated_state
from policyd.model.quantity import nano_value

DRIVER_A = "driver-a"
DRIVER_B = "driver-b"
CLASS_A = "class-a"
CLASS_B = "class-b"
NODE_1 = "node-1"
NODE_2 = "node-2"


# The one real CEL form the fake also reads, so hand-written scenes can be run by
# upstream's allocator and by policyd unchanged.
_CEL_DRIVER = 'device.driver == "'


class FakeCompileError(Exception):
    pass


class FakeRuntimeError(Exception):
    pass


@dataclass(frozen=True)
class FakeSelector:
    clauses: tuple[str, ...]

    def matches(self, driver: str, device: Mapping[str, Any]) -> bool:
        return all(_clause(c, driver, device) for c in self.clauses)


def _clause(clause: str, driver: str, device: Mapping[str, Any]) -> bool:
    if clause in ("true", "false"):
        return clause == "true"
    if clause == "boom":
        raise FakeRuntimeError("no such key: boom")
    if clause == "multi":
        return bool(device.get("allowMultipleAllocations"))
    if clause.startswith("driver="):
        return driver == clause.removeprefix("driver=")
    if clause.startswith(_CEL_DRIVER):
        return driver == clause.removeprefix(_CEL_DRIVER).removesuffix('"')
    if clause.startswith("attr:"):
        name, _, value = clause.removeprefix("attr:").partition("=")
        attribute = (device.get("attributes") or {}).get(name)
        if attribute is None:
            return False
        # The value the decoder keeps: the first kind set, in its order; an attribute
        # with none (which the API server would refuse) equals nothing.
        found = next((attribute[k] for k in ("int", "bool", "string", "version")
                      if attribute.get(k) is not None), None)
        if found is None:
            return False
        return str(found).lower() == value.lower() if isinstance(found, bool) else (
            str(found) == value)
    name, _, low = clause.removeprefix("cap:").partition(">=")
    cap = (device.get("capacity") or {}).get(name)
    return cap is not None and nano_value(cap["value"]) >= nano_value(low)


def fake_compile(expression: str) -> FakeSelector:
    clauses = tuple(expression.split(" && "))
    for c in clauses:
        known = (c in ("true", "false", "boom", "multi") or c.startswith("driver=")
                 or (c.startswith(_CEL_DRIVER) and c.endswith('"'))
                 or (c.startswith("attr:") and "=" in c)
                 or (c.startswith("cap:") and ">=" in c))
        if not known:
            raise FakeCompileError(f"cannot compile {c!r}")
    return FakeSelector(clauses)


FAKE_CEL = CelBackend(fake_compile, FakeCompileError, FakeRuntimeError)


# ------------------------------------------------------------------ objects


def device(name: str, attributes: Mapping[str, Any] | None = None,
           capacity: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A device; attribute values are typed by their Python type (str -> string,
    a str starting with `v` and digits -> version is not guessed: pass
    {"version": ...} explicitly)."""
    out: dict[str, Any] = {"name": name}
    if attributes:
        out["attributes"] = {k: _attribute(v) for k, v in attributes.items()}
    if capacity:
        out["capacity"] = {k: v if isinstance(v, dict) else {"value": v}
                           for k, v in capacity.items()}
    out.update(extra)
    return out


def _attribute(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def resource_slice(name: str, *devices: dict[str, Any], node: str | None = NODE_1,
                   pool: str = "pool-1", driver: str = DRIVER_A, generation: int = 1,
                   count: int = 1, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": driver,
                            "pool": {"name": pool, "generation": generation,
                                     "resourceSliceCount": count},
                            "devices": list(devices)}
    if node is not None:
        body["nodeName"] = node
    body.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name}, "spec": body}


def device_class(name: str = CLASS_A, driver: str | None = DRIVER_A, *selectors: str,
                 config: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    exprs = ([f"driver={driver}"] if driver else []) + list(selectors)
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
    if config:
        spec["config"] = [dict(c) for c in config]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name}, "spec": spec}


def exactly(cls: str = CLASS_A, count: int | None = None, *, mode: str | None = None,
            selectors: Sequence[str] = (), admin: bool | None = None,
            tolerations: Sequence[Mapping[str, Any]] = (),
            capacity: Mapping[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": cls}
    if mode is not None:
        out["allocationMode"] = mode
    if count is not None:
        out["count"] = count
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin is not None:
        out["adminAccess"] = admin
    if tolerations:
        out["tolerations"] = [dict(t) for t in tolerations]
    if capacity is not None:
        out["capacity"] = {"requests": dict(capacity)}
    return out


def request(name: str, cls: str = CLASS_A, count: int | None = None,
            **kwargs: Any) -> dict[str, Any]:
    return {"name": name, "exactly": exactly(cls, count, **kwargs)}


def sub(name: str, cls: str = CLASS_A, count: int | None = None,
        **kwargs: Any) -> dict[str, Any]:
    body = exactly(cls, count, **kwargs)
    body.pop("adminAccess", None)
    return {"name": name, **body}


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(name: str, *requests: dict[str, Any],
          constraints: Sequence[Mapping[str, Any]] = (),
          config: Sequence[Mapping[str, Any]] = (),
          allocation: Mapping[str, Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = [dict(c) for c in constraints]
    if config:
        devices["config"] = [dict(c) for c in config]
    out: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": name, "namespace": "default",
                                        "uid": f"uid-{name}"},
                           "spec": {"devices": devices}}
    if allocation is not None:
        out["status"] = {"allocation": dict(allocation)}
    return out


def allocated_claim(name: str, *results: tuple[str, str, str] | Mapping[str, Any],
                    ) -> dict[str, Any]:
    """A claim whose status holds these results ((driver, pool, device) or raw)."""
    raw = [r if isinstance(r, Mapping) else
           {"request": "req", "driver": r[0], "pool": r[1], "device": r[2]} for r in results]
    return claim(name, request("req"), allocation={"devices": {"results": raw}})


def opaque(driver: str, **parameters: Any) -> dict[str, Any]:
    return {"opaque": {"driver": driver, "parameters": parameters}}


# ------------------------------------------------------------------ running


@dataclass
class Scene:
    claims: list[dict[str, Any]]
    slices: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=lambda: [device_class()])
    node: Node = field(default_factory=lambda: Node(NODE_1, {"region": "r1"}))
    allocated: list[dict[str, Any]] = field(default_factory=list)
    features: AllocatorFeatures = field(default_factory=AllocatorFeatures)


def share_ids() -> Callable[[], str]:
    counter = iter(range(1, 1_000_000))
    return lambda: f"share-{next(counter)}"


def build(scene: Scene, cel: CelBackend = FAKE_CEL) -> Allocator:
    classes = {c.name: c for c in map(decode_device_class, scene.classes)}
    slices = [decode_resource_slice(s, nano_value) for s in scene.slices]
    allocated = [decode_resource_claim(c, nano_value) for c in scene.allocated]
    state = gather_allocated_state(
        allocated, consumable_capacity=scene.features.consumable_capacity)
    return Allocator(features=scene.features, allocated=state, classes=classes,
                     slices=slices, selectors=SelectorCache(cel),
                     new_share_id=share_ids())


def run(scene: Scene) -> list[AllocationResult] | None:
    claims = [decode_resource_claim(c, nano_value) for c in scene.claims]
    return build(scene).allocate(scene.node, claims)


def picked(results: Iterable[AllocationResult] | None) -> list[list[str]] | None:
    """Per claim, `request driver/pool/device` per result (` admin` appended when
    it has admin access): what a case expects, exactly."""
    if results is None:
        return None
    out = []
    for result in results:
        out.append([
            f"{d.request} {d.driver}/{d.pool}/{d.device}" + (" admin" if d.admin_access
                                                              else "")
            for d in result.devices])
    return out


# ------------------------------------------------------------------ cases


CLAIM_0 = "claim-0"
CLAIM_1 = "claim-1"


@dataclass
class Case:
    scene: Scene
    expect: list[list[str]] | None = None
    error: str | None = None
    node_error: bool = False


def check(case: Case) -> None:
    if case.error is not None:
        kind = NodeAllocationError if case.node_error else AllocationError
        with pytest.raises(kind) as raised:
            run(case.scene)
        assert str(raised.value) == case.error
        if not case.node_error:
            assert not isinstance(raised.value, NodeAllocationError)
        return
    assert picked(run(case.scene)) == case.expect


def one(name: str = "slice-1", *names: str, **kwargs: Any) -> dict[str, Any]:
    """A slice with the named devices (device-1 when none)."""
    return resource_slice(name, *(device(n) for n in (names or ("device-1",))), **kwargs)


def d(request_name: str, device_name: str, pool: str = "pool-1",
      driver: str = DRIVER_A) -> str:
    return f"{request_name} {driver}/{pool}/{device_name}"
