"""VolumeBinding's Score under StorageCapacityScoring (alpha, off in v1.36): how full
each storage class would be on the node after the pod's volumes, through the
configured utilization shape (volumebinding/scorer.go, VolumeBinding.Score).

Per class, `requested` over `capacity`:
- when the node's decision binds existing PVs (static bindings), or the gate is off,
  those PVs: the claims' requested sizes over the PVs' capacities, grouped by the
  PV's `spec.storageClassName`;
- otherwise the claims to provision whose capacity was checked against a
  CSIStorageCapacity: the claims' sizes summed over that capacity object's `capacity`
  (taken once per class, not summed: two claims of one class share one pool).
Each class scores shape(requested * 100 / capacity), shape(100) when the capacity is 0
or too small; the node scores the classes' mean, rounded half away from zero; no class
scores 0. Score has no normalization upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from policyd.framework import MAX_NODE_SCORE
from policyd.model.quantity import QuantityError, int_value
from policyd.plugins.helper.function_shape import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    ShapePoint,
    broken_linear_function,
)
from policyd.plugins.volumebinding.binder import PodVolumes
from policyd.plugins.volumebinding.objects import spec


def _bytes(resources: Any) -> int:
    """The `storage` entry of a requests or capacity list, rounded up (Quantity.Value);
    0 when absent or not a quantity (the API server accepts neither as a size)."""
    if not isinstance(resources, dict) or resources.get("storage") is None:
        return 0
    try:
        return int_value(resources["storage"])
    except QuantityError:
        return 0


def _claim_request(pvc: dict[str, Any]) -> int:
    res = spec(pvc).get("resources")
    return _bytes(res.get("requests") if isinstance(res, dict) else None)


def _class_name(obj: dict[str, Any]) -> str:
    # Upstream reads the spec field itself, not the beta storage-class annotation.
    return str(spec(obj).get("storageClassName") or "")


def class_resources(volumes: PodVolumes, from_static: bool) -> dict[str, tuple[int, int]]:
    """classResourceMap: storage class -> (requested, capacity) in bytes."""
    out: dict[str, tuple[int, int]] = {}
    if from_static:
        for binding in volumes.static_bindings:
            name = _class_name(binding.pv)
            requested, capacity = out.get(name, (0, 0))
            out[name] = (requested + _claim_request(binding.pvc),
                         capacity + _bytes(spec(binding.pv).get("capacity")))
        return out
    for provision in volumes.dynamic_provisions:
        if provision.capacity is None:
            continue
        name = _class_name(provision.pvc)
        # A capacity object without `capacity` (maximumVolumeSize only) counts 0; upstream
        # would dereference a nil Quantity there.
        pool = _bytes({"storage": provision.capacity.get("capacity")})
        requested, _ = out.get(name, (0, 0))
        out[name] = (requested + _claim_request(provision.pvc), pool)
    return out


def build_scorer(shape: Sequence[ShapePoint]) -> Callable[[dict[str, tuple[int, int]]], int]:
    """buildScorerFunction: the shape's 0..10 scores scaled to 0..100."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    raw = broken_linear_function([ShapePoint(p.utilization, p.score * scale) for p in shape])

    def class_score(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(MAX_UTILIZATION)
        return raw(requested * MAX_UTILIZATION // capacity)

    def node_score(classes: dict[str, tuple[int, int]]) -> int:
        if not classes:
            return 0
        total = sum(class_score(r, c) for r, c in classes.values())
        # math.Round(total / n) for total >= 0: half away from zero, in integers.
        return (2 * total + len(classes)) // (2 * len(classes))

    return node_score
