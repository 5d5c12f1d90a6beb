"""Kubernetes' CEL base environment on cel-expr-python, and the one compile step both
device selectors and policy rules go through.

What the environment has, as Kubernetes' base environment (k8s.io/apiserver
pkg/cel/environment/base.go) at v1.36: the standard functions and macros,
`cel.bind` (ext.Bindings), the strings extension (`lowerAscii`, `split`, `join`, ...),
optional types (`?.`, `orValue`), and Kubernetes' quantity, semver and regex
(`find`, `findAll`) libraries (`library.py`). What it lacks (cel-expr-python has no
such extension; an expression that uses one fails to compile with "undeclared
reference"): Kubernetes' lists (`isSorted`, `sum`, `min`, `max`, `indexOf` on lists),
URL, IP, CIDR, format and authz libraries, cel-go's sets, lists (v3) and
two-variable comprehension extensions, and DRA's `includes` (meant for list
attributes, alpha in v1.36). cel-go's compile-time literal checks (a regex, duration
or timestamp literal that does not parse, a list literal of mixed types) are not
made either: such an expression fails when evaluated instead. The API server makes
those checks when it admits an object, so they matter only for files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from policyd.cel import checked_ast, library, messages, values
from policyd.cel.errors import CelCompileError


def new_env(variables: Mapping[str, Any]) -> Any:
    """A cel.Env with Kubernetes' functions and the given variable declarations."""
    return cel.NewEnv(
        values.POOL,
        variables=dict(variables),
        extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings(),
                    ext_optional.ExtOptional()],
        functions=library.kubernetes_functions(),
    )


@dataclass(frozen=True, slots=True)
class Compiled:
    """A checked program, its tree and its result type in cel-go's spelling."""

    program: Any
    ast: checked_ast.CheckedAst
    output_type: str


def compile_expression(env: Any, expression: str, prefix: str = "",
                       objects: Mapping[str, frozenset[str]] | None = None) -> Compiled:
    """Parse and type-check `expression`; CelCompileError carries the checker's
    issues (after `prefix`, e.g. upstream's "compilation failed: ") and the first
    issue's line and column. `objects`: variables declared as qualified names
    (`device.driver`, ...), by object name, with their fields."""
    try:
        program = env.compile(expression)
    except RuntimeError as e:
        issues = messages.compile_issues(str(e), expression, objects)
        position = messages.first_position(issues)
        line, column = position if position else (None, None)
        raise CelCompileError(prefix + issues, expression, line, column) from None
    try:
        ast = checked_ast.decode(program.serialize())
    except checked_ast.AstDecodeError as e:
        # Only a library whose serialized form changed gets here; upstream's wording
        # for a checker that returned something unusable.
        raise CelCompileError(f"unexpected compilation error: {e}", expression) from None
    return Compiled(program, ast, type_name(program.return_type()))


_PRIMITIVES = {"BOOL": "bool", "INT": "int", "UINT": "uint", "DOUBLE": "double",
               "STRING": "string", "BYTES": "bytes", "NULL": "null_type", "DYN": "dyn",
               "ERROR": "*error*", "TYPE": "type",
               "google.protobuf.Timestamp": "google.protobuf.Timestamp",
               "google.protobuf.Duration": "google.protobuf.Duration"}


def type_name(t: Any) -> str:
    """cel-cpp's type name (`MAP<STRING, DYN>`) as cel-go's Type.String()
    (`map(string, dyn)`)."""
    return _spell(t.name())


def _spell(name: str) -> str:
    if name in _PRIMITIVES:
        return _PRIMITIVES[name]
    for outer, inner in (("LIST<", "list("), ("MAP<", "map("), ("TYPE<", "type("),
                         ("optional_type<", "optional_type(")):
        if name.startswith(outer) and name.endswith(">"):
            return inner + ", ".join(_spell(p) for p in _split_params(name[len(outer):-1])) \
                + ")"
    return name


def _split_params(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts
