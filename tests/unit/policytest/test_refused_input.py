"""Bad PolicyTest input is said once, where it is, with the fix: a scalar YAML typed
where a string is wanted, and nothing false after it; a file too large, empty, or of
another kind is refused by name, never summed up as "no tests found"; real kubectl
output fits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyd.policytest.render import render
from policyd.policytest.run_tests import TEST_LIMITS, RunResult, run_tests

POLICY = """\
    - apiVersion: policyd.io/v1alpha1
      kind: SchedulingPolicy
      metadata: {name: enc}
      spec:
        pluginName: HwEncrypt
        filters:
          - {id: enc, message: no encryption, nodeLabels: {matchLabels: {enc: "true"}}}
"""


def write(tmp_path: Path, nodes: str, pods: str = "    - {name: p}\n",
          tests: str = "    - {name: a, pod: p, scheduledTo: enc, policies: "
                       "{HwEncrypt: {pass: [enc], fail: {plain: no encryption}}}}\n",
          policies: str = POLICY) -> Path:
    test = tmp_path / "t.yaml"
    test.write_text("apiVersion: policyd.io/v1alpha1\nkind: PolicyTest\nmetadata: {name: t}\n"
                    f"spec:\n  policies:\n{policies}  nodes:\n{nodes}  pods:\n{pods}"
                    f"  tests:\n{tests}")
    return test


def found(result: RunResult) -> list[tuple[int, int, str, str]]:
    return [(p.line, p.column, p.rule, p.message) for p in result.problems
            if p.level == "error"]


def test_an_unquoted_true_is_the_one_problem_not_no_tests_and_no_node(
        tmp_path: Path) -> None:
    result = run_tests([write(tmp_path, "    - {name: enc, labels: {enc: true}}\n"
                                        "    - {name: plain}\n")])
    assert found(result) == [(14, 33, "schema",
                              'expected a string, got boolean true; quote it: "true"')]
    summary = render(result, "text")
    assert "no tests found" not in summary
    assert summary == ("no tests run: 1 file(s) or PolicyTest(s) refused as bad input, "
                       "not run (the problems are on stderr)\n")


@pytest.mark.parametrize(("value", "said"), [
    ("1", 'expected a string, got integer 1; quote it: "1"'),
    ("1.10", "expected a string, got number 1.1; quote it as written"),
    ("", "expected a string, got null (an empty value); write a value, quoted"),
    ("false", 'expected a string, got boolean false; quote it: "false"'),
])
def test_other_scalars_where_a_label_value_is_wanted(tmp_path: Path, value: str,
                                                    said: str) -> None:
    result = run_tests([write(tmp_path, f"    - name: enc\n      labels: {{enc: {value}}}\n"
                                        "    - {name: plain}\n")])
    assert [(line, rule, message) for line, _, rule, message in found(result)] == [
        (15, "schema", said)]


def test_a_name_that_is_not_a_string(tmp_path: Path) -> None:
    # The node was refused: the cases that name it (as "true") say nothing more.
    result = run_tests([write(tmp_path, "    - {name: true}\n    - {name: plain}\n",
                              tests="    - {name: a, pod: p, scheduledTo: \"true\"}\n")])
    assert [(line, message) for line, _, _, message in found(result)] == [
        (14, 'expected a string, got boolean true; quote it: "true"')]
    result = run_tests([write(tmp_path, "    - {name: enc}\n    - {name: plain}\n",
                              pods="    - {name: 8080}\n",
                              tests="    - {name: a, pod: \"8080\", scheduledTo: enc}\n")])
    assert [(line, message) for line, _, _, message in found(result)] == [
        (17, 'expected a string, got integer 8080; quote it: "8080"')]


def test_a_bad_policy_is_not_also_an_unknown_policy(tmp_path: Path) -> None:
    broken = POLICY.replace("message: no encryption", "message: 7")
    result = run_tests([write(tmp_path, "    - {name: enc, labels: {enc: \"true\"}}\n"
                                        "    - {name: plain}\n", policies=broken)])
    assert [rule for _, _, rule, _ in found(result)] == ["schema"]


def kubectl_node(i: int) -> dict[str, object]:
    """A Node as `kubectl get nodes -o yaml` prints one: managedFields, conditions,
    images, some 20 KiB of YAML."""
    name = f"ip-10-0-{i}-17.eu-west-1.compute.internal"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": f"6c1f0a52-{i:04d}-4b1e-9f0e-1d2c3b4a5f60",
            "resourceVersion": str(1000 + i), "creationTimestamp": "2026-11-30T10:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "topology.kubernetes.io/zone": f"eu-west-1{'abc'[i % 3]}",
                       "node.kubernetes.io/instance-type": "m6i.2xlarge"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach":
                                "true"},
            "managedFields": [{
                "manager": m, "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {
                    f"f:label-{k}": {} for k in range(12)}},
                    "f:status": {"f:conditions": {
                        f'k:{{"type":"Cond{k}"}}': {"f:lastHeartbeatTime": {},
                                                   "f:status": {}} for k in range(6)}}},
            } for m in ("kubelet", "kube-controller-manager", "aws-node")],
        },
        "spec": {"providerID": f"aws:///eu-west-1a/i-0{i:016x}"},
        "status": {
            "allocatable": {"cpu": "7910m", "memory": "31482Mi", "pods": "58",
                            "ephemeral-storage": "95551679124"},
            "capacity": {"cpu": "8", "memory": "32386Mi", "pods": "58"},
            "conditions": [{"type": t, "status": "False", "reason": f"Kubelet{t}",
                            "message": f"kubelet has no {t}",
                            "lastHeartbeatTime": "2026-11-30T10:00:00Z",
                            "lastTransitionTime": "2026-11-30T10:00:00Z"}
                           for t in ("MemoryPressure", "DiskPressure", "PIDPressure")],
            "images": [{"names": [f"602401143452.dkr.ecr.eu-west-1.amazonaws.com/img-{k}"
                                  f"@sha256:{k:064x}",
                                  f"602401143452.dkr.ecr.eu-west-1.amazonaws.com/img-{k}"
                                  f":v1.{k}.0"],
                        "sizeBytes": 1000000 + k} for k in range(30)],
            "nodeInfo": {"kubeletVersion": "v1.36.0", "osImage": "Amazon Linux 2023",
                         "containerRuntimeVersion": "containerd://1.7.11"},
        },
    }


def yaml_block(nodes: list[dict[str, object]]) -> str:
    import yaml  # type: ignore[import-untyped]

    text = yaml.safe_dump(nodes, default_flow_style=False, sort_keys=False)
    return "".join(f"    {line}\n" for line in text.splitlines())


def test_twelve_nodes_pasted_from_kubectl_fit(tmp_path: Path) -> None:
    nodes = [kubectl_node(i) for i in range(12)]
    first = nodes[0]["metadata"]["name"]  # type: ignore[index]
    test = write(tmp_path, yaml_block(nodes),
                 tests=f"    - {{name: a, pod: p, policies: {{HwEncrypt: "
                       f"{{fail: {{{first}: no encryption}}}}}}}}\n")
    assert test.stat().st_size > 128 * 1024  # what the policy cap refused
    result = run_tests([test])
    assert found(result) == []
    assert [c.passed for c in result.cases] == [True]


def test_a_file_over_the_cap_is_refused_with_its_size_and_the_cap(tmp_path: Path) -> None:
    test = write(tmp_path, "    - {name: enc}\n    - {name: plain}\n")
    with test.open("a") as f:
        f.write(("# padding\n" * 1000 + "\n") * (TEST_LIMITS.max_bytes // 10_000 + 1))
    size = test.stat().st_size
    result = run_tests([test])
    assert found(result) == [(1, 1, "file-too-large",
                              f"file refused, not run: {size:,} bytes, over the "
                              f"{TEST_LIMITS.max_bytes:,}-byte limit of PolicyTest files")]
    assert render(result, "text").startswith("no tests run: 1 file(s)")
    assert json.loads(render(result, "json"))["summary"]["refused"] == 1


def test_an_empty_file_is_refused_not_no_tests(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text("\n# nothing\n")
    result = run_tests([tmp_path / "t.yaml"])
    assert [p.rule for p in result.problems] == ["file-empty"]
    assert render(result, "text").startswith("no tests run: 1 ")


@pytest.mark.parametrize(("kind", "said"), [
    ("PolicydConfiguration", "this file is a profile: `policyd check-config` checks it"),
    ("SchedulingPolicy", "this file is a policy: `policyd lint` checks it"),
    ("Deployment", "this file holds kind 'Deployment'"),
])
def test_a_file_of_another_kind_says_what_it_is(tmp_path: Path, kind: str, said: str
                                               ) -> None:
    (tmp_path / "x.yaml").write_text(f"apiVersion: v1\nkind: {kind}\n")
    result = run_tests([tmp_path / "x.yaml"])
    assert [(p.line, p.rule, p.level) for p in result.problems] == [
        (2, "not-a-test", "warning")]
    assert said in result.problems[0].message
    assert not result.bad_input and result.cases == []
    assert render(result, "text") == (
        f"no tests found: a run without tests fails (1 file(s) read, no PolicyTest in "
        f"them: 1 {kind})\n")


def test_a_directory_of_policies_and_tests_warns_about_nothing(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("apiVersion: policyd.io/v1alpha1\n"
                                          "kind: SchedulingPolicy\n")
    write(tmp_path, "    - {name: enc, labels: {enc: \"true\"}}\n    - {name: plain}\n")
    result = run_tests([tmp_path])
    assert result.problems == [] and [c.passed for c in result.cases] == [True]


def test_junit_shows_refused_suites_beside_the_tests_that_ran(tmp_path: Path) -> None:
    from xml.etree import ElementTree as ET

    good = write(tmp_path, "    - {name: enc, labels: {enc: \"true\"}}\n    - {name: plain}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace('enc: "true"}', "enc: true}"))
    result = run_tests([good, bad])
    assert [c.passed for c in result.cases] == [True] and result.refused == 1
    assert render(result, "text").splitlines()[-1] == (
        "1 passed, 0 failed; 1 file(s) or PolicyTest(s) refused as bad input, not run (the "
        "problems are on stderr)")
    root = ET.fromstring(render(result, "junit"))
    assert (root.get("tests"), root.get("errors")) == ("2", "1")
    error = root.find("testsuite/testcase[@name='refused input']/error")
    assert error is not None and "quote it" in (error.text or "")
