"""Seeded DRA cases for the differential test: `tests.gen.differential`'s cases (a few
nodes, pods bound to them, one pod to place) with devices around them.

A DRA case adds DeviceClasses, ResourceSlices, ResourceClaimTemplates and
ResourceClaims (resource.k8s.io/v1), and gives the pod under test one to three claims:

- three drivers per case, each with pools of its own shape: `<prefix>-gpu.diff.io`, a
  pool per node (its name is the node's), some split over two slices; `<prefix>-nic.
  diff.io`, network-attached: a pool whose slice selects nodes (a hostname selector, or
  allNodes) and one whose devices each say where they are reachable
  (perDeviceNodeSelection: nodeName, nodeSelector or allNodes), some devices shareable
  with consumable capacity (allowMultipleAllocations, a bandwidth with a request
  policy); `<prefix>-part.diff.io`, partitionable: per node a slice of shared counters
  and a slice of devices consuming them (one whole, two halves, four quarters);
- classes selecting by driver first (so that no selector of one case ever reads
  another case's device: a missing attribute is a CEL error upstream), then by
  capacity (`quantity()` comparison), version (`semver()`), or a model no device has;
- devices with attributes (a model, a NUMA node under a domain every driver shares, so
  matchAttribute and distinctAttribute span drivers; a driver version), memory
  capacity, and now and then a NoSchedule or NoExecute taint;
- requests: ExactCount (1 to 3) or All, with their own selectors, tolerations, admin
  access (the case's namespace carries the label the API server wants for it),
  capacity requests on shareable devices; `firstAvailable` lists of two or three
  subrequests; constraints (matchAttribute, distinctAttribute) over some or all
  requests;
- claims from a ResourceClaimTemplate (the resourceclaim controller of the local
  kube-controller-manager creates them), named claims, and claims already allocated
  for a pod bound to a node (`DraCase.allocations`: the runner writes the allocation
  and the reservation through the status subresource once that pod exists), which the
  pod under test may share;
- claims that cannot be satisfied: too many devices, a class whose selector matches
  nothing, a constraint no pair of devices meets, and (by index) a class that does not
  exist.

The kinds too rare to leave to chance in a run of the default size (FORCED: a
distinctAttribute constraint, a class matching nothing, admin access, a capacity
request; and MISSING_CLASS) are given to the first claim made for the pod by the
case's index. Never drawn: allocationMode All beside a constraint (a device of an All
request that breaks a constraint is an error upstream, not a reason). The pod under
test is created with a scheduling gate (GATE) that the runner removes once its claims
have been read back.

Isolation between cases on one API server, beyond `tests.gen.differential`'s: the
drivers carry the prefix (so do the cluster-scoped names: classes, slices) and every
object the CASE_LABEL, so clean-up finds them by label and no case's class selects
another case's devices.

Not drawn: DRA-backed extended resources (DRAExtendedResource; policyd does not model
them yet), device binding conditions (they need a driver that reports the device's
status), opaque configuration (copied into an allocation, it never decides one).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field, replace
from typing import Any

from tests.gen.clusters import GPU, HOSTNAME, Mix, Names, gen_node, gen_pod_dict
from tests.gen.differential import (
    CASE_LABEL,
    SCHEDULER_NAME,
    UNDER_TEST_LABEL,
    Case,
    isolated,
)

API_VERSION = "resource.k8s.io/v1"
# The attribute every driver's devices share (fully qualified), which constraints name.
NUMA = "diff.policyd.io/numa"
UNHEALTHY = "diff.policyd.io/unhealthy"
MAINTENANCE = "diff.policyd.io/maintenance"
# When the claims of pods on nodes were allocated.
ALLOCATED_AT = "2026-11-01T11:00:00Z"
# What the API server wants on a namespace whose claims ask for admin access.
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
# The scheduling gate the pods under test are created with: the runner removes it once
# their template claims exist and have been read back (`differential.dra`).
GATE = "diff.policyd.io/claims-read"

MODELS = ("a100", "h100", "l4")
VERSIONS = ("1.0.0", "1.2.0", "1.3.1", "2.0.0-rc.1", "2.1.0")
MEMORY = ("16Gi", "40Gi", "80Gi")
# A partitionable device's shape: (name, how many, memory it takes from the counter).
PARTITIONS = (("whole", 1, "40Gi"), ("half", 2, "20Gi"), ("quarter", 4, "10Gi"))

# What a DRA case exercises (`DraCase.kinds`), by what the pod under test's claims use.
TEMPLATE = "template"  # a claim made from a ResourceClaimTemplate
NAMED = "named"  # a ResourceClaim the pod names
SHARED = "shared"  # a claim allocated for, and reserved by, a pod on a node
PREALLOCATED = "preallocated"  # devices of the requested drivers taken by such claims
COUNT = "count"  # ExactCount with count 2 or 3
ALL = "all"  # allocationMode All
FIRST_AVAILABLE = "first-available"
MATCH = "match-attribute"
DISTINCT = "distinct-attribute"
TAINTED = "tainted"  # a requested driver has tainted devices
TOLERATION = "toleration"  # a request tolerates device taints
PARTITIONABLE = "partitionable"  # devices consuming shared counters
NETWORK = "network"  # a pool whose slice selects nodes (or all of them)
PER_DEVICE = "per-device-nodes"  # a pool whose devices each select nodes
MULTI_SLICE = "multi-slice"  # a pool of several slices
CAPACITY_SELECTOR = "capacity-selector"  # a quantity() comparison
SEMVER = "semver"
CONSUMABLE = "consumable-capacity"  # a capacity request on a shareable device
ADMIN = "admin-access"
NOTHING = "matches-nothing"  # a class whose selector matches no device
MISSING_CLASS = "missing-class"
DRA_KINDS = (TEMPLATE, NAMED, SHARED, PREALLOCATED, COUNT, ALL, FIRST_AVAILABLE, MATCH,
             DISTINCT, TAINTED, TOLERATION, PARTITIONABLE, NETWORK, PER_DEVICE, MULTI_SLICE,
             CAPACITY_SELECTOR, SEMVER, CONSUMABLE, ADMIN, NOTHING, MISSING_CLASS)
# One case in this many asks for a class that does not exist (PreFilter refuses it).
MISSING_CLASS_EVERY = 16
# Kinds too rare by chance alone, drawn by index (index % 8) for the first claim.
FORCED = {1: DISTINCT, 3: NOTHING, 5: ADMIN, 7: CONSUMABLE}

# Clean, roomy nodes and few other constraints: the devices should decide.
DRA_MIX = Mix("dra", taints=0.05, roomy=True, spread=0.2, affinity=0.1,
              existing_per_node=1, apps=2, same_namespace=0.5, restart_all_rule=0.0)


@dataclass(frozen=True)
class Allocation:
    """A claim allocated for a pod bound to a node: `status` (allocation and
    reservedFor, the pod's uid left for the runner to fill in) is written through the
    claim's status subresource once the pod exists."""

    namespace: str
    claim: str
    pod: str
    status: dict[str, Any]


@dataclass
class DraCase:
    """A case (`case`: nodes, pods bound, the pod under test, created with GATE) and its
    DRA objects in creation order (classes, slices, templates, claims)."""

    case: Case
    objects: list[dict[str, Any]]
    allocations: list[Allocation]
    kinds: tuple[str, ...]
    twin: DraCase | None = None

    @property
    def prefix(self) -> str:
        return self.case.prefix

    @property
    def index(self) -> int:
        return self.case.index


def drivers(prefix: str) -> tuple[str, str, str]:
    """The case's GPU, NIC and partitionable drivers."""
    return (f"{prefix}-gpu.diff.io", f"{prefix}-nic.diff.io", f"{prefix}-part.diff.io")


def gen_dra_case(seed: int, index: int, prefix: str, scheduler: str = SCHEDULER_NAME,
                 twin: tuple[str, str] | None = None) -> DraCase:
    """The DRA case number `index` of the run with `seed`; names start with `prefix` (a
    DNS label); its pod is for `scheduler`. `twin` = (prefix, scheduler) adds the same
    case under that prefix for that scheduler (`DraCase.twin`, and `Case.twin`)."""
    rng = random.Random(f"{seed}/dra/{index}")
    force = MISSING_CLASS if index % MISSING_CLASS_EVERY == MISSING_CLASS_EVERY - 1 \
        else FORCED.get(index % 8)
    scene = _Scene(rng, prefix, force)
    scene.gpu_pools()
    scene.nic_pools()
    scene.part_pools()
    scene.classes()
    scene.existing_claim_users()
    pod = gen_pod_dict(rng, "under-test", scene.namespace, scene.names, DRA_MIX)
    if rng.random() < 0.85:
        # Mostly no node selection but the case's: the devices choose the nodes.
        pod["spec"].pop("nodeSelector", None)
        pod["spec"].get("affinity", {}).pop("nodeAffinity", None)
    pod = isolated(pod, prefix, scheduler)
    _plainer(rng, pod)
    entries = scene.claims_of_pod_under_test(force)
    pod["spec"]["resourceClaims"] = entries
    pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [
        {"name": e["name"]} for e in entries]
    pod["spec"]["schedulingGates"] = [{"name": GATE}]
    pod["metadata"]["labels"][UNDER_TEST_LABEL] = "true"
    kinds = tuple(k for k in DRA_KINDS if k in scene.kinds)
    case = Case(seed, index, prefix, scene.namespaces, scene.nodes, scene.pods, pod,
                notes=["dra", *kinds, f"claims {[e['name'] for e in entries]}"])
    out = DraCase(case, scene.objects, scene.allocations, kinds)
    if twin is not None:
        out.twin = gen_dra_case(seed, index, *twin)
        case.twin = out.twin.case
    return out


def _plainer(rng: random.Random, pod: dict[str, Any]) -> None:
    """Mostly drop the pod's ephemeral storage and extended resource requests (which
    many of the generated nodes lack): the devices should decide."""
    if rng.random() < 0.15:
        return
    for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
        for values in c.get("resources", {}).values():
            if isinstance(values, dict):
                for name in ("ephemeral-storage", GPU):
                    values.pop(name, None)


@dataclass
class _Pool:
    """A pool drawn for a case: where it is, its devices (raw), and what using it
    exercises."""

    driver: str
    name: str
    devices: list[dict[str, Any]]
    node: str | None  # a per-node pool's node
    kinds: set[str] = field(default_factory=set)


class _Scene:
    """One DRA case being drawn: its objects so far and what each part exercises."""

    def __init__(self, rng: random.Random, prefix: str, force: str | None) -> None:
        self.rng = rng
        self.prefix = prefix
        # the kind the pod's first claim must exercise (FORCED, MISSING_CLASS), if any
        self.force = force
        self.gpu, self.nic, self.part = drivers(prefix)
        self.namespaces = {
            f"{prefix}-a": {CASE_LABEL: prefix, "team": "a", ADMIN_ACCESS_LABEL: "true"},
            f"{prefix}-b": {CASE_LABEL: prefix, "team": "b"}}
        self.namespace = f"{prefix}-a"
        zones = [f"{prefix}-z{z}" for z in "ab"][: rng.randint(1, 2)]
        names = Names(zones=zones, racks=[f"{prefix}-R1"],
                      namespaces=list(self.namespaces),
                      namespace_labels={CASE_LABEL: prefix})
        self.nodes = [gen_node(rng, f"{prefix}-n{i}", names, DRA_MIX,
                               labels={HOSTNAME: f"{prefix}-n{i}", CASE_LABEL: prefix})
                      for i in range(rng.randint(2, 5))]
        self.node_names = [n["metadata"]["name"] for n in self.nodes]
        self.names = replace(names, nodes=list(self.node_names))
        self.pods: list[dict[str, Any]] = []
        self.objects: list[dict[str, Any]] = []
        self.slices: list[dict[str, Any]] = []
        self.claims: list[dict[str, Any]] = []
        self.templates: list[dict[str, Any]] = []
        self.allocations: list[Allocation] = []
        self.pools: dict[str, list[_Pool]] = {self.gpu: [], self.nic: [], self.part: []}
        self.class_names: dict[str, str] = {}
        # (driver, pool, device) taken by claims allocated for pods on nodes
        self.taken: set[tuple[str, str, str]] = set()
        # claims allocated for pods on nodes, which the pod under test may share
        self.shareable: list[str] = []
        self.kinds: set[str] = set()
        # the classes (short names) the pod under test's requests name
        self.requested: set[str] = set()
        self._claims = 0

    # -- objects ------------------------------------------------------------------------

    def _meta(self, name: str, namespaced: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": {CASE_LABEL: self.prefix}}
        if namespaced:
            meta["namespace"] = self.namespace
        return meta

    def _slice(self, name: str, driver: str, pool: str, count: int,
               where: dict[str, Any], devices: list[dict[str, Any]] | None = None,
               counters: list[dict[str, Any]] | None = None) -> None:
        spec: dict[str, Any] = {"driver": driver, "pool": {
            "name": pool, "generation": 1, "resourceSliceCount": count}, **where}
        if devices is not None:
            spec["devices"] = devices
        if counters is not None:
            spec["sharedCounters"] = counters
        self.slices.append({"apiVersion": API_VERSION, "kind": "ResourceSlice",
                            "metadata": self._meta(name), "spec": spec})

    def _taints(self) -> list[dict[str, Any]]:
        r = self.rng.random()
        if r < 0.1:
            return [{"key": UNHEALTHY, "value": "true", "effect": "NoSchedule"}]
        if r < 0.15:
            return [{"key": MAINTENANCE, "effect": "NoExecute"}]
        return []

    def _numa(self) -> dict[str, Any]:
        return {NUMA: {"int": self.rng.randint(0, 1)}}

    def gpu_pools(self) -> None:
        """Per node (most nodes): one to four GPUs, in one slice or split over two."""
        rng = self.rng
        for node in self.node_names:
            if rng.random() < 0.2:
                continue
            devices = []
            for d in range(rng.randint(2, 6)):
                device: dict[str, Any] = {
                    "name": f"gpu-{d}",
                    "attributes": {"model": {"string": rng.choice(MODELS)},
                                   "driverVersion": {"version": rng.choice(VERSIONS)},
                                   **self._numa()},
                    "capacity": {"memory": {"value": rng.choice(MEMORY)}}}
                taints = self._taints()
                if taints:
                    device["taints"] = taints
                devices.append(device)
            pool = _Pool(self.gpu, node, devices, node)
            if any("taints" in d for d in devices):
                pool.kinds.add(TAINTED)
            split = len(devices) >= 2 and rng.random() < 0.35
            if split:
                cut = rng.randint(1, len(devices) - 1)
                pool.kinds.add(MULTI_SLICE)
                for i, part in enumerate((devices[:cut], devices[cut:])):
                    self._slice(f"{node}-gpu-{i}", self.gpu, node, 2, {"nodeName": node},
                                part)
            else:
                self._slice(f"{node}-gpu", self.gpu, node, 1, {"nodeName": node}, devices)
            self.pools[self.gpu].append(pool)

    def _nic(self, name: str, shareable: bool) -> dict[str, Any]:
        device: dict[str, Any] = {"name": name, "attributes": {
            "speed": {"int": self.rng.choice([10, 25, 100])}, **self._numa()}}
        if shareable:
            device["allowMultipleAllocations"] = True
            device["capacity"] = {"bandwidth": {"value": "10Gi", "requestPolicy": {
                "default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}
        taints = self._taints()
        if taints:
            device["taints"] = taints
        return device

    def nic_pools(self) -> None:
        """Network-attached NICs: a pool whose slice selects some nodes by hostname (or
        all nodes), and a pool whose devices each say where they are reachable."""
        rng = self.rng
        consumable = self.force == CONSUMABLE
        if consumable or rng.random() < 0.65:
            devices = [self._nic(f"nic-{d}", (consumable and d == 0) or rng.random() < 0.4)
                       for d in range(rng.randint(1, 3))]
            if rng.random() < 0.7:
                chosen = sorted(rng.sample(self.node_names,
                                           rng.randint(1, len(self.node_names))))
                where: dict[str, Any] = {"nodeSelector": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In",
                                           "values": chosen}]}]}}
            else:
                where = {"allNodes": True}
            name = f"{self.prefix}-fabric"
            self._slice(name, self.nic, name, 1, where, devices)
            self.pools[self.nic].append(_Pool(self.nic, name, devices, None, {NETWORK}))
        if rng.random() < 0.6:
            devices = []
            for d in range(rng.randint(2, 4)):
                device = self._nic(f"port-{d}", rng.random() < 0.2)
                r = rng.random()
                if r < 0.5:
                    device["nodeName"] = rng.choice(self.node_names)
                elif r < 0.85:
                    device["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": HOSTNAME, "operator": "In", "values": sorted(rng.sample(
                            self.node_names, rng.randint(1, len(self.node_names))))}]}]}
                else:
                    device["allNodes"] = True
                devices.append(device)
            name = f"{self.prefix}-ports"
            self._slice(name, self.nic, name, 1, {"perDeviceNodeSelection": True}, devices)
            self.pools[self.nic].append(_Pool(self.nic, name, devices, None, {PER_DEVICE}))
        for pool in self.pools[self.nic]:
            if any("taints" in d for d in pool.devices):
                pool.kinds.add(TAINTED)

    def part_pools(self) -> None:
        """Partitionable devices on some nodes: a slice with the shared counter, a
        slice with the devices that consume it (one whole, two halves, four quarters:
        taking a half leaves no whole)."""
        rng = self.rng
        if rng.random() < 0.35:
            return
        for node in self.node_names:
            if rng.random() < 0.4:
                continue
            devices = []
            for shape, n, memory in PARTITIONS:
                for i in range(n):
                    devices.append({
                        "name": f"{shape}-{i}",
                        "attributes": {"size": {"string": shape}},
                        "capacity": {"memory": {"value": memory}},
                        "consumesCounters": [{"counterSet": "mem", "counters": {
                            "memory": {"value": memory}}}]})
            self._slice(f"{node}-part-counters", self.part, node, 2, {"nodeName": node},
                        counters=[{"name": "mem", "counters": {
                            "memory": {"value": "40Gi"}}}])
            self._slice(f"{node}-part", self.part, node, 2, {"nodeName": node}, devices)
            self.pools[self.part].append(_Pool(self.part, node, devices, node,
                                               {PARTITIONABLE, MULTI_SLICE}))

    def classes(self) -> None:
        p, gpu = self.prefix, self.gpu
        by_driver = f'device.driver == "{gpu}"'
        specs = {
            "gpu": [by_driver],
            "gpu-big": [by_driver, f'device.capacity["{gpu}"].memory.compareTo('
                                   'quantity("40Gi")) >= 0'],
            "gpu-new": [by_driver, f'device.attributes["{gpu}"].driverVersion'
                                   '.isGreaterThan(semver("1.2.0"))'],
            "gpu-none": [by_driver, f'device.attributes["{gpu}"].model == "tpu"'],
            "nic": [f'device.driver == "{self.nic}"'],
            "part": [f'device.driver == "{self.part}"'],
        }
        for short, exprs in specs.items():
            name = f"{p}-{short}"
            self.class_names[short] = name
            self.objects.append({
                "apiVersion": API_VERSION, "kind": "DeviceClass",
                "metadata": self._meta(name),
                "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}})
        self.objects += self.slices

    # -- claims allocated for pods on nodes -----------------------------------------------

    def existing_claim_users(self) -> None:
        """Pods already on nodes, some with a claim allocated for them: one GPU of
        their node, or one half of its partitionable device."""
        rng = self.rng
        for i in range(rng.randint(0, len(self.nodes))):
            node = rng.choice(self.node_names)
            pod = gen_pod_dict(rng, f"p{i}", self.namespace, self.names, DRA_MIX,
                               bound_to=node)
            # A claim user still running.
            pod["status"].pop("phase", None)
            pod["metadata"].pop("deletionTimestamp", None)
            self.pods.append(pod)
            if rng.random() < 0.5:
                self._allocate_for(pod, node)

    def _allocate_for(self, pod: dict[str, Any], node: str) -> None:
        rng = self.rng
        candidates = [(pool, d) for driver in (self.gpu, self.part)
                      for pool in self.pools[driver] if pool.node == node
                      for d in pool.devices
                      if (driver, pool.name, d["name"]) not in self.taken
                      and "taints" not in d
                      and (driver == self.gpu or d["name"].startswith("half"))]
        if not candidates:
            return
        pool, device = rng.choice(candidates)
        short = "gpu" if pool.driver == self.gpu else "part"
        name = f"pre{len(self.allocations)}"
        claim = self._claim_object(name, {"requests": [{"name": short, "exactly": {
            "deviceClassName": self.class_names[short]}}]})
        self.claims.append(claim)
        self.taken.add((pool.driver, pool.name, device["name"]))
        result: dict[str, Any] = {"request": short, "driver": pool.driver,
                                  "pool": pool.name, "device": device["name"]}
        status = {"allocation": {
            # As kube-scheduler writes it (binding conditions are on by default): a
            # scheduler adding a pod to reservedFor sets a missing one, which the API
            # server refuses (the allocation is immutable).
            "allocationTimestamp": ALLOCATED_AT,
            "devices": {"results": [result]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"]}]}
        self.allocations.append(Allocation(self.namespace, name, pod["metadata"]["name"],
                                           status))
        pod["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": name}]
        pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [
            {"name": "dev"}]
        self.shareable.append(name)

    # -- the pod under test's claims ------------------------------------------------------

    def _claim_object(self, name: str, devices: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": API_VERSION, "kind": "ResourceClaim",
                "metadata": self._meta(name, namespaced=True),
                "spec": {"devices": devices}}

    def claims_of_pod_under_test(self, force: str | None) -> list[dict[str, Any]]:
        """The pod's spec.resourceClaims: one to three claims, each from a template, a
        named claim, or a claim allocated for a pod on a node (shared); the first one
        made for the pod exercises `force` (one of FORCED), if given."""
        rng = self.rng
        entries: list[dict[str, Any]] = []
        shared = list(self.shareable)
        rng.shuffle(shared)
        for i in range(rng.choice([1, 1, 1, 2, 2, 3])):
            entry = f"c{i}"
            r = rng.random()
            if r < 0.35 and shared and (i > 0 or force is None):
                entries.append({"name": entry, "resourceClaimName": shared.pop()})
                self.kinds.add(SHARED)
                continue
            devices = self._devices(force if i == 0 else None)
            name = f"claim{self._claims}"
            self._claims += 1
            if r < 0.6:
                self.templates.append({
                    "apiVersion": API_VERSION, "kind": "ResourceClaimTemplate",
                    "metadata": self._meta(name, namespaced=True),
                    "spec": {"spec": {"devices": devices}}})
                entries.append({"name": entry, "resourceClaimTemplateName": name})
                self.kinds.add(TEMPLATE)
            else:
                self.claims.append(self._claim_object(name, devices))
                entries.append({"name": entry, "resourceClaimName": name})
                self.kinds.add(NAMED)
        if self.allocations:
            used = {d for short in self.requested for d in self._drivers_of(short)}
            if any(a.status["allocation"]["devices"]["results"][0]["driver"] in used
                   for a in self.allocations):
                self.kinds.add(PREALLOCATED)
        self.objects += self.templates + self.claims
        return entries

    def _drivers_of(self, short: str) -> set[str]:
        return {self.nic} if short == "nic" else {self.part} if short == "part" \
            else {self.gpu}

    def _devices(self, force: str | None) -> dict[str, Any]:
        """A claim's spec.devices: one or two requests, maybe a constraint; `force`
        (one of FORCED) makes the claim exercise that kind."""
        rng = self.rng
        n = rng.choice([1, 1, 1, 2])
        requests: list[dict[str, Any]] = []
        if force == NOTHING:
            requests = [{"name": "r0", "exactly": self._exact("gpu-none")}]
        elif force == ADMIN:
            requests = [{"name": "r0", "exactly": {**self._exact("gpu"),
                                                   "adminAccess": True}}]
        elif force == CONSUMABLE:
            requests = [{"name": "r0", "exactly": self._exact("nic", consumable=True)}]
        elif force == DISTINCT:
            requests = [{"name": f"r{i}", "exactly": self._exact(short, sub=True)}
                        for i, short in enumerate(("gpu", rng.choice(["gpu", "nic"])))]
            for r in requests:
                r["exactly"].pop("count", None)  # two devices on two NUMA nodes
            n = 0
        requests += [self._request(f"r{i}") for i in range(len(requests), n)]
        if force == MISSING_CLASS:
            target = requests[0].get("exactly") or requests[0]["firstAvailable"][0]
            target["deviceClassName"] = f"{self.prefix}-missing"
        if force is not None:
            self.kinds.add(force)
        devices: dict[str, Any] = {"requests": requests}
        wanted = sum((r.get("exactly") or {}).get("count", 1) for r in requests)
        # Never with allocationMode All: a device of an All request that breaks a
        # constraint is an error upstream (a claim nobody should write), not a reason.
        every = any((r.get("exactly") or {}).get("allocationMode") == "All"
                    for r in requests)
        if wanted > 1 and not every and (force == DISTINCT or rng.random() < 0.45):
            # Devices have two NUMA nodes: more than two distinct ones never fit.
            distinct = force == DISTINCT or (wanted == 2 and rng.random() < 0.4)
            constraint: dict[str, Any] = {
                "distinctAttribute" if distinct else "matchAttribute": NUMA}
            if len(requests) > 1 and rng.random() < 0.5:
                constraint["requests"] = [r["name"] for r in requests]
            devices["constraints"] = [constraint]
            self.kinds.add(DISTINCT if distinct else MATCH)
        return devices

    def _request(self, name: str) -> dict[str, Any]:
        rng = self.rng
        if rng.random() < 0.22:
            subs = self._first_available()
            self.kinds.add(FIRST_AVAILABLE)
            return {"name": name, "firstAvailable": subs}
        # A driver without devices in the case now and then: nothing to allocate.
        nic = 2.5 if self.pools[self.nic] else 0.25
        part = 2.0 if self.pools[self.part] else 0.2
        short = rng.choices(["gpu", "gpu-big", "gpu-new", "gpu-none", "nic", "part"],
                            weights=[5, 2, 2, 0.4, nic, part])[0]
        exactly = self._exact(short)
        if rng.random() < 0.06 and short.startswith("gpu"):
            exactly["adminAccess"] = True
            self.kinds.add(ADMIN)
        return {"name": name, "exactly": exactly}

    def _exact(self, short: str, *, sub: bool = False, consumable: bool = False
               ) -> dict[str, Any]:
        """The device request of one class (`exactly`, or a subrequest with `sub`);
        `consumable`: a capacity request (NIC classes only)."""
        rng = self.rng
        out: dict[str, Any] = {"deviceClassName": self.class_names[short]}
        self.requested.add(short)
        driver = next(iter(self._drivers_of(short)))
        pools = self.pools[driver]
        for pool in pools:
            self.kinds |= pool.kinds
        self.kinds |= {"gpu-big": {CAPACITY_SELECTOR}, "gpu-new": {SEMVER},
                       "gpu-none": {NOTHING}}.get(short, set())
        selectors = []
        if short == "part":
            shape = rng.choice(PARTITIONS)[0]
            selectors.append(f'device.attributes["{driver}"].size == "{shape}"')
        elif short.startswith("gpu") and rng.random() < 0.25:
            selectors.append(f'device.attributes["{driver}"].model == '
                             f'"{rng.choice(MODELS)}"')
        elif short == "nic" and rng.random() < 0.3:
            selectors.append(f'device.attributes["{driver}"].speed >= 25')
        if selectors:
            out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
        if not sub and rng.random() < 0.15:
            out["allocationMode"] = "All"
            self.kinds.add(ALL)
        else:
            # A narrower request asks for fewer devices: most would fit nowhere.
            count = 1 if selectors else rng.choice([1, 1, 1, 1, 1, 2, 2, 3])
            if count > 1:
                out["count"] = count
                self.kinds.add(COUNT)
        if rng.random() < 0.3:
            out["tolerations"] = [rng.choice([
                {"key": UNHEALTHY, "operator": "Exists", "effect": "NoSchedule"},
                {"key": UNHEALTHY, "operator": "Equal", "value": "true"},
                {"key": MAINTENANCE, "operator": "Exists"},
                {"operator": "Exists"}])]
            self.kinds.add(TOLERATION)
        shareable = any(d.get("allowMultipleAllocations") for p in pools
                        for d in p.devices)
        if short == "nic" and shareable and (consumable or rng.random() < 0.6):
            out["capacity"] = {"requests": {"bandwidth": rng.choice(
                ["1Gi", "2Gi", "4Gi", "6Gi"])}}
            self.kinds.add(CONSUMABLE)
        return out

    def _first_available(self) -> list[dict[str, Any]]:
        """Two or three alternatives, the preferred first."""
        rng = self.rng
        shape = rng.choice(["gpu", "part", "mixed"] if self.pools[self.part]
                           else ["gpu", "gpu", "mixed"])
        if shape == "gpu":
            shorts = ["gpu-big", "gpu"] if rng.random() < 0.5 else ["gpu-new", "gpu-big",
                                                                      "gpu"]
        elif shape == "part":
            shorts = ["part", "part"]
        else:
            shorts = ["gpu", "nic"] if rng.random() < 0.5 else ["part", "gpu"]
        return [{"name": f"s{i}", **self._exact(short, sub=True)}
                for i, short in enumerate(shorts)]


@dataclass
class OfflineReadBack:
    """What the runner reads back of a case, made without an API server (`pods`: those
    bound to nodes; `objects`: classes, slices and claims)."""

    pods: list[dict[str, Any]]
    pod: dict[str, Any]
    objects: list[dict[str, Any]]


def read_back_offline(case: DraCase) -> OfflineReadBack:
    """The case as the runner reads it back once the resourceclaim controller has made
    the template claims (named `<pod>-<entry>`, owned by the pod, recorded in its
    status) and the allocations of pods on nodes are written; uids are `uid-<name>`;
    the pod under test without its gate. For tests that need no API server."""
    c = case.case
    pod = copy.deepcopy(c.pod)
    pod["metadata"]["uid"] = "uid-under-test"
    pod["spec"].pop("schedulingGates")
    objects = copy.deepcopy([o for o in case.objects
                             if o["kind"] != "ResourceClaimTemplate"])
    templates = {t["metadata"]["name"]: t for t in case.objects
                 if t["kind"] == "ResourceClaimTemplate"}
    statuses = []
    for entry in pod["spec"]["resourceClaims"]:
        if "resourceClaimTemplateName" in entry:
            name = f"{pod['metadata']['name']}-{entry['name']}"
            objects.append({
                "apiVersion": API_VERSION, "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": pod["metadata"]["namespace"],
                             "ownerReferences": [{
                                 "apiVersion": "v1", "kind": "Pod", "controller": True,
                                 "name": pod["metadata"]["name"],
                                 "uid": "uid-under-test"}]},
                "spec": copy.deepcopy(templates[entry["resourceClaimTemplateName"]][
                    "spec"]["spec"])})
            statuses.append({"name": entry["name"], "resourceClaimName": name})
    pod["status"]["resourceClaimStatuses"] = statuses
    pods = copy.deepcopy(c.pods)
    for p in pods:
        p["metadata"]["uid"] = f"uid-{p['metadata']['name']}"
    by_claim = {a.claim: a for a in case.allocations}
    for obj in objects:
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        allocation = by_claim.get(obj["metadata"]["name"])
        if obj["kind"] == "ResourceClaim" and allocation is not None:
            obj["status"] = allocation_status(allocation, f"uid-{allocation.pod}")
    return OfflineReadBack(pods, pod, objects)


def allocation_status(allocation: Allocation, pod_uid: str) -> dict[str, Any]:
    """The status to write for `allocation` once its pod exists with `pod_uid`."""
    status = copy.deepcopy(allocation.status)
    for consumer in status["reservedFor"]:
        consumer["uid"] = pod_uid
    return status
