"""spec.cluster.file: a snapshot loaded as `simulate --cluster` loads it, its nodes and
bound pods the cluster, its pending pods pods to test (by namespace/name, or by name
when only one has it), beside spec.nodes and spec.pods."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.policytest.run_tests import RunResult, run_tests

SNAPSHOT = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: busy, labels: {kubernetes.io/hostname: busy}}
  status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: idle, labels: {kubernetes.io/hostname: idle}}
  status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
- apiVersion: v1
  kind: Pod
  metadata: {name: load, namespace: shop, uid: u1}
  spec:
    nodeName: busy
    containers: [{name: c, image: i, resources: {requests: {cpu: "3500m"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: web, namespace: shop, uid: u2}
  spec:
    containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: web, namespace: blog, uid: u3}
  spec:
    containers: [{name: c, image: i}]
- apiVersion: v1
  kind: Pod
  metadata: {name: api, namespace: shop, uid: u4}
  spec:
    containers: [{name: c, image: i, resources: {requests: {cpu: "3"}}}]
"""

POLICY = """\
    - apiVersion: policyd.io/v1alpha1
      kind: SchedulingPolicy
      metadata: {name: any}
      spec:
        pluginName: AnyNode
        filters:
          - {id: any, message: never, nodeLabels: {matchExpressions: [
              {key: kubernetes.io/hostname, operator: Exists}]}}
"""


def run(tmp_path: Path, tests: str, extra: str = "", snapshot: str = SNAPSHOT,
        file: str = "snap.yaml") -> RunResult:
    (tmp_path / "snap.yaml").write_text(snapshot)
    test = tmp_path / "t.yaml"
    test.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicyTest\nmetadata: {name: t}\n"
                    f"spec:\n  cluster: {{file: {file}}}\n  policies:\n{POLICY}{extra}"
                    f"  tests:\n{tests}")
    return run_tests([test])


def outcome(result: RunResult) -> list[tuple[str, bool, list[str]]]:
    return [(c.name, c.passed, c.failures) for c in result.cases]


def test_the_snapshots_nodes_and_load_are_the_cluster(tmp_path: Path) -> None:
    tests = ("    - {name: shop web, pod: shop/web, scheduledTo: idle}\n"
             "    - {name: by name, pod: api, scheduledTo: idle}\n"
             "    - {name: blog web, pod: blog/web, policies: {AnyNode: {pass: [busy, idle]}}}\n")
    result = run(tmp_path, tests)
    assert result.problems == []
    assert outcome(result) == [("shop web", True, []), ("by name", True, []),
                               ("blog web", True, [])]


def test_a_wrong_expectation_on_the_snapshot_fails(tmp_path: Path) -> None:
    result = run(tmp_path, "    - {name: wrong, pod: shop/web, scheduledTo: busy}\n")
    assert outcome(result) == [("wrong", False, [
        "expected the pod on busy, but it was scheduled to idle"])]


def test_inline_nodes_and_pods_join_the_snapshot(tmp_path: Path) -> None:
    extra = ("  nodes: [{name: big, allocatable: {cpu: \"64\"}}]\n"
             "  pods:\n    - {name: hog, nodeName: idle, requests: {cpu: \"4\"}}\n"
             "    - {name: mine, requests: {cpu: \"2\"}}\n")
    tests = ("    - {name: only big fits, pod: mine, scheduledTo: big}\n"
             "    - {name: full, pod: shop/api, scheduledTo: big}\n")
    result = run(tmp_path, tests, extra)
    assert result.problems == []
    assert [c.passed for c in result.cases] == [True, True]


def test_a_name_in_two_namespaces_asks_for_namespace_slash_name(tmp_path: Path) -> None:
    result = run(tmp_path, "    - {name: which, pod: web, scheduledTo: idle}\n")
    assert [(p.line, p.rule) for p in result.problems] == [(16, "unknown-pod")]
    assert "write namespace/name (blog/web, shop/web)" in result.problems[0].message


def test_an_unknown_pod_suggests_the_namespaced_one(tmp_path: Path) -> None:
    result = run(tmp_path, "    - {name: ns, pod: default/api, scheduledTo: idle}\n")
    assert [p.rule for p in result.problems] == ["unknown-pod"]
    assert result.problems[0].message == ("no pod named 'default/api' in spec.pods or the "
                                          "cluster file; did you mean 'shop/api'?")


def test_a_pod_in_both_is_defined_twice(tmp_path: Path) -> None:
    extra = "  pods: [{name: api, namespace: shop}]\n"
    result = run(tmp_path, "    - {name: x, pod: shop/api, scheduledTo: idle}\n", extra)
    assert [p.rule for p in result.problems] == ["duplicate-name"]


@pytest.mark.parametrize(("file", "snapshot", "said"), [
    ("missing.yaml", SNAPSHOT, "missing.yaml': No such file or directory"),
    ("/dev/null", SNAPSHOT, "not a regular file"),
    (".", SNAPSHOT, "is a directory"),
    ('"a\\0b"', SNAPSHOT, "contains a NUL character"),
    ("x" * 3000, SNAPSHOT, "File name too long"),
    ("snap.yaml", "", "empty file"),
    ("snap.yaml", SNAPSHOT.replace("kind: Pod\n  metadata: {name: load",
                                   "kind: Podd\n  metadata: {name: load"),
     "Podd"),
    ("snap.yaml", SNAPSHOT.replace('cpu: "3500m"', 'cpu: "3.5 cores"'), "Pod shop/load"),
])
def test_a_snapshot_that_does_not_load_is_one_problem(
        tmp_path: Path, file: str, snapshot: str, said: str) -> None:
    # The cases name the snapshot's nodes and pods: no false "no node named" after it.
    tests = ("    - {name: x, pod: shop/web, scheduledTo: idle, policies: {AnyNode: "
             "{pass: [busy]}}}\n")
    result = run(tmp_path, tests, snapshot=snapshot, file=file)
    assert [(p.line, p.column, p.rule) for p in result.problems] == [(5, 19, "cluster-file")]
    assert said in result.problems[0].message
    assert result.bad_input and result.cases == [] and result.refused == 1
