"""Turn a profile's `plugins` and `pluginConfig` into a Framework, by upstream's rules.

Follows KubeSchedulerConfiguration v1: the defaults are enabled through `multiPoint`;
per extension point, `disabled` removes defaults (`"*"` all of them) and `enabled`
overrides a default in place or appends; `multiPoint` plugins then expand to every
extension point they implement, after the ones configured at that point explicitly.
A score weight of 0 or none is 1. Unlike upstream, every problem is collected (with its
path in the profile) instead of failing on the first when the framework is built.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from policyd.framework.interfaces import (
    FilterPlugin,
    Plugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ScorePlugin,
)
from policyd.framework.runtime import Framework, WeightedScorePlugin
from policyd.framework.status import PluginError
from policyd.plugins import registry

POINTS = ("queueSort", "preFilter", "filter", "preScore", "score")
# Upstream extension points policyd has no plugins for; accepted so that profiles copied
# from kube-scheduler can disable upstream plugins there.
OTHER_POINTS = ("preEnqueue", "postFilter", "reserve", "permit", "preBind", "bind",
                "postBind")


@dataclass(frozen=True, slots=True)
class Problem:
    path: str  # JSON-path-like, relative to the profile: plugins.filter.enabled[0].name
    message: str


class ProfileError(Exception):
    def __init__(self, problems: Sequence[Problem]) -> None:
        super().__init__("; ".join(f"{p.path}: {p.message}" for p in problems))
        self.problems = list(problems)


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    weight: int
    path: str


def closest_name(name: str, candidates: Sequence[str]) -> str | None:
    """The registered name a misspelt one most likely meant (case-insensitive first)."""
    for c in candidates:
        if c.lower() == name.lower():
            return c
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


class _Catalog:
    """Built-ins plus compiled policies, by name."""

    def __init__(self, policies: Mapping[str, Plugin]) -> None:
        self.policies = policies

    def names(self) -> list[str]:
        return [*registry.builtin_names(), *self.policies]

    def points(self, name: str) -> frozenset[str] | None:
        if name in self.policies:
            return registry.extension_points_of(self.policies[name])
        spec = registry.builtin(name)
        return spec.extension_points if spec else None

    def default_weight(self, name: str) -> int:
        if name in self.policies:
            return int(getattr(self.policies[name], "default_weight", 1) or 1)
        spec = registry.builtin(name)
        return spec.default_weight or 1 if spec else 1


def _entries(plugin_set: Any, path: str, key: str, problems: list[Problem]) -> list[_Entry]:
    if not isinstance(plugin_set, Mapping):
        return []
    out = []
    for i, item in enumerate(plugin_set.get(key) or []):
        p = f"{path}.{key}[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            problems.append(Problem(p, "must be an object with a string name"))
            continue
        weight = item.get("weight") or 0
        out.append(_Entry(item["name"], weight if isinstance(weight, int) else 0, p))
    return out


def _merge(defaults: list[_Entry], enabled: list[_Entry], disabled: set[str]) -> list[_Entry]:
    """mergePluginSet: custom entries replace defaults in place, the rest are appended."""
    custom = {e.name: i for i, e in enumerate(enabled)}
    replaced: set[int] = set()
    merged: list[_Entry] = []
    if "*" not in disabled:
        for d in defaults:
            if d.name in disabled:
                continue
            if d.name in custom:
                merged.append(enabled[custom[d.name]])
                replaced.add(custom[d.name])
            else:
                merged.append(d)
    merged.extend(e for i, e in enumerate(enabled) if i not in replaced)
    return merged


def build_framework(
    profile: Mapping[str, Any],
    policies: Mapping[str, Plugin] | None = None,
    *,
    seed: int | None = None,
    path: str = "",
) -> Framework:
    """A Framework for one profile (`schedulerName`, `plugins`, `pluginConfig`).

    Raises ProfileError listing every problem: unknown plugin names (with the closest
    registered one), plugins enabled where they have no such extension point, pluginConfig
    for a plugin that is not enabled, duplicate pluginConfig, invalid plugin args."""
    policies = dict(policies or {})
    catalog = _Catalog(policies)
    problems: list[Problem] = []
    prefix = f"{path}." if path else ""
    plugins_cfg = profile.get("plugins") or {}
    known = catalog.names()

    def check_name(entry: _Entry, enabling: bool) -> bool:
        if catalog.points(entry.name) is not None or entry.name == "*":
            return True
        if entry.name in registry.UPSTREAM_ONLY:
            if enabling:
                problems.append(Problem(f"{prefix}{entry.path}.name",
                                        f"plugin {entry.name!r} is a kube-scheduler plugin "
                                        "that policyd does not implement"))
                return False
            return True
        hint = closest_name(entry.name, known)
        msg = f'plugin "{entry.name}" is not registered'
        if hint:
            msg += f'; did you mean "{hint}"?'
        problems.append(Problem(f"{prefix}{entry.path}.name", msg))
        return False

    defaults = [_Entry(n, catalog.default_weight(n), "defaults") for n in
                (*registry.DEFAULT_PROFILE_ORDER, *policies)]
    per_point_enabled: dict[str, list[_Entry]] = {}
    per_point_disabled: dict[str, set[str]] = {}
    for point in ("multiPoint", *POINTS, *OTHER_POINTS):
        point_path = f"plugins.{point}"
        cfg = plugins_cfg.get(point) if isinstance(plugins_cfg, Mapping) else None
        enabled = [e for e in _entries(cfg, point_path, "enabled", problems) if check_name(e, True)]
        disabled_entries = _entries(cfg, point_path, "disabled", problems)
        disabled = {e.name for e in disabled_entries if check_name(e, False)}
        if point in OTHER_POINTS:
            for e in enabled:
                problems.append(Problem(f"{prefix}{e.path}.name",
                                        f"policyd has no {point} plugins"))
            continue
        for e in enabled:
            points = catalog.points(e.name) or frozenset()
            if point == "multiPoint" and not points:
                problems.append(Problem(f"{prefix}{e.path}.name",
                                        f"plugin {e.name!r} implements no extension point"))
            elif point != "multiPoint" and point not in points:
                problems.append(Problem(
                    f"{prefix}{e.path}.name",
                    f"plugin {e.name!r} does not implement the {point} extension point "
                    f"(it implements: {', '.join(sorted(points)) or 'none'})"))
        per_point_enabled[point] = _merge(defaults if point == "multiPoint" else [],
                                          enabled, disabled)
        per_point_disabled[point] = disabled

    # Expand multiPoint into each extension point (expandMultiPointPlugins).
    final: dict[str, list[_Entry]] = {}
    for point in POINTS:
        specific = [e for e in per_point_enabled[point] if point in (catalog.points(e.name) or ())]
        specific_names = {e.name for e in specific}
        disabled = per_point_disabled[point]
        overrides: list[_Entry] = []
        from_multi: list[_Entry] = []
        for e in per_point_enabled["multiPoint"]:
            if point not in (catalog.points(e.name) or ()):
                continue
            if "*" in disabled or e.name in disabled:
                continue
            if e.name in specific_names:
                continue
            from_multi.append(e)
        overrides = [e for e in specific
                     if e.name in {m.name for m in per_point_enabled["multiPoint"]}]
        rest = [e for e in specific if e not in overrides]
        final[point] = overrides + from_multi + rest

    # pluginConfig: one entry per plugin, only for plugins that are enabled somewhere.
    enabled_names = {e.name for entries in final.values() for e in entries}
    args_by_name: dict[str, Mapping[str, Any] | None] = {}
    for i, pc in enumerate(profile.get("pluginConfig") or []):
        pc_path = f"{prefix}pluginConfig[{i}]"
        if not isinstance(pc, Mapping) or not isinstance(pc.get("name"), str):
            problems.append(Problem(pc_path, "must be an object with a string name"))
            continue
        name = pc["name"]
        if name in args_by_name:
            problems.append(Problem(pc_path, f"Duplicate value: {name!r}"))
            continue
        if name not in enabled_names:
            if catalog.points(name) is None and name not in registry.UPSTREAM_ONLY:
                hint = closest_name(name, known)
                msg = f'plugin "{name}" is not registered'
                problems.append(Problem(f"{pc_path}.name",
                                        msg + (f'; did you mean "{hint}"?' if hint else "")))
            else:
                problems.append(Problem(f"{pc_path}.name",
                                        f"pluginConfig for plugin {name!r}, which is not "
                                        "enabled in this profile"))
            continue
        args = pc.get("args")
        if args is not None and not isinstance(args, Mapping):
            problems.append(Problem(f"{pc_path}.args", "must be an object"))
            continue
        args_by_name[name] = args

    if len(final["queueSort"]) > 1:
        problems.append(Problem(f"{prefix}plugins.queueSort",
                                "only one queueSort plugin can be enabled"))

    instances: dict[str, Plugin] = {}
    for name in sorted(enabled_names):
        if name in policies:
            instances[name] = policies[name]
            continue
        spec = registry.builtin(name)
        assert spec is not None
        try:
            instances[name] = spec.factory(args_by_name.get(name))
        except PluginError as exc:
            idx = next((i for i, pc in enumerate(profile.get("pluginConfig") or [])
                        if isinstance(pc, Mapping) and pc.get("name") == name), None)
            base = f"{prefix}pluginConfig[{idx}].args" if idx is not None else f"{prefix}plugins"
            for field_path, message in exc.problems:
                problems.append(Problem(f"{base}.{field_path}" if field_path else base,
                                        message))
    if problems:
        raise ProfileError(problems)

    def plugins_at(point: str) -> list[Any]:
        return [instances[e.name] for e in final[point]]

    queue_sort: list[QueueSortPlugin] = plugins_at("queueSort")
    pre_filter: list[PreFilterPlugin] = plugins_at("preFilter")
    filters: list[FilterPlugin] = plugins_at("filter")
    pre_score: list[PreScorePlugin] = plugins_at("preScore")
    scores = [WeightedScorePlugin(cast(ScorePlugin, instances[e.name]),
                                  e.weight or catalog.default_weight(e.name))
              for e in final["score"]]
    return Framework(
        str(profile.get("schedulerName") or "policyd"),
        queue_sort=queue_sort[0] if queue_sort else None,
        pre_filter=pre_filter,
        filter=filters,
        pre_score=pre_score,
        score=scores,
        seed=seed,
    )


def default_framework(
    policies: Sequence[Plugin] = (), *, scheduler_name: str = "policyd", seed: int | None = None
) -> Framework:
    """kube-scheduler's default profile plus every given policy, at default weights."""
    return build_framework({"schedulerName": scheduler_name},
                           {p.name: p for p in policies}, seed=seed)
