"""The type-checked syntax tree of a compiled expression, read back from the library.

cel-expr-python hands out a compiled expression only as an opaque program plus
`serialize()`: a `google.protobuf.Any` holding a `cel.expr.CheckedExpr`. Two things
need the tree itself: the worst-case cost estimate (`cost.py`) and the device
selector's view of which attribute domains an expression names (`device.py`). Rather
than ship the cel.expr .proto files, this module reads the few fields it needs straight
off the protobuf wire format (field numbers of cel-spec's `checked.proto` and
`syntax.proto`, which are stable: they are the wire contract between CEL
implementations). Fields it does not know are skipped, as any protobuf reader would.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


class AstDecodeError(ValueError):
    """The serialized expression is not the CheckedExpr this module reads."""


@dataclass(slots=True)
class Node:
    """One expression node. `kind` is one of const, ident, select, call, list, struct,
    comprehension; the other fields are filled as the kind needs."""

    id: int = 0
    kind: str = ""
    # const: the Python value (None for null); ident: name; select: field;
    # call: function name.
    value: object = None
    name: str = ""
    operand: Node | None = None  # select's operand, call's target
    test_only: bool = False  # select inside has()
    args: list[Node] = field(default_factory=list)  # call args, list elements, struct values
    # comprehension parts
    iter_range: Node | None = None
    accu_init: Node | None = None
    loop_condition: Node | None = None
    loop_step: Node | None = None
    result: Node | None = None
    iter_var: str = ""
    accu_var: str = ""

    def children(self) -> list[Node]:
        parts = [self.operand, self.iter_range, self.accu_init, self.loop_condition,
                 self.loop_step, self.result]
        return [n for n in parts if n is not None] + self.args


@dataclass(frozen=True, slots=True)
class CheckedAst:
    """The root node and, per node id, the overload ids the checker chose and the type
    it inferred (as the library's kind number: the `primitive`/`well_known` tag)."""

    root: Node
    overloads: dict[int, tuple[str, ...]]


# --- protobuf wire format -------------------------------------------------------------

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of every field of one message, in order."""
    out: list[tuple[int, int, int | bytes]] = []
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _I64:
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == _LEN:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == _I32:
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise AstDecodeError(f"unsupported wire type {wire}")
        if pos > end:
            raise AstDecodeError("truncated message")
        out.append((number, wire, value))
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise AstDecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _text(v: int | bytes) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else ""


def _msg(v: int | bytes) -> bytes:
    if not isinstance(v, bytes):
        raise AstDecodeError("expected a message field")
    return v


# --- cel.expr messages ----------------------------------------------------------------

def decode(serialized: bytes) -> CheckedAst:
    """The CheckedExpr inside the library's serialized Any."""
    payload = b""
    for number, _, value in _fields(serialized):
        if number == 2:  # Any.value
            payload = _msg(value)
    root: Node | None = None
    overloads: dict[int, tuple[str, ...]] = {}
    for number, _, value in _fields(payload):
        if number == 4:  # CheckedExpr.expr
            root = _expr(_msg(value))
        elif number == 2:  # reference_map entry
            key, ref = 0, b""
            for n, _, v in _fields(_msg(value)):
                if n == 1 and isinstance(v, int):
                    key = _signed(v)
                elif n == 2:
                    ref = _msg(v)
            ids = tuple(_text(v) for n, _, v in _fields(ref) if n == 3)
            overloads[key] = ids
    if root is None:
        raise AstDecodeError("no expression in the checked AST")
    return CheckedAst(root, overloads)


def _expr(buf: bytes) -> Node:
    node = Node()
    for number, _, value in _fields(buf):
        if number == 2 and isinstance(value, int):
            node.id = _signed(value)
        elif number == 3:
            node.kind, node.value = "const", _constant(_msg(value))
        elif number == 4:
            node.kind = "ident"
            node.name = "".join(_text(v) for n, _, v in _fields(_msg(value)) if n == 1)
        elif number == 5:
            node.kind = "select"
            _select(node, _msg(value))
        elif number == 6:
            node.kind = "call"
            _call(node, _msg(value))
        elif number == 7:
            node.kind = "list"
            node.args = [_expr(_msg(v)) for n, _, v in _fields(_msg(value)) if n == 1]
        elif number == 8:
            node.kind = "struct"
            _struct(node, _msg(value))
        elif number == 9:
            node.kind = "comprehension"
            _comprehension(node, _msg(value))
    return node


def _constant(buf: bytes) -> object:
    for number, wire, value in _fields(buf):
        if number == 1:
            return None
        if number == 2 and isinstance(value, int):
            return bool(value)
        if number in (3, 4) and isinstance(value, int):
            return _signed(value) if number == 3 else value
        if number == 5 and wire == _I64 and isinstance(value, int):
            return struct.unpack("<d", value.to_bytes(8, "little"))[0]
        if number == 6:
            return _text(value)
        if number == 7:
            return _msg(value)
    return None


def _select(node: Node, buf: bytes) -> None:
    for number, _, value in _fields(buf):
        if number == 1:
            node.operand = _expr(_msg(value))
        elif number == 2:
            node.name = _text(value)
        elif number == 3:
            node.test_only = bool(value)


def _call(node: Node, buf: bytes) -> None:
    for number, _, value in _fields(buf):
        if number == 1:
            node.operand = _expr(_msg(value))
        elif number == 2:
            node.name = _text(value)
        elif number == 3:
            node.args.append(_expr(_msg(value)))


def _struct(node: Node, buf: bytes) -> None:
    for number, _, value in _fields(buf):
        if number == 1:
            node.name = _text(value)
        elif number == 2:
            for n, _, v in _fields(_msg(value)):
                if n in (3, 4):  # map_key, value
                    node.args.append(_expr(_msg(v)))


def _comprehension(node: Node, buf: bytes) -> None:
    for number, _, value in _fields(buf):
        if number == 1:
            node.iter_var = _text(value)
        elif number == 2:
            node.iter_range = _expr(_msg(value))
        elif number == 3:
            node.accu_var = _text(value)
        elif number == 4:
            node.accu_init = _expr(_msg(value))
        elif number == 5:
            node.loop_condition = _expr(_msg(value))
        elif number == 6:
            node.loop_step = _expr(_msg(value))
        elif number == 7:
            node.result = _expr(_msg(value))
