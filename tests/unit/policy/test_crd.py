"""The SchedulingPolicy CRD: the committed deploy/crd.yaml is the generated one, its
schema and the policy JSON schema describe the same fields, and it keeps the rules of a
structural schema (tests/integration/test_crd.py has the API server itself judge it)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from policyd.policy import crd, policy_schema

ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / "deploy" / "crd.yaml"

# Keywords a structural schema must not hold anywhere (JSON Schema only, or refused by
# apiextensions' validation of a CRD schema).
FORBIDDEN = {"$ref", "$schema", "$id", "$defs", "definitions", "const", "id",
             "patternProperties", "dependencies", "dependentRequired", "dependentSchemas",
             "if", "then", "else", "prefixItems", "unevaluatedProperties",
             "unevaluatedItems", "contains", "propertyNames", "additionalItems",
             "x-kubernetes-preserve-unknown-fields"}
# What a oneOf/anyOf branch must not hold in a structural schema.
NOT_IN_JUNCTOR = {"type", "properties", "items", "additionalProperties", "description",
                  "default", "nullable", "title"}
# The JSON schema allows metadata a CRD may not constrain (only name): the API server
# owns labels, annotations and the fields it sets.
METADATA_ONLY_IN_FILES = {"labels", "annotations", *policy_schema.SERVER_METADATA}


def crd_schema() -> dict[str, Any]:
    schema: dict[str, Any] = crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def json_paths(node: Mapping[str, Any], defs: Mapping[str, Any],
               path: str = "") -> Iterator[str]:
    """Every property path of a JSON schema, `$ref`s followed."""
    if "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[1]], **node}
    for name, sub in node.get("properties", {}).items():
        yield f"{path}.{name}"
        yield from json_paths(sub, defs, f"{path}.{name}")
    if isinstance(node.get("items"), Mapping):
        yield from json_paths(node["items"], defs, f"{path}[]")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from json_paths(node["additionalProperties"], defs, f"{path}{{}}")


def nodes(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if isinstance(node.get("items"), Mapping):
        yield from nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from nodes(node["additionalProperties"], f"{path}{{}}")


def test_committed_crd_is_generated_from_the_schema() -> None:
    text = CRD_FILE.read_text()
    assert text == crd.render(), "run: python -m policyd.policy.crd > deploy/crd.yaml"
    assert text.startswith("# GENERATED")
    assert YAML(typ="safe").load(text) == crd.build_crd()


def test_crd_and_json_schema_have_the_same_fields() -> None:
    source = policy_schema.SCHEMA
    in_json = set(json_paths(source, source["$defs"]))
    in_crd = {p for p in json_paths(crd_schema(), {})}
    only_in_files = {p for p in in_json
                     if p.startswith(".metadata.") and p.split(".")[2].split("[")[0]
                     .split("{")[0] in METADATA_ONLY_IN_FILES}
    assert only_in_files  # the exception is real, not a mask over nothing
    assert in_json - only_in_files == in_crd
    # The walk saw the deep parts too, through $refs.
    assert ".spec.filters[].nodeLabels.matchExpressions[].operator" in in_crd
    assert ".status.conditions[].lastTransitionTime" in in_crd


def test_every_node_is_typed_and_no_forbidden_keyword_is_left() -> None:
    for path, node in nodes(crd_schema()):
        assert "type" in node or node.get("x-kubernetes-int-or-string") is True, path
        assert not FORBIDDEN & set(node), (path, FORBIDDEN & set(node))
        # Unknown fields are pruned, so a node never has both (structural rule).
        assert not ("properties" in node and "additionalProperties" in node), path
        for junctor in ("oneOf", "anyOf", "allOf", "not"):
            for branch in node.get(junctor, []):
                assert not NOT_IN_JUNCTOR & set(branch), (path, branch)
                # A junctor may only mention fields the typed node declares.
                assert set(branch.get("required", [])) <= set(node["properties"]), path
        if "enum" in node:
            assert node["type"] == "string", path


def test_root_metadata_constrains_only_the_name() -> None:
    schema = crd_schema()
    assert schema["type"] == "object"
    metadata = schema["properties"]["metadata"]
    assert metadata == {"type": "object", "properties": {"name": metadata["properties"]
                                                         ["name"]}}
    assert metadata["properties"]["name"]["pattern"] == policy_schema.DNS_SUBDOMAIN_PATTERN
    assert schema["properties"]["apiVersion"] == {"type": "string"}
    assert schema["properties"]["kind"] == {"type": "string"}


def test_quantities_are_int_or_string() -> None:
    headroom = crd_schema()["properties"]["spec"]["properties"]["filters"]["items"][
        "properties"]["headroom"]
    quantity = headroom["properties"]["quantity"]
    assert quantity["x-kubernetes-int-or-string"] is True and "type" not in quantity
    assert headroom["oneOf"] == [{"required": ["quantity"]}, {"required": ["percent"]}]


def test_rule_lists_are_bounded_and_carry_the_uniqueness_rules() -> None:
    spec = crd_schema()["properties"]["spec"]
    for name in ("filters", "scores"):
        rules = spec["properties"][name]
        assert rules["maxItems"] == policy_schema.MAX_RULES
        assert rules["items"]["properties"]["id"]["maxLength"] == 63
        [unique] = rules["x-kubernetes-validations"]
        assert "exists_one" in unique["rule"] and "unique" in unique["message"]
    [across] = spec["x-kubernetes-validations"]
    assert "self.scores.exists" in across["rule"]
    for _, node in nodes(crd_schema()):
        for rule in node.get("x-kubernetes-validations", []):
            assert set(rule) == {"rule", "message"} and rule["message"]


def test_status_subresource_and_condition_list() -> None:
    version = crd.build_crd()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    assert (version["name"], version["served"], version["storage"]) == (
        "v1alpha1", True, True)
    conditions = crd_schema()["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert set(item["properties"]) == {"type", "status", "reason", "message",
                                       "lastTransitionTime", "observedGeneration"}
    assert "type" in item["required"]  # a list-map key must be required
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]


def test_names_scope_and_printer_columns() -> None:
    spec = crd.build_crd()["spec"]
    assert crd.build_crd()["metadata"]["name"] == "schedulingpolicies.policyd.io"
    assert (spec["group"], spec["scope"]) == ("policyd.io", "Cluster")
    assert spec["names"] == {"plural": "schedulingpolicies", "singular": "schedulingpolicy",
                             "kind": "SchedulingPolicy", "listKind": "SchedulingPolicyList",
                             "shortNames": ["spol"], "categories": ["policyd"]}
    columns = {c["name"]: (c["type"], c["jsonPath"])
               for c in spec["versions"][0]["additionalPrinterColumns"]}
    assert columns == {
        "PluginName": ("string", ".spec.pluginName"),
        "Mode": ("string", ".spec.mode"),
        "Accepted": ("string", '.status.conditions[?(@.type=="Accepted")].status'),
        "Age": ("date", ".metadata.creationTimestamp"),
    }


@pytest.mark.parametrize(("node", "message"), [
    ({"type": "object", "patternProperties": {}}, "'patternProperties'"),
    ({"description": "no type"}, "untyped node"),
    ({"type": ["string", "boolean"]}, "no structural form for type"),
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "oneOf": [{"properties": {"a": {}}}]}, "may only validate values"),
    ({"$ref": "#/$defs/missing"}, "unresolvable $ref"),
    ({"enum": ["a", 1]}, "mixed"),
])
def test_what_cannot_be_translated_is_an_error_not_dropped(node: dict[str, Any],
                                                           message: str) -> None:
    with pytest.raises(crd.SchemaTranslationError, match=message.replace("$", r"\$")):
        crd.structural(node, {})


def test_translation_of_const_enum_and_closed_objects() -> None:
    out = crd.structural({"type": "object", "properties": {
        "k": {"const": "X"}, "e": {"enum": ["a", "b"]}}, "additionalProperties": False}, {})
    assert out == {"type": "object", "properties": {
        "k": {"type": "string", "enum": ["X"]}, "e": {"type": "string", "enum": ["a", "b"]}}}
