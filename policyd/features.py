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
- a name in no row is refused, naming the known ones;
- once every setting is accepted, a gate left on whose dependencies are off is
  refused, as component-base refuses it. Turning NodeDeclaredFeatures off therefore
  takes the gates that depend on it off too, some of which the scheduler never reads:
  those few are rows as well (`Gate.scheduler` False), so that the value that starts
  kube-scheduler starts policyd.

The flag's grammar (an optional `kube:` prefix, repeated flags joined) and every
error text are component-base v0.36.3's (cli/flag, compatibility/registry.go,
featuregate/feature_gate.go).

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
    # False: a gate kube-scheduler never reads, listed only because a scheduler gate's
    # dependencies involve it (turning NodeDeclaredFeatures off takes these off too),
    # so kube-scheduler's own --feature-gates value is accepted as it is. Either
    # value is accepted (unless locked) and changes nothing in policyd.
    scheduler: bool = True


_A, _B, _GA = Stage.ALPHA, Stage.BETA, Stage.GA

# Upstream's names; the scheduler's alphabetical, then the others a dependency brings
# in. `modelled=False`: policyd behaves as the default only.
GATES: tuple[Gate, ...] = (
    Gate("DRAAdminAccess", True, _GA, locked=True, modelled=False),
    Gate("DRAConsumableCapacity", True, _B, modelled=False),
    Gate("DRADeviceBindingConditions", True, _B, modelled=False),
    Gate("DRADeviceTaintRules", False, _B, modelled=False),
    Gate("DRADeviceTaints", True, _B, modelled=False),
    Gate("DRAExtendedResource", True, _B),
    Gate("DRAListTypeAttributes", False, _A, modelled=False),
    Gate("DRANodeAllocatableResources", False, _A, modelled=False),
    Gate("DRAPartitionableDevices", True, _B, modelled=False),
    Gate("DRAPrioritizedList", True, _GA, modelled=False),
    Gate("DRAResourceClaimDeviceStatus", True, _B, modelled=False),
    Gate("DRASchedulerFilterTimeout", True, _B, modelled=False),
    Gate("DRAWorkloadResourceClaims", False, _A, modelled=False),
    Gate("DynamicResourceAllocation", True, _GA, locked=True, modelled=False),
    Gate("GangScheduling", False, _A),
    Gate("GenericWorkload", False, _A),
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
    # Not read by the scheduler: see Gate.scheduler.
    Gate("ContainerRestartRules", True, _B, scheduler=False),
    Gate("ExtendWebSocketsToKubelet", True, _B, scheduler=False),
    Gate("InPlacePodVerticalScalingInitContainers", True, _B, scheduler=False),
    Gate("RestartAllContainersOnContainerExits", True, _B, scheduler=False),
    Gate("UserNamespacesHostNetworkSupport", False, _A, scheduler=False),
    Gate("UserNamespacesSupport", True, _GA, locked=True, scheduler=False),
)

BY_NAME: Mapping[str, Gate] = MappingProxyType({g.name: g for g in GATES})


# Upstream's dependencies among these gates (kube_features.go,
# defaultKubernetesFeatureGateDependencies): a gate that is on needs each of these on.
# Every dependency of a gate in the table is in the table too.
DEPENDENCIES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "DRAAdminAccess": ("DynamicResourceAllocation",),
    "DRAConsumableCapacity": ("DynamicResourceAllocation",),
    "DRADeviceBindingConditions": ("DynamicResourceAllocation",
                                   "DRAResourceClaimDeviceStatus"),
    "DRADeviceTaintRules": ("DRADeviceTaints",),
    "DRADeviceTaints": ("DynamicResourceAllocation",),
    "DRAExtendedResource": ("DynamicResourceAllocation",),
    "DRAListTypeAttributes": ("DynamicResourceAllocation",),
    "DRANodeAllocatableResources": ("DynamicResourceAllocation",),
    "DRAPartitionableDevices": ("DynamicResourceAllocation",),
    "DRAPrioritizedList": ("DynamicResourceAllocation",),
    "DRASchedulerFilterTimeout": ("DynamicResourceAllocation",),
    "DRAWorkloadResourceClaims": ("DynamicResourceAllocation", "GenericWorkload"),
    "GangScheduling": ("GenericWorkload",),
    # So `NodeDeclaredFeatures=false` alone is refused, by kube-scheduler too: it
    # takes this gate and the four below that depend on it off with it.
    "InPlacePodLevelResourcesVerticalScaling": ("InPlacePodVerticalScaling",
                                                "PodLevelResources",
                                                "NodeDeclaredFeatures"),
    "TopologyAwareWorkloadScheduling": ("GenericWorkload",),
    "WorkloadAwarePreemption": ("GangScheduling",),
    # Gates the scheduler does not read (Gate.scheduler), on NodeDeclaredFeatures.
    "ExtendWebSocketsToKubelet": ("NodeDeclaredFeatures",),
    "InPlacePodVerticalScalingInitContainers": ("InPlacePodVerticalScaling",
                                                "NodeDeclaredFeatures"),
    "RestartAllContainersOnContainerExits": ("ContainerRestartRules",
                                             "NodeDeclaredFeatures"),
    "UserNamespacesHostNetworkSupport": ("UserNamespacesSupport", "NodeDeclaredFeatures"),
})


class FeatureGateError(ValueError):
    """Gate settings policyd refuses; `messages` says which and why, one per problem."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


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

    def describe(self) -> str:
        """`A=false,B=true` (the flag's form) of the non-default settings, or
        "defaults"."""
        return ",".join(f"{n}={str(v).lower()}"
                        for n, v in sorted(self.overrides().items())) or "defaults"


DEFAULTS = FeatureGates(MappingProxyType({g.name: g.default for g in GATES}))


def known_names() -> str:
    return ", ".join(g.name for g in GATES)


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


def check_setting(name: str, value: bool) -> str | None:
    """Why `name=value` is refused, or None when policyd accepts it (component-base's
    wording for an unknown or locked gate, with the known names added)."""
    gate = BY_NAME.get(name)
    if gate is None:
        return (f"unrecognized feature gate: {name} (the kube-scheduler v1.36 gates "
                f"policyd knows: {known_names()})")
    if gate.locked and value != gate.default:
        return (f"cannot set feature gate {name} to {_go_bool(value)}, feature is "
                f"locked to {_go_bool(gate.default)}")
    if not gate.modelled and value != gate.default:
        return (f"feature gate {name}={_go_bool(value)} is not supported: policyd "
                f"implements only kube-scheduler v1.36's default "
                f"({name}={_go_bool(gate.default)})")
    return None


def dependency_problems(gates: FeatureGates) -> list[str]:
    """component-base's check once every setting is applied: each gate that is on
    with a dependency off, in the table's order."""
    out = []
    for name, deps in DEPENDENCIES.items():
        off = [d for d in deps if not gates.enabled(d)]
        if gates.enabled(name) and off:
            out.append(f"{name} is enabled, but depends on features that are disabled: "
                       f"[{' '.join(off)}]")
    return sorted(out)


def check_settings(settings: Iterable[tuple[str, bool]]) -> dict[str, bool]:
    """`settings` by name (a later setting of a name wins, as in a Go map), or
    FeatureGateError with every refusal; as component-base does, an unknown name is
    the only error reported. Dependencies are not checked: other settings (a
    profile's) may still come."""
    given = dict(settings)
    unknown = next((n for n in given if n not in BY_NAME), None)
    if unknown is not None:
        raise FeatureGateError([check_setting(unknown, given[unknown]) or ""])
    refused = [p for n, v in given.items() if (p := check_setting(n, v)) is not None]
    if refused:
        raise FeatureGateError(refused)
    return given


def turning_off(name: str, base: FeatureGates = DEFAULTS) -> list[tuple[str, bool]]:
    """The settings that turn `name` off with every gate on in `base` that depends on
    it (directly or not): what `--feature-gates` must say for the result to be
    accepted, e.g. for NodeDeclaredFeatures."""
    off = [name]
    for gate in off:
        off.extend(n for n, deps in DEPENDENCIES.items()
                   if gate in deps and base.enabled(n) and n not in off)
    return [(n, False) for n in off]


def with_settings(settings: Iterable[tuple[str, bool]],
                  base: FeatureGates = DEFAULTS) -> FeatureGates:
    """`base` with `settings` applied; raises FeatureGateError with every refusal
    (`check_settings`), then, all accepted, with every unmet dependency."""
    given = check_settings(settings)
    gates = FeatureGates(MappingProxyType({**base.values, **given}))
    if problems := dependency_problems(gates):
        raise FeatureGateError(problems)
    return gates


def parse_flag(text: str) -> list[tuple[str, bool]]:
    """`[kube:]NAME=BOOL,...` as kube-scheduler v1.36's `--feature-gates` reads it
    (given more than once, the values joined with commas): component-base's
    ColonSeparatedMultimapStringString splits the items and an optional component
    prefix, each trimmed (so blank items vanish), then featureGate.Set reads
    `NAME=BOOL` with Go's strconv.ParseBool. Raises FeatureGateError in their words."""
    kube: list[str] = []
    prefixes: set[str] = set()
    for item in text.split(","):
        if not item:
            continue
        component, sep, rest = item.partition(":")
        if not sep:
            component, rest = "", component
        component = component.strip()
        if component not in ("", KUBE_COMPONENT):
            raise FeatureGateError([f"component not registered: {component}"])
        prefixes.add(component)
        kube.append(rest.strip())
    if len(prefixes) > 1:
        raise FeatureGateError(["set kube feature gates with default empty prefix or "
                                "kube: prefix consistently, do not mix use"])
    out: list[tuple[str, bool]] = []
    for item in kube:
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep:
            raise FeatureGateError([f"missing bool value for {name}"])
        value = _GO_BOOLS.get(raw)
        if value is None:
            raise FeatureGateError([f"invalid value of {name}={raw}, err: "
                                    f"strconv.ParseBool: parsing {go_quote(raw)}: "
                                    "invalid syntax"])
        out.append((name, value))
    return out


KUBE_COMPONENT = "kube"  # component-base's DefaultKubeComponent
_GO_BOOLS = {
    **dict.fromkeys(("1", "t", "T", "true", "TRUE", "True"), True),
    **dict.fromkeys(("0", "f", "F", "false", "FALSE", "False"), False),
}


def go_quote(text: str) -> str:
    """Go's strconv.Quote (what `%q` prints) for the strings a flag value can hold:
    backslash and double quote escaped, control characters as Go escapes them."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _CONTROL:
            out.append(_CONTROL[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif not ch.isprintable():
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_CONTROL = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
            "\t": "\\t", "\v": "\\v"}
