"""Which optional allocator behaviours are on (upstream's structured.Features).

Derived from the feature gates exactly as the DynamicResources plugin derives them
(AllocatorFeatures): one flag per gate, except that binding conditions need both
DRADeviceBindingConditions and DRAResourceClaimDeviceStatus.
"""

from __future__ import annotations

from dataclasses import dataclass

from policyd.features import DEFAULTS, FeatureGates


@dataclass(frozen=True, slots=True)
class AllocatorFeatures:
    admin_access: bool = True
    consumable_capacity: bool = True
    device_binding_and_status: bool = True
    device_taints: bool = True
    partitionable_devices: bool = True
    prioritized_list: bool = True

    @classmethod
    def from_gates(cls, gates: FeatureGates = DEFAULTS) -> AllocatorFeatures:
        on = gates.enabled
        return cls(
            admin_access=on("DRAAdminAccess"),
            consumable_capacity=on("DRAConsumableCapacity"),
            device_binding_and_status=(on("DRADeviceBindingConditions")
                                       and on("DRAResourceClaimDeviceStatus")),
            device_taints=on("DRADeviceTaints"),
            partitionable_devices=on("DRAPartitionableDevices"),
            prioritized_list=on("DRAPrioritizedList"),
        )


# Every flag off: what a cluster with only the GA core of DRA allocates.
NONE = AllocatorFeatures(False, False, False, False, False, False)
