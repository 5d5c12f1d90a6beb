"""CEL for policies: the `cel` filter and score kinds' expressions, compiled once, linted
with positions, and fed only the parts of the pod and node they read.

The variables are `pod` and `node`, the raw Kubernetes objects (JSON as the API server
serves them), each with two shortcuts at its top level: `labels` and `annotations`
are `metadata.labels` and `metadata.annotations`, `{}` when absent, so
`node.labels["tier"] == pod.annotations["myorg.io/tier"]` is the whole rule.
Unlike JMESPath, reading a missing key is an error, not null: guard it with `has()`
(`has(node.labels.tier)`), `in` (`"tier" in node.labels`) or an optional
(`node.labels.?tier.orValue("")`). A filter rejects a node on false or an error; a
score counts an error as a missing value.

Speed: converting a whole node (several KB: conditions, images, addresses) into CEL
values costs more than the evaluation itself. `paths()` reads from the checked tree
which fields of `pod` and `node` the expression selects with constant names
(`node.status.allocatable`, `node.labels["tier"]`, `node.?spec.taints`) and `view()`
copies just those subtrees (the whole object when the expression uses a variable by
itself, e.g. `cel.bind(n, node, ...)` or `node == ...`). A view is built once per node
record (its `cache`) and once per pod per cycle; the library's Activation, which
binds them, is made per evaluation, so no thread ever evaluates another's. An
expression that reads no pod field is a function of the node alone: its result is
kept on the node record, so later pods and cycles pay a dict lookup; one that reads
the pod is evaluated once per pod per distinct node view (nodes of one tier or zone
share the verdict).

Cost: the worst case is estimated at compile time with every list, map and string of
`pod` and `node`, and every value derived from them (`policyd/cel/rule_cost.py`), as
large as the biggest object the API server stores (3 MiB). One pass over an object's
data stays under `MAX_COST`; a loop inside a loop over them does not, and lint warns.
Only warns: the bound treats each nested list as if it could hold the whole object
(an image's names inside a node's images), so a loop over nested data of real,
linear total size estimates as high as a true quadratic one; and every evaluation
ends, its inputs being finite.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from policyd.cel import (
    CelCompileError,
    CelNode,
    CelRuntimeError,
    CheckedAst,
    CompiledRule,
    Shape,
    compile_rule,
    estimate_bounded,
)

VARIABLES = {"pod": dict, "node": dict}
SHORTCUTS = ("labels", "annotations")
FILTER_TYPES = frozenset({"bool", "dyn"})
SCORE_TYPES = frozenset({"int", "uint", "double", "dyn"})

# The API server's largest request body (k8s.io/apiserver's MaxRequestSizeBytes): no
# stored object, so no list, map or string inside one, is larger.
MAX_OBJECT_BYTES = 3 * 1024 * 1024
# Above one pass over the data (3 Mi elements times a step), below two nested passes.
MAX_COST = 10**12
_SHAPE_DEPTH = 32

# Calls that select one constant key of their first argument.
_INDEX_CALLS = frozenset({"_[_]", "_[?_]", "_?._"})

# A path of constant keys from a variable; () means the whole variable.
Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CelProblem:
    """A lint problem: message, 1-based line and column inside the expression; line
    0 for a problem of the whole expression (its type, its cost)."""

    message: str
    line: int
    column: int
    expression: str
    warning: bool = False  # the cost estimate: a bound, not a measurement

    def offset(self) -> int:
        """The 0-based character offset in the expression."""
        lines = self.expression.split("\n")
        before = sum(len(text) + 1 for text in lines[:self.line - 1])
        return before + max(0, self.column - 1)

    def caret(self) -> tuple[str, ...]:
        """The expression's line and a caret under the column; () for the whole."""
        if self.line == 0:
            return ()
        lines = self.expression.split("\n")
        text = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
        return text, " " * max(0, self.column - 1) + "^"


def _object_shape(depth: int = _SHAPE_DEPTH) -> Shape:
    inner = _object_shape(depth - 1) if depth else None
    return Shape(MAX_OBJECT_BYTES, inner, inner)


_BOUND = _object_shape()
_SHAPES = dict.fromkeys(VARIABLES, _BOUND)


@cache
def compile_cel(source: str) -> CompiledRule:
    """The compiled expression; CelCompileError when it does not compile."""
    return compile_rule(source, VARIABLES)


def check(source: str, wanted: frozenset[str], what: str) -> list[CelProblem]:
    """Every lint problem of `source` as a rule whose result must have one of the
    `wanted` types (`what`: "a filter", "a score"): compile errors at their position,
    a wrong result type, and (a warning) a worst-case cost over `MAX_COST`."""
    try:
        rule = compile_cel(source)
    except CelCompileError as e:
        # cel-go's issue lines without their source-and-caret lines: lint draws its
        # own caret, and a problem's message is one line.
        issues = "; ".join(line for line in e.message.split("\n")
                           if line.strip() and not line.startswith(" |"))
        return [CelProblem(f"invalid CEL: {issues}", e.line or 1, e.column or 1, source)]
    problems: list[CelProblem] = []
    if rule.output_type not in wanted:
        problems.append(CelProblem(
            f"CEL expression of {what} must give {_one_of(wanted)}, but it gives "
            f"{rule.output_type}", 0, 0, source))
    cost = estimate_bounded(rule.ast, _SHAPES, _BOUND)
    if cost > MAX_COST:
        problems.append(CelProblem(
            f"CEL expression may be slow: its estimated worst-case cost "
            f"({_magnitude(cost)}, with every list, map and string in pod and node as large "
            f"as a 3 MiB object allows) exceeds 10^{round(math.log10(MAX_COST))}, which one "
            "pass over the data stays under; a loop inside a loop over pod or node data "
            "runs once per pair of elements", 0, 0, source, warning=True))
    return problems


def _one_of(types: frozenset[str]) -> str:
    named = sorted(t for t in types if t != "dyn")
    return (", ".join(named[:-1]) + " or " + named[-1]) if len(named) > 1 else named[0]


def _magnitude(n: int) -> str:
    return f"about 10^{math.floor(math.log10(n))}" if n > 0 else "0"


# --- what the expression reads ----------------------------------------------------------

def paths(ast: CheckedAst) -> dict[str, frozenset[Path]]:
    """Per variable the expression reads, the constant-key paths it selects from it
    (maximal chains of `.name`, `["name"]`, `.?name`, `[?"name"]`, `has(...)`)."""
    found: dict[str, set[Path]] = {}
    stack: list[CelNode] = [ast.root]
    while stack:
        n = stack.pop()
        chain = _chain(n)
        if chain is not None:
            name, path = chain
            found.setdefault(name, set()).add(path)
            # The chain's own operands are covered; its index keys are constants.
            continue
        stack.extend(n.children())
    return {name: frozenset(p) for name, p in found.items()}


def _chain(n: CelNode) -> tuple[str, Path] | None:
    keys: list[str] = []
    while True:
        if n.kind == "ident":
            if n.name not in VARIABLES:
                return None
            return n.name, tuple(reversed(keys))
        if n.kind == "select" and n.operand is not None:
            keys.append(n.name)
            n = n.operand
        elif (n.kind == "call" and n.name in _INDEX_CALLS and n.operand is None
              and len(n.args) == 2 and n.args[1].kind == "const"
              and isinstance(n.args[1].value, str)):
            keys.append(n.args[1].value)
            n = n.args[0]
        else:
            return None


def with_shortcuts(raw: Mapping[str, Any]) -> dict[str, Any]:
    """`raw` with `labels` and `annotations` at its top level (from metadata, {} when
    absent or not maps)."""
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    out = dict(raw)
    for key in SHORTCUTS:
        value = meta.get(key)
        out[key] = value if isinstance(value, Mapping) else {}
    return out


def view(raw: Mapping[str, Any], selected: frozenset[Path]) -> Any:
    """The part of `raw` (with its shortcuts) that paths `selected` reach: each path's
    subtree where it exists, every key along it, nothing else."""
    full = with_shortcuts(raw)
    if () in selected:
        return full
    return _prune(full, sorted(selected))


def _prune(value: Any, selected: list[Path]) -> Any:
    if any(not p for p in selected) or not isinstance(value, Mapping):
        # A path ends here, or a step would select from a list or scalar (which the
        # expression then fails on, or reads whole): keep the value as it is.
        return value
    by_key: dict[str, list[Path]] = {}
    for p in selected:
        by_key.setdefault(p[0], []).append(p[1:])
    return {k: _prune(value[k], rest) for k, rest in by_key.items() if k in value}


class HasRaw(Protocol):
    """What `CelInput` reads of a node record: its raw object and its memo."""

    raw: dict[str, Any]
    cache: dict[str, Any]


class CelInput:
    """A policy's CEL expression, compiled once, with the views of pod and node it
    reads. `bind(pod)` once per cycle, then the returned function per node."""

    __slots__ = ("_cache_key", "_node_paths", "_pod_paths", "_result_key", "rule",
                 "source")

    def __init__(self, source: str, rule_id: str = "") -> None:
        self.source = source
        try:
            self.rule = compile_cel(source)
        except CelCompileError as e:
            # Lint reports this first; only a document that skipped it gets here.
            raise ValueError(f"rule {rule_id!r}: invalid CEL {source!r}: "
                             + e.message.split("\n")[0]) from None
        selected = paths(self.rule.ast)
        self._pod_paths = selected.get("pod")
        self._node_paths = selected.get("node")
        # Rules reading the same node fields share a node's view.
        self._cache_key = "cel-view:" + repr(sorted(self._node_paths or ()))
        self._result_key = "cel-result:" + source

    @property
    def reads_pod(self) -> bool:
        """Whether the result depends on the pod (it names `pod`)."""
        return self._pod_paths is not None

    def node_label_keys(self) -> tuple[str, ...]:
        """The node label keys the expression reads by name (`node.labels.tier`,
        `node.metadata.labels["myorg.io/x"]`, `has(...)`, `.?`), for explain and
        audit's case check."""
        keys = [p[-1] for p in sorted(self._node_paths or ())
                if (len(p) == 2 and p[0] == "labels")
                or (len(p) == 3 and p[:2] == ("metadata", "labels"))]
        return tuple(dict.fromkeys(keys))

    def bind(self, pod_raw: Mapping[str, Any]) -> Callable[[HasRaw], Any]:
        """The per-node evaluation for this pod: node record -> the result (plain
        Python), or CelRuntimeError."""
        pod = {} if self._pod_paths is None else view(pod_raw, self._pod_paths)
        node_paths = self._node_paths
        key = self._cache_key
        evaluate = self.rule.evaluate

        if node_paths is None:
            def without_node(node: HasRaw) -> Any:
                return evaluate({"pod": pod, "node": {}})
            return without_node

        if () in node_paths or self._pod_paths is None:
            def plain(node: HasRaw) -> Any:
                memo = node.cache
                found = memo.get(key)
                if found is None:
                    found = memo[key] = view(node.raw, node_paths)
                return evaluate({"pod": pod, "node": found})
            run = plain
        else:
            # Nodes often agree on the few fields an expression reads (the same
            # tier, zone, allocatable): the result is a function of the two views,
            # so this pod evaluates once per distinct node view. A view's canonical
            # text, its key here, is made once per node record beside the view.
            results: dict[str, Any] = {}
            key = "cel-keyed-" + key  # (view, text) pairs: not the plain views' entry

            def grouped(node: HasRaw) -> Any:
                memo = node.cache
                found = memo.get(key)
                if found is None:
                    selected = view(node.raw, node_paths)
                    found = memo[key] = (selected, _canonical(selected))
                selected, text = found
                result = results.get(text, _UNSET)
                if result is _UNSET:
                    try:
                        result = evaluate({"pod": pod, "node": selected})
                    except CelRuntimeError as e:
                        result = e
                    results[text] = result
                if isinstance(result, CelRuntimeError):
                    raise result
                return result
            run = grouped

        if self._pod_paths is not None:
            return run
        # Without pod fields the result is the node's alone, and a node record never
        # changes (an update makes a new one): keep it, value or error, on the record,
        # so every later pod and cycle pays a lookup.
        result_key = self._result_key

        def remembered(node: HasRaw) -> Any:
            memo = node.cache
            found = memo.get(result_key, _UNSET)
            if found is _UNSET:
                try:
                    found = run(node)
                except CelRuntimeError as e:
                    found = e
                memo[result_key] = found
            if isinstance(found, CelRuntimeError):
                raise found
            return found
        return remembered


_UNSET = object()


def _canonical(value: Any) -> str:
    """One text per distinct view: JSON with sorted keys, types kept apart (1, 1.0,
    "1" and true differ; CEL tells them apart too)."""
    return json.dumps(value, sort_keys=True, default=repr)
