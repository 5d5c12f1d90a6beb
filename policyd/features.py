"""kube-scheduler v1.36's scheduler-side feature gates, as policyd models them.

A cluster that turns a gate off (or a later release that turns one on) is matched by
configuration (`policyd run --feature-gates`, the profile's `featureGates`), not by a new
build. The table holds every gate v1.36's scheduler reads (`pkg/scheduler/.../feature`,
`Features`, and the queue's own), each with upstream's v1.36 default, stage and lock
(k8s.io/kubernetes v1.36.3, pkg/features/kube_features.go), and whether policyd models
its behaviour:

- a modelled gate may be set either way (unless upstream locks it);
- a gate policyd does not model may be set only to the value policyd behaves as (its
  v1.36 default, which is what policyd implements); any other value is refused,
  saying so, rather than silently running the other behaviour;
- a name in no row is refused, naming the known ones.

A leaf module: it imports nothing from policyd, so any layer may read the gates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType


class Stage(Enum):
    ALPHA = "Alpha"
    BETA = "Beta"
    GA = "GA"


@dataclass(frozen=True, slots=True)
class Gate:
    name: str
    default: bool  # v1.36's default
    stage: Stage
    locked: bool = False  # LockToDefault upstream: no other value is accepted
    modelled: bool = True  # policyd implements both values


_A, _B, _GA = Stage.ALPHA, Stage.BETA, Stage.GA

# Upstream's names; alphabetical. `modelled=False`: policyd behaves as the default only.
GATES: tuple[Gate, ...] = (
    Gate("DRAAdminAccess", True, _GA, locked=True, modelled=False),
    Gate("DRAConsumableCapacity", True, _B, modelled=False),
    Gate("DRADeviceBindingConditions", True, _B, modelled=False),
    Gate("DRADeviceTaintRules", False, _B, modelled=False),
    Gate("DRADeviceTaints", True, _B, modelled=False),
    Gate("DRAExtendedResource", True, _B, modelled=False),
    Gate("DRAListTypeAttributes", False, _A, modelled=False),
    Gate("DRANodeAllocatableResources", False, _A, modelled=False),
    Gate("DRAPartitionableDevices", True, _B, modelled=False),
    Gate("DRAPrioritizedList", True, _GA, modelled=False),
    Gate("DRAResourceClaimDeviceStatus", True, _B, modelled=False),
    Gate("DRASchedulerFilterTimeout", True, _B, modelled=False),
    Gate("DRAWorkloadResourceClaims", False, _A, modelled=False),
    Gate("DynamicResourceAllocation", True, _GA, locked=True, modelled=False),
    Gate("GangScheduling", False, _A, modelled=False),
    Gate("GenericWorkload", False, _A, modelled=False),
    Gate("InPlacePodLevelResourcesVerticalScaling", True, _B),
    Gate("InPlacePodVerticalScaling", True, _GA, locked=True),
    Gate("MatchLabelKeysInPodTopologySpread", True, _B, modelled=False),
    Gate("NodeDeclaredFeatures", True, _B),
    Gate("NodeInclusionPolicyInPodTopologySpread", True, _GA, locked=True),
    Gate("NominatedNodeNameForExpectation", True, _B),
    Gate("OpportunisticBatching", True, _B, modelled=False),
    Gate("PodLevelResources", True, _B, modelled=False),
    Gate("SchedulerAsyncAPICalls", False, _B, modelled=False),
    Gate("SchedulerAsyncPreemption", True, _B, modelled=False),
    Gate("SchedulerPopFromBackoffQ", True, _B),
    Gate("SchedulerQueueingHints", True, _GA, locked=True),
    Gate("SidecarContainers", True, _GA, locked=True),
    Gate("StorageCapacityScoring", False, _A),
    Gate("TaintTolerationComparisonOperators", False, _A, modelled=False),
    Gate("TopologyAwareWorkloadScheduling", False, _A, modelled=False),
    Gate("VolumeAttributesClass", True, _GA, locked=True),
    Gate("VolumeLimitScaling", False, _A),
    Gate("WorkloadAwarePreemption", False, _A, modelled=False),
)

BY_NAME: Mapping[str, Gate] = MappingProxyType({g.name: g for g in GATES})


class FeatureGateError(ValueError):
    """A gate setting policyd refuses; the message says which and why."""


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """Every gate's value: v1.36's defaults with the settings given applied."""

    values: Mapping[str, bool]

    def enabled(self, name: str) -> bool:
        """The value of `name`; a name not in the table is a programming error."""
        return self.values[name]

    def overrides(self) -> dict[str, bool]:
        """The settings that differ from v1.36's defaults (for logs and check-config)."""
        return {n: v for n, v in self.values.items() if v != BY_NAME[n].default}


DEFAULTS = FeatureGates(MappingProxyType({g.name: g.default for g in GATES}))


def known_names() -> str:
    return ", ".join(g.name for g in GATES)


def check_setting(name: str, value: bool) -> str | None:
    """Why `name=value` is refused, or None when policyd accepts it."""
    gate = BY_NAME.get(name)
    if gate is None:
        return (f"unrecognized feature gate: {name} (kube-scheduler v1.36's gates that "
                f"policyd knows: {known_names()})")
    if gate.locked and value != gate.default:
        return (f"cannot set feature gate {name} to {str(value).lower()}, feature is "
                f"locked to {str(gate.default).lower()}")
    if not gate.modelled and value != gate.default:
        return (f"feature gate {name}={str(value).lower()} is not supported: policyd "
                f"implements only kube-scheduler v1.36's default "
                f"({name}={str(gate.default).lower()})")
    return None


def with_settings(settings: Iterable[tuple[str, bool]],
                  base: FeatureGates = DEFAULTS) -> FeatureGates:
    """`base` with `settings` applied; the first refused setting raises."""
    values = dict(base.values)
    for name, value in settings:
        problem = check_setting(name, value)
        if problem is not None:
            raise FeatureGateError(problem)
        values[name] = value
    return FeatureGates(MappingProxyType(values))


def parse_flag(text: str) -> list[tuple[str, bool]]:
    """`NAME=BOOL,NAME=BOOL` as component-base's `--feature-gates` reads it: booleans
    as Go's strconv.ParseBool takes them, surrounding spaces ignored, empty items
    skipped. Raises FeatureGateError naming the item."""
    out: list[tuple[str, bool]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {name}")
        value = _GO_BOOLS.get(raw)
        if value is None:
            raise FeatureGateError(f"invalid value of {name}={raw}, err: strconv.ParseBool: "
                                   f'parsing "{raw}": invalid syntax')
        out.append((name, value))
    return out


_GO_BOOLS = {
    **dict.fromkeys(("1", "t", "T", "true", "TRUE", "True"), True),
    **dict.fromkeys(("0", "f", "F", "false", "FALSE", "False"), False),
}
