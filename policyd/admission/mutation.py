"""A pod as the admission webhook admits it: the profile's scheduler name, the
projected rules in its required node affinity, annotations saying what an autoscaler
can and cannot see, and the warnings the AdmissionReview carries.

Required node affinity is an OR of terms, each an AND of requirements: a rule's
requirements must hold whichever term matches, so every existing term gains each of
them (a pod without required terms gets one term of them all); `nodeSelector` is
ANDed with the terms by kube-scheduler already and stays as it is. A requirement a
term already has is not added again, so admitting the admitted pod changes nothing.

A pod that names another scheduler is left alone (unless `override_scheduler`): its
scheduler does not run policyd's policies, so they have nothing to add to it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policyd.admission.projection import RuleProjection

DEFAULT_SCHEDULER = "default-scheduler"
# Which rules' constraints the pod carries, and which rules no constraint expresses
# (an autoscaler simulating kube-scheduler cannot see them).
VISIBLE_ANNOTATION = "policyd.io/autoscaler-visible-rules"
INVISIBLE_ANNOTATION = "policyd.io/autoscaler-invisible-rules"

Obj = dict[str, Any]
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass(slots=True)
class Admitted:
    pod: Obj  # the admitted pod (a copy; the input is not changed)
    patch: list[Obj] = field(default_factory=list)  # RFC 6902 ops from input to `pod`
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.patch)


def admit(pod: Mapping[str, Any], projections: Sequence[RuleProjection], *,
          scheduler_name: str | None, override_scheduler: bool = False) -> Admitted:
    """`pod` (API JSON) admitted for the profile `scheduler_name` with the rules that
    apply to it (`project_pod`)."""
    out: Obj = copy.deepcopy(dict(pod))
    admitted = Admitted(out)
    spec: Obj = out.setdefault("spec", {})
    current = spec.get("schedulerName") or ""
    if scheduler_name is not None and current != scheduler_name:
        if current not in ("", DEFAULT_SCHEDULER) and not override_scheduler:
            return Admitted(copy.deepcopy(dict(pod)))
        spec["schedulerName"] = scheduler_name
        admitted.patch.append(_add("/spec/schedulerName", scheduler_name))
        admitted.warnings.append(f"policyd: spec.schedulerName set to {scheduler_name}")
    if not projections:
        return admitted
    _project_affinity(spec, projections, admitted)
    _annotate(out, projections, admitted)
    return admitted


def _project_affinity(spec: Obj, projections: Sequence[RuleProjection],
                      admitted: Admitted) -> None:
    wanted: list[tuple[Mapping[str, Any], str]] = []  # (requirement, first rule)
    seen: set[str] = set()
    for p in projections:
        for req in p.requirements:
            key = _canonical(req)
            if key not in seen:
                seen.add(key)
                wanted.append((req, p.name))
    if not wanted:
        return
    affinity: Obj = copy.deepcopy(spec.get("affinity") or {})
    node: Obj = dict(affinity.get("nodeAffinity") or {})
    required: Obj = dict(node.get(_REQUIRED) or {})
    terms = [dict(t or {}) for t in required.get("nodeSelectorTerms") or []] or [{}]
    added: dict[str, list[str]] = {}  # requirement as shown -> the rules it is for
    for term in terms:
        exprs = list(term.get("matchExpressions") or [])
        have = {_canonical(e) for e in exprs}
        for req, rule in wanted:
            if _canonical(req) not in have:
                have.add(_canonical(req))
                exprs.append(dict(req))
                added.setdefault(_show(req), []).append(rule)
        term["matchExpressions"] = exprs
    if not added:
        return  # every term has every requirement: admitted before
    required["nodeSelectorTerms"] = terms
    node[_REQUIRED] = required
    affinity["nodeAffinity"] = node
    spec["affinity"] = affinity
    admitted.patch.append(_add("/spec/affinity", affinity))
    for text, rules in added.items():
        admitted.warnings.append(f"policyd: required node affinity gained {text} "
                                 f"({', '.join(dict.fromkeys(rules))})")


def _annotate(pod: Obj, projections: Sequence[RuleProjection], admitted: Admitted) -> None:
    visible = [p.name for p in projections if not p.invisible]
    invisible = [p for p in projections if p.invisible]
    meta: Obj = pod.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    before = dict(annotations)
    if visible:
        annotations[VISIBLE_ANNOTATION] = ",".join(dict.fromkeys(visible))
    if invisible:
        annotations[INVISIBLE_ANNOTATION] = "; ".join(
            f"{p.name}: {p.invisible}" for p in invisible)
    for p in invisible:
        if INVISIBLE_ANNOTATION not in before:
            admitted.warnings.append(f"policyd: {p.name} is not visible to autoscalers "
                                     f"({p.invisible})")
    if annotations != before:
        meta["annotations"] = annotations
        admitted.patch.append(_add("/metadata/annotations", annotations))


def _canonical(requirement: Mapping[str, Any]) -> str:
    """A requirement's identity: key, operator and its values as a set."""
    values = sorted(str(v) for v in requirement.get("values") or ())
    return json.dumps([requirement.get("key"), requirement.get("operator"), values])


def _show(requirement: Mapping[str, Any]) -> str:
    values = requirement.get("values")
    shown = f" [{', '.join(map(str, values))}]" if values else ""
    return f"{requirement.get('key')} {requirement.get('operator')}{shown}"


def _add(path: str, value: Any) -> Obj:
    return {"op": "add", "path": path, "value": copy.deepcopy(value)}
