"""The one map from a rule kind (the key naming it in a `filters[]` or `scores[]` entry,
as the schema lists them) to the class that compiles it.

A new kind is a module under `filters/` or `scores/`, its declaration (schema fragment,
docs row, example) in that package's `schemas.py`, which the class names as `kind`, and
its class listed here; the map is keyed by the declarations, so a kind is never
spelt twice, and a unit test checks it lists every declared kind in the schema's order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from policyd.policy.rules.base import FilterRule, ScoreRule
from policyd.policy.rules.filters.annotation_to_node_label import AnnotationToNodeLabel
from policyd.policy.rules.filters.cel import CelFilter
from policyd.policy.rules.filters.headroom import Headroom
from policyd.policy.rules.filters.jmespath import JmesFilter
from policyd.policy.rules.filters.max_pods_per_node import MaxPodsPerNode
from policyd.policy.rules.filters.node_labels import NodeLabels
from policyd.policy.rules.filters.require_extended_resource import RequireExtendedResource
from policyd.policy.rules.filters.same_topology import SameTopology
from policyd.policy.rules.scores.allocation import AllocationScore
from policyd.policy.rules.scores.cel import CelScore
from policyd.policy.rules.scores.jmespath import JmesScore
from policyd.policy.rules.scores.label_value import LabelValueScore
from policyd.policy.rules.scores.metric import MetricScore
from policyd.policy.rules.scores.numeric import NumericScore

# A filter class takes the rule's id, its message and the value under its kind's key;
# a score class the whole rule (id, weight, normalize and reverse are common to all).
FilterFactory = Callable[[str, str, Any], FilterRule]
ScoreFactory = Callable[[Mapping[str, Any]], ScoreRule]

FILTER_RULES: dict[str, FilterFactory] = {cls.kind.name: cls for cls in (
    AnnotationToNodeLabel, NodeLabels, Headroom, RequireExtendedResource, MaxPodsPerNode,
    SameTopology, JmesFilter, CelFilter)}

SCORE_RULES: dict[str, ScoreFactory] = {cls.kind.name: cls for cls in (
    LabelValueScore, NumericScore, AllocationScore, JmesScore, MetricScore, CelScore)}


def rule_kind(spec: Mapping[str, Any], kinds: Mapping[str, object], section: str) -> str:
    """The one key of `spec` that names a kind in `kinds`. The schema guarantees exactly
    one; a document that skipped validation fails here, naming the rule."""
    found = [k for k in kinds if k in spec]
    if len(found) != 1:
        what = "no rule kind" if not found else "several rule kinds (" + ", ".join(found) + ")"
        raise ValueError(f"{section} rule {spec.get('id')!r} has {what}; "
                         f"expected one of: {', '.join(kinds)}")
    return found[0]


def filter_rule(spec: Mapping[str, Any]) -> FilterRule:
    kind = rule_kind(spec, FILTER_RULES, "filter")
    return FILTER_RULES[kind](spec["id"], spec["message"], spec[kind])


def score_rule(spec: Mapping[str, Any]) -> ScoreRule:
    return SCORE_RULES[rule_kind(spec, SCORE_RULES, "score")](spec)
