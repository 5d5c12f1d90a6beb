"""The profile's JSON Schema: generated file, valid draft 2020-12, strict, and the
example profile validates against it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from policyd.config.model import parse_duration
from policyd.config.profile_schema import DURATION_PATTERN, SCHEMA
from policyd.sourcefile import load_file
from tests.unit.config.conftest import ROOT

EXAMPLES = sorted((ROOT / "examples" / "profiles").glob("*.yaml"))


def test_committed_schema_is_generated_from_the_code() -> None:
    committed = json.loads((ROOT / "schemas" / "profile.schema.json").read_text())
    assert committed == SCHEMA, \
        "run: python -m policyd.config.profile_schema > schemas/profile.schema.json"


def test_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def _objects(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield path, node
        for k, v in node.items():
            yield from _objects(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _objects(v, f"{path}/{i}")


def test_strict_everywhere_except_plugin_args_and_feature_gates() -> None:
    # featureGates takes any name with a boolean: validation refuses an unknown one
    # naming the known ones, as kube-scheduler's flag does.
    loose = [p for p, o in _objects(SCHEMA) if o.get("additionalProperties") is not False]
    assert loose == ["/properties/featureGates", "/$defs/pluginConfig/properties/args"]
    assert SCHEMA["properties"]["featureGates"]["additionalProperties"] == {
        "type": "boolean"}


def test_every_upstream_extension_point_is_accepted() -> None:
    """kube-scheduler v1.36's Plugins fields (config/v1 types.go), the PodGroup
    cycle's placement points included."""
    points = set(SCHEMA["$defs"]["plugins"]["properties"])
    assert points == {"multiPoint", "preEnqueue", "queueSort", "preFilter", "filter",
                      "postFilter", "preScore", "score", "reserve", "permit", "preBind",
                      "bind", "postBind", "placementGenerate", "placementScore"}


def test_defaults_are_documented() -> None:
    top = SCHEMA["properties"]
    assert top["podInitialBackoffSeconds"]["default"] == 1
    assert top["podMaxBackoffSeconds"]["default"] == 10
    assert "Default 1." in top["podInitialBackoffSeconds"]["description"]
    le = SCHEMA["$defs"]["leaderElection"]["properties"]
    assert le["leaseDuration"]["default"] == "15s"
    cc = SCHEMA["$defs"]["clientConnection"]["properties"]
    assert (cc["qps"]["default"], cc["burst"]["default"]) == (50.0, 100)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_profiles_validate_and_reference_the_schema(path: Path) -> None:
    assert path.read_text().startswith(
        "# yaml-language-server: $schema=../../schemas/profile.schema.json\n")
    src = load_file(path)
    assert src.problems == []
    committed = json.loads((ROOT / "schemas" / "profile.schema.json").read_text())
    assert list(Draft202012Validator(committed).iter_errors(src.documents[0].data)) == []


@pytest.mark.parametrize(("text", "seconds"), [
    ("15s", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("1.5h", 5400.0), ("0", 0.0),
    ("-2s", -2.0), ("10us", 1e-5), ("2µs", 2e-6), (".5s", 0.5), ("1h2m3s4ms", 3723.004),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)
    assert Draft202012Validator({"pattern": DURATION_PATTERN}).is_valid(text)


@pytest.mark.parametrize("text", ["", "15", "s", "1x", "1s ", " 1s", "1.2.3s", "1m-1s"])
def test_not_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)
    assert not Draft202012Validator({"pattern": DURATION_PATTERN}).is_valid(text)
