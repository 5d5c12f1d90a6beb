"""The JSON Schema (draft 2020-12) of a SchedulingPolicy, and schema validation with
positions and readable messages (`policyd.sourcefile.schema_problems`).

The schema lives here as data so the installed package always has it;
`schemas/policy.schema.json` (what editors load through the `yaml-language-server`
comment) is generated from it with `python -m policyd.policy.policy_schema > ...` (`make
generate` runs every generator), and a test keeps the two identical. Each rule kind's
fragment is declared beside its class (`policyd/policy/rules/*/schemas.py`).

Structural rules live in the schema; rules the schema cannot say well (Kubernetes
label syntax, JMESPath, quantities, contradictions) are in `semantics.py`, so each
problem is reported once, with a message written for it.
"""

from __future__ import annotations

import json
import math
import sys
from functools import cache
from typing import Any

from policyd.policy.rules.filters import schemas as filters
from policyd.policy.rules.scores import schemas as scores
from policyd.policy.schema_parts import (
    INT64_MAX,
    INT64_MIN,
    METRIC_NAME_PATTERN,
    STRING_MAP,
    STRINGS,
    schema_object,
)
from policyd.problems import Problem
from policyd.sourcefile import SourceDocument
from policyd.sourcefile.schema_problems import schema_problems

API_VERSION = "policyd.io/v1alpha1"
KIND = "SchedulingPolicy"
SCHEMA_ID = "https://policyd.io/schemas/policy.schema.json"

# Each kind's fragment is declared beside its class (policyd/policy/rules/*/schemas.py).
FILTER_KINDS = tuple(k.name for k in filters.KINDS)
SCORE_KINDS = tuple(k.name for k in scores.KINDS)
NORMALIZE = ("minmax", "max", "none")
# spec.mode: how a policy takes effect (Enforce unless it says otherwise).
ENFORCE, AUDIT = "Enforce", "Audit"
MODES = (ENFORCE, AUDIT)
# The owners an exception names a pod's workload by (a Deployment through the pod's
# ReplicaSet and its pod-template-hash label).
WORKLOAD_KINDS = ("Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")

RULE_ID_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
RULE_ID_MAX_LENGTH = 63  # a DNS label's length
# Bounds on the rule lists: far above any real policy, and what lets the API server's
# CEL cost estimate admit the CRD's per-object uniqueness rules (policyd.policy.crd).
MAX_RULES = 64
PLUGIN_NAME_PATTERN = "^[A-Z][A-Za-z0-9]*$"
DNS_SUBDOMAIN_PATTERN = (
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

def _one_of_required(kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"required": [k]} for k in kinds]


def _requirement(operators: list[str]) -> dict[str, Any]:
    return schema_object({
        "key": {"type": "string", "description": "Label key (case-sensitive)."},
        "operator": {"enum": operators},
        "values": {**STRINGS, "description":
                   "In/NotIn: one or more values; Exists/DoesNotExist: none; "
                   "Gt/Lt: exactly one integer."},
    }, ("key", "operator"))


# An integer the API server stores: an int64. (Not in the CRD: the API server refuses
# a schema whose integer bound is 2^63-1, which its float64 cannot hold; it keeps its
# own int64 fields in range by itself.)
_INT64 = {"type": "integer", "minimum": INT64_MIN, "maximum": INT64_MAX}

# Metadata the API server sets. Allowed so that a file of objects as
# `kubectl get schedulingpolicies -o yaml` prints them lints as the objects themselves
# (the same document whether applied or mounted); policyd ignores all of it.
_SERVER_SET = "Set by the API server; ignored by policyd."
_OWNER_REFERENCE = schema_object({
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "name": {"type": "string"},
    "uid": {"type": "string"},
    "controller": {"type": "boolean"},
    "blockOwnerDeletion": {"type": "boolean"},
}, ("apiVersion", "kind", "name", "uid"))
_MANAGED_FIELDS_ENTRY = schema_object({
    "apiVersion": {"type": "string"},
    "fieldsType": {"type": "string"},
    "fieldsV1": {"type": "object", "description": "The managed field set (free-form)."},
    "manager": {"type": "string"},
    "operation": {"type": "string"},
    "subresource": {"type": "string"},
    "time": {"type": "string"},
})
SERVER_METADATA: dict[str, Any] = {
    "generateName": {"type": "string", "description": _SERVER_SET},
    "uid": {"type": "string", "description": _SERVER_SET},
    "resourceVersion": {"type": "string", "description": _SERVER_SET},
    "generation": {**_INT64, "description": _SERVER_SET},
    "creationTimestamp": {"type": "string", "description": _SERVER_SET},
    "deletionTimestamp": {"type": "string", "description": _SERVER_SET},
    "deletionGracePeriodSeconds": {**_INT64, "description": _SERVER_SET},
    "finalizers": {**STRINGS, "description": _SERVER_SET},
    "ownerReferences": {"type": "array", "items": _OWNER_REFERENCE,
                        "description": _SERVER_SET},
    "managedFields": {"type": "array", "items": _MANAGED_FIELDS_ENTRY,
                      "description": _SERVER_SET},
}

# The condition policyd writes on each object it checked (True: the policy runs).
ACCEPTED_CONDITION = "Accepted"
# metav1.Condition's shape and the API server's own validation of it.
_CONDITION_TYPE_PATTERN = (
    "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
_CONDITION_REASON_PATTERN = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def policy_status() -> dict[str, Any]:
    """`status`: what policyd found when it checked the object in the cluster (written
    through the status subresource; in a file it is allowed and ignored)."""
    condition = schema_object({
        "type": {"type": "string", "maxLength": 316, "pattern": _CONDITION_TYPE_PATTERN,
                 "description": f"{ACCEPTED_CONDITION}: whether policyd runs the policy."},
        "status": {"enum": ["True", "False", "Unknown"]},
        "observedGeneration": {"type": "integer", "minimum": 0, "description":
                               "The metadata.generation the condition was set for."},
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "reason": {"type": "string", "minLength": 1, "maxLength": 1024,
                   "pattern": _CONDITION_REASON_PATTERN},
        "message": {"type": "string", "maxLength": 32768},
    }, ("type", "status", "lastTransitionTime", "reason", "message"))
    return schema_object({
        "observedGeneration": {"type": "integer", "minimum": 0, "description":
                               "The metadata.generation policyd last checked."},
        "conditions": {"type": "array", "items": condition, "description":
                       "One condition per type (metav1.Condition)."},
    }, description="Written by policyd through the status subresource; ignored when "
                   "checking a policy.")


def build_schema() -> dict[str, Any]:
    label_selector = schema_object({
        "matchLabels": STRING_MAP,
        "matchExpressions": {"type": "array", "items": {"$ref": "#/$defs/labelRequirement"}},
    }, description="A Kubernetes label selector over the pod's labels. Empty: every pod.")
    annotation_selector = schema_object({
        "matchAnnotations": STRING_MAP,
        "matchExpressions": {"type": "array", "items": {"$ref": "#/$defs/labelRequirement"}},
    }, description="Like a label selector, over the pod's annotations.")
    applies_to = schema_object({
        "namespaces": schema_object({
            "include": {**STRINGS, "description": "Only these namespaces (empty: all)."},
            "exclude": {**STRINGS, "description": "Never these namespaces."},
        }),
        "labelSelector": {"$ref": "#/$defs/labelSelector"},
        "annotationSelector": annotation_selector,
        "podGroup": schema_object({
            "member": {"type": "boolean", "description":
                       "true: only pods of a pod group (spec.schedulingGroup, or the "
                       "scheduling.x-k8s.io/pod-group label); false: only pods of none."},
            "names": {**STRINGS, "description":
                      "Only pods of the pod groups of these names (in their namespace)."},
        }, description="Pods by the pod group (gang) they belong to."),
        "condition": {"type": "string", "description":
                      "JMESPath over the Pod object; the policy applies when truthy."},
    }, description="Which pods the policy applies to (all conditions ANDed; absent: "
                   "every pod). A policy that does not apply is skipped for the pod.")

    filter_rule = schema_object({
        "id": {"type": "string", "pattern": RULE_ID_PATTERN,
               "maxLength": RULE_ID_MAX_LENGTH,
               "description": "Rule id, unique in the policy (lowercase DNS label)."},
        "message": {"type": "string", "minLength": 1,
                    "description": "The Unschedulable reason shown for rejected nodes."},
        "description": {"type": "string"},
        **{k.name: k.schema for k in filters.KINDS},
    }, ("id", "message"), oneOf=_one_of_required(FILTER_KINDS))

    score_rule = schema_object({
        "id": {"type": "string", "pattern": RULE_ID_PATTERN,
               "maxLength": RULE_ID_MAX_LENGTH,
               "description": "Rule id, unique in the policy across filters and scores "
                              "(lowercase DNS label)."},
        "description": {"type": "string"},
        "weight": {"type": "integer", "minimum": 1, "maximum": 100,
                   "description": "Weight of this rule inside the policy's score."},
        "normalize": {"enum": list(NORMALIZE), "description":
                      "How raw values become 0..100 over the feasible nodes: minmax "
                      "(lowest 0, highest 100), max (value*100/highest), none (already "
                      "0..100; clamped)."},
        "reverse": {"type": "boolean", "description": "Lower raw values score higher."},
        **{k.name: k.schema for k in scores.KINDS},
    }, ("id", "weight", "normalize"), oneOf=_one_of_required(SCORE_KINDS))

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "policyd SchedulingPolicy",
        "description": "A declarative scheduling rule compiled into a scheduler plugin. "
                       "See docs/policy-language.md.",
        "type": "object",
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": KIND},
            "metadata": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 253,
                             "pattern": DNS_SUBDOMAIN_PATTERN},
                    "labels": STRING_MAP,
                    "annotations": STRING_MAP,
                    **SERVER_METADATA,
                },
                "required": ["name"],
                "additionalProperties": False,
            },
            "spec": schema_object({
                "pluginName": {"type": "string", "pattern": PLUGIN_NAME_PATTERN,
                               "maxLength": 63, "description":
                               "The plugin name profiles refer to (CamelCase, unique, "
                               "case-sensitive)."},
                "description": {"type": "string"},
                "weight": {"type": "integer", "minimum": 1, "maximum": 100,
                           "description": "The plugin's score weight in the default "
                                          "profile (default 1); a profile may override."},
                "mode": {"enum": list(MODES), "default": ENFORCE, "description":
                         "Enforce (the default): the filters reject nodes and the scores "
                         "count. Audit: the filters are evaluated for every pod the policy "
                         "applies to but reject nothing (each would-be rejection is counted "
                         "and reported), and the scores do not count."},
                "scopedModes": {"type": "array", "maxItems": MAX_RULES, "items": schema_object({
                    "mode": {"enum": list(MODES)},
                    "namespaces": {**STRINGS, "minItems": 1, "description":
                                   "Namespace names or globs (`prod-*`, `*-staging`)."},
                }, ("mode", "namespaces"), description=(
                    "This mode for the pods of these namespaces; the first entry whose "
                    "namespaces match the pod's wins, spec.mode otherwise."))},
                "exceptions": {"type": "array", "maxItems": MAX_RULES,
                               "items": {"$ref": "#/$defs/policyException"}},
                "appliesTo": applies_to,
                "filters": {"type": "array", "maxItems": MAX_RULES, "items": filter_rule},
                "scores": {"type": "array", "maxItems": MAX_RULES, "items": score_rule},
            }, ("pluginName",)),
            "status": policy_status(),
        },
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "$defs": {
            "policyException": schema_object({
                "name": {"type": "string", "pattern": RULE_ID_PATTERN,
                         "maxLength": RULE_ID_MAX_LENGTH,
                         "description": "Unique in the policy (lowercase DNS label)."},
                "reason": {"type": "string", "minLength": 1,
                           "description": "Why: shown wherever the exception is applied."},
                "expires": {"type": "string", "minLength": 1, "description":
                            "RFC 3339 time (2027-01-31T00:00:00Z) after which the "
                            "exception no longer applies."},
                "rules": {**STRINGS, "minItems": 1, "description":
                          "Ids of the policy's filter rules the matched pods are exempt "
                          "from, or [\"*\"] for all of them."},
                "match": schema_object({
                    "namespaces": {**STRINGS, "description": "Namespace names or globs."},
                    "workloads": {"type": "array", "items": schema_object({
                        "kind": {"enum": list(WORKLOAD_KINDS)},
                        "name": {"type": "string", "minLength": 1,
                                 "description": "The workload's name, or a glob."},
                    }, ("kind", "name"))},
                    "podSelector": {"$ref": "#/$defs/labelSelector"},
                }, description="Which pods (every part given ANDed; at least one)."),
            }, ("name", "reason", "expires", "rules", "match"), description=(
                "Exempts the matched pods from the named filter rules until it expires, "
                "with a reason shown in explain, audit, reports and events.")),
            "labelSelector": label_selector,
            "labelRequirement": _requirement(["In", "NotIn", "Exists", "DoesNotExist"]),
            "nodeRequirement": _requirement(["In", "NotIn", "Exists", "DoesNotExist",
                                             "Gt", "Lt"]),
        },
    }


SCHEMA = build_schema()


@cache
def _validator() -> Any:
    # jsonschema (~0.2 s) only when validating: importers of the constants do not pay it.
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

    return Draft202012Validator(SCHEMA)


# Patterns explained in words (the profile schema uses some of them too).
PATTERN_MESSAGES = {
    PLUGIN_NAME_PATTERN: "must be CamelCase: a capital letter, then letters and digits "
                         "(^[A-Z][A-Za-z0-9]*$)",
    METRIC_NAME_PATTERN: "must be a metric name: letters, digits and '_', not starting "
                         "with a digit (^[a-zA-Z_][a-zA-Z0-9_]*$)",
    RULE_ID_PATTERN: "must be a lowercase DNS label: a-z, 0-9 and '-', starting and "
                     "ending with a letter or digit",
    DNS_SUBDOMAIN_PATTERN: "must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-', '.'), "
                           "like a Kubernetes object name",
}

def validate(doc: SourceDocument) -> list[Problem]:
    """Schema problems of one document, each at the key or value it concerns."""
    # `.inf` is beyond every maximum too; semantics' `number` check says what it is.
    errors = [e for e in _validator().iter_errors(doc.data)
              if not (e.validator in ("minimum", "maximum")
                      and isinstance(e.instance, float) and not math.isfinite(e.instance))]
    return schema_problems(doc, errors, pattern_messages=PATTERN_MESSAGES)


def main() -> None:
    """Print the schema as JSON (regenerates schemas/policy.schema.json)."""
    json.dump(SCHEMA, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
