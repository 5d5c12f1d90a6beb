"""Reading raw resource.k8s.io/v1 JSON field by field, with the path of every field.

The DRA objects arrive as the API server's JSON (informers, snapshot files). What the
API server validated can still be broken in a hand-written snapshot, so every read
checks the JSON type and a bad one raises `InvalidObjectError` naming the object and
the field path (`spec.devices[2].capacity.memory.value`), never a KeyError deep in the
allocator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from policyd.errors import InvalidObjectError

# A quantity parser returns the value in billionths (apimachinery's finest scale), so
# counters and capacities add and compare exactly; it raises ValueError on bad input.
# Injected: the project's one parser lives above this package's layer.
QuantityParser = Callable[[object], int]

_EMPTY: Mapping[str, Any] = {}


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class Fields:
    """Typed reads of one object's fields; errors name `kind name` and the path."""

    __slots__ = ("kind", "name", "quantity")

    def __init__(self, kind: str, name: str, quantity: QuantityParser | None = None) -> None:
        self.kind = kind
        self.name = name
        self.quantity = quantity

    def fail(self, path: str, message: str) -> NoReturn:
        raise InvalidObjectError(self.kind, self.name, path, message)

    def mapping(self, value: object, path: str) -> Mapping[str, Any]:
        """An object; a missing (null) one reads as empty, as Go decodes it."""
        if value is None:
            return _EMPTY
        if not isinstance(value, dict):
            self.fail(path, f"must be an object, not {type_name(value)}")
        return value

    def items(self, value: object, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"must be a list, not {type_name(value)}")
        return value

    def text(self, m: Mapping[str, Any], key: str, path: str, *,
             required: bool = False) -> str:
        value = m.get(key)
        if value is None:
            if required:
                self.fail(join(path, key), "is required")
            return ""
        if not isinstance(value, str):
            self.fail(join(path, key), f"must be a string, not {type_name(value)}")
        return value

    def optional_text(self, m: Mapping[str, Any], key: str, path: str) -> str | None:
        return self.text(m, key, path) if m.get(key) is not None else None

    def integer(self, m: Mapping[str, Any], key: str, path: str, default: int = 0) -> int:
        value = m.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            self.fail(join(path, key), f"must be an integer, not {type_name(value)}")
        return value

    def flag(self, m: Mapping[str, Any], key: str, path: str) -> bool | None:
        value = m.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            self.fail(join(path, key), f"must be a boolean, not {type_name(value)}")
        return value

    def texts(self, m: Mapping[str, Any], key: str, path: str) -> tuple[str, ...] | None:
        """A list of strings; None when absent (Go keeps nil and empty apart)."""
        value = m.get(key)
        if value is None:
            return None
        out = []
        for i, item in enumerate(self.items(value, join(path, key))):
            if not isinstance(item, str):
                self.fail(f"{join(path, key)}[{i}]", f"must be a string, not {type_name(item)}")
            out.append(item)
        return tuple(out)

    def nanos(self, value: object, path: str) -> int:
        if self.quantity is None:  # a programming error, not bad input
            raise TypeError(f"{self.kind} decoding needs a quantity parser")
        if value is None:
            self.fail(path, "is required")
        try:
            return self.quantity(value)
        except ValueError as err:
            self.fail(path, str(err))


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
