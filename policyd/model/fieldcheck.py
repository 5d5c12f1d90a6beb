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

# A compiled type is a dict, JSON field name -> what its value holds:
#   None                 nothing to check (a scalar, a free-form map or `object`)
#   dict                 an object of that compiled type
#   (_LIST_OF, what)     a list of typed values
#   (_MAP_OF, what)      a string-keyed map of typed values
# Plain dicts and tuples keep the walk cheap: it runs over every object of a snapshot.
_Fields = dict[str, Any]
_LIST_OF = "list"
_MAP_OF = "map"
_MISSING = object()
# A path while walking is a linked pair (parent, key), expanded only for a message.
_Path = tuple[Any, str | int] | None

_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")


@cache
def _table() -> dict[str, Any]:
    text = resources.files("policyd").joinpath("data/k8s_fields.json").read_text("utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


@cache
def _root(kind: str) -> _Fields | None:
    table = _table()
    type_name = table["kinds"].get(kind) or (kind if kind in table["types"] else None)
    if type_name is None:
        return None
    return _build(type_name, table["types"], {})


def _build(name: str, types: dict[str, dict[str, str]], built: dict[str, _Fields]
           ) -> _Fields:
    if name in built:  # a type shared by several fields is compiled once
        return built[name]
    fields: _Fields = {}
    built[name] = fields
    for field, type_str in types[name].items():
        fields[field] = _compile(type_str, types, built)
    return fields


def _compile(type_str: str, types: dict[str, dict[str, str]], built: dict[str, _Fields]
             ) -> Any:
    for pattern, wrapper in ((_LIST, _LIST_OF), (_DICT, _MAP_OF)):
        m = pattern.match(type_str)
        if m:
            item = _compile(m.group(1), types, built)
            return None if item is None else (wrapper, item)
    if type_str in types:
        return _build(type_str, types, built)
    return None  # a scalar, or a free-form value (`object`: IntOrString, RawExtension)


def known_kinds() -> tuple[str, ...]:
    return tuple(_table()["kinds"])


def unknown_field_paths(kind: str, obj: Any) -> list[tuple[JsonPath, str]]:
    """(path of the unknown field, message) for every unknown field of `obj`, a `kind`
    object (a root kind such as "Pod", or a model name such as "V1Toleration"), in
    document order; nothing for a kind the table does not have."""
    root = _root(kind)
    out: list[tuple[JsonPath, str]] = []
    if root is not None and isinstance(obj, dict):
        _walk_object(root, obj, None, out)
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


def _expand(path: _Path) -> JsonPath:
    parts: list[str | int] = []
    while path is not None:
        path, part = path
        parts.append(part)
    return tuple(reversed(parts))


def _walk_object(fields: _Fields, obj: dict[Any, Any], path: _Path,
                 out: list[tuple[JsonPath, str]]) -> None:
    for key, value in obj.items():
        sub = fields.get(key, _MISSING)
        if sub is None:
            continue  # the common case: a scalar
        if sub is _MISSING:
            out.append((_expand((path, str(key))), _unknown(str(key), fields)))
        elif value is None:
            continue
        elif type(sub) is dict:
            if type(value) is dict:  # a wrong type is the decoder's to report
                _walk_object(sub, value, (path, key), out)
        else:
            _walk_container(sub, value, (path, key), out)


def _walk_container(spec: tuple[str, Any], value: Any, path: _Path,
                    out: list[tuple[JsonPath, str]]) -> None:
    wrapper, item = spec
    if wrapper == _LIST_OF:
        if type(value) is not list:
            return
        entries: Any = enumerate(value)
    else:
        if type(value) is not dict:
            return
        entries = ((str(k), x) for k, x in value.items())
    for key, x in entries:
        if x is None:
            continue
        if type(item) is dict:
            if type(x) is dict:
                _walk_object(item, x, (path, key), out)
        else:
            _walk_container(item, x, (path, key), out)


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
