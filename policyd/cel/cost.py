"""A worst-case cost estimate of a checked expression, after cel-go's estimator.

cel-go counts the cost of each evaluation and stops one that passes the limit
(DRA: 1,000,000 per selector); cel-cpp, which policyd evaluates with, has no such
counter. What policyd does instead (see `device.py`): estimate the worst case when
the expression is compiled, as the API server does when it admits a DeviceClass or
ResourceClaim (it refuses a selector whose estimate passes the limit: "too complex,
exceeds cost limit"), and refuse to evaluate one whose estimate is over the limit.
An expression the API server admitted is thus never refused, and no evaluation can
run away.

The rules are cel-go's checker/cost.go, in simplified form: identifiers and field
selections cost 1, constants 0, a call 1 plus its arguments, `&&`/`||`/`?:` the
costlier branch, string traversals a tenth of a unit per character, `in` on a list one
per element, `matches` the product of string and pattern, and a comprehension its range
size times the cost of one step. Sizes come from what is known: literals, and the
maximum sizes DRA declares for a device (32 attributes per domain, 64-character
values, ...). An unknown size is unbounded, as in cel-go, which makes any loop over it
exceed the limit. The numbers are close to cel-go's but not identical: the estimate is
a guard, not an output users compare.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from policyd.cel.checked_ast import CheckedAst, Node

UNBOUNDED = 2**64 - 1
_STRING_TRAVERSAL = 0.1
# String methods whose result is no longer than their receiver.
_SAME_SIZE = frozenset({"lowerAscii", "upperAscii", "trim", "substring", "charAt", "find"})
_REGEX_LENGTH = 0.25


@dataclass(frozen=True, slots=True)
class Shape:
    """The maximum size of a value and, for containers, of its elements."""

    size: int
    element: Shape | None = None
    # A map's keys, which a comprehension over the map ranges over.
    key: Shape | None = None


def _sat(x: int) -> int:
    return min(x, UNBOUNDED)


def _factor(size: int, factor: float) -> int:
    return _sat(math.ceil(size * factor)) if size < UNBOUNDED else UNBOUNDED


@dataclass(slots=True)
class _Estimator:
    ast: CheckedAst
    variables: Mapping[str, Shape]
    locals_: dict[str, Shape]

    def cost(self, n: Node) -> int:
        kind = n.kind
        if kind == "const":
            return 0
        if kind == "ident":
            return 1
        if kind == "select":
            assert n.operand is not None
            if n.test_only:  # has(): PresenceTestHasCost(false), as Kubernetes sets
                return self.cost(n.operand)
            return _sat(self.cost(n.operand) + 1)
        if kind == "call":
            return self._call(n)
        if kind in ("list", "struct"):
            return _sat(sum(self.cost(a) for a in n.args) + 10)
        if kind == "comprehension":
            return self._comprehension(n)
        return 0

    def _call(self, n: Node) -> int:
        args = [self.cost(a) for a in n.args]
        target = self.cost(n.operand) if n.operand is not None else 0
        fn = n.name
        if fn == "dyn" and args:
            return _sat(1 + args[0])
        if fn in ("_&&_", "_||_"):
            return _sat(sum(args))
        if fn == "_?_:_" and len(args) == 3:
            return _sat(args[0] + max(args[1], args[2]))
        total = _sat(sum(args) + target)
        if fn == "@in" and len(n.args) == 2:
            return _sat(total + self.shape(n.args[1]).size)
        overloads = self.ast.overloads.get(n.id, ())
        if fn in ("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_") and len(n.args) == 2:
            # Proportional to the shorter operand; an operand of unknown size (a
            # function's scalar result) counts as 1.
            sizes = [s for s in (self.shape(a).size for a in n.args) if s < UNBOUNDED]
            smallest = min(sizes, default=1)
            return _sat(total + max(1, _factor(smallest, _STRING_TRAVERSAL)))
        if fn == "_+_" and len(n.args) == 2 and set(overloads) & {"add_string", "add_bytes",
                                                                    "add_list"}:
            joined = _sat(self.shape(n.args[0]).size + self.shape(n.args[1]).size)
            return _sat(total + max(1, _factor(joined, _STRING_TRAVERSAL)))
        if n.operand is not None and len(n.args) == 1:
            this = self.shape(n.operand).size
            arg = self.shape(n.args[0]).size
            if fn == "matches":
                return _sat(total + _factor(_sat(this + 1), _STRING_TRAVERSAL)
                            * _factor(arg, _REGEX_LENGTH))
            if fn == "contains":
                return _sat(total + _factor(this, _STRING_TRAVERSAL)
                            * _factor(arg, _STRING_TRAVERSAL))
            if fn in ("startsWith", "endsWith"):
                return _sat(total + _factor(arg, _STRING_TRAVERSAL))
        if n.operand is not None and fn in ("split", "lowerAscii", "upperAscii", "trim",
                                            "replace", "indexOf", "lastIndexOf", "find",
                                            "findAll", "substring", "charAt", "join"):
            # Kubernetes' estimator: a traversal of the receiver (strings library).
            return _sat(total + max(1, _factor(self.shape(n.operand).size,
                                               _STRING_TRAVERSAL)))
        return _sat(total + 1)

    def _comprehension(self, n: Node) -> int:
        assert n.iter_range is not None and n.accu_init is not None
        base = _sat(self.cost(n.iter_range) + self.cost(n.accu_init))
        is_bind = (n.iter_range.kind == "list" and not n.iter_range.args
                   and n.loop_condition is not None and n.loop_condition.kind == "const"
                   and n.loop_condition.value is False and n.accu_var != "@result")
        if is_bind:  # cel.bind(): evaluated once, lazily
            self.locals_[n.accu_var] = self.shape(n.accu_init)
            return _sat(base + (self.cost(n.result) if n.result else 0))
        range_shape = self.shape(n.iter_range)
        self.locals_[n.iter_var] = range_shape.key or range_shape.element or Shape(UNBOUNDED)
        step = _sat((self.cost(n.loop_condition) if n.loop_condition else 0)
                    + (self.cost(n.loop_step) if n.loop_step else 0))
        result = self.cost(n.result) if n.result else 0
        loop = UNBOUNDED if range_shape.size >= UNBOUNDED and step else \
            _sat(range_shape.size * step)
        return _sat(base + result + loop)

    def shape(self, n: Node) -> Shape:
        """The maximum size of the value `n` evaluates to (unbounded when unknown)."""
        if n.kind == "const":
            v = n.value
            return Shape(len(v)) if isinstance(v, str | bytes) else Shape(1)
        if n.kind == "ident":
            return self.locals_.get(n.name) or self.variables.get(n.name) or Shape(UNBOUNDED)
        if n.kind == "list":
            items = [self.shape(a) for a in n.args]
            biggest = max(items, key=lambda s: s.size, default=Shape(0))
            return Shape(len(n.args), biggest)
        if n.kind == "select" and n.operand is not None and not n.test_only:
            return self.shape(n.operand).element or Shape(UNBOUNDED)
        if n.kind == "call" and n.name == "_[_]" and n.args:
            return self.shape(n.args[0]).element or Shape(UNBOUNDED)
        if n.kind == "call" and n.name in ("_&&_", "_||_", "_==_", "_!=_", "_<_", "_>_",
                                           "_<=_", "_>=_", "@in", "size", "!_", "-_"):
            return Shape(1)
        if n.kind == "call" and n.name == "dyn" and n.args:
            return self.shape(n.args[0])
        if n.kind == "call" and n.name == "_+_" and len(n.args) == 2:
            return Shape(_sat(self.shape(n.args[0]).size + self.shape(n.args[1]).size))
        if n.kind == "call" and n.operand is not None and n.name in _SAME_SIZE:
            return Shape(self.shape(n.operand).size)
        return Shape(UNBOUNDED)


def estimate(ast: CheckedAst, variables: Mapping[str, Shape]) -> int:
    """The worst-case cost of `ast`, given the maximum shapes of its variables."""
    return _Estimator(ast, variables, {}).cost(ast.root)
