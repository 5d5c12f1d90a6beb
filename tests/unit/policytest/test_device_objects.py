"""PolicyTest files carry DRA objects (spec.devices: DeviceClasses, ResourceSlices,
ResourceClaims) into the suite's cluster, checked as a snapshot's are, so cases can
run on pods with claims."""

from __future__ import annotations

from pathlib import Path

from policyd.policytest.loading import load_suite
from policyd.policytest.run_tests import run_tests
from policyd.problems import Problem
from policyd.sourcefile import load_file

SUITE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {name: devices}
spec:
  policies:
    - apiVersion: policyd.io/v1alpha1
      kind: SchedulingPolicy
      metadata: {name: any}
      spec:
        pluginName: AnyNode
        filters:
          - {id: any, message: "never", nodeLabels: {matchExpressions: [
              {key: kubernetes.io/hostname, operator: Exists}]}}
  nodes:
    - {name: n1}
  devices:
    - apiVersion: resource.k8s.io/v1
      kind: DeviceClass
      metadata: {name: gpu.example.com}
      spec:
        selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
    - apiVersion: resource.k8s.io/v1
      kind: ResourceSlice
      metadata: {name: n1-gpu}
      spec:
        driver: gpu.example.com
        nodeName: n1
        pool: {name: n1, generation: 1, resourceSliceCount: 1}
        devices:
          - name: gpu-0
            attributes: {model: {string: a100}}
            capacity: {memory: {value: 40Gi}}
    - apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {name: gpu, namespace: ml}
      spec:
        devices:
          requests:
            - name: gpu
              exactly: {deviceClassName: gpu.example.com}
  pods:
    - {name: web, requests: {cpu: "1"}}
  tests:
    - name: the pod fits
      pod: web
      scheduledTo: n1
"""


def _load(tmp_path: Path, text: str) -> tuple[object, list[Problem]]:
    f = tmp_path / "t.yaml"
    f.write_text(text)
    source = load_file(f)
    problems: list[Problem] = list(source.problems)
    try:
        suite = load_suite(source.documents[0], tmp_path, problems)
    except Exception:  # BadSuite: the problems say why
        return None, problems
    return suite, problems


def test_the_suites_devices_reach_its_cluster(tmp_path: Path) -> None:
    suite, problems = _load(tmp_path, SUITE)
    assert problems == []
    cluster = suite.cluster.cluster()  # type: ignore[attr-defined]
    assert cluster.dra.classes.get("gpu.example.com") is not None
    assert [s["metadata"]["name"] for s in cluster.dra.slices.on_node("n1")] == ["n1-gpu"]
    assert cluster.dra.claims.get("ml/gpu") is not None
    f = tmp_path / "t.yaml"
    result = run_tests([f])
    assert not result.problems and [c.passed for c in result.cases] == [True]


def test_bad_device_entries_are_problems_with_positions(tmp_path: Path) -> None:
    text = (SUITE.replace("resourceSliceCount: 1", "resourceSliceCont: 1")
            .replace("{name: n1}\n  devices:\n", "{name: n1}\n  devices:\n"
                     "    - kind: ResourceClaimTemplate\n      metadata: {name: t}\n")
            .replace("metadata: {name: gpu, namespace: ml}",
                     "metadata: {name: gpu, namespace: ML_team}"))
    suite, problems = _load(tmp_path, text)
    assert suite is None
    messages = [p.message for p in problems]
    assert any("'ResourceClaimTemplate' is not a DRA kind (one of DeviceClass, "
               "ResourceSlice, ResourceClaim)" in m for m in messages), messages
    assert any("resourceSliceCont" in m for m in messages), messages
    assert any(m.startswith("ResourceClaim ML_team/gpu: metadata.namespace: 'ML_team'")
               for m in messages), messages
    assert all(p.line > 0 for p in problems)


def test_a_device_object_defined_twice_is_a_problem(tmp_path: Path) -> None:
    twice = SUITE.replace("  pods:", """\
    - apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {name: gpu, namespace: ml}
      spec: {devices: {requests: []}}
    - apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {name: gpu, namespace: other}
      spec: {devices: {requests: []}}
  pods:""")
    _, problems = _load(tmp_path, twice)
    assert [p.message for p in problems] == ["ResourceClaim 'ml/gpu' is defined twice"]
