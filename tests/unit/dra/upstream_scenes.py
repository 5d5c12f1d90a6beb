"""Seeded random DRA scenes, written twice: with the fake selectors of
`dra_fixtures` (for policyd) and with the equivalent real CEL (for upstream's allocator
in `upstream/allocate.go`). `test_upstream_scenes.py` holds policyd to the outputs
upstream v1.36.3 gave on them (`data/upstream_allocations.json`, written by
`upstream/record.py`).

Scenes mix what the allocator reads: several drivers and pools, node-local,
all-nodes (some devices binding to the node), node-selector and per-device slices,
pools of two nodes, old generations, incomplete and invalid pools, shared counters,
shareable devices with request policies, taints, binding conditions, allocated
devices and shares; claims with ExactCount and All requests, firstAvailable, admin
access, tolerations, capacity requests, match and distinct constraints (string, int,
bool and version attributes) and configuration for requests and sub-requests;
admin-access results among the allocated ones. Every device carries every attribute
a selector reads, so no CEL expression fails at run time.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from typing import Any

from policyd.dra.allocator import Allocator
from policyd.dra.errors import AllocationError, NodeAllocationError
from policyd.dra.features import AllocatorFeatures
from policyd.dra.nodes import Node
from policyd.dra.objects import decode_device_class, decode_resource_claim, decode_resource_slice
from policyd.dra.selectors import CelBackend, SelectorCache
from policyd.dra.state import gather_allocated_state
from policyd.model.quantity import nano_value
from tests.unit.dra.dra_fixtures import FAKE_CEL

DRIVERS = ("a.example.com", "b.example.com")
NODE = {"metadata": {"name": "node-1", "labels": {"region": "r1"}}}
# (fake selector, CEL): the same test on a device
SELECTORS = (
    ("true", "true"),
    ("attr:kind=x", 'device.attributes[device.driver].kind == "x"'),
    ("attr:kind=y", 'device.attributes[device.driver].kind == "y"'),
    ("attr:numa=1", "device.attributes[device.driver].numa == 1"),
    ("attr:fast=true", "device.attributes[device.driver].fast"),
    ("cap:mem>=2Gi", 'device.capacity[device.driver].mem.compareTo(quantity("2Gi")) >= 0'),
    ("multi", "device.allowMultipleAllocations"),
)
CLASSES = (
    ("class-a", (f"driver={DRIVERS[0]}", f'device.driver == "{DRIVERS[0]}"')),
    ("class-b", (f"driver={DRIVERS[1]}", f'device.driver == "{DRIVERS[1]}"')),
    ("class-any", ("true", "true")),
    ("class-x", SELECTORS[1]),
)
_REGION = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "region", "operator": "In", "values": ["r1"]}]}]}


def scene(seed: int) -> Callable[[bool], dict[str, Any]]:
    """The scene of `seed`, as a function of `cel` (True: real CEL selectors)."""
    rng = random.Random(seed)
    slices = _slices(rng)
    claims = [_claim(rng, i) for i in range(rng.choice([1, 1, 2, 3]))]
    allocated = _allocated(rng, slices)
    with_config = {name for name, _ in CLASSES if rng.random() < 0.3}
    constraint_driver = rng.choice(DRIVERS)

    def build(cel: bool) -> dict[str, Any]:
        def sel(pair: tuple[str, str]) -> dict[str, Any]:
            return {"cel": {"expression": pair[1] if cel else pair[0]}}
        classes = []
        for name, pair in CLASSES:
            spec: dict[str, Any] = {"selectors": [sel(pair)]}
            if name in with_config:
                spec["config"] = [{"opaque": {"driver": DRIVERS[0],
                                              "parameters": {"class": name}}}]
            classes.append({"metadata": {"name": name}, "spec": spec})
        out_claims = []
        for c in copy.deepcopy(claims):
            for r in c["spec"]["devices"]["requests"]:
                for e in [r["exactly"]] if "exactly" in r else r["firstAvailable"]:
                    if "selectors" in e:
                        e["selectors"] = [sel(SELECTORS[i]) for i in e["selectors"]]
            for k in c["spec"]["devices"].get("constraints", []):
                for field in ("matchAttribute", "distinctAttribute"):
                    if field in k:
                        k[field] = f"{constraint_driver}/{k[field]}"
            out_claims.append(c)
        return {"claims": out_claims, "slices": slices, "classes": classes,
                "allocated": allocated, "node": NODE}
    return build


def _slices(rng: random.Random) -> list[dict[str, Any]]:
    slices: list[dict[str, Any]] = []
    for p in range(rng.randint(1, 4)):
        driver, pool = rng.choice(DRIVERS), f"pool-{p}"
        where = rng.choice(["n1", "n1", "n1", "n2", "all", "all", "sel1", "sel2", "perdev",
                            "mixed"])
        partition = rng.random() < 0.25
        n_slices = rng.randint(1, 2)
        count = n_slices + (1 if partition else 0) + (1 if rng.random() < 0.08 else 0)
        names = [f"dev-{i}" for i in range(16)]
        rng.shuffle(names)
        for si in range(n_slices):
            devices = [_device(rng, names, where, partition) for _ in range(rng.randint(2, 6))]
            spec: dict[str, Any] = {"driver": driver, "devices": devices, "pool": {
                "name": pool, "generation": 1, "resourceSliceCount": count}}
            w = where if where != "mixed" else ("n1", "n2")[si % 2]
            if w in ("n1", "n2"):
                spec["nodeName"] = "node-1" if w == "n1" else "node-2"
            elif w == "all":
                spec["allNodes"] = True
            elif w in ("sel1", "sel2"):
                selector = copy.deepcopy(_REGION)
                term = selector["nodeSelectorTerms"][0]
                term["matchExpressions"][0]["values"] = ["r1" if w == "sel1" else "r2"]
                if rng.random() < 0.4:
                    term["matchExpressions"].append({"key": "zone",
                                                     "operator": "DoesNotExist"})
                if rng.random() < 0.2:
                    term["matchFields"] = [{"key": "metadata.name", "operator": "In",
                                            "values": ["node-1"]}]
                spec["nodeSelector"] = selector
            else:
                spec["perDeviceNodeSelection"] = True
            slices.append({"metadata": {"name": f"s-{p}-{si}"}, "spec": spec})
        if partition:
            spec = {"driver": driver, "pool": {"name": pool, "generation": 1,
                                               "resourceSliceCount": count},
                    "sharedCounters": [{"name": "cs", "counters": {
                        "m": {"value": rng.choice(["6", "8"])}}}]}
            if where in ("n1", "n2"):
                spec["nodeName"] = "node-1" if where == "n1" else "node-2"
            else:
                spec["allNodes"] = True
            slices.append({"metadata": {"name": f"s-{p}-c"}, "spec": spec})
        if rng.random() < 0.07:
            old = copy.deepcopy(slices[-1])
            old["metadata"]["name"] += "-old"
            old["spec"]["pool"]["generation"] = 0
            slices.append(old)
    rng.shuffle(slices)
    return slices


def _device(rng: random.Random, names: list[str], where: str,
            partition: bool) -> dict[str, Any]:
    device: dict[str, Any] = {
        "name": names.pop() if rng.random() > 0.05 else "dev-dup",
        "attributes": {"kind": {"string": rng.choice("xy")},
                       "numa": {"int": rng.randint(0, 1)},
                       "fast": {"bool": rng.random() < 0.5},
                       "ver": {"version": rng.choice(["1.0.0", "2.0.0"])}},
        "capacity": {"mem": {"value": rng.choice(["1Gi", "2Gi", "4Gi"])}}}
    if rng.random() < 0.2:
        device["allowMultipleAllocations"] = True
        bandwidth: dict[str, Any] = {"value": rng.choice(["4Gi", "10Gi"])}
        r = rng.random()
        if r < 0.2:
            bandwidth["requestPolicy"] = {"default": "1Gi",
                                          "validRange": {"min": "1Gi", "step": "1Gi"}}
        elif r < 0.35:
            bandwidth["requestPolicy"] = {"default": "1Gi",
                                          "validValues": ["1Gi", "2Gi", "4Gi"]}
        device["capacity"]["bw"] = bandwidth
    if rng.random() < 0.1:
        device["taints"] = [{"key": "k", "value": rng.choice(["v", "w"]),
                             "effect": rng.choice(["NoSchedule", "NoExecute", "None"])}]
    if rng.random() < 0.05:
        device["bindingConditions"] = ["ready"]
        device["bindingFailureConditions"] = ["failed"]
    if partition:
        device["consumesCounters"] = [{"counterSet": "cs", "counters": {
            "m": {"value": rng.choice(["2", "4", "6"])}}}]
    if where == "all" and rng.random() < 0.1:
        device["bindsToNode"] = True
    if where == "perdev":
        device.update(rng.choice([{"nodeName": "node-1"}, {"nodeName": "node-2"},
                                  {"allNodes": True}, {"nodeSelector": _REGION}]))
    return device


def _claim(rng: random.Random, index: int) -> dict[str, Any]:
    requests: list[dict[str, Any]] = []
    for ri in range(rng.choice([1, 1, 2, 3])):
        if rng.random() < 0.25:
            requests.append({"name": f"r{ri}", "firstAvailable": [
                {"name": f"s{k}", **_exactly(rng, sub=True)}
                for k in range(rng.randint(2, 3))]})
        else:
            requests.append({"name": f"r{ri}", "exactly": _exactly(rng, sub=False)})
    devices: dict[str, Any] = {"requests": requests}
    if rng.random() < 0.3:
        constraint: dict[str, Any] = {
            rng.choice(["matchAttribute", "distinctAttribute"]):
                rng.choice(["kind", "numa", "fast", "ver"])}
        if rng.random() < 0.5 and len(requests) > 1:
            constraint["requests"] = [r["name"] for r in rng.sample(requests, 2)]
        devices["constraints"] = [constraint]
    if rng.random() < 0.3:
        first = requests[0]
        named = first["name"]
        if "firstAvailable" in first and rng.random() < 0.5:
            named += "/" + rng.choice(first["firstAvailable"])["name"]
        devices["config"] = [{"requests": [named],
                              "opaque": {"driver": DRIVERS[0], "parameters": {"c": index}}}]
    metadata = {"name": f"claim-{index}", "namespace": "default", "uid": f"uid-{index}"}
    return {"metadata": metadata, "spec": {"devices": devices}}


def _exactly(rng: random.Random, *, sub: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": rng.choice(CLASSES)[0]}
    if rng.random() < 0.12:
        out["allocationMode"] = "All"
    else:
        out["allocationMode"] = "ExactCount"
        out["count"] = rng.choice([1, 1, 1, 1, 2, 3])
    if rng.random() < 0.4:
        out["selectors"] = [rng.randrange(len(SELECTORS))]  # an index until built
    if not sub and rng.random() < 0.08:
        out["adminAccess"] = True
    if rng.random() < 0.15:
        out["tolerations"] = [rng.choice([
            {"key": "k", "operator": "Exists"},
            {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
            {"operator": "Exists", "effect": "NoExecute"}])]
    if rng.random() < 0.15:
        out["capacity"] = {"requests": {"bw": rng.choice(["1Gi", "3Gi", "1536Mi"])}}
    return out


def _allocated(rng: random.Random, slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in slices:
        for device in s["spec"].get("devices", []):
            if rng.random() >= 0.12:
                continue
            result: dict[str, Any] = {"request": "r", "driver": s["spec"]["driver"],
                                      "pool": s["spec"]["pool"]["name"],
                                      "device": device["name"]}
            if rng.random() < 0.1:
                result["adminAccess"] = True
            elif device.get("allowMultipleAllocations") and rng.random() < 0.7:
                result["shareID"] = f"00000000-0000-0000-0000-{rng.randint(0, 999):012d}"
                result["consumedCapacity"] = {"bw": "2Gi"}
            out.append({"metadata": {"name": f"allocated-{len(out)}", "namespace": "default"},
                        "spec": {"devices": {"requests": [
                            {"name": "r", "exactly": {"deviceClassName": "class-any"}}]}},
                        "status": {"allocation": {"devices": {"results": [result]}}}})
    return out


# Hand-written scenes for the errors random scenes rarely reach (whole texts checked).
def _named_base(claims: list[dict[str, Any]]) -> dict[str, Any]:
    return {"slices": [{"metadata": {"name": "s"}, "spec": {
                "driver": DRIVERS[0], "nodeName": "node-1", "devices": [
                    {"name": f"d{i}"} for i in range(40)],
                "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}}],
            "classes": [{"metadata": {"name": "c"},
                         "spec": {"selectors": [{"cel": {"expression": "true"}}]}}],
            "claims": claims, "allocated": [], "node": NODE}


def _named_claim(requests: list[dict[str, Any]],
                 constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": "cl", "namespace": "ns"}, "spec": {"devices": devices}}


def _exact(name: str, cls: str = "c", count: int | None = 1,
           mode: str = "ExactCount", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode, **extra}
    if count is not None:
        body["count"] = count
    return {"name": name, "exactly": body}


def _sub(name: str, count: int) -> dict[str, Any]:
    return {"name": name, "deviceClassName": "c", "allocationMode": "ExactCount",
            "count": count}


def _partitioned(driver: str, available: str) -> list[dict[str, Any]]:
    pool = {"name": "p", "generation": 1, "resourceSliceCount": 2}
    consumes = [{"counterSet": "cs", "counters": {"m": {"value": "4"}}}]
    return [{"metadata": {"name": f"{driver}-devices"}, "spec": {
                "driver": driver, "nodeName": "node-1", "pool": pool, "devices": [
                    {"name": f"d{i}", "consumesCounters": consumes} for i in range(2)]}},
            {"metadata": {"name": f"{driver}-counters"}, "spec": {
                "driver": driver, "nodeName": "node-1", "pool": pool,
                "sharedCounters": [{"name": "cs", "counters": {"m": {"value": available}}}]}}]


def _by_driver(name: str, driver: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{driver}"'}}]}}


NAMED_SCENES: dict[str, dict[str, Any]] = {
    # v1.36.3 tracks shared counters by pool name alone (kubernetes/kubernetes#140434):
    # two drivers' pools named alike share one account, and the first pool used sets
    # what is available. ca takes 4 of driver a's 4; cb then finds nothing left.
    "same-pool-name-in-two-drivers": {
        **_named_base([_named_claim([_exact("ra", cls="ca"), _exact("rb", cls="cb")])]),
        "slices": _partitioned(DRIVERS[0], "4") + _partitioned(DRIVERS[1], "8"),
        "classes": [_by_driver("ca", DRIVERS[0]), _by_driver("cb", DRIVERS[1])]},
    "unknown-class": _named_base([_named_claim([_exact("r", cls="nope")])]),
    "unknown-mode": _named_base([_named_claim([_exact("r", mode="Some")])]),
    "empty-constraint": _named_base([_named_claim([_exact("r")], [{"requests": ["r"]}])]),
    "too-many": _named_base([_named_claim([_exact("r", count=33)])]),
    "too-many-all": _named_base([_named_claim([_exact("r", count=None, mode="All")])]),
    "missing-class-name": _named_base([_named_claim([_exact("r", cls="")])]),
    "selector-without-cel": _named_base([_named_claim([_exact("r", selectors=[{}])])]),
    "too-many-in-every-sub-request": _named_base([_named_claim([
        {"name": "r", "firstAvailable": [_sub("a", 33), _sub("b", 34)]}])]),
    "first-claim-limit-picks-smaller-sub-request": _named_base([_named_claim([
        {"name": "r", "firstAvailable": [_sub("a", 31), _sub("b", 1)]},
        {"name": "q", "firstAvailable": [_sub("x", 2)]}])]),
    "second-claim-limit": _named_base([
        _named_claim([_exact("r")]),
        {**_named_claim([{"name": "r", "firstAvailable": [_sub("a", 30), _sub("b", 3)]},
                         _exact("q", count=3)]),
         "metadata": {"name": "cl2", "namespace": "ns"}}]),
}


def run_policyd(data: dict[str, Any], backend: CelBackend = FAKE_CEL) -> dict[str, Any]:
    """The scene allocated by policyd, in the harness's output shape, its selectors
    compiled by `backend` (the fake one by default: `scene(seed)(False)`'s syntax)."""
    classes = {c.name: c for c in map(decode_device_class, data["classes"])}
    slices = [decode_resource_slice(s, nano_value) for s in data["slices"]]
    allocated = [decode_resource_claim(c, nano_value) for c in data["allocated"]]
    allocator = Allocator(
        features=AllocatorFeatures(), classes=classes, slices=slices,
        allocated=gather_allocated_state(allocated, consumable_capacity=True),
        selectors=SelectorCache(backend))
    claims = [decode_resource_claim(c, nano_value) for c in data["claims"]]
    node = data["node"]["metadata"]
    try:
        results = allocator.allocate(Node(node["name"], node["labels"]), claims)
    except NodeAllocationError as err:
        return {"error": str(err), "nodeError": True}
    except AllocationError as err:
        return {"error": str(err)}
    if results is None:
        return {"nil": True}
    return {"results": [r.to_api() for r in results]}


def normalize(output: dict[str, Any]) -> dict[str, Any]:
    """What must agree: the error and whether it concerns only the node, None, or the
    results with share IDs reduced to their presence (upstream's are random UUIDs)."""
    if output.get("error"):
        return {"error": output["error"], "nodeError": bool(output.get("nodeError"))}
    if output.get("nil"):
        return {"nil": True}
    results = []
    for result in json.loads(json.dumps(output["results"])):
        result.setdefault("devices", {})
        for device in result["devices"].get("results", []):
            if "shareID" in device:
                device["shareID"] = "<share>"
        results.append(result)
    return {"results": results}
