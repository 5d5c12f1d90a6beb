"""The one registry of built-in plugins: name -> factory, default weight, extension points.

Modules are imported on first use so that commands which never build a framework
(lint) do not pay for them.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from policyd.features import DEFAULTS, FeatureGates
from policyd.framework.interfaces import Plugin, extension_points
from policyd.plugins import names

_MODULES = {
    names.PRIORITY_SORT: "queuesort.priority_sort",
    names.NODE_UNSCHEDULABLE: "nodeunschedulable.node_unschedulable",
    names.NODE_NAME: "nodename.node_name",
    names.TAINT_TOLERATION: "tainttoleration.taint_toleration",
    names.NODE_AFFINITY: "nodeaffinity.node_affinity",
    names.NODE_PORTS: "nodeports.node_ports",
    names.NODE_RESOURCES_FIT: "noderesources.fit",
    names.VOLUME_RESTRICTIONS: "volumerestrictions.volume_restrictions",
    names.NODE_VOLUME_LIMITS: "nodevolumelimits.csi",
    names.VOLUME_BINDING: "volumebinding.plugin",
    names.VOLUME_ZONE: "volumezone.volume_zone",
    names.POD_TOPOLOGY_SPREAD: "podtopologyspread.plugin",
    names.INTER_POD_AFFINITY: "interpodaffinity.plugin",
    names.DYNAMIC_RESOURCES: "dynamicresources.plugin",
    names.DEFAULT_PREEMPTION: "defaultpreemption.plugin",
    names.NODE_RESOURCES_BALANCED_ALLOCATION: "noderesources.balanced_allocation",
    names.IMAGE_LOCALITY: "imagelocality.image_locality",
    # Last: v1.36 appends it for its feature gate, after DefaultBinder.
    names.NODE_DECLARED_FEATURES: "nodedeclaredfeatures.node_declared_features",
    # Then v1.36's applyGangScheduling appends it, while GangScheduling is on.
    names.GANG_SCHEDULING: "gangscheduling.plugin",
}

# Out-of-tree plugins (scheduler-plugins'): registered under their upstream names, so
# a profile copied from a scheduler-plugins deployment enables them, but never in the
# default profile (kube-scheduler's has none of them).
_OUT_OF_TREE = {
    names.COSCHEDULING: "coscheduling.plugin",
}

# kube-scheduler's default profile, in its order (getDefaultPlugins with the feature
# gates on by default applied, v1.36), restricted to the plugins policyd has.
DEFAULT_PROFILE_ORDER = tuple(_MODULES)
# Default plugins that upstream's applyFeatureGates (apis/config/v1/default_plugins.go)
# adds only while their gate is on.
GATED_DEFAULTS = {names.NODE_DECLARED_FEATURES: "NodeDeclaredFeatures",
                  names.GANG_SCHEDULING: "GangScheduling"}


def default_profile_order(features: FeatureGates = DEFAULTS) -> tuple[str, ...]:
    """The default plugins under `features`, in upstream's order."""
    return tuple(n for n in DEFAULT_PROFILE_ORDER
                 if n not in GATED_DEFAULTS or features.enabled(GATED_DEFAULTS[n]))

# Upstream plugins policyd does not implement. A profile may disable them (configs are
# often copied from kube-scheduler) but not enable them.
UPSTREAM_ONLY = names.UPSTREAM_NOT_IMPLEMENTED


@dataclass(frozen=True, slots=True)
class PluginSpec:
    name: str
    factory: Callable[..., Plugin]  # new(args) or new(args, features=...)
    default_weight: int | None
    extension_points: frozenset[str]
    # Whether the factory takes the feature gates (`new(args, features=DEFAULTS)`):
    # upstream's FactoryAdapter hands every plugin `feature.Features`; here only the
    # plugins whose behaviour depends on a gate ask for them.
    gated: bool = False

    def make(self, args: Mapping[str, Any] | None,
             features: FeatureGates = DEFAULTS) -> Plugin:
        """The plugin for `args` under `features` (PluginError on invalid args)."""
        return self.factory(args, features=features) if self.gated else self.factory(args)


@cache
def builtin(name: str) -> PluginSpec | None:
    module_name = _MODULES.get(name) or _OUT_OF_TREE.get(name)
    if module_name is None:
        return None
    module = importlib.import_module(f"policyd.plugins.{module_name}")
    plugin = module.new(None)
    return PluginSpec(
        name=name,
        factory=module.new,
        default_weight=getattr(module, "DEFAULT_WEIGHT", None),
        extension_points=extension_points_of(plugin),
        gated="features" in inspect.signature(module.new).parameters,
    )


def builtin_names() -> tuple[str, ...]:
    """Every plugin policyd has: kube-scheduler's, then the out-of-tree ones."""
    return (*_MODULES, *_OUT_OF_TREE)


def out_of_tree_names() -> tuple[str, ...]:
    """The registered plugins that are not kube-scheduler's (scheduler-plugins')."""
    return tuple(_OUT_OF_TREE)


def extension_points_of(plugin: object) -> frozenset[str]:
    """The config's extension points `plugin` serves: the Framework's classification."""
    return extension_points(plugin)
