"""The DynamicResources workload's DRA objects, shared by the engine benchmark
(`bench.engine_bench --workloads DynamicResources`) and the end-to-end one
(`bench.e2e_bench --workloads DynamicResources`), so both measure the same cluster.

Every node publishes one ResourceSlice of DEVICES_PER_NODE GPU-like devices (its own
pool, driver DRIVER, attributes and a memory capacity as a GPU driver reports them);
one DeviceClass selects them with CEL; every measured pod has one ResourceClaim of its
own asking for one device of that class.

Claims are created one per pod, beside it (`resourceClaimName`), not through a
ResourceClaimTemplate: a template needs kube-controller-manager's resourceclaim
controller to create each claim after its pod, whose speed would then be part of both
schedulers' throughput (a pod waits, unschedulable, until its claim exists) and
whose CPU would compete with them on the benchmark's two cores. Pre-created claims
leave the schedulers alone on the path being compared: find devices, write the
allocation and reservedFor, bind.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

DRIVER = "gpu.bench.example"
DEVICE_CLASS = "bench-gpu"
DEVICES_PER_NODE = 8
GPU_MODEL = "bench-a100"
GPU_MEMORY = "80Gi"
CLAIM_REQUEST = "gpu"
API_VERSION = "resource.k8s.io/v1"
# The class's selector: the driver, and an attribute check as a real class would have
# (a model), so each device costs one CEL evaluation that reads an attribute.
CLASS_SELECTOR = (f'device.driver == "{DRIVER}" && '
                  f'device.attributes["{DRIVER}"].model == "{GPU_MODEL}"')


def device_class() -> Obj:
    return {"apiVersion": API_VERSION, "kind": "DeviceClass",
            "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": CLASS_SELECTOR}}]}}


def slice_name(node: str) -> str:
    return f"{node}-{DRIVER}"


def resource_slice(node: str, devices: int = DEVICES_PER_NODE) -> Obj:
    """The node's one slice: its own pool (named after the node), generation 1."""
    return {"apiVersion": API_VERSION, "kind": "ResourceSlice",
            "metadata": {"name": slice_name(node)},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [_device(node, k) for k in range(devices)]}}


def _device(node: str, k: int) -> Obj:
    return {"name": f"gpu-{k}",
            "attributes": {"model": {"string": GPU_MODEL}, "index": {"int": k},
                           "uuid": {"string": f"GPU-{node}-{k}"},
                           "driverVersion": {"version": "1.2.3"}},
            "capacity": {"memory": {"value": GPU_MEMORY}}}


def claim_name(pod: str) -> str:
    return f"{pod}-gpu"


def resource_claim(pod: str, namespace: str) -> Obj:
    """The pod's claim: one device of the class, not allocated yet."""
    return {"apiVersion": API_VERSION, "kind": "ResourceClaim",
            "metadata": {"name": claim_name(pod), "namespace": namespace},
            "spec": {"devices": {"requests": [
                {"name": CLAIM_REQUEST,
                 "exactly": {"deviceClassName": DEVICE_CLASS, "count": 1}}]}}}


def pod_claims(pod: str) -> list[Obj]:
    """The pod's spec.resourceClaims: its own claim, by name."""
    return [{"name": CLAIM_REQUEST, "resourceClaimName": claim_name(pod)}]
