"""Which filter rules of a policy an autoscaler cannot see (`policyd lint
--require-autoscaler-visible`): the rules of Enforce-mode policies that no
kube-scheduler constraint expresses (`FilterRule.autoscaler_visible`; the admission
webhook projects the others into the pods, docs/autoscalers.md)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from policyd.policy.policy_schema import AUDIT
from policyd.policy.rules.base import ALWAYS, WHEN_REQUESTED
from policyd.policy.rules.kinds import FILTER_RULES
from policyd.problems import Problem
from policyd.sourcefile import SourceDocument

RULE = "autoscaler-invisible"


def invisible_rules(doc: SourceDocument) -> Iterator[Problem]:
    """One error per filter rule of the document (an Enforce-mode SchedulingPolicy)
    that an autoscaler cannot see, at the rule."""
    data = doc.data if isinstance(doc.data, Mapping) else {}
    spec = data.get("spec") if isinstance(data.get("spec"), Mapping) else {}
    if not isinstance(spec, Mapping) or spec.get("mode") == AUDIT:
        return
    filters = spec.get("filters")
    for i, rule in enumerate(filters if isinstance(filters, list) else []):
        if not isinstance(rule, Mapping):
            continue
        kinds = [k for k in FILTER_RULES if k in rule]
        if len(kinds) != 1:
            continue  # the schema reports it
        visible = getattr(FILTER_RULES[kinds[0]], "autoscaler_visible", None)
        if visible == ALWAYS:
            continue
        why = ("only when the pod requests the resource itself" if visible == WHEN_REQUESTED
               else "no kube-scheduler constraint expresses it")
        yield doc.problem(("spec", "filters", i), RULE,
                          f"filter rule {rule.get('id')!r} ({kinds[0]}) is not visible to "
                          f"cluster-autoscaler or Karpenter: {why}")
