"""`policyd check-config -o json|yaml`: the effective configuration beside the problems
(`policyd.config.effective`): every profile's plugins per extension point after
multiPoint expansion, disabled plugins gone, custom weights and args in, and a document
that reads back as itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from ruamel.yaml import YAML
from typer.testing import CliRunner

from policyd.cli.check_config_cmd import check_config

ROOT = Path(__file__).resolve().parents[3]
BROKEN = ROOT / "tests" / "unit" / "config" / "profiles" / "broken.yaml"
POLICY = ROOT / "policies" / "low-latency.yaml"  # a score policy, pluginName LowLatency

PROFILE = f"""\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
podMaxBackoffSeconds: 20
policies: [{POLICY}]
profiles:
  - schedulerName: packed
    plugins:
      multiPoint:
        disabled: [{{name: LowLatency}}]
      filter:
        disabled: [{{name: NodePorts}}]
      score:
        disabled: [{{name: ImageLocality}}]
        enabled:
          - {{name: NodeAffinity, weight: 7}}
    pluginConfig:
      - name: NodeResourcesFit
        args: {{scoringStrategy: {{type: MostAllocated}}}}
  - schedulerName: fast
    plugins:
      score:
        enabled: [{{name: LowLatency, weight: 5}}]
"""


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(check_config)
    return app


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(_app(), list(args), env={"GITHUB_ACTIONS": ""})
    return result.exit_code, result.stdout


def effective(path: Path, fmt: str = "json") -> dict[str, Any]:
    code, out = run(str(path), "-o", fmt)
    assert code == 0, out
    doc = json.loads(out) if fmt == "json" else YAML(typ="safe", pure=True).load(out)
    assert doc["problems"] == []
    result: dict[str, Any] = doc["effective"]
    return result


def enabled(profile: dict[str, Any], point: str) -> list[str]:
    return [e["name"] for e in profile["plugins"][point]["enabled"]]


def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE)
    return path


def test_disabled_plugins_are_gone_and_custom_weights_in(tmp_path: Path) -> None:
    doc = effective(profile_file(tmp_path))
    assert doc["kind"] == "PolicydConfiguration"
    assert doc["podMaxBackoffSeconds"] == 20 and doc["podInitialBackoffSeconds"] == 1
    packed, fast = doc["profiles"]
    assert (packed["schedulerName"], fast["schedulerName"]) == ("packed", "fast")
    # multiPoint's disable removes the policy from every point; a point's own only there.
    for point in ("preScore", "score"):
        assert "LowLatency" not in enabled(packed, point)
        assert "LowLatency" in enabled(fast, point)
    assert "NodePorts" not in enabled(packed, "filter")
    assert "NodePorts" in enabled(packed, "preFilter")  # disabled at filter only
    assert "NodePorts" in enabled(fast, "filter")
    assert "ImageLocality" not in enabled(packed, "score")
    weights = {e["name"]: e["weight"] for e in packed["plugins"]["score"]["enabled"]}
    assert weights["NodeAffinity"] == 7
    assert weights["TaintToleration"] == 3  # kube-scheduler's default weight
    fast_weights = {e["name"]: e["weight"] for e in fast["plugins"]["score"]["enabled"]}
    assert fast_weights["LowLatency"] == 5 and fast_weights["NodeAffinity"] == 2
    assert packed["pluginConfig"] == [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]
    assert fast["pluginConfig"] == []
    assert enabled(packed, "queueSort") == ["PrioritySort"]


def test_yaml_is_the_json_document(tmp_path: Path) -> None:
    path = profile_file(tmp_path)
    assert effective(path, "yaml") == effective(path, "json")


def test_the_document_reads_back_as_itself(tmp_path: Path) -> None:
    first = effective(profile_file(tmp_path))
    again = tmp_path / "effective.json"
    again.write_text(json.dumps(first))
    assert effective(again) == first


def test_the_default_profile_is_written_out(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicydConfiguration\n")
    (profile,) = effective(path)["profiles"]
    assert profile["schedulerName"] == "policyd"
    assert "NodeResourcesFit" in enabled(profile, "filter")
    assert enabled(profile, "postFilter")[-1] == "DefaultPreemption"


def test_with_errors_there_is_no_effective_configuration() -> None:
    for fmt in ("json", "yaml"):
        code, out = run(str(BROKEN), "-o", fmt)
        assert code == 1
        doc = json.loads(out) if fmt == "json" else YAML(typ="safe", pure=True).load(out)
        assert doc["effective"] is None
        assert doc["summary"]["errors"] == len(doc["problems"]) > 0


def test_text_output_is_unchanged(tmp_path: Path) -> None:
    code, out = run(str(profile_file(tmp_path)))
    assert code == 0
    assert out.endswith("no problems\n")
    assert "effective" not in out
