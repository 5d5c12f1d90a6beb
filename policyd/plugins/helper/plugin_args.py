"""What every plugin's args decoding shares: upstream decodes `<Plugin>Args` strictly
(an unknown field, a wrong `kind` or a value of the wrong type is an error), and every
problem is reported at once."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from policyd.model.int64 import INT32, INT64
from policyd.problems import Problem, field_problem

Problems = list[Problem]


def type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(value),
                                                                          "a value")


def check_unknown_fields(obj: Mapping[str, Any], known: Sequence[str], path: str,
                         problems: Problems) -> None:
    """Upstream decodes plugin args strictly: an unknown field is an error."""
    for key in obj:
        if key not in known:
            where = f"{path}.{key}" if path else str(key)
            problems.append(field_problem(where, f"unknown field {key!r}; known fields: "
                                    + ", ".join(known)))


def check_envelope(args: Mapping[str, Any], known: Sequence[str], kind: str,
                   problems: Problems) -> None:
    """The fields every args object is checked for first: none unknown (`known` lists
    `apiVersion` and `kind` too), and a `kind`, when given, that names these args."""
    check_unknown_fields(args, known, "", problems)
    got = args.get("kind")
    if got is not None and got != kind:
        problems.append(field_problem(
            "kind", f"must be {kind!r}, not {json.dumps(got, default=str)}"))


# Upstream's decoder refuses a number that does not fit the Go field's type.
INT_BITS = {32: INT32, 64: INT64}


def fits_int(value: int, path: str, bits: int, problems: Problems) -> bool:
    """Whether `value` fits a Go int32 or int64 (`bits`) field; a problem if not."""
    if value in INT_BITS[bits]:
        return True
    problems.append(field_problem(path, f"{value} does not fit a {bits}-bit integer"))
    return False


def parse_int(value: Any, path: str, problems: Problems) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(field_problem(path, f"must be an integer, not {type_name(value)}"))
        return None
    return value
