"""scheduler-plugins' CheckClusterResource (pkg/coscheduling/core): whether the nodes,
with the group's own pods taken off them, have room for the PodGroup's minResources and
minMember pods, summed over the cluster (not per node); the "resource gap" message when
they do not.

The message is upstream's `fmt.Errorf("resource gap: %v", resourceList)`: Go prints
the map sorted by key and each Quantity as its struct, `{{value scale} {<nil>} cached
Format}`, so the amounts keep apimachinery's int64 representation and the scale the
subtractions left them at. `Amount` follows Quantity.Sub on that fast path (values
beyond it, which Go prints as a pointer, are kept exact here instead).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from policyd.features import FeatureGates
from policyd.model.node_info import NodeInfo, accounting
from policyd.model.pod_groups import COSCHEDULING_LABEL
from policyd.model.quantity import GO_BINARY_SI, GO_DECIMAL_SI, go_amount, nano_value
from policyd.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from policyd.plugins.noderesources.resource_allocation import is_scalar_resource_name


@dataclass(slots=True)
class Amount:
    """A resource.Quantity on apimachinery's int64 path: value x 10^scale."""

    value: int
    scale: int
    fmt: str
    cached: str = ""

    @classmethod
    def parse(cls, raw: Any) -> Amount:
        fast = go_amount(raw)
        if fast is not None:
            return cls(*fast)
        return cls(nano_value(raw), -9, GO_DECIMAL_SI)

    def sub(self, other: Amount) -> None:
        """Quantity.Sub: the cached string dropped, a zero takes the other's format,
        then int64Amount.Add of the negation (the smaller scale wins)."""
        self.cached = ""
        if self.value == 0:
            self.fmt = other.fmt
        b, b_scale = -other.value, other.scale
        if b == 0:
            return
        if self.value == 0:
            self.value, self.scale = b, b_scale
        elif self.scale == b_scale:
            self.value += b
        elif self.scale > b_scale:
            self.value = self.value * 10 ** (self.scale - b_scale) + b
            self.scale = b_scale
        else:
            self.value += b * 10 ** (b_scale - self.scale)

    def go_struct(self) -> str:
        return f"{{{{{self.value} {self.scale}}} {{<nil>}} {self.cached} {self.fmt}}}"


_ZERO = Amount(0, 0, "")


def min_resources_of(raw_group: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """spec.minResources as written (None when the group sets none: upstream skips
    the check only then; an empty map still checks room for minMember pods)."""
    spec = raw_group.get("spec")
    value = spec.get("minResources") if isinstance(spec, dict) else None
    return value if isinstance(value, dict) else None


def node_left(info: NodeInfo, namespace: str, group: str, features: FeatureGates
              ) -> dict[str, Amount]:
    """getNodeResource: what the node has left, as util.ResourceList builds it, once
    the group's own pods (by the label, in its namespace) are taken off it."""
    requested = dict(info.requested)
    pods = len(info.pods)
    for pod in info.pods.values():
        if pod.namespace == namespace and pod.labels.get(COSCHEDULING_LABEL) == group:
            pods -= 1
            for name, value in accounting(pod, features)[0]:
                requested[name] = requested.get(name, 0) - value
    alloc = info.node.allocatable
    left = {
        CPU: Amount(alloc.get(CPU, 0) - requested.get(CPU, 0), -3, GO_DECIMAL_SI),
        MEMORY: Amount(alloc.get(MEMORY, 0) - requested.get(MEMORY, 0), 0, GO_BINARY_SI),
        PODS: Amount(alloc.get(PODS, 0) - pods, 0, GO_BINARY_SI),
        EPHEMERAL_STORAGE: Amount(alloc.get(EPHEMERAL_STORAGE, 0)
                                  - requested.get(EPHEMERAL_STORAGE, 0), 0, GO_BINARY_SI),
    }
    for name, value in alloc.items():
        if is_scalar_resource_name(name):
            fmt = GO_BINARY_SI if name.startswith("hugepages-") else GO_DECIMAL_SI
            left[name] = Amount(value - requested.get(name, 0), 0, fmt)
    return left


def resource_gap(nodes: Iterable[NodeInfo], min_resources: Mapping[str, Any],
                 min_member: int, namespace: str, group: str,
                 features: FeatureGates) -> str | None:
    """None when the cluster can hold the group; else upstream's error text."""
    wanted = {name: Amount.parse(raw) for name, raw in min_resources.items()}
    wanted[PODS] = Amount(min_member, 0, GO_DECIMAL_SI)
    for info in nodes:
        left = node_left(info, namespace, group, features)
        for name in list(wanted):
            amount = wanted[name]
            amount.sub(left.get(name, _ZERO))
            if amount.value <= 0:
                del wanted[name]
        if not wanted:
            return None
    shown = " ".join(f"{name}:{wanted[name].go_struct()}" for name in sorted(wanted))
    return f"resource gap: map[{shown}]"
