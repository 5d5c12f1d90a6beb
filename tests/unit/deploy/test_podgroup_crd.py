"""deploy/crds/scheduling.x-k8s.io_podgroups.yaml against scheduler-plugins' Go types,
as a hand-written fixture records them (tests/data/scheduler_plugins_podgroup_v1alpha1.json:
the tests must not need the Go module cache)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[3]
CRD = REPO / "deploy" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
FIXTURE = json.loads((REPO / "tests" / "data" / "scheduler_plugins_podgroup_v1alpha1.json")
                     .read_text())

# How each Go type of the fixture is written in a structural schema.
_INT32 = {"type": "integer", "format": "int32"}
_OPENAPI: dict[str, dict[str, Any]] = {
    "int32": _INT32,
    "*int32": _INT32,
    "string": {"type": "string"},
    "PodGroupPhase": {"type": "string"},
    "metav1.Time": {"type": "string", "format": "date-time"},
    "v1.ResourceList": {"type": "object", "additionalProperties": {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True}},
}


def _crd() -> dict[str, Any]:
    doc: dict[str, Any] = YAML(typ="safe").load(CRD.read_text())
    return doc


def _version() -> dict[str, Any]:
    (version,) = _crd()["spec"]["versions"]
    return dict(version)


def _fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """spec.* and status.* leaves: path -> the schema's type keys."""
    out = {}
    for top in ("spec", "status"):
        for name, prop in schema["properties"][top]["properties"].items():
            out[f"{top}.{name}"] = prop
    return out


def test_names_scope_and_subresource() -> None:
    crd = _crd()
    assert crd["metadata"]["name"] == f"{FIXTURE['plural']}.{FIXTURE['group']}"
    spec = crd["spec"]
    assert spec["group"] == FIXTURE["group"] and spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == FIXTURE["kind"]
    assert spec["names"]["plural"] == FIXTURE["plural"]
    assert spec["names"]["shortNames"] == FIXTURE["shortNames"]
    version = _version()
    assert version["name"] == FIXTURE["version"] and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


def test_fields_have_the_go_types_json_names_and_types() -> None:
    fields = _fields(_version()["schema"]["openAPIV3Schema"])
    assert set(fields) == set(FIXTURE["fields"])
    for path, go_type in FIXTURE["fields"].items():
        expected = _OPENAPI[go_type]
        got = fields[path]
        for key, value in expected.items():
            if key == "additionalProperties":
                assert {k: got[key][k] for k in value} == value, path
            else:
                assert got.get(key) == value, (path, key)
    # kubebuilder:validation:Minimum=1 on minMember.
    assert fields["spec.minMember"]["minimum"] == 1


def test_every_phase_is_documented() -> None:
    phase = _fields(_version()["schema"]["openAPIV3Schema"])["status.phase"]
    for name in FIXTURE["phases"]:
        assert name in phase["description"]


def test_the_quantity_pattern_accepts_what_upstream_parses() -> None:
    """Against apimachinery's own ParseQuantity (tests/data/quantity_table.json): every
    quantity it parses matches, but for the degenerate ones with no digit in the
    mantissa (`m`, `+`, `.Ki`, `e3`), which a resource list never means."""
    pattern = _fields(_version()["schema"]["openAPIV3Schema"])[
        "spec.minResources"]["additionalProperties"]["pattern"]
    # Go's RE2 `$` is the end of the text; Python's would also match before a final "\n".
    regex = re.compile(pattern.removesuffix("$") + r"\Z")
    cases = json.loads((REPO / "tests" / "data" / "quantity_table.json").read_text())["cases"]
    refused = [c["input"] for c in cases if c["ok"] and not regex.match(c["input"])]
    assert refused and all(re.fullmatch(r"[+-]?\.?([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?",
                                        r) for r in refused), refused
    wrongly_accepted = [c["input"] for c in cases if not c["ok"] and regex.match(c["input"])]
    # Only exponents past int64, which no pattern can see.
    assert all(re.fullmatch(r"1e-?9223372036854775\d+", w) for w in wrongly_accepted), \
        wrongly_accepted
    for good in ("2", "500m", "1Gi", "1.5", "1e3"):
        assert regex.match(good)
    for bad in ("x", "1 Gi", "1GB", "-", ""):
        assert not regex.match(bad)


def test_optional_and_kept_out_of_the_default_install() -> None:
    kustomization = YAML(typ="safe").load((REPO / "deploy" / "kustomization.yaml").read_text())
    assert not any("podgroups" in r for r in kustomization["resources"])
    assert "podgroups.scheduling.x-k8s.io" not in (REPO / "deploy" / "policyd.yaml").read_text()
