"""Kubernetes resource quantities, parsed by the official client's own parser.

`kubernetes.utils.parse_quantity` is the reference implementation, but importing
`kubernetes.utils` runs the client package's `__init__`, which loads the whole API
client (~0.4 s). The parser module itself only needs `decimal`, so it is loaded straight
from its file: lint and explain stay fast and still never parse quantities by hand.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from decimal import Decimal
from functools import cache
from pathlib import Path


@cache
def _parser() -> Callable[[object], Decimal]:
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the kubernetes client package is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "utils" / "quantity.py"
    module_spec = importlib.util.spec_from_file_location("_policyd_k8s_quantity", path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    parse: Callable[[object], Decimal] = module.parse_quantity
    return parse


# A Quantity's value must fit an int64 (resource.Quantity's MaxInt64 bound): larger ones
# cannot be counted by the scheduler, upstream or here.
MAX_QUANTITY = Decimal(2**63 - 1)


def parse_quantity(value: object) -> Decimal:
    """Parse a quantity (`"100m"`, `"1Gi"`, `2`, `"1e3"`); raises ValueError if invalid,
    not finite (the client's parser accepts "Infinity" and "NaN"), or beyond int64."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{value!r} is not a quantity")
    try:
        q = _parser()(value)
    except ValueError:
        raise
    except Exception as exc:  # the parser raises ValueError, but be safe about others
        raise ValueError(f"{value!r} is not a quantity: {exc}") from exc
    if not q.is_finite():
        raise ValueError(f"{value!r} is not a finite quantity")
    if abs(q) > MAX_QUANTITY:
        raise ValueError(f"{value!r} is larger than a quantity can be (2^63-1)")
    return q


def milli_value(value: object) -> int:
    """The quantity in thousandths, rounded up (Quantity.MilliValue): used for cpu."""
    return math.ceil(parse_quantity(value) * 1000)


def int_value(value: object) -> int:
    """The quantity rounded up to an integer (Quantity.Value): memory, storage, counts."""
    return math.ceil(parse_quantity(value))


NANO = 10**9


def nano_value(value: object) -> int:
    """The quantity in billionths (a Quantity's finest scale), rounded up: exact enough
    to add requests up before rounding once, as upstream adds Quantities."""
    return math.ceil(parse_quantity(value) * NANO)


def from_nano(name: str, nanos: int) -> int:
    """`resource_value` of a quantity given in billionths: millicores for cpu, rounded up."""
    unit = NANO // 1000 if name == "cpu" else NANO
    return -(-nanos // unit)


def resource_value(name: str, value: object) -> int:
    """The integer the scheduler keeps for resource `name`: millicores for cpu."""
    return milli_value(value) if name == "cpu" else int_value(value)
