"""schemas/policytest.schema.json is the schema `policyd test` validates with, for
editors; the repository's own PolicyTests pass it."""

from __future__ import annotations

import json
from pathlib import Path

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from policyd.policytest.schema import SCHEMA
from policyd.sourcefile import load_file

ROOT = Path(__file__).resolve().parents[3]


def test_committed_schema_is_generated_from_the_code() -> None:
    committed = json.loads((ROOT / "schemas" / "policytest.schema.json").read_text())
    assert committed == SCHEMA, \
        "run: python -m policyd.policytest.schema > schemas/policytest.schema.json"


def test_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)


def test_the_repositorys_policytests_pass_it() -> None:
    files = [*(ROOT / "policies" / "tests").glob("*.yaml"),
             *(ROOT / "examples" / "profiles" / "tests").glob("*.yaml")]
    assert len(files) >= 5
    validator = Draft202012Validator(SCHEMA)
    for f in files:
        for doc in load_file(f).documents:
            assert list(validator.iter_errors(doc.data)) == [], f


def test_a_profile_or_a_cluster_makes_policies_or_nodes_optional() -> None:
    validator = Draft202012Validator(SCHEMA)
    base = {"apiVersion": "policyd.io/v1alpha1", "kind": "PolicyTest",
            "metadata": {"name": "t"}}

    def missing(spec: dict[str, object]) -> list[str]:
        return sorted(e.message for e in validator.iter_errors({**base, "spec": spec}))

    assert missing({"tests": []}) == ["'nodes' is a required property",
                                      "'pods' is a required property",
                                      "'policies' is a required property"]
    assert missing({"tests": [], "profile": {"file": "p.yaml"},
                    "cluster": {"file": "c.yaml"}}) == []
    assert missing({"tests": [], "cluster": {"file": "c.yaml"}}) == [
        "'policies' is a required property"]
