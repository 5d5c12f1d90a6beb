"""The one registry of built-in plugins: name -> factory, default weight, extension points.

Modules are imported on first use so that commands which never build a framework
(lint) do not pay for them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

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
}

# kube-scheduler's default profile, in its order (getDefaultPlugins with the feature
# gates on by default applied, v1.36), restricted to the plugins policyd has.
DEFAULT_PROFILE_ORDER = tuple(_MODULES)

# Upstream plugins policyd does not implement. A profile may disable them (configs are
# often copied from kube-scheduler) but not enable them.
UPSTREAM_ONLY = names.UPSTREAM_NOT_IMPLEMENTED


@dataclass(frozen=True, slots=True)
class PluginSpec:
    name: str
    factory: Callable[[Mapping[str, Any] | None], Plugin]
    default_weight: int | None
    extension_points: frozenset[str]


@cache
def builtin(name: str) -> PluginSpec | None:
    module_name = _MODULES.get(name)
    if module_name is None:
        return None
    module = importlib.import_module(f"policyd.plugins.{module_name}")
    plugin = module.new(None)
    return PluginSpec(
        name=name,
        factory=module.new,
        default_weight=getattr(module, "DEFAULT_WEIGHT", None),
        extension_points=extension_points_of(plugin),
    )


def builtin_names() -> tuple[str, ...]:
    return tuple(_MODULES)


def extension_points_of(plugin: object) -> frozenset[str]:
    """The config's extension points `plugin` serves: the Framework's classification."""
    return extension_points(plugin)
