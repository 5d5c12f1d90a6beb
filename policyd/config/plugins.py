"""Turn a profile's `plugins` and `pluginConfig` into a Framework, by upstream's rules.

Follows KubeSchedulerConfiguration v1: the defaults are enabled through `multiPoint`;
per extension point, `disabled` removes defaults (`"*"` all of them) and `enabled`
overrides a default in place or appends; `multiPoint` plugins then expand to every
extension point they implement, after the ones configured at that point explicitly.
A score weight of 0 or none is 1. Unlike upstream, every problem is reported (with its
JSON path in the profile document and a rule id) instead of failing on the first, so
`policyd check-config` can point at each one: the checks (`check_profile`) report to a
`Report` callable, and `build_framework` only builds what they found valid.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from policyd.features import DEFAULTS, FeatureGates
from policyd.framework import MAX_NODE_SCORE
from policyd.framework.interfaces import (
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from policyd.framework.runtime import Framework, WeightedScorePlugin
from policyd.framework.status import PluginError
from policyd.model.spelling import closest
from policyd.plugins import registry
from policyd.problems import ERROR, Problem
from policyd.sourcefile import JsonPath, format_path

POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
          "reserve", "permit", "preBind")
# Upstream extension points policyd has no plugins for; accepted so that profiles copied
# from kube-scheduler can disable upstream plugins there.
OTHER_POINTS = ("bind", "postBind", "placementGenerate", "placementScore")

# Rule ids of the problems found here (the lint rule namespace of `check-config`).
RULE_UNKNOWN = "plugin-unknown"
RULE_UPSTREAM_ONLY = "plugin-not-implemented"
RULE_EXTENSION_POINT = "extension-point"
RULE_DUPLICATE_PLUGIN = "plugin-duplicate"
RULE_CONFIG_UNUSED = "plugin-config-unused"
RULE_CONFIG_DUPLICATE = "plugin-config-duplicate"
RULE_ARGS = "plugin-args"
RULE_QUEUE_SORT = "queue-sort"
RULE_SHAPE = "schema"
RULE_TOTAL_SCORE = "out-of-range"
# MaxTotalScore (math.MaxInt64): what every score plugin's weight x MaxNodeScore may add
# up to in one profile.
MAX_TOTAL_SCORE = 2**63 - 1


# Where the checks send each problem: its JSON path from the document root, rule id and
# message. Profile validation places them in the file; `build_framework` collects them.
Report = Callable[[JsonPath, str, str], None]


class ProfileError(Exception):
    """A profile `build_framework` cannot build: its problems, without a position (the
    profile may have no file)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.lines()))

    def lines(self) -> list[str]:
        """`path: message` per problem (the message alone at the document's root)."""
        return [f"{p.path}: {p.message}" if p.path else p.message for p in self.problems]


class _Collect(list[Problem]):
    """A `Report` that keeps the problems, unplaced."""

    def __call__(self, where: JsonPath, rule: str, message: str) -> None:
        self.append(Problem("", 0, 0, rule, ERROR, message, format_path(where)))


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    weight: int
    where: JsonPath


_SEGMENT = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")


def parse_field_path(text: str) -> JsonPath:
    """`scoringStrategy.resources[0].weight` -> ("scoringStrategy", "resources", 0,
    "weight"): PluginError's field paths, so they can be placed in the file."""
    out: list[str | int] = []
    for m in _SEGMENT.finditer(text):
        out.append(int(m.group(1)) if m.group(1) is not None else m.group(2))
    return tuple(out)


def closest_name(name: str, candidates: Sequence[str]) -> str | None:
    """The registered name a misspelt one most likely meant (case-insensitive first)."""
    if name in candidates:
        return name
    found = closest(name, candidates)
    return found[0] if found else None


def not_registered(name: str, candidates: Sequence[str]) -> str:
    hint = closest_name(name, candidates)
    return f'plugin "{name}" is not registered' + (f'; did you mean "{hint}"?' if hint else "")


def upstream_only(name: str) -> str:
    return f'policyd has no plugin "{name}" (a kube-scheduler plugin policyd does not implement)'


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


def _entries(plugin_set: Any, where: JsonPath, key: str, report: Report) -> list[_Entry]:
    if not isinstance(plugin_set, Mapping):
        return []
    items = plugin_set.get(key) or []
    if not isinstance(items, list):
        return []
    out = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        w = (*where, key, i)
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            report(w, RULE_SHAPE, "must be an object with a string name")
            continue
        name = item["name"]
        if name in seen:
            report((*w, "name"), RULE_DUPLICATE_PLUGIN, f'Duplicate value: "{name}"')
            continue
        seen.add(name)
        out.append(_Entry(name, _weight(item.get("weight")), w))
    return out


def _weight(value: Any) -> int:
    """A plugin entry's weight (0: unset). An integral float is its integer, as upstream
    reads `5.0` (the JSON it converts YAML to says 5); anything else the schema reports
    counts as unset here."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _check_total_score(entries: Sequence[_Entry], catalog: _Catalog, path: JsonPath,
                       report: Report) -> None:
    """getScoreWeights: the score plugins' weights x MaxNodeScore must add up to at most
    MaxTotalScore (2^63-1), or a node's total could overflow int64."""
    total = 0
    for e in entries:
        weight = e.weight or catalog.default_weight(e.name)
        if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
            where = (*e.where, "weight") if e.where else (*path, "plugins")
            report(where, RULE_TOTAL_SCORE,
                   f"Invalid value: {weight}: total score of Score plugins could overflow "
                   f"(the weights x {MAX_NODE_SCORE} must add up to at most "
                   f"{MAX_TOTAL_SCORE}, MaxTotalScore)")
            return
        total += weight * MAX_NODE_SCORE


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


@dataclass(frozen=True, slots=True)
class ResolvedProfile:
    """A profile after expansion: the plugins at each extension point, in order, and the
    args of each enabled plugin (None: defaults)."""

    scheduler_name: str
    points: Mapping[str, Sequence[_Entry]]
    args: Mapping[str, Mapping[str, Any] | None]

    def names_at(self, point: str) -> list[str]:
        return [e.name for e in self.points.get(point, ())]


def resolve_profile(
    profile: Mapping[str, Any],
    policies: Mapping[str, Plugin] | None = None,
    *,
    path: JsonPath = (),
    report: Report,
    features: FeatureGates = DEFAULTS,
) -> ResolvedProfile:
    """Expand one profile's `plugins` and collect its `pluginConfig`, by upstream's rules.
    The defaults are those of `features` (a gated default plugin is left out while its
    gate is off; enabled explicitly, it is built and does what its gate says).

    Reports every problem found: unknown plugin names (with the closest registered one),
    plugins enabled where they have no such extension point, the same plugin enabled
    twice at one point, pluginConfig for a plugin that is not enabled, duplicate
    pluginConfig, more than one queueSort plugin. Plugin args are checked by
    `check_profile`, which runs each plugin's factory."""
    policies = dict(policies or {})
    catalog = _Catalog(policies)
    plugins_cfg = profile.get("plugins") or {}
    known = catalog.names()

    def check_name(entry: _Entry, enabling: bool) -> bool:
        if catalog.points(entry.name) is not None or entry.name == "*":
            return True
        where = (*entry.where, "name")
        if entry.name in registry.UPSTREAM_ONLY:
            if enabling:
                report(where, RULE_UPSTREAM_ONLY, upstream_only(entry.name))
                return False
            return True
        report(where, RULE_UNKNOWN, not_registered(entry.name, known))
        return False

    defaults = [_Entry(n, catalog.default_weight(n), ()) for n in
                (*registry.default_profile_order(features), *policies)]
    per_point_enabled: dict[str, list[_Entry]] = {}
    per_point_disabled: dict[str, set[str]] = {}
    for point in ("multiPoint", *POINTS, *OTHER_POINTS):
        point_path: JsonPath = (*path, "plugins", point)
        cfg = plugins_cfg.get(point) if isinstance(plugins_cfg, Mapping) else None
        enabled = [e for e in _entries(cfg, point_path, "enabled", report)
                   if check_name(e, True)]
        disabled_entries = _entries(cfg, point_path, "disabled", report)
        disabled = {e.name for e in disabled_entries if check_name(e, False)}
        if point in OTHER_POINTS:
            for e in enabled:
                report((*e.where, "name"), RULE_EXTENSION_POINT,
                       f"policyd has no {point} plugins")
            continue
        for e in enabled:
            if e.name == "*":
                report((*e.where, "name"), RULE_UNKNOWN,
                       '"*" can only be disabled, not enabled')
                continue
            points = catalog.points(e.name) or frozenset()
            if point == "multiPoint" and not points:
                report((*e.where, "name"), RULE_EXTENSION_POINT,
                       f'plugin "{e.name}" implements no extension point')
            elif point != "multiPoint" and point not in points:
                report((*e.where, "name"), RULE_EXTENSION_POINT,
                       f'plugin "{e.name}" does not implement the {point} extension point '
                       f"(it implements: {', '.join(sorted(points)) or 'none'})")
        per_point_enabled[point] = _merge(defaults if point == "multiPoint" else [],
                                          [e for e in enabled if e.name != "*"], disabled)
        per_point_disabled[point] = disabled

    # Expand multiPoint into each extension point (expandMultiPointPlugins).
    multi_names = {m.name for m in per_point_enabled["multiPoint"]}
    final: dict[str, list[_Entry]] = {}
    for point in POINTS:
        specific = [e for e in per_point_enabled[point] if point in (catalog.points(e.name) or ())]
        specific_names = {e.name for e in specific}
        disabled = per_point_disabled[point]
        from_multi: list[_Entry] = []
        for e in per_point_enabled["multiPoint"]:
            if point not in (catalog.points(e.name) or ()):
                continue
            if "*" in disabled or e.name in disabled:
                continue
            if e.name in specific_names:
                continue
            from_multi.append(e)
        overrides = [e for e in specific if e.name in multi_names]
        rest = [e for e in specific if e not in overrides]
        final[point] = overrides + from_multi + rest

    _check_total_score(final["score"], catalog, path, report)

    # pluginConfig: one entry per plugin, only for plugins that are enabled somewhere.
    enabled_names = {e.name for entries in final.values() for e in entries}
    args_by_name: dict[str, Mapping[str, Any] | None] = {}
    seen_config: set[str] = set()
    plugin_config = profile.get("pluginConfig") or []
    for i, pc in enumerate(plugin_config if isinstance(plugin_config, list) else []):
        pc_path = (*path, "pluginConfig", i)
        if not isinstance(pc, Mapping) or not isinstance(pc.get("name"), str):
            report(pc_path, RULE_SHAPE, "must be an object with a string name")
            continue
        name = pc["name"]
        if name in seen_config:
            report(pc_path, RULE_CONFIG_DUPLICATE, f'Duplicate value: "{name}"')
            continue
        seen_config.add(name)
        if name not in enabled_names:
            if name in registry.UPSTREAM_ONLY:
                report((*pc_path, "name"), RULE_UPSTREAM_ONLY, upstream_only(name))
            elif catalog.points(name) is None:
                report((*pc_path, "name"), RULE_UNKNOWN, not_registered(name, known))
            else:
                report((*pc_path, "name"), RULE_CONFIG_UNUSED,
                       f'pluginConfig for plugin "{name}", which is not enabled in this '
                       "profile")
            continue
        args = pc.get("args")
        if args is not None and not isinstance(args, Mapping):
            report((*pc_path, "args"), RULE_ARGS, "must be an object")
            continue
        args_by_name[name] = args

    if len(final["queueSort"]) > 1:
        report((*path, "plugins", "queueSort"), RULE_QUEUE_SORT,
               f"Invalid value: {len(final['queueSort'])}: only one queue sort plugin "
               "can be enabled")
    name = profile.get("schedulerName")
    return ResolvedProfile(name if isinstance(name, str) and name else "policyd",
                           final, args_by_name)


def check_profile(
    profile: Mapping[str, Any],
    policies: Mapping[str, Plugin],
    *,
    path: JsonPath,
    report: Report,
    features: FeatureGates = DEFAULTS,
) -> ResolvedProfile:
    """Report every problem of one profile: `resolve_profile`'s and invalid plugin args
    (each plugin's factory validates its own, upstream's rules)."""
    resolved = resolve_profile(profile, policies, path=path, report=report,
                               features=features)
    _instances(resolved, profile, policies, path, report, features)
    return resolved


def _instances(resolved: ResolvedProfile, profile: Mapping[str, Any],
               policies: Mapping[str, Plugin], path: JsonPath, report: Report,
               features: FeatureGates = DEFAULTS) -> dict[str, Plugin]:
    """Every plugin the resolved profile enables, by name: the compiled policies, and a
    built-in's factory run on its args."""
    final = resolved.points

    def config_path(name: str) -> JsonPath:
        configs = profile.get("pluginConfig") or []
        idx = next((i for i, pc in enumerate(configs if isinstance(configs, list) else [])
                    if isinstance(pc, Mapping) and pc.get("name") == name), None)
        return (*path, "pluginConfig", idx, "args") if idx is not None else (*path, "plugins")

    instances: dict[str, Plugin] = {}
    for name in sorted({e.name for entries in final.values() for e in entries}):
        if name in policies:
            if resolved.args.get(name):
                report(config_path(name), RULE_ARGS,
                       f'plugin "{name}" is a policy and takes no args: its parameters '
                       "live in the policy file")
            instances[name] = policies[name]
            continue
        spec = registry.builtin(name)
        assert spec is not None
        try:
            instances[name] = spec.make(resolved.args.get(name), features)
        except PluginError as exc:
            base = config_path(name)
            for p in exc.problems:
                report((*base, *parse_field_path(p.path)), RULE_ARGS, p.message)
    return instances


def build_framework(
    profile: Mapping[str, Any],
    policies: Mapping[str, Plugin] | None = None,
    *,
    seed: int | None = None,
    path: JsonPath = (),
    features: FeatureGates = DEFAULTS,
) -> Framework:
    """A Framework for one profile (`schedulerName`, `plugins`, `pluginConfig`), its
    plugins built under `features` (which the Framework keeps, for what runs it).

    Meant for a profile `check_profile` found valid; raises ProfileError listing every
    problem otherwise."""
    policies = dict(policies or {})
    problems = _Collect()
    resolved = resolve_profile(profile, policies, path=path, report=problems,
                               features=features)
    instances = _instances(resolved, profile, policies, path, problems, features)
    if problems:
        raise ProfileError(problems)
    final = resolved.points

    def plugins_at(point: str) -> list[Any]:
        return [instances[e.name] for e in final[point]]

    pre_enqueue: list[PreEnqueuePlugin] = plugins_at("preEnqueue")
    queue_sort: list[QueueSortPlugin] = plugins_at("queueSort")
    pre_filter: list[PreFilterPlugin] = plugins_at("preFilter")
    filters: list[FilterPlugin] = plugins_at("filter")
    pre_score: list[PreScorePlugin] = plugins_at("preScore")
    scores = [WeightedScorePlugin(cast(ScorePlugin, instances[e.name]),
                                  score_weight(e.name, e.weight, policies))
              for e in final["score"]]
    post_filter: list[PostFilterPlugin] = plugins_at("postFilter")
    reserve: list[ReservePlugin] = plugins_at("reserve")
    permit: list[PermitPlugin] = plugins_at("permit")
    pre_bind: list[PreBindPlugin] = plugins_at("preBind")
    return Framework(
        resolved.scheduler_name,
        pre_enqueue=pre_enqueue,
        queue_sort=queue_sort[0] if queue_sort else None,
        pre_filter=pre_filter,
        filter=filters,
        pre_score=pre_score,
        score=scores,
        post_filter=post_filter,
        reserve=reserve,
        permit=permit,
        pre_bind=pre_bind,
        seed=seed,
        features=features,
    )


def default_framework(
    policies: Sequence[Plugin] = (), *, scheduler_name: str = "policyd",
    seed: int | None = None, features: FeatureGates = DEFAULTS,
) -> Framework:
    """kube-scheduler's default profile plus every given policy, at default weights."""
    return build_framework({"schedulerName": scheduler_name},
                           {p.name: p for p in policies}, seed=seed, features=features)


def score_weight(name: str, weight: int, policies: Mapping[str, Plugin]) -> int:
    """The weight a score entry runs at: its own, else the plugin's default (a
    policy's spec.weight, a built-in's registered default), as `build_framework`
    weighs it."""
    return weight or _Catalog(policies).default_weight(name)
