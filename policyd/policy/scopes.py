"""Scoped enforcement: a policy's mode per namespace (`spec.scopedModes`) and its
exceptions (`spec.exceptions`), compiled once.

- `scopedModes`: the first entry whose namespace globs match the pod's namespace gives
  the pod's mode; `spec.mode` otherwise. `Enforce` in `prod-*` and `Audit` elsewhere is
  `mode: Audit` with one entry.
- `exceptions`: each exempts the pods it matches (namespaces, workloads, a pod label
  selector: every part given must match) from the named filter rules (`*`: all of
  them) until `expires`; after that it no longer exempts, with no reload (it is asked
  with the wall clock at each decision). An exempted rule is not asked for the pod at
  all: it rejects nothing and is not audited, and each place that would have asked it
  says the exception applied instead (explain, audit, the reports, a pod event).

A workload is the pod's controller owner: `Job`, `StatefulSet`, `DaemonSet`,
`ReplicaSet` by the owner's name; `Deployment` through the pod's ReplicaSet, named
`<deployment>-<pod-template-hash>`; `Pod` by the pod's own name. Names may be globs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any

from policyd.model.records import Pod
from policyd.model.selectors import LabelSelector, compile_label_selector

ALL_RULES = "*"


def parse_expiry(text: str) -> float | None:
    """An RFC 3339 time as epoch seconds; None when it is not one (a zone is required:
    a time without one means different moments on different machines)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None or "T" not in text.upper():
        return None
    return when.timestamp()


def _globs_match(globs: Sequence[str], value: str) -> bool:
    return any(fnmatchcase(value, g) for g in globs)


def workload_of(pod: Pod) -> list[tuple[str, str]]:
    """(kind, name) of every workload `pod` belongs to: itself, its controller, and for
    a ReplicaSet's pod with a pod-template-hash the Deployment that made it."""
    out = [("Pod", pod.name)]
    refs = (pod.raw.get("metadata") or {}).get("ownerReferences") or []
    for ref in refs:
        if not isinstance(ref, dict) or not ref.get("controller"):
            continue
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        out.append((kind, name))
        suffix = "-" + pod.labels.get("pod-template-hash", "")
        if kind == "ReplicaSet" and len(suffix) > 1 and name.endswith(suffix):
            out.append(("Deployment", name[: -len(suffix)]))
    return out


@dataclass(frozen=True, slots=True)
class PolicyException:
    name: str
    reason: str
    expires: str  # as written
    expires_at: float  # epoch seconds
    rules: frozenset[str] | None  # None: every filter rule
    namespaces: tuple[str, ...] | None
    workloads: tuple[tuple[str, str], ...] | None
    selector: LabelSelector | None

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> PolicyException:
        match = spec.get("match") or {}
        rules = list(spec.get("rules") or [])
        return cls(
            name=spec["name"], reason=spec["reason"], expires=spec["expires"],
            expires_at=parse_expiry(spec["expires"]) or 0.0,
            rules=None if ALL_RULES in rules else frozenset(rules),
            namespaces=tuple(match["namespaces"]) if "namespaces" in match else None,
            workloads=tuple((w["kind"], w["name"]) for w in match["workloads"])
            if "workloads" in match else None,
            selector=compile_label_selector(match["podSelector"])
            if "podSelector" in match else None)

    def covers(self, rule_id: str) -> bool:
        return self.rules is None or rule_id in self.rules

    def matches(self, pod: Pod) -> bool:
        if self.namespaces is not None and not _globs_match(self.namespaces, pod.namespace):
            return False
        if self.selector is not None and not self.selector.matches(pod.labels):
            return False
        if self.workloads is not None:
            mine = workload_of(pod)
            if not any(kind == k and fnmatchcase(name, glob)
                       for k, glob in self.workloads for kind, name in mine):
                return False
        return True

    def active(self, now: float) -> bool:
        return now < self.expires_at

    def describe(self) -> str:
        """`exception legacy-batch (migrating to the new pool; expires 2027-01-31T00:00:00Z)`."""
        return f"exception {self.name} ({self.reason}; expires {self.expires})"


class Scopes:
    """A policy's scoped modes and exceptions."""

    __slots__ = ("exceptions", "modes")

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.modes: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
            (m["mode"], tuple(m["namespaces"])) for m in spec.get("scopedModes") or ())
        self.exceptions: tuple[PolicyException, ...] = tuple(
            PolicyException.of(e) for e in spec.get("exceptions") or ())

    def mode_for(self, pod: Pod, default: str) -> str:
        for mode, globs in self.modes:
            if _globs_match(globs, pod.namespace):
                return mode
        return default

    def all_modes(self, default: str) -> set[str]:
        return {default, *(mode for mode, _ in self.modes)}

    def exemption(self, pod: Pod, rule_id: str, now: float) -> PolicyException | None:
        """The first unexpired exception exempting `pod` from the rule, if any."""
        for e in self.exceptions:
            if e.covers(rule_id) and e.active(now) and e.matches(pod):
                return e
        return None

    def expired_for(self, pod: Pod, rule_id: str, now: float) -> PolicyException | None:
        """An exception that would exempt `pod` from the rule had it not expired (for
        explain: the rule applies again, and why)."""
        for e in self.exceptions:
            if e.covers(rule_id) and not e.active(now) and e.matches(pod):
                return e
        return None
