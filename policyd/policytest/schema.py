"""The PolicyTest document: its JSON schema, the node and pod shorthand schemas, and
the typed shape of a document that passed them."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, Literal, Required, TypedDict

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from policyd.policy import policy_schema as policy_schema
from policyd.problems import Problem
from policyd.sourcefile import JsonPath, SourceDocument
from policyd.sourcefile.schema_problems import schema_problems

KIND = "PolicyTest"

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_QTY_MAP = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
_REASONS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}


def _obj(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


SCHEMA: dict[str, Any] = _obj({
    "apiVersion": {"const": policy_schema.API_VERSION},
    "kind": {"const": KIND},
    "metadata": _obj({"name": {"type": "string", "minLength": 1}}, ["name"]),
    "spec": _obj({
        "policies": {"type": "array", "minItems": 1, "items": {"oneOf": [
            {"type": "string"},
            {"type": "object", "required": ["kind"]},
        ]}},
        "nodes": {"type": "array", "items": {"type": "object"}},
        "pods": {"type": "array", "items": {"type": "object"}},
        # PersistentVolumes, claims, StorageClasses and CSI objects, as full objects:
        # what the volume plugins read.
        "storage": {"type": "array", "items": {"type": "object",
                                               "required": ["kind", "metadata"]}},
        # Node metric values for `metric` score rules: metric -> node -> number, as the
        # daemon's cache would hold them (they never age here).
        "metrics": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": {"type": "number"}}},
        "tests": {"type": "array", "items": _obj({
            "name": {"type": "string", "minLength": 1},
            "pod": {"type": "string", "minLength": 1},
            "policies": {"type": "object", "additionalProperties": _obj({
                "applies": {"type": "boolean"},
                "pass": {"type": "array", "items": {"type": "string"}},
                "fail": {"type": "object", "additionalProperties": _REASONS},
                "scores": {"type": "object", "additionalProperties": {"type": "integer"}},
            })},
            "scheduledTo": {"oneOf": [{"type": "string"},
                                      {"type": "array", "items": {"type": "string"}}]},
            "unschedulable": {"type": ["boolean", "string"]},
        }, ["name", "pod"])},
    }, ["policies", "nodes", "pods", "tests"]),
}, ["apiVersion", "kind", "metadata", "spec"])

NODE_SHORTHAND = _obj({
    "name": {"type": "string", "minLength": 1},
    "labels": _STR_MAP,
    "annotations": _STR_MAP,
    "allocatable": _QTY_MAP,
    "taints": {"type": "array", "items": {"type": "object"}},
    "unschedulable": {"type": "boolean"},
}, ["name"])

POD_SHORTHAND = _obj({
    "name": {"type": "string", "minLength": 1},
    "namespace": {"type": "string"},
    "labels": _STR_MAP,
    "annotations": _STR_MAP,
    "requests": _QTY_MAP,
    "nodeName": {"type": "string"},
    "priority": {"type": "integer"},
    "nodeSelector": _STR_MAP,
    "tolerations": {"type": "array", "items": {"type": "object"}},
}, ["name"])

# What SCHEMA guarantees about a document, for the code that reads one it accepted.
# `pass` is a keyword, hence the functional form.
PolicyExpectation = TypedDict("PolicyExpectation", {
    "applies": bool,
    "pass": list[str],
    "fail": dict[str, str | list[str]],  # node -> the reason, or every reason in order
    "scores": dict[str, int],
}, total=False)


class CaseSpec(TypedDict, total=False):
    name: Required[str]
    pod: Required[str]
    policies: dict[str, PolicyExpectation]  # by pluginName
    scheduledTo: str | list[str]
    unschedulable: bool | str


class SuiteSpec(TypedDict, total=False):
    policies: Required[list[str | dict[str, Any]]]  # paths, or inline documents
    nodes: Required[list[dict[str, Any]]]  # full objects or NODE_SHORTHAND
    pods: Required[list[dict[str, Any]]]  # full objects or POD_SHORTHAND
    storage: list[dict[str, Any]]
    metrics: dict[str, dict[str, float]]
    tests: Required[list[CaseSpec]]


class SuiteDocument(TypedDict):
    apiVersion: str
    kind: str
    metadata: dict[str, str]
    spec: SuiteSpec


Shape = Literal["test", "node", "pod"]


@cache
def _validator(which: Shape) -> Any:
    return Draft202012Validator({"test": SCHEMA, "node": NODE_SHORTHAND,
                                 "pod": POD_SHORTHAND}[which])


def shape_problems(doc: SourceDocument, data: Any, which: Shape, base: JsonPath
                   ) -> list[Problem]:
    """Where `data` (at `base` in `doc`) breaks the schema `which`, with positions."""
    return schema_problems(doc, _validator(which).iter_errors(data), base=base,
                           jsonschema_wording=True)
