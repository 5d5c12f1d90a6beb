"""The PolicyTest document: its JSON schema, the node and pod shorthand schemas, and
the typed shape of a document that passed them. `python -m policyd.policytest.schema`
prints the schema (schemas/policytest.schema.json, for editors)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from functools import cache
from typing import Any, Literal, Required, TypedDict

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

from policyd.framework import MAX_NODE_SCORE
from policyd.model.int64 import INT32_MAX, INT32_MIN
from policyd.model.spelling import show_value
from policyd.policy import policy_schema as policy_schema
from policyd.problems import Problem
from policyd.sourcefile import JsonPath, SourceDocument
from policyd.sourcefile.schema_problems import schema_problems

KIND = "PolicyTest"

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_QTY_MAP = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
_REASONS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
# A policy's score for a node is what its NormalizeScore leaves: 0 to MaxNodeScore, as
# every plugin's is (the framework refuses any other), whatever the node's raw values.
_SCORE = {"type": "integer", "minimum": 0, "maximum": MAX_NODE_SCORE}
# spec.priority is an int32 in the API server, which refuses a number beyond it.
_PRIORITY = {"type": "integer", "minimum": INT32_MIN, "maximum": INT32_MAX}
_RANGE_VALIDATORS = ("minimum", "maximum")
# What each range is, said with a number outside it (the bound alone does not say why).
_RANGES = {
    (INT32_MIN, INT32_MAX): "the API server stores spec.priority as an int32",
    (0, MAX_NODE_SCORE): "what a policy scores a node, after normalization, as every "
                         "plugin (kube-scheduler's MaxNodeScore)",
}


def _obj(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


def _unless(present: str, required: list[str]) -> dict[str, Any]:
    """`required` fields, unless the document has `present`."""
    return {"if": {"not": {"required": [present]}}, "then": {"required": required}}


SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://policyd.io/schemas/policytest.schema.json",
    "title": "policyd PolicyTest",
    "description": "Policies, a small cluster and the verdicts they must give on it, run "
                   "by `policyd test`. See docs/policy-language.md.",
    **_obj({
    "apiVersion": {"const": policy_schema.API_VERSION},
    "kind": {"const": KIND},
    "metadata": _obj({"name": {"type": "string", "minLength": 1}}, ["name"]),
    "spec": {**_obj({
        # The PolicydConfiguration whose profile whole-scheduler cases run (path relative
        # to the test file); without it they run the default profile.
        "profile": _obj({"file": {"type": "string", "minLength": 1},
                         "schedulerName": {"type": "string", "minLength": 1}}, ["file"]),
        # A snapshot file (what `kubectl get nodes,pods -A -o yaml` prints, relative to
        # the test file) loaded as `simulate --cluster` loads it, beside spec.nodes/pods.
        "cluster": _obj({"file": {"type": "string", "minLength": 1}}, ["file"]),
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
        # DeviceClasses, ResourceSlices and ResourceClaims, as full objects: what
        # DynamicResources reads.
        "devices": {"type": "array", "items": {"type": "object",
                                               "required": ["kind", "metadata"]}},
        # Node metric values for `metric` score rules: metric -> node -> number, as the
        # daemon's cache would hold them (they never age here).
        "metrics": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": {"type": "number"}}},
        # PodGroups (scheduling.k8s.io/v1alpha2 or scheduling.x-k8s.io/v1alpha1), as
        # full objects: the gangs whose pods spec.pods names (`podGroup`).
        "podGroups": {"type": "array", "items": {"type": "object",
                                                 "required": ["kind", "metadata"]}},
        "tests": {"type": "array", "items": {**_obj({
            "name": {"type": "string", "minLength": 1},
            "pod": {"type": "string", "minLength": 1},
            # A pod group case: the group's pending pods tried together (the pod group
            # cycle of the profile, GenericWorkload on), instead of one pod.
            "podGroup": {"type": "string", "minLength": 1},
            "placed": {"type": "boolean"},
            "nodes": {"type": "array", "items": {"type": "string"}},
            "fits": {"type": "integer", "minimum": 0},
            "policies": {"type": "object", "additionalProperties": _obj({
                "applies": {"type": "boolean"},
                "pass": {"type": "array", "items": {"type": "string"}},
                "fail": {"type": "object", "additionalProperties": _REASONS},
                "scores": {"type": "object", "additionalProperties": _SCORE},
            })},
            "scheduledTo": {"oneOf": [{"type": "string"},
                                      {"type": "array", "items": {"type": "string"}}]},
            "unschedulable": {"type": ["boolean", "string"]},
        }, ["name"]), "oneOf": [{"required": ["pod"]}, {"required": ["podGroup"]}]}},
    }, ["tests"]),
        # A profile brings its own policies, a snapshot its own nodes and pods.
        "allOf": [_unless("profile", ["policies"]), _unless("cluster", ["nodes", "pods"])]},
    }, ["apiVersion", "kind", "metadata", "spec"])}

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
    "priority": _PRIORITY,
    "nodeSelector": _STR_MAP,
    "podGroup": {"type": "string", "minLength": 1},
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
    pod: str  # this or podGroup
    policies: dict[str, PolicyExpectation]  # by pluginName
    scheduledTo: str | list[str]
    unschedulable: bool | str
    podGroup: str  # [namespace/]name of a PodGroup
    placed: bool  # the group cycle places the group
    nodes: list[str]  # the node set it gets
    fits: int  # how many of its pending pods fit


class ProfileSpec(TypedDict, total=False):
    file: Required[str]  # relative to the test file
    schedulerName: str


class SuiteSpec(TypedDict, total=False):
    profile: ProfileSpec
    cluster: dict[str, str]  # {"file": path relative to the test file}
    policies: list[str | dict[str, Any]]  # paths, or inline documents
    nodes: list[dict[str, Any]]  # full objects or NODE_SHORTHAND
    pods: list[dict[str, Any]]  # full objects or POD_SHORTHAND
    storage: list[dict[str, Any]]
    devices: list[dict[str, Any]]
    metrics: dict[str, dict[str, float]]
    podGroups: list[dict[str, Any]]
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
    """Where `data` (at `base` in `doc`) breaks the schema `which`, with positions.

    A scalar YAML typed as something else where a string is wanted (`true`, `on`, `1.10`,
    `8080`, an empty value) is said so, with how to fix it: jsonschema's `True is not of
    type 'string'` reads as if the author had written Python."""
    out: list[Problem] = []
    for error in _validator(which).iter_errors(data):
        best = best_match(error.context) if error.context else error
        if best.validator in _RANGE_VALIDATORS and not _integral(best.instance):
            continue  # not an integer (infinity, 1.5): its type error says so, once
        said = (_unquoted(best.validator, best.validator_value, best.instance)
                or _out_of_range(best.validator, best.schema, best.instance))
        if said is None:
            out.extend(schema_problems(doc, [error], base=base, jsonschema_wording=True))
        else:
            out.append(doc.problem((*base, *best.absolute_path), "schema", said))
    return out


_SCALAR_TYPES = {bool: "boolean", int: "integer", float: "number", type(None): "null"}
_ARTICLES = {"string": "a string", "number": "a number", "boolean": "a boolean",
             "integer": "an integer", "array": "a list", "object": "an object"}


def _unquoted(validator: str, expected: Any, instance: Any) -> str | None:
    """The message for a YAML scalar that is not the string the schema wants, or None."""
    wanted = expected if isinstance(expected, list) else [expected]
    got = _SCALAR_TYPES.get(type(instance))
    if validator != "type" or "string" not in wanted or got is None:
        return None
    text = "(an empty value)" if instance is None else json.dumps(instance)
    # A float's text is not what was written (`1.10` reads as 1.1): no quoted suggestion.
    fix = ("write a value, quoted" if instance is None
           else "quote it as written" if isinstance(instance, float)
           else f'quote it: "{text}"')
    names = " or ".join(_ARTICLES.get(str(w), str(w)) for w in wanted)
    return f"expected {names}, got {got} {text}; {fix}"


def _integral(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer())


def _out_of_range(validator: str, schema: Any, instance: Any) -> str | None:
    """The message for a number beyond its field's range, with the range, or None."""
    if validator not in _RANGE_VALIDATORS:
        return None
    lo, hi = schema.get("minimum"), schema.get("maximum")
    return f"{show_value(instance)} is out of range ({lo} to {hi}): {_RANGES[lo, hi]}"


def main() -> None:
    """Print the schema as JSON (regenerates schemas/policytest.schema.json)."""
    json.dump(SCHEMA, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
