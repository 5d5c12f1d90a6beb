"""Label selectors and node selector terms, compiled once into matchers.

Semantics follow apimachinery's `labels.Selector` (LabelSelectorAsSelector) and
component-helpers' `nodeaffinity`: keys and values are case-sensitive; NotIn and
DoesNotExist match a missing key; Gt/Lt compare integers and never match a label whose
value is not an integer; an empty LabelSelector matches everything, a missing one
nothing; an empty NodeSelectorTerm matches nothing; terms are ORed, requirements ANDed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.model.int64 import parse_int64

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_OPERATORS = (*LABEL_OPERATORS, "Gt", "Lt")


class SelectorError(ValueError):
    """An invalid selector; `path` is relative to the selector object."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str]
    number: int = 0  # the single integer of Gt/Lt

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op == "NotIn":
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        value = labels.get(self.key)
        if value is None:
            return False
        n = parse_int64(value)  # Kubernetes: strconv.ParseInt, no " 5" or "5_0"
        if n is None:
            return False
        return n > self.number if op == "Gt" else n < self.number


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """AND of requirements. `match_nothing` models a nil selector."""

    requirements: tuple[Requirement, ...]
    match_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.match_nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    @property
    def is_empty(self) -> bool:
        return not self.match_nothing and not self.requirements


MATCH_NOTHING = LabelSelector((), match_nothing=True)


def _requirement(expr: Any, path: str, operators: tuple[str, ...]) -> Requirement:
    if not isinstance(expr, Mapping):
        raise SelectorError(path, "must be an object")
    key = expr.get("key")
    if not isinstance(key, str) or not key:
        raise SelectorError(f"{path}.key", "is required")
    op = expr.get("operator")
    if op not in operators:
        raise SelectorError(f"{path}.operator",
                            f"{op!r} is not a valid operator, expected one of "
                            + ", ".join(operators))
    values = expr.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SelectorError(f"{path}.values", "must be a list of strings")
    if op in ("In", "NotIn") and not values:
        raise SelectorError(f"{path}.values", f"must be non-empty for operator {op}")
    if op in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"{path}.values", f"must be empty for operator {op}")
    number = 0
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise SelectorError(f"{path}.values", f"must have exactly one value for {op}")
        parsed = parse_int64(values[0])
        if parsed is None:
            raise SelectorError(f"{path}.values[0]",
                                f"{values[0]!r} is not an integer (int64)")
        number = parsed
    return Requirement(key, op, frozenset(values), number)


def compile_label_selector(selector: Any) -> LabelSelector:
    """metav1.LabelSelector -> matcher. None matches nothing, {} everything."""
    if selector is None:
        return MATCH_NOTHING
    if not isinstance(selector, Mapping):
        raise SelectorError("", "must be an object")
    reqs: list[Requirement] = []
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise SelectorError("matchLabels", "must be an object")
    for k, v in match_labels.items():
        if not isinstance(v, str):
            raise SelectorError(f"matchLabels.{k}", "must be a string")
        reqs.append(Requirement(str(k), "In", frozenset((v,))))
    exprs = selector.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise SelectorError("matchExpressions", "must be a list")
    for i, e in enumerate(exprs):
        reqs.append(_requirement(e, f"matchExpressions[{i}]", LABEL_OPERATORS))
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    label_requirements: tuple[Requirement, ...]
    field_requirements: tuple[Requirement, ...]  # only metadata.name

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if not self.label_requirements and not self.field_requirements:
            return False
        if not all(r.matches(labels) for r in self.label_requirements):
            return False
        fields = {"metadata.name": node_name}
        return all(r.matches(fields) for r in self.field_requirements)


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """OR of terms (v1.NodeSelector)."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return any(t.matches(labels, node_name) for t in self.terms)


def compile_node_selector_term(term: Any, path: str = "") -> NodeSelectorTerm:
    if not isinstance(term, Mapping):
        raise SelectorError(path, "must be an object")
    prefix = f"{path}." if path else ""
    labels = [
        _requirement(e, f"{prefix}matchExpressions[{i}]", NODE_OPERATORS)
        for i, e in enumerate(term.get("matchExpressions") or [])
    ]
    fields = []
    for i, e in enumerate(term.get("matchFields") or []):
        req = _requirement(e, f"{prefix}matchFields[{i}]", ("In", "NotIn"))
        if req.key != "metadata.name":
            raise SelectorError(f"{prefix}matchFields[{i}].key",
                                f"{req.key!r} is not a supported field, only metadata.name")
        if len(req.values) != 1:
            raise SelectorError(f"{prefix}matchFields[{i}].values",
                                "must have exactly one value for metadata.name")
        fields.append(req)
    return NodeSelectorTerm(tuple(labels), tuple(fields))


def compile_node_selector(selector: Any, path: str = "") -> NodeSelector:
    if not isinstance(selector, Mapping):
        raise SelectorError(path, "must be an object")
    terms = selector.get("nodeSelectorTerms") or []
    if not isinstance(terms, list):
        raise SelectorError(f"{path}.nodeSelectorTerms", "must be a list")
    prefix = f"{path}." if path else ""
    return NodeSelector(tuple(
        compile_node_selector_term(t, f"{prefix}nodeSelectorTerms[{i}]")
        for i, t in enumerate(terms)
    ))
