from __future__ import annotations

from policyd.dra.features import AllocatorFeatures
from policyd.features import DEFAULTS, FeatureGates


def test_v1_36_defaults_turn_every_allocator_feature_on() -> None:
    assert AllocatorFeatures.from_gates(DEFAULTS) == AllocatorFeatures()


def test_binding_conditions_need_both_gates() -> None:
    # policyd refuses to turn these gates off today (not modelled), so the values are
    # built directly: the derivation is what is under test.
    gates = FeatureGates({**DEFAULTS.values, "DRAResourceClaimDeviceStatus": False,
                          "DRAPrioritizedList": False})
    features = AllocatorFeatures.from_gates(gates)
    assert not features.device_binding_and_status
    assert not features.prioritized_list
    assert features.consumable_capacity and features.device_taints
