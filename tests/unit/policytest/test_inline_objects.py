"""A PolicyTest's inline nodes and pods are held to what a snapshot's are: the API
server's metadata checks and its number types, each refused field reported once at the
line:column it was written (shorthand or full object), with nothing false after it;
and a test's numbers (priorities, expected scores) within their real ranges."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.model.records import pod_from_dict
from policyd.policytest.field_paths import entry_path, object_path
from policyd.policytest.render import render
from policyd.policytest.run_tests import run_tests
from tests.unit.policytest.test_refused_input import found, write

NODES = "    - {name: enc, labels: {enc: \"true\"}}\n    - {name: plain}\n"
# In `write`'s file with NODES: the line of a node added after them, of the first pod,
# and of the first test when there is one pod.
AFTER_NODES, FIRST_POD, FIRST_TEST = 16, 17, 19


def refused(tmp_path: Path, nodes: str = NODES, pods: str = "    - {name: p}\n",
            tests: str | None = None) -> list[tuple[int, int, str, str]]:
    """The errors of a PolicyTest that must be refused as bad input (exit 2), never run."""
    path = write(tmp_path, nodes, pods, tests) if tests is not None \
        else write(tmp_path, nodes, pods)
    result = run_tests([path])
    summary = render(result, "text")
    assert "no tests found" not in summary and summary.startswith("no tests run: 1 file")
    return found(result)


# -- metadata, as the API server checks it ------------------------------------------

@pytest.mark.parametrize(("node", "column", "said"), [
    ("{name: web/0}", 14, "metadata.name: 'web/0': must be a lowercase RFC 1123 subdomain"),
    ("{name: Web}", 14, "metadata.name: 'Web': must be a lowercase RFC 1123 subdomain"),
    ("{name: x, labels: {\"n\u043ede.kubernetes.io/a\": b}}", 26,
     "key: prefix part must be a lowercase RFC 1123 subdomain"),
    ("{name: x, labels: {\"bad key\": b}}", 26, "key: name part must consist of"),
    ("{name: x, labels: {k: \"bad value!\"}}", 29,
     "value 'bad value!': a valid label value must be"),
    ("{name: x, labels: {k: " + "v" * 64 + "}}", 29, "must be no more than 63 characters"),
    ("{name: x, annotations: {\"a b\": c}}", 31, "key: name part must consist of"),
])
def test_a_node_the_api_server_would_refuse_is_one_problem_at_its_field(
        tmp_path: Path, node: str, column: int, said: str) -> None:
    # The case names the refused node: no "no node named" after it.
    name = "web/0" if "web/0" in node else "Web" if "Web" in node else "x"
    problems = refused(tmp_path, NODES + f"    - {node}\n",
                       tests=f"    - {{name: a, pod: p, scheduledTo: {name!r}}}\n")
    assert len(problems) == 1, problems
    line, col, rule, message = problems[0]
    assert (line, col, rule) == (AFTER_NODES, column, "invalid-object")
    assert message.startswith(f"Node {name}: ") and said in message


def test_a_pod_the_api_server_would_refuse_names_its_namespace_or_name(
        tmp_path: Path) -> None:
    problems = refused(tmp_path, pods="    - {name: p, namespace: Shop_EU}\n"
                                      "    - {name: web/0}\n",
                       tests="    - {name: a, pod: web/0, scheduledTo: enc}\n")
    assert [(line, col) for line, col, _, _ in problems] == [
        (FIRST_POD, 28), (FIRST_POD + 1, 14)]
    assert "Pod Shop_EU/p: metadata.namespace: 'Shop_EU': must be a lowercase RFC 1123 " \
           "label" in problems[0][3]
    assert problems[1][3].startswith("Pod default/web/0: metadata.name: 'web/0'")


def test_a_full_object_is_checked_at_its_own_fields(tmp_path: Path) -> None:
    node = ("    - apiVersion: v1\n      kind: Node\n      metadata:\n        name: full\n"
            "        labels: {\"bad key\": b}\n")
    problems = refused(tmp_path, NODES + node)
    # At the key: what is wrong is the key.
    assert [(line, col) for line, col, _, _ in problems] == [(AFTER_NODES + 4, 18)]
    assert "Node full: metadata.labels.bad key: key:" in problems[0][3]


def test_escape_sequences_in_a_name_are_escaped_in_the_message(tmp_path: Path) -> None:
    problems = refused(tmp_path, NODES + '    - {name: "n\\e[31m1"}\n')
    assert len(problems) == 1 and "\x1b" not in problems[0][3]
    assert "\\x1b[31m1" in problems[0][3]


def test_every_refused_entry_is_its_own_problem(tmp_path: Path) -> None:
    problems = refused(tmp_path, NODES + "    - {name: a_1}\n    - {name: b_2}\n")
    assert [line for line, _, _, _ in problems] == [AFTER_NODES, AFTER_NODES + 1]


# -- numbers -------------------------------------------------------------------------

INT32_SAID = ("is out of range (-2147483648 to 2147483647): the API server stores "
              "spec.priority as an int32")


@pytest.mark.parametrize("priority", ["2147483648", "-2147483649", "9223372036854775808",
                                      "1e10", str(10**40)])
def test_a_priority_beyond_int32_is_refused_with_the_bound(tmp_path: Path,
                                                            priority: str) -> None:
    problems = refused(tmp_path, pods=f"    - {{name: p, priority: {priority}}}\n")
    assert [(line, col, rule) for line, col, rule, _ in problems] == [
        (FIRST_POD, 27, "schema")]
    assert INT32_SAID in problems[0][3]


def test_int32_priorities_at_the_bounds_load(tmp_path: Path) -> None:
    pods = "    - {name: p, priority: 2147483647}\n    - {name: q, priority: -2147483648}\n"
    result = run_tests([write(tmp_path, NODES, pods)])
    assert found(result) == [] and sum(c.passed for c in result.cases) == 1


def test_a_full_object_priority_beyond_int32_is_refused_at_spec_priority(
        tmp_path: Path) -> None:
    pod = ("    - {name: p}\n    - apiVersion: v1\n      kind: Pod\n"
           "      metadata: {name: q}\n"
           "      spec: {priority: 2147483648, containers: [{name: c, image: i}]}\n")
    problems = refused(tmp_path, pods=pod)
    assert [(line, col) for line, col, _, _ in problems] == [(FIRST_POD + 4, 24)]
    assert "spec.priority: 2147483648 is out of range for an int32 " \
           "(-2147483648 to 2147483647)" in problems[0][3]


@pytest.mark.parametrize(("score", "column"), [("1e23", 62), ("101", 62), ("-1", 62),
                                               ("1e400", 62)])
def test_an_expected_score_outside_0_to_100_is_refused(tmp_path: Path, score: str,
                                                       column: int) -> None:
    tests = f"    - {{name: a, pod: p, policies: {{HwEncrypt: {{scores: {{enc: {score}}}}}}}}}\n"
    problems = refused(tmp_path, tests=tests)
    # One problem: 1e400 (infinity) is not an integer, and that is all it is told.
    assert [(line, col) for line, col, _, _ in problems] == [(FIRST_TEST, column)]
    if score != "1e400":  # infinity is not an integer at all: the type says so
        assert "is out of range (0 to 100): what a policy scores a node" in problems[0][3]


def test_scores_0_and_100_pass_the_schema(tmp_path: Path) -> None:
    tests = "    - {name: a, pod: p, policies: {HwEncrypt: {scores: {enc: 100, plain: 0}}}}\n"
    result = run_tests([write(tmp_path, NODES, tests=tests)])
    # The policy has no score rules: a test failure, not bad input.
    assert found(result) == [] and result.failed == 1


# -- quantities: as a snapshot's ------------------------------------------------------

@pytest.mark.parametrize(("nodes", "pods", "line", "column", "field"), [
    (NODES, "    - {name: p, requests: {memory: 1e19}}\n", FIRST_POD, 36,
     "spec.containers[0].resources.requests.memory"),
    (NODES + "    - {name: big, allocatable: {cpu: \"1e19\"}}\n", "    - {name: p}\n",
     AFTER_NODES, 38, "status.allocatable.cpu"),
    (NODES, "    - {name: p, requests: {example.com/gpu: 99999999999999999999}}\n",
     FIRST_POD, 45, "spec.containers[0].resources.requests.example.com/gpu"),
])
def test_a_quantity_beyond_int64_is_refused_at_its_field(
        tmp_path: Path, nodes: str, pods: str, line: int, column: int, field: str) -> None:
    problems = refused(tmp_path, nodes, pods)
    assert [(ln, col) for ln, col, _, _ in problems] == [(line, column)]
    assert f"{field}: invalid quantity" in problems[0][3]
    assert "larger than 2^63-1 (9223372036854775807)" in problems[0][3]


def test_cpu_within_int64_counts_exactly_as_in_a_snapshot(tmp_path: Path) -> None:
    # 9e18 cores is a quantity the API server takes; its millicores pass int64, and
    # policyd counts them exactly (records, for snapshots too): it fits no node.
    pods = "    - {name: p, requests: {cpu: 9e18}}\n"
    tests = "    - {name: a, pod: p, unschedulable: true}\n"
    result = run_tests([write(tmp_path, NODES, pods, tests)])
    assert found(result) == [] and sum(c.passed for c in result.cases) == 1
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i",
                                    "resources": {"requests": {"cpu": 9e18}}}]}}
    pod_from_dict(raw)  # the snapshot's decoder takes it as well


# -- where a decoder's field was written ----------------------------------------------

def test_object_paths_keep_map_keys_whole() -> None:
    assert object_path("spec.containers[0].resources.requests.example.com/gpu") == (
        "spec", "containers", 0, "resources", "requests", "example.com/gpu")
    assert object_path("metadata.labels.a.b/c[0]") == ("metadata", "labels", "a.b/c[0]")
    assert object_path("spec.priority") == ("spec", "priority")


def test_entry_paths_of_the_shorthand() -> None:
    assert entry_path("metadata.labels.k", "node", shorthand=True) == ("labels", "k")
    assert entry_path("status.allocatable.cpu", "node", shorthand=True) == (
        "allocatable", "cpu")
    assert entry_path("spec.containers[0].resources.requests.cpu", "pod",
                      shorthand=True) == ("requests", "cpu")
    assert entry_path("spec.tolerations[1].key", "pod", shorthand=True) == (
        "tolerations", 1, "key")
    # A field the shorthand does not have: the entry itself.
    assert entry_path("status.phase", "pod", shorthand=True) == ()
    assert entry_path("metadata.labels.k", "node", shorthand=False) == (
        "metadata", "labels", "k")


# -- metric values: as a cluster's ---------------------------------------------------

METRIC_SUITE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {name: t}
spec:
  policies:
    - apiVersion: policyd.io/v1alpha1
      kind: SchedulingPolicy
      metadata: {name: m}
      spec:
        pluginName: M
        scores:
          - {id: m, weight: 1, normalize: minmax, metric: {name: load, prefer: lowest}}
  nodes: [{name: a}, {name: b}]
  pods: [{name: p}]
  metrics:
    load: {a: VALUE, b: 5}
  tests:
    - {name: t, pod: p, policies: {M: {scores: {a: 0, b: 100}}}}
"""


@pytest.mark.parametrize(("value", "passes"), [
    ("-1e308", True), ("-9007199254740994", True), ("-1000", False)])
def test_a_metric_beyond_2_53_is_missing_as_in_a_cluster(tmp_path: Path, value: str,
                                                         passes: bool) -> None:
    # prefer lowest: counted, a's value would make it the best node (100).
    f = tmp_path / "t.yaml"
    f.write_text(METRIC_SUITE.replace("VALUE", value))
    result = run_tests([f])
    assert found(result) == []
    assert [c.passed for c in result.cases] == [passes]
