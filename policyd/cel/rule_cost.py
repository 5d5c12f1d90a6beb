"""The worst-case cost of a policy rule, where every value is bounded by its inputs.

`cost.estimate` follows cel-go: a size it cannot derive (an optional's `orValue`, the
list `map()` or `filter()` builds, a function's result) is unbounded, so any loop over
it is. That suits device selectors, whose inputs have declared limits. A rule's
inputs, a pod and a node, are bounded only as a whole (the largest object the API
server stores), and every value an expression reaches is drawn from them or from its
literals, so here an underivable size is that bound instead: one loop over
`node.?status.images.orValue([])` costs what one loop over `node.status.images`
does, and only loops inside loops, or a search of data inside data within a loop,
grow past it.
"""

from __future__ import annotations

from collections.abc import Mapping

from policyd.cel.checked_ast import CheckedAst, Node
from policyd.cel.cost import UNBOUNDED, Shape, _Estimator


class _BoundedEstimator(_Estimator):
    bound: Shape = Shape(UNBOUNDED)

    def shape(self, n: Node) -> Shape:
        found = super().shape(n)
        return self.bound if found.size >= UNBOUNDED else found


def estimate_bounded(ast: CheckedAst, variables: Mapping[str, Shape], bound: Shape) -> int:
    """The worst-case cost of `ast` with an underivable size taken as `bound`."""
    estimator = _BoundedEstimator(ast, variables, {})
    estimator.bound = bound
    return estimator.cost(ast.root)
