"""Which node metrics a policy's `metric` score rules read, and how an unknown one is
told: the same check for a policy file (`policyd check-config`) and a SchedulingPolicy
object (the daemon, explain), since both run beside the same profile's
`metricsProviders`."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policyd.sourcefile import JsonPath

UNKNOWN_METRIC = "unknown-metric"


def metric_rules(policy: Any) -> Iterator[tuple[int, str]]:
    """(index in spec.scores, metric name) of each `metric` rule of a policy document."""
    spec = policy.get("spec") if isinstance(policy, Mapping) else None
    rules = spec.get("scores") if isinstance(spec, Mapping) else None
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        metric = rule.get("metric") if isinstance(rule, Mapping) else None
        name = metric.get("name") if isinstance(metric, Mapping) else None
        if isinstance(name, str):
            yield i, name


def unknown_metric_message(name: str, known: Collection[str], profile: str) -> str:
    """What a rule naming a metric no provider of `profile` defines is told."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=1)
    hint = (f"; did you mean {close[0]!r}?" if close else
            f"; defined: {', '.join(names)}" if names else
            "; the profile has no metricsProviders")
    return f"metric {name!r} is not defined by any metricsProviders entry of {profile}{hint}"


@dataclass(frozen=True, slots=True)
class MetricCheck:
    """The metrics a profile's providers define, and the profile as messages name it."""

    known: frozenset[str]
    profile: str

    def unknown(self, policy: Any) -> Iterator[tuple[JsonPath, str]]:
        """Where a policy document names a metric no provider defines, and the message."""
        for i, name in metric_rules(policy):
            if name not in self.known:
                yield (("spec", "scores", i, "metric", "name"),
                       unknown_metric_message(name, self.known, self.profile))
