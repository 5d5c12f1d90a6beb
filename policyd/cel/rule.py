"""Generic CEL rules over named variables, for the policy language's `cel` rule kind
(e.g. `node.labels["tier"] == pod.annotations["myorg.io/tier"]`).

Same environment as device selectors (Kubernetes' quantity, semver and regex
libraries, strings, cel.bind, optionals), any variables the caller declares, and any
result type (the caller decides what a rule must return; `CompiledRule.output_type`
says what the checker inferred, in cel-go's spelling). Compile errors carry the 1-based
line and column of the first problem, for lint to point at. The worst-case cost is
estimated (`max_cost`) but not enforced: rule inputs are API objects of bounded size,
and the caller may decide a limit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Union

from cel_expr_python import cel

from policyd.cel import environment, messages, results
from policyd.cel.cost import UNBOUNDED, Shape, estimate
from policyd.cel.errors import CelCompileError, CelRuntimeError
from policyd.cel.library import QUANTITY, SEMVER

# A variable's declared type: a Python type (str, int, float, bool, bytes, dict, list,
# or Any for dyn), a CEL type name ("string", "int", "uint", "double", "bool",
# "bytes", "dyn", "map", "list", "quantity", "semver"), or a cel.Type.
TypeLike = Union[type, str, Any]  # noqa: UP007 (a runtime alias)

_NAMED = {
    "string": cel.Type.STRING, "int": cel.Type.INT, "uint": cel.Type.UINT,
    "double": cel.Type.DOUBLE, "bool": cel.Type.BOOL, "bytes": cel.Type.BYTES,
    "dyn": cel.Type.DYN, "map": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
    "list": cel.Type.List(cel.Type.DYN), "quantity": QUANTITY, "semver": SEMVER,
}
_PYTHON = {str: "string", int: "int", float: "double", bool: "bool", bytes: "bytes",
           dict: "map", list: "list", object: "dyn"}


def cel_type(t: TypeLike) -> Any:
    """The cel.Type for a type-ish declaration; ValueError naming it otherwise."""
    if isinstance(t, cel.Type):
        return t
    if t is Any:
        return cel.Type.DYN
    if isinstance(t, type) and t in _PYTHON:
        return _NAMED[_PYTHON[t]]
    if isinstance(t, str) and t in _NAMED:
        return _NAMED[t]
    raise ValueError(f"unsupported variable type {t!r}: use one of "
                     f"{', '.join(sorted(_NAMED))}, a Python type or a cel.Type")


class CompiledRule:
    """A compiled rule; `evaluate` is safe to call from several threads."""

    __slots__ = ("_program", "_variables", "ast", "expression", "max_cost", "output_type")

    def __init__(self, expression: str, compiled: environment.Compiled,
                 variables: frozenset[str]) -> None:
        self.expression = expression
        self._program = compiled.program
        self._variables = variables
        self.output_type = compiled.output_type
        # The checked tree, for callers that read what the expression selects.
        self.ast = compiled.ast
        unknown = {name: Shape(UNBOUNDED) for name in variables}
        self.max_cost = estimate(compiled.ast, unknown)

    def __repr__(self) -> str:
        return f"CompiledRule({self.expression!r})"

    def evaluate(self, activation: Mapping[str, Any]) -> Any:
        """The rule's value for these variable values (plain JSON-like Python values;
        a quantity comes back as a Decimal, a semver as semver.Version).
        CelRuntimeError, in cel-go's words, when evaluation fails or a declared
        variable is missing."""
        missing = sorted(self._variables - activation.keys())
        if missing:
            raise CelRuntimeError(f"no such attribute(s): {', '.join(missing)}",
                                  self.expression)
        data = {name: activation[name] for name in self._variables}
        try:
            result = self._program.eval(data=data)
        except (RuntimeError, TypeError, ValueError, OverflowError) as e:
            # A value the binding cannot turn into CEL (an int past 64 bits, a set).
            raise CelRuntimeError(messages.runtime(str(e)), self.expression) from None
        return results.to_python(result, self.expression)


_env_lock = threading.Lock()
_envs: OrderedDict[tuple[tuple[str, str], ...], Any] = OrderedDict()
_ENV_CACHE_SIZE = 32


def compile_rule(expression: str, variables: Mapping[str, TypeLike]) -> CompiledRule:
    """Compile `expression` with the given variables declared; CelCompileError (with
    `line` and `column`) when it does not compile."""
    declared = {name: cel_type(t) for name, t in variables.items()}
    key = tuple(sorted((name, t.name()) for name, t in declared.items()))
    with _env_lock:
        env = _envs.get(key)
        if env is None:
            env = environment.new_env(declared)
            _envs[key] = env
            if len(_envs) > _ENV_CACHE_SIZE:
                _envs.popitem(last=False)
        else:
            _envs.move_to_end(key)
    compiled = environment.compile_expression(env, expression)
    return CompiledRule(expression, compiled, frozenset(declared))


__all__ = ["CelCompileError", "CelRuntimeError", "CompiledRule", "TypeLike", "cel_type",
           "compile_rule"]
