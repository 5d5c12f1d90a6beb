"""`policyd explain`: a policy's raw score is the value its rule computed from the node
(0.4, not the 0 its Score's integer truncates it to), in JSON and in text; built-in
plugins' integer raw scores stay as they are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.builders import make_node

ROOT = Path(__file__).resolve().parents[3]
LOADS = {"n1": "0.4", "n2": "0.9", "n3": "1.6"}


def _node(name: str, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return (make_node(name).labels(labels).annotations(annotations)
            .capacity(cpu="4", memory="8Gi", pods="110").raw())


def _policy(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policyd.io/v1alpha1", "kind": "SchedulingPolicy",
            "metadata": {"name": "load"}, "spec": {"pluginName": "Load", "scores": list(rules)}}


def _rule(rule_id: str, kind: dict[str, Any], normalize: str = "max",
          weight: int = 1) -> dict[str, Any]:
    return {"id": rule_id, "weight": weight, "normalize": normalize, **kind}


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "x",
                                "resources": {"requests": {"cpu": "100m"}}}]}}


def explain(tmp: Path, policy: dict[str, Any], nodes: list[dict[str, Any]],
            fmt: str = "json") -> subprocess.CompletedProcess[str]:
    # As `kubectl get nodes -o json` prints them; JSON is YAML too.
    (tmp / "cluster.yaml").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                  "items": nodes}))
    (tmp / "policy.yaml").write_text(json.dumps(policy))
    (tmp / "pod.yaml").write_text(json.dumps(POD))
    r = subprocess.run(
        [sys.executable, "-m", "policyd", "explain", "--cluster", str(tmp / "cluster.yaml"),
         "--pod", str(tmp / "pod.yaml"), "--policies", str(tmp / "policy.yaml"),
         "--format", fmt], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r


def _scores(r: subprocess.CompletedProcess[str], plugin: str) -> dict[str, dict[str, Any]]:
    return {n["name"]: n["scores"][plugin] for n in json.loads(r.stdout)["nodes"]}


LOAD_NODES = [_node(n, {"load": v}, {"load": v}) for n, v in LOADS.items()]


@pytest.mark.parametrize("kind", [
    pytest.param({"numeric": {"label": "load"}}, id="numeric-label"),
    pytest.param({"numeric": {"annotation": "load"}}, id="numeric-annotation"),
    pytest.param({"jmespath": "to_number(node.metadata.labels.load)"}, id="jmespath"),
    pytest.param({"labelValue": {"label": "load",
                                 "values": {"0.4": 0.4, "0.9": 0.9, "1.6": 1.6}}},
                 id="labelValue"),
])
def test_fractional_raw_values_are_shown_as_computed(tmp_path: Path,
                                                     kind: dict[str, Any]) -> None:
    scores = _scores(explain(tmp_path, _policy(_rule("load", kind)), LOAD_NODES), "Load")
    assert {n: s["raw"] for n, s in scores.items()} == {"n1": 0.4, "n2": 0.9, "n3": 1.6}
    assert {n: s["normalized"] for n, s in scores.items()} == {"n1": 25, "n2": 56, "n3": 100}
    assert scores["n1"]["rules"] == {"load": {"raw": 0.4, "normalized": 25}}


def test_text_output_shows_each_rules_raw_value(tmp_path: Path) -> None:
    out = explain(tmp_path, _policy(_rule("load", {"numeric": {"label": "load"}})),
                  LOAD_NODES, fmt="text").stdout
    assert "Load/load" in out
    for node, shown in [("n1", "0.4 -> 25"), ("n2", "0.9 -> 56"), ("n3", "1.6 -> 100")]:
        line = next(ln for ln in out.splitlines() if ln.split()[:1] == [node]
                    and "->" in ln)
        assert shown in line


def test_several_rules_each_keep_their_raw_value(tmp_path: Path) -> None:
    policy = _policy(
        _rule("load", {"numeric": {"label": "load", "prefer": "lowest"}}, weight=3),
        _rule("zone", {"labelValue": {"label": "zone", "values": {"a": 100, "b": 40}}},
              normalize="none"))
    nodes = [_node("n1", {"load": "0.4", "zone": "a"}, {}),
             _node("n2", {"load": "1.6", "zone": "b"}, {}),
             _node("n3", {"zone": "b"}, {})]  # no load label: missing
    scores = _scores(explain(tmp_path, policy, nodes), "Load")
    # One raw number cannot stand for two rules: raw is null, each rule has its own.
    assert all(s["raw"] is None for s in scores.values())
    assert scores["n1"]["rules"] == {"load": {"raw": 0.4, "normalized": 75},
                                     "zone": {"raw": 100, "normalized": 100}}
    assert scores["n2"]["rules"]["load"] == {"raw": 1.6, "normalized": 0}
    assert scores["n2"]["rules"]["zone"] == {"raw": 40, "normalized": 40}
    assert scores["n3"]["rules"]["load"] == {"raw": None, "normalized": 0}
    assert isinstance(scores["n1"]["rules"]["zone"]["raw"], int)  # 100, not 100.0
    assert {n: s["normalized"] for n, s in scores.items()} == {
        "n1": (3 * 75 + 100) // 4, "n2": (0 + 40) // 4, "n3": (0 + 40) // 4}


def test_missing_value_is_null_in_json_and_named_in_text(tmp_path: Path) -> None:
    policy = _policy(_rule("load", {"numeric": {"label": "load"}}))
    nodes = [*LOAD_NODES[:2], _node("n4", {}, {})]
    scores = _scores(explain(tmp_path, policy, nodes), "Load")
    assert scores["n4"]["raw"] is None and scores["n4"]["normalized"] == 0
    assert scores["n2"]["raw"] == 0.9 and scores["n2"]["normalized"] == 100
    text = explain(tmp_path, policy, nodes, fmt="text").stdout
    assert "missing -> 0" in text


def test_builtin_plugins_keep_their_integer_raw_scores(tmp_path: Path) -> None:
    r = explain(tmp_path, _policy(_rule("load", {"numeric": {"label": "load"}})), LOAD_NODES)
    for node in json.loads(r.stdout)["nodes"]:
        for plugin, s in node["scores"].items():
            if plugin == "Load":
                continue
            assert isinstance(s["raw"], int), (plugin, s)
            assert "rules" not in s
    fit = _scores(r, "NodeResourcesFit")["n1"]
    # LeastAllocated: 100m of 4 cpu -> 97, the 200Mi scoring default of 8Gi -> 97.
    assert fit["raw"] == fit["normalized"] == 97
