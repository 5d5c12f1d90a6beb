"""Strict field validation for the Kubernetes objects the offline commands read.

The API server rejects an object with a field its schema does not know (kubectl's
`--validate=strict`, the default); a pod file with `nodeSelectr` or a toleration with
`operater` would otherwise be scheduled as if the field were absent, a confident wrong
answer. The field names come from policyd/data/k8s_fields.json, generated from the
kubernetes Python client's models by tools/gen_k8s_fields.py, so checking never
imports the client. Only names are checked: values are the decoders' business
(`records.py`), and maps such as labels, nodeSelector or resources.requests are free.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from policyd.errors import InputFileError

JsonPath = tuple[str | int, ...]
FIELD_VALIDATION_MODES = ("strict", "warn", "ignore")


class _Type:
    """One object type: JSON field name -> what its value holds (None: nothing to check)."""

    __slots__ = ("fields", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: dict[str, _Value | None] = {}


class _Value:
    """A typed value: an object (`type`), or a list or string-keyed map of `item`s."""

    __slots__ = ("is_list", "item", "type")

    def __init__(self, type_: _Type | None, item: _Value | None, is_list: bool) -> None:
        self.type = type_  # set for an object
        self.item = item  # set for a list or a map of typed values
        self.is_list = is_list


_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")


@cache
def _table() -> dict[str, Any]:
    text = resources.files("policyd").joinpath("data/k8s_fields.json").read_text("utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


@cache
def _root(kind: str) -> _Type | None:
    table = _table()
    type_name = table["kinds"].get(kind) or (kind if kind in table["types"] else None)
    if type_name is None:
        return None
    built: dict[str, _Type] = {}
    return _build(type_name, table["types"], built)


def _build(name: str, types: dict[str, dict[str, str]], built: dict[str, _Type]) -> _Type:
    if name in built:  # recursive types (none today) and shared ones are built once
        return built[name]
    t = _Type(name)
    built[name] = t
    for field, type_str in types[name].items():
        t.fields[field] = _value(type_str, types, built)
    return t


def _value(type_str: str, types: dict[str, dict[str, str]], built: dict[str, _Type]
           ) -> _Value | None:
    m = _LIST.match(type_str)
    if m:
        item = _value(m.group(1), types, built)
        return None if item is None else _Value(None, item, is_list=True)
    m = _DICT.match(type_str)
    if m:
        item = _value(m.group(1), types, built)
        return None if item is None else _Value(None, item, is_list=False)
    if type_str in types:
        return _Value(_build(type_str, types, built), None, is_list=False)
    return None  # a scalar, or a free-form value (`object`: IntOrString, RawExtension)


def known_kinds() -> tuple[str, ...]:
    return tuple(_table()["kinds"])


def unknown_field_paths(kind: str, obj: Any) -> list[tuple[JsonPath, str]]:
    """(path of the unknown field, message) for every unknown field of `obj`, a `kind`
    object (a root kind such as "Pod", or a model name such as "V1Toleration");
    nothing for a kind the table does not have."""
    root = _root(kind)
    out: list[tuple[JsonPath, str]] = []
    if root is not None:
        _walk_object(root, obj, (), out)
    return out


def unknown_fields(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """`spec.nodeSelectr: unknown field "nodeSelectr" (did you mean "nodeSelector"?)`
    for every unknown field of `obj`, a `kind` object, in document order."""
    return [f"{format_path(path)}: {message}" for path, message in
            unknown_field_paths(kind, obj)]


def format_path(path: JsonPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _walk_object(t: _Type, obj: Any, path: JsonPath, out: list[tuple[JsonPath, str]]
                 ) -> None:
    if not isinstance(obj, dict):
        return  # a wrong type is the decoder's to report, with its own message
    fields = t.fields
    for key, value in obj.items():
        try:
            sub = fields[key]
        except KeyError:
            out.append(((*path, str(key)), _unknown(str(key), fields)))
            continue
        if sub is not None and value is not None:
            _walk_value(sub, value, (*path, key), out)


def _walk_value(v: _Value, value: Any, path: JsonPath, out: list[tuple[JsonPath, str]]
                ) -> None:
    if v.type is not None:
        _walk_object(v.type, value, path, out)
        return
    item = v.item
    assert item is not None
    if v.is_list:
        if isinstance(value, list):
            for i, x in enumerate(value):
                if x is not None:
                    _walk_value(item, x, (*path, i), out)
    elif isinstance(value, dict):
        for k, x in value.items():
            if x is not None:
                _walk_value(item, x, (*path, str(k)), out)


def _unknown(key: str, fields: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
    if not close:  # `NodeSelector`, `node_selector`: the same name in another case
        folded = key.replace("_", "").lower()
        close = [f for f in fields if f.lower() == folded]
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    return f'unknown field "{key}"{hint}'


def _object_name(kind: str, obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        return f"{kind} <unnamed>"
    if kind != "Pod":
        return f"{kind} {name}"
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return f"{kind} {namespace if isinstance(namespace, str) and namespace else 'default'}/{name}"


def check_fields(kind: Any, obj: Any, where: str, mode: str) -> list[str]:
    """Apply `--validate` to one object read from a file: `strict` raises on the first
    unknown field (naming `where`, the object and the field), `warn` returns one
    warning per unknown field, `ignore` checks nothing."""
    if mode == "ignore" or not isinstance(obj, dict) or not isinstance(kind, str):
        return []
    if mode not in FIELD_VALIDATION_MODES:
        raise ValueError(f"field validation mode {mode!r}")
    found = unknown_fields(kind, obj)
    if not found:
        return []
    name = _object_name(kind, obj)
    if mode == "strict":
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise InputFileError(f"{name}: {found[0]}{more}; the API server would reject it "
                             "(strict field validation; --validate=warn to go on)",
                             where=where)
    return [f"{where}: {name}: {message}" for message in found]
