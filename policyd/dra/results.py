"""What an allocation produces for one claim: upstream's resource.k8s.io/v1
AllocationResult, as values and as the JSON written to status.allocation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.dra.nodes import NodeSelector
from policyd.dra.objects import Quantity, Toleration

SOURCE_CLASS = "FromClass"
SOURCE_CLAIM = "FromClaim"


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str  # `request` or `request/subrequest`
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[Toleration, ...] = ()
    binding_conditions: tuple[str, ...] | None = None
    binding_failure_conditions: tuple[str, ...] | None = None
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] | None = None

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request, "driver": self.driver,
                               "pool": self.pool, "device": self.device}
        if self.admin_access is not None:
            out["adminAccess"] = self.admin_access
        if self.tolerations:
            # With the API server's default operator, as a stored claim has it.
            out["tolerations"] = [{**t.raw, "operator": t.operator}
                                  for t in self.tolerations]
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
        if self.binding_failure_conditions:
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.consumed_capacity:
            out["consumedCapacity"] = {k: self.consumed_capacity[k].text
                                       for k in sorted(self.consumed_capacity)}
        return out


@dataclass(frozen=True, slots=True)
class ConfigResult:
    source: str  # FromClass or FromClaim
    requests: tuple[str, ...]
    configuration: Mapping[str, Any]  # the DeviceConfiguration (`opaque`)

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        if self.requests:
            out["requests"] = list(self.requests)
        out.update(self.configuration)
        return out


@dataclass(frozen=True, slots=True)
class AllocationResult:
    devices: tuple[DeviceResult, ...]
    config: tuple[ConfigResult, ...] = ()
    # None: usable from every node.
    node_selector: NodeSelector | None = None

    def to_api(self) -> dict[str, Any]:
        """status.allocation without allocationTimestamp (the writer sets it)."""
        devices: dict[str, Any] = {}
        if self.devices:
            devices["results"] = [d.to_api() for d in self.devices]
        if self.config:
            devices["config"] = [c.to_api() for c in self.config]
        # `devices` is a struct upstream, written even when empty.
        out: dict[str, Any] = {"devices": devices}
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector.to_api()
        return out
