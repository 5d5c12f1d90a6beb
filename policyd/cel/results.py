"""What an evaluation returned, as Python values or as upstream's error text."""

from __future__ import annotations

from typing import Any

from policyd.cel import messages, values
from policyd.cel.errors import CelRuntimeError

# cel-go's reason when a value of each type is converted to a Go bool
# (ConvertToNative(reflect.TypeOf(true))), keyed by cel-cpp's type name.
_NOT_BOOL = {
    "INT": ("int", "unsupported type conversion from 'int' to bool"),
    "UINT": ("uint", "unsupported type conversion from 'uint' to bool"),
    "DOUBLE": ("double", "type conversion error from Double to 'bool'"),
    "STRING": ("string", "unsupported native conversion from string to 'bool'"),
    "BYTES": ("bytes", "type conversion error from Bytes to 'bool'"),
    "NULL": ("null_type", "type conversion error from 'null_type' to 'bool'"),
    values.QUANTITY_TYPE: (values.QUANTITY_TYPE,
                           "type conversion error from 'Quantity' to 'bool'"),
    values.SEMVER_TYPE: (values.SEMVER_TYPE, "type conversion error from 'Semver' to 'bool'"),
}


def error_of(result: Any, expression: str) -> CelRuntimeError | None:
    """The runtime error an evaluation produced, in cel-go's words, or None."""
    if result.type().name() != "ERROR":
        return None
    return CelRuntimeError(messages.runtime(str(result.value())), expression)


def as_bool(result: Any, expression: str) -> bool:
    """A selector's result, which must be a bool (DeviceMatches' check and texts)."""
    kind = result.type().name()
    if kind == "BOOL":
        return bool(result.value())
    error = error_of(result, expression)
    if error is not None:
        raise error
    if kind.startswith("LIST<"):
        name, reason = "list", "type conversion error from list to 'bool'"
    elif kind.startswith("MAP<"):
        name, reason = "map", "type conversion error from map to 'bool'"
    else:
        name, reason = _NOT_BOOL.get(kind, (kind.lower(), f"type conversion error from "
                                                          f"'{kind.lower()}' to 'bool'"))
    raise CelRuntimeError(f"CEL result of type {name} could not be converted to bool: "
                          f"{reason}", expression)


def to_python(result: Any, expression: str) -> Any:
    """A rule's result as plain Python: CEL's scalars, lists and maps as themselves,
    a quantity as its exact Decimal, a semantic version as semver.Version."""
    error = error_of(result, expression)
    if error is not None:
        raise error
    return _plain(result.value())


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v.value() if hasattr(v, "value") else v) for v in value]
    if isinstance(value, dict):
        return {(_plain(k.value() if hasattr(k, "value") else k)):
                _plain(v.value() if hasattr(v, "value") else v) for k, v in value.items()}
    if values.is_quantity(value):
        return values.quantity_value(value)
    if values.is_semver(value):
        return values.semver_value(value)
    return value
