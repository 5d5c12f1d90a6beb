"""jsonschema errors as problems: the one converter of policies, profiles and PolicyTests.

Each error becomes a problem at the key or value it concerns, in words written for
YAML authors rather than jsonschema's Python spellings: an unknown field names the
closest known one, a missing one is reported at its parent's key, for anyOf/oneOf only
the best match is shown (and "set exactly one of" when the branches just pick a kind).
Callers choose the schema and add their own wording for some errors (`special`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from policyd.model.spelling import show_value
from policyd.problems import Problem
from policyd.sourcefile import JsonPath, SourceDocument

# A caller's own wording for some errors: a problem, or None for the general one.
Special = Callable[[Any], Problem | None]


def schema_problems(doc: SourceDocument, errors: Iterable[Any], *,
                    base: JsonPath = (),
                    pattern_messages: Mapping[str, str] | None = None,
                    special: Special | None = None,
                    jsonschema_wording: bool = False) -> list[Problem]:
    """Problems (rule `schema` unless `special` says otherwise) for the jsonschema
    `errors` of the value at `base` in `doc`.

    `pattern_messages` explains regular expressions in words; `special` is tried
    first on each error. `jsonschema_wording` keeps jsonschema's own message at the
    best match's path, as `policyd test` has always printed PolicyTest problems.
    """
    out: list[Problem] = []
    for error in errors:
        if jsonschema_wording:
            best = _best(error)
            out.append(doc.problem((*base, *best.absolute_path), "schema", best.message))
            continue
        own = special(error) if special is not None else None
        if own is not None:
            out.append(own)
        else:
            out.extend(_readable(doc, error, base, pattern_messages or {}))
    return out


_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
               int: "an integer", float: "a number", type(None): "null"}


def _type_of(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _best(error: Any) -> Any:
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

    return best_match(error.context) if error.context else error


def _readable(doc: SourceDocument, error: Any, base: JsonPath,
              pattern_messages: Mapping[str, str]) -> Iterator[Problem]:
    path = (*base, *error.absolute_path)
    validator = error.validator
    if validator in ("oneOf", "anyOf"):
        branches = error.schema.get(validator, [])
        kinds = [b["required"][0] for b in branches
                 if set(b) == {"required"} and len(b["required"]) == 1]
        if kinds and len(kinds) == len(branches) and not isinstance(error.instance, dict):
            return  # not an object at all: the `type` error says so, once
        if kinds and len(kinds) == len(branches):
            present = [k for k in kinds if k in error.instance]
            if present:
                msg = (f"set exactly one of {', '.join(kinds)}; found "
                       f"{' and '.join(present)}")
                yield doc.problem((*path, present[-1]), "schema", msg, key=True)
            else:
                yield doc.problem(path, "schema", f"set exactly one of {', '.join(kinds)}")
            return
        if not error.context:  # valid under several branches: nothing deeper to show
            yield doc.problem(path, "schema", error.message)
            return
        yield from _readable(doc, _best(error), base, pattern_messages)
        return
    if validator == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties", {}))
        for key in error.instance:
            if key in known:
                continue
            close = difflib.get_close_matches(key, known, n=1) if isinstance(key, str) \
                else []
            hint = f"; did you mean {close[0]!r}?" if close else (
                f"; expected one of {', '.join(known)}" if known else "")
            yield doc.problem((*path, key), "schema",
                              f"unknown field {show_value(key)}{hint}", key=True)
        return
    if validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        yield doc.problem(path, "schema", f"missing required field {missing!r}", key=True)
        return
    if validator == "type":
        expected = error.validator_value
        names = expected if isinstance(expected, list) else [expected]
        yield doc.problem(path, "schema", f"must be {' or '.join(map(_article, names))}, not "
                          f"{_type_of(error.instance)}")
        return
    if validator == "pattern":
        msg = pattern_messages.get(error.validator_value,
                                    f"must match {error.validator_value}")
        yield doc.problem(path, "schema", f"{show_value(error.instance)} {msg}")
        return
    if validator == "const":
        yield doc.problem(path, "schema",
                          f"must be {show_value(error.validator_value)}, not "
                          f"{show_value(error.instance)}")
        return
    if validator == "enum":
        choices = ", ".join(str(v) for v in error.validator_value)
        yield doc.problem(path, "schema",
                          f"{show_value(error.instance)} is not one of: {choices}")
        return
    if validator in ("minimum", "maximum"):
        yield doc.problem(path, "schema",
                          f"{show_value(error.instance)} is out of range"
                          f"{_bound(error.schema)}")
        return
    if validator == "exclusiveMinimum":
        yield doc.problem(path, "schema", f"{show_value(error.instance)} must be greater "
                          f"than {error.validator_value}")
        return
    if validator in _SIZE_MESSAGES:
        yield doc.problem(path, "schema", _SIZE_MESSAGES[validator](error.validator_value))
        return
    # Anything else: jsonschema's own words (Python spellings avoided above).
    yield doc.problem(path, "schema", error.message)


_SIZE_MESSAGES = {
    "minLength": lambda n: "must not be empty" if n == 1 else f"must be at least {n} "
                                                              "characters long",
    "maxLength": lambda n: f"must be at most {n} characters long",
    "minItems": lambda n: "must not be an empty list" if n == 1 else f"must have at least "
                                                                     f"{n} items",
}


def _bound(schema: dict[str, Any]) -> str:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None and hi is not None:
        return f" [{lo}..{hi}]"
    if lo is not None:
        return f": must be at least {lo}"
    if hi is not None:
        return f": must be at most {hi}"
    return ""


def _article(type_name: str) -> str:
    return {"object": "an object", "array": "a list", "integer": "an integer",
            "string": "a string", "boolean": "a boolean", "number": "a number",
            "null": "null"}.get(type_name, type_name)
