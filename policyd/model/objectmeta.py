"""The API server's metadata checks (ValidateObjectMeta) for every object a snapshot or
pod file gives: its name (per kind, as each kind's name validator says), its namespace,
its labels and its annotations.

An object the API server would refuse could never be in a real cluster, so a snapshot
holding one is refused, whatever `--validate` says (that option is about unknown
fields only): `web/0` as a pod name would otherwise be counted as something else, and a
Cyrillic `о` in a label key would silently match nothing. Every label map follows one
rule, whatever the kind: a value must be a string (a YAML `true` or `3` is refused,
with the quoted form to write instead).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NoReturn

from policyd.errors import InvalidObjectError
from policyd.model import k8snames

# ValidateObjectMeta's name validator per kind (k8s.io/kubernetes pkg/apis/*/validation,
# v1.36): most kinds take a DNS subdomain; these take a DNS label. Services took a
# DNS-1035 label (starting with a letter) before RelaxedServiceNameValidation, beta and
# on by default in v1.36.
_NAME_RULES: dict[str, Callable[[str], list[str]]] = {
    "Namespace": k8snames.dns1123_label,
    "Service": k8snames.dns1123_label,
    "StatefulSet": k8snames.dns1123_label,
}
# Kinds whose objects live in a namespace (the rest are cluster-scoped).
NAMESPACED_KINDS = frozenset({
    "Pod", "Service", "ReplicaSet", "StatefulSet", "ReplicationController",
    "PersistentVolumeClaim", "CSIStorageCapacity", "PodDisruptionBudget", "ResourceClaim",
    "PodGroup"})
# apimachinery's TotalAnnotationSizeLimitB: keys and values together.
ANNOTATIONS_MAX_BYTES = 256 * 1024
_CSI_DRIVER_NAME_MAX = 63


def check_metadata(kind: str, obj: dict[str, Any]) -> None:
    """Raise InvalidObjectError naming the object and the field for the first thing in
    `obj`'s metadata the API server would refuse; names are printed escaped."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return  # absent or not an object: the kind's decoder says so
    # Runs on every object of a snapshot: the checks are cheap, the messages (and the
    # escaped names in them) are built only for an object that fails.
    name = meta.get("name")
    if isinstance(name, str) and name:
        problems = name_problems(kind, name)
        if problems:
            _fail(kind, meta, "metadata.name",
                  f"{k8snames.printable(repr(name))}: {problems[0]}")
    namespace = meta.get("namespace")
    if kind in NAMESPACED_KINDS and isinstance(namespace, str) and namespace:
        problems = k8snames.dns1123_label(namespace)
        if problems:
            _fail(kind, meta, "metadata.namespace",
                  f"{k8snames.printable(repr(namespace))}: {problems[0]}")
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for key, value in labels.items():
            if type(value) is not str or type(key) is not str \
                    or _label_key_problem(key) or _label_value_problem(value):
                _label_failure(kind, meta, key, value)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        _check_annotations(kind, meta, annotations)


def name_problems(kind: str, name: str) -> list[str]:
    """What the API server says of `name` as the name of a `kind` object."""
    if kind == "CSIDriver":  # ValidateCSIDriverName: at most 63, case-insensitive
        if len(name) > _CSI_DRIVER_NAME_MAX:
            return [f"must be no more than {_CSI_DRIVER_NAME_MAX} characters"]
        return k8snames.dns1123_subdomain(name.lower())
    return _NAME_RULES.get(kind, k8snames.dns1123_subdomain)(name)


def string_problem(value: Any) -> str | None:
    """Why `value` cannot stand where Kubernetes wants a string (a label value, an
    annotation, a nodeSelector entry), with the quoted form to write; None for a string.
    YAML reads `true`, `3` and `1.5` unquoted as a boolean and numbers."""
    if isinstance(value, str):
        return None
    if isinstance(value, bool | int | float):
        what = "a boolean" if isinstance(value, bool) else "a number"
        return f'must be a string, not {what} (quote it: "{json.dumps(value)}")'
    return f"must be a string, not {_type_name(value)}"


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", type(None): "null"}.get(type(value),
                                                                     "a value")


def _fail(kind: str, meta: dict[str, Any], field: str, message: str) -> NoReturn:
    name = meta.get("name")
    text = name if isinstance(name, str) and name else "<unnamed>"
    if kind in NAMESPACED_KINDS:
        namespace = meta.get("namespace")
        text = f"{namespace if isinstance(namespace, str) and namespace else 'default'}/{text}"
    raise InvalidObjectError(kind, k8snames.printable(text),
                             k8snames.printable(field), message)


def _label_failure(kind: str, meta: dict[str, Any], key: Any, value: Any) -> NoReturn:
    """ValidateLabels' finding for the label `key`: every key a qualified name, every
    value a label value."""
    field = f"metadata.labels.{key}"
    _check_strings(kind, meta, field, key, value)
    key_problem = _label_key_problem(key)
    if key_problem is not None:
        _fail(kind, meta, field, f"key: {key_problem}")
    _fail(kind, meta, field, f"value {k8snames.printable(repr(value))}: "
                             f"{_label_value_problem(value)}")


def _check_strings(kind: str, meta: dict[str, Any], field: str, key: Any, value: Any
                   ) -> None:
    """A map entry's key and value must both be strings (YAML reads `1:` as a number)."""
    for what, item in (("key ", key), ("", value)):
        problem = string_problem(item)
        if problem is not None:
            _fail(kind, meta, field, what + problem)


def _check_annotations(kind: str, meta: dict[str, Any], annotations: dict[Any, Any]
                       ) -> None:
    """ValidateAnnotations: keys are qualified names (compared lowercased), values
    strings, and keys and values together at most 256 KiB."""
    chars = 0
    for key, value in annotations.items():
        if type(value) is not str or type(key) is not str \
                or _annotation_key_problem(key):
            field = f"metadata.annotations.{key}"
            _check_strings(kind, meta, field, key, value)
            _fail(kind, meta, field, f"key: {_annotation_key_problem(key)}")
        chars += len(key) + len(value)
    if chars * 4 <= ANNOTATIONS_MAX_BYTES:  # UTF-8 takes at most 4 bytes a character
        return
    total = sum(len(k.encode("utf-8", "surrogatepass")) + len(v.encode("utf-8", "surrogatepass"))
                for k, v in annotations.items())
    if total > ANNOTATIONS_MAX_BYTES:
        _fail(kind, meta, "metadata.annotations",
              f"may not be more than {ANNOTATIONS_MAX_BYTES} bytes in total, got {total}")


# Keys and values repeat across thousands of objects of a snapshot: each is judged once.
@lru_cache(maxsize=4096)
def _label_key_problem(key: str) -> str | None:
    problems = k8snames.qualified_name(key)
    return problems[0] if problems else None


@lru_cache(maxsize=4096)
def _annotation_key_problem(key: str) -> str | None:
    return _label_key_problem(key.lower())


@lru_cache(maxsize=4096)
def _label_value_problem(value: str) -> str | None:
    problems = k8snames.label_value(value)
    return problems[0] if problems else None
