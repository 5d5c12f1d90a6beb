"""Reading the checked tree back from the library's serialized CheckedExpr."""

from __future__ import annotations

import pytest
from cel_expr_python import cel

from policyd.cel import environment
from policyd.cel.checked_ast import AstDecodeError, Node, decode

ENV = environment.new_env({"x": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)})


def _root(expression: str) -> Node:
    return decode(ENV.compile(expression).serialize()).root


def test_calls_selects_and_constants() -> None:
    root = _root('x["a"].b > 1 && has(x.c)')
    assert (root.kind, root.name) == ("call", "_&&_")
    greater, presence = root.args
    assert (greater.name, greater.args[1].value) == ("_>_", 1)
    select = greater.args[0]
    assert (select.kind, select.name, select.test_only) == ("select", "b", False)
    assert select.operand is not None and select.operand.name == "_[_]"
    assert [a.kind for a in select.operand.args] == ["ident", "const"]
    assert select.operand.args[1].value == "a"
    assert (presence.kind, presence.name, presence.test_only) == ("select", "c", True)


@pytest.mark.parametrize(("expression", "value"), [
    ("true", True), ("-5", -5), ("5u", 5), ("2.5", 2.5), ('"s"', "s"), ('b"b"', b"b"),
    ("null", None),
])
def test_constants(expression: str, value: object) -> None:
    root = _root(expression)
    assert root.kind == "const" and root.value == value


def test_comprehension_and_overloads() -> None:
    checked = decode(ENV.compile("[1, 2].all(i, i > 0)").serialize())
    root = checked.root
    assert root.kind == "comprehension" and root.iter_var == "i"
    assert root.iter_range is not None and len(root.iter_range.args) == 2
    step = root.loop_step
    assert step is not None and step.name == "_&&_"
    assert ("greater_int64",) in checked.overloads.values()


def test_garbage_is_refused() -> None:
    with pytest.raises(AstDecodeError):
        decode(b"\x0a\xff")
