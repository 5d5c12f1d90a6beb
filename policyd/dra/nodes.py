"""The node side of DRA: which nodes a slice or device serves, and the node selector an
allocation result carries.

Slices and devices name their nodes with a core/v1 NodeSelector, read here with
component-helpers' nodeaffinity semantics (terms ORed, requirements ANDed, an empty
term selects nothing, matchFields only on `metadata.name` with In/NotIn and one
value, Gt/Lt compare int64 values and never match a label that is not one). A selector
nodeaffinity refuses to build is an error of the allocation, as upstream's
NodeMatches returns it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from policyd.dra.decoding import Fields, join

_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_FIELD_OPERATORS = ("In", "NotIn")
_INT64 = re.compile(r"[+-]?[0-9]+\Z")
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Node:
    """What the allocator reads of a node: its name and labels."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, slots=True)
class Term:
    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_expressions:
            out["matchExpressions"] = [r.to_api() for r in self.match_expressions]
        if self.match_fields:
            out["matchFields"] = [r.to_api() for r in self.match_fields]
        return out


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[Term, ...] = ()

    def to_api(self) -> dict[str, Any]:
        return {"nodeSelectorTerms": [t.to_api() for t in self.terms]}


class NodeSelectorError(ValueError):
    """A node selector nodeaffinity cannot build (the message lists every problem)."""


def decode_node_selector(fields: Fields, value: object, path: str) -> NodeSelector | None:
    if value is None:
        return None
    m = fields.mapping(value, path)
    terms = []
    terms_path = join(path, "nodeSelectorTerms")
    for i, raw_term in enumerate(fields.items(m.get("nodeSelectorTerms"), terms_path)):
        term_path = f"{terms_path}[{i}]"
        t = fields.mapping(raw_term, term_path)
        terms.append(Term(
            _requirements(fields, t, "matchExpressions", term_path),
            _requirements(fields, t, "matchFields", term_path),
        ))
    return NodeSelector(tuple(terms))


def _requirements(fields: Fields, term: Mapping[str, Any], key: str,
                  path: str) -> tuple[Requirement, ...]:
    out = []
    list_path = join(path, key)
    for i, raw in enumerate(fields.items(term.get(key), list_path)):
        p = f"{list_path}[{i}]"
        r = fields.mapping(raw, p)
        out.append(Requirement(fields.text(r, "key", p), fields.text(r, "operator", p),
                               fields.texts(r, "values", p) or ()))
    return tuple(out)


def node_matches(node: Node, node_name: str, all_nodes: bool,
                 selector: NodeSelector | None) -> bool:
    """Upstream's NodeMatches: a node name, all nodes, or a selector, checked in that
    order; none of them set selects no node. Raises NodeSelectorError."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return _compiled(selector).matches(node)
    return False


@dataclass(frozen=True, slots=True)
class _CompiledRequirement:
    key: str
    operator: str
    values: frozenset[str]
    number: int

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op == "=":  # a field selector reads a missing field as ""
            return (value or "") in self.values
        if op == "!=":
            return (value or "") not in self.values
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        n = _int64(value) if value is not None else None
        if n is None:
            return False
        return n > self.number if op == "Gt" else n < self.number


@dataclass(frozen=True, slots=True)
class _CompiledTerm:
    labels: tuple[_CompiledRequirement, ...]
    names: tuple[_CompiledRequirement, ...]

    def matches(self, node: Node) -> bool:
        fields = {"metadata.name": node.name}
        return (all(r.matches(node.labels) for r in self.labels)
                and all(r.matches(fields) for r in self.names))


@dataclass(frozen=True, slots=True)
class _CompiledSelector:
    terms: tuple[_CompiledTerm, ...]

    def matches(self, node: Node) -> bool:
        return any(t.matches(node) for t in self.terms)


@lru_cache(maxsize=4096)
def _compiled(selector: NodeSelector) -> _CompiledSelector:
    problems: list[str] = []
    terms = []
    for i, term in enumerate(selector.terms):
        if not term.match_expressions and not term.match_fields:
            continue  # an empty term selects nothing
        base = f"nodeSelectorTerms[{i}]"
        labels = [_label_requirement(r, f"{base}.matchExpressions[{j}]", problems)
                  for j, r in enumerate(term.match_expressions)]
        names = [_field_requirement(r, f"{base}.matchFields[{j}]", problems)
                 for j, r in enumerate(term.match_fields)]
        terms.append(_CompiledTerm(tuple(x for x in labels if x is not None),
                                   tuple(x for x in names if x is not None)))
    if problems:
        message = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        raise NodeSelectorError(message)
    return _CompiledSelector(tuple(terms))


def _label_requirement(r: Requirement, path: str,
                       problems: list[str]) -> _CompiledRequirement | None:
    if r.operator not in _LABEL_OPERATORS:
        supported = ", ".join(f'"{op}"' for op in _LABEL_OPERATORS)
        problems.append(f'{path}.operator: Unsupported value: "{r.operator}": '
                        f"supported values: {supported}")
        return None
    number = 0
    if r.operator in ("In", "NotIn") and not r.values:
        problems.append(f"{path}.values: Invalid value: []: "
                        "for 'in', 'notin' operators, values set can't be empty")
        return None
    if r.operator in ("Exists", "DoesNotExist") and r.values:
        problems.append(f"{path}.values: Invalid value: {list(r.values)}: "
                        "values set must be empty for exists and does not exist")
        return None
    if r.operator in ("Gt", "Lt"):
        parsed = _int64(r.values[0]) if len(r.values) == 1 else None
        if len(r.values) != 1:
            problems.append(f"{path}.values: Invalid value: {list(r.values)}: "
                            "for 'Gt', 'Lt' operators, exactly one value is required")
            return None
        if parsed is None:
            problems.append(f"{path}.values[0]: Invalid value: \"{r.values[0]}\": "
                            "for 'Gt', 'Lt' operators, the value must be an integer")
            return None
        number = parsed
    return _CompiledRequirement(r.key, r.operator, frozenset(r.values), number)


def _field_requirement(r: Requirement, path: str,
                       problems: list[str]) -> _CompiledRequirement | None:
    if r.operator not in _FIELD_OPERATORS:
        supported = ", ".join(f'"{op}"' for op in _FIELD_OPERATORS)
        problems.append(f'{path}.operator: Unsupported value: "{r.operator}": '
                        f"supported values: {supported}")
        return None
    if len(r.values) != 1:
        problems.append(f"{path}.values: Invalid value: {list(r.values)}: "
                        "must have one element")
        return None
    op = "=" if r.operator == "In" else "!="
    return _CompiledRequirement(r.key, op, frozenset(r.values), 0)


def _int64(text: str) -> int | None:
    if not _INT64.match(text):
        return None
    n = int(text)
    return n if -_INT64_MAX - 1 <= n <= _INT64_MAX else None
