"""Numbers at their limits in what policies read from the cluster (issue 26, class 1):
`explain`, `simulate` and `policyd test` treat a value beyond +-2^53 (1e308, -1e308, a
huge integer) as missing, agree on the node, and run without a numpy warning."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: lat}
spec:
  pluginName: Lat
  weight: 5
  scores:
    - {id: lat, weight: 10, normalize: %(normalize)s,
       numeric: {%(source)s: myorg.io/lat, prefer: lowest}}
    - {id: jp, weight: 5, normalize: max,
       jmespath: "to_number(annotation(node, 'myorg.io/lat'))"}
    - {id: load, weight: 5, normalize: minmax,
       metric: {name: busy, prefer: lowest, missing: neutral}}
"""
PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
policies: [policy.yaml]
metricsProviders:
  - {name: a, kind: nodeAnnotation, metric: busy, annotation: myorg.io/busy}
"""
NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: %(name)s
  labels: {myorg.io/lat: "%(label)s"}
  annotations: {myorg.io/lat: "%(value)s"}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec: {schedulerName: policyd, containers: [{name: c, image: x}]}
"""
# The extreme nodes first (a tie would otherwise go to them by name): `ok` holds the only
# value in range, so every form must choose it.
EXTREMES = ["1e308", "-1e308", "9007199254740994", "123456789012345678901234567890",
            "-9.9e307"]
TEST = """\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {name: limits}
spec:
  policies: [policy.yaml]
  nodes:
%(nodes)s
  pods: [{name: web}]
  tests:
    - name: values beyond 2^53 are missing
      pod: web
      policies:
        Lat:
          scores: {%(scores)s}
      scheduledTo: ok
"""


def policyd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # -W error: a numpy overflow or invalid-cast warning fails the command.
    return subprocess.run([sys.executable, "-W", "error", "-m", "policyd", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def _write(tmp_path: Path, normalize: str, source: str) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY % {"normalize": normalize, "source": source})
    (tmp_path / "profile.yaml").write_text(PROFILE)
    # Labels cannot start with "-": those nodes carry a positive extreme label instead.
    nodes = [NODE % {"name": f"x{i}", "value": v, "label": v.lstrip("-")}
             for i, v in enumerate(EXTREMES)]
    nodes.append(NODE % {"name": "ok", "value": "5", "label": "5"})
    (tmp_path / "cluster.yaml").write_text("---\n".join([*nodes, POD]))
    metrics = {f"x{i}": v for i, v in enumerate([1e308, -1e308, 2.0**60, 1e300, -5e307])}
    (tmp_path / "metrics.yaml").write_text(json.dumps({"busy": {**metrics, "ok": 3}}))


@pytest.mark.parametrize("normalize", ["minmax", "max", "none"])
@pytest.mark.parametrize("source", ["annotation", "label"])
def test_explain_and_simulate_treat_values_beyond_the_bound_as_missing(
        tmp_path: Path, normalize: str, source: str) -> None:
    _write(tmp_path, normalize, source)
    common = ["--cluster", "cluster.yaml", "--config", "profile.yaml",
              "--metrics", "metrics.yaml", "--seed", "3", "-o", "json"]
    explained = policyd("explain", "web", *common, cwd=tmp_path)
    assert explained.returncode == 0, explained.stdout + explained.stderr
    assert explained.stderr == ""
    out = json.loads(explained.stdout)
    assert out["node"] == "ok"
    for node in out["nodes"]:
        lat = node["scores"]["Lat"]
        assert 0 <= lat["normalized"] <= 100
        raws = {r: v["raw"] for r, v in lat["rules"].items()}
        if node["name"] == "ok":
            assert raws == {"lat": 5, "jp": 5, "load": 3}
        else:  # every value of an extreme node is out of range: missing
            assert raws == {"lat": None, "jp": None, "load": None}, node["name"]
    simulated = policyd("simulate", *common, cwd=tmp_path)
    assert simulated.returncode == 0, simulated.stdout + simulated.stderr
    assert simulated.stderr == ""
    [placement] = json.loads(simulated.stdout)["placements"]
    assert placement["node"] == "ok"


def test_policyd_test_scores_values_beyond_the_bound_as_missing(tmp_path: Path) -> None:
    _write(tmp_path, "minmax", "annotation")
    nodes = "\n".join(f"    - {{name: x{i}, annotations: {{myorg.io/lat: \"{v}\"}}}}"
                      for i, v in enumerate(EXTREMES))
    nodes += '\n    - {name: ok, annotations: {myorg.io/lat: "5"}}'
    # lat: only `ok` has a value (minmax of one value: 100, reversed stays 100); jp: 100
    # on ok; load: no metrics in a PolicyTest, so missing: neutral 50 everywhere.
    # ok: (10*100 + 5*100 + 5*50) / 20 = 87; the others: 5*50 / 20 = 12.
    scores = ", ".join([*(f"x{i}: 12" for i in range(len(EXTREMES))), "ok: 87"])
    (tmp_path / "limits.test.yaml").write_text(TEST % {"nodes": nodes, "scores": scores})
    r = policyd("test", "limits.test.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "internal error" not in r.stdout + r.stderr
    assert r.stderr == ""
