"""A PreFilter that rejects the pod rejects it on every node: a `pass:` expectation
must fail then, naming the plugin and its reason, never pass because Filter never ran;
a `fail:` expectation holds when its reason is the PreFilter's."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.framework.cycle_state import CycleState
from policyd.framework.status import Status
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod, node_from_dict, pod_from_dict
from policyd.plugins.nodeaffinity.node_affinity import ERR_REASON_CONFLICT, NodeAffinity
from policyd.policy.compiler import FilterPolicy
from policyd.policytest.run_tests import run_tests
from policyd.policytest.running import Rejection, check_nodes, filter_verdicts
from policyd.policytest.schema import PolicyExpectation


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "status": {"allocatable": {"cpu": "4", "pods": "110"}}}


def _pod_with_conflicting_names() -> Pod:
    """Its required node affinity pins two disjoint node names: NodeAffinity's
    PreFilter rejects it before any Filter runs."""
    fields = [{"key": "metadata.name", "operator": "In", "values": ["n1"]},
              {"key": "metadata.name", "operator": "In", "values": ["n2"]}]
    return pod_from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "default/p"},
        "spec": {"containers": [{"name": "app", "image": "app"}], "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": fields}]}}}}})


def _builtin_verdicts() -> dict[str, Rejection | None]:
    cluster = ClusterState([node_from_dict(_node(n)) for n in ("n1", "n2")], [])
    infos = cluster.node_infos()
    return filter_verdicts(NodeAffinity(), CycleState(infos, cluster),
                           _pod_with_conflicting_names(), infos)


def test_a_builtin_prefilter_rejection_rejects_every_node() -> None:
    rejected = Rejection((ERR_REASON_CONFLICT,), "NodeAffinity")
    assert _builtin_verdicts() == {"n1": rejected, "n2": rejected}


def test_pass_fails_naming_the_builtin_prefilter_and_its_reason() -> None:
    failures: list[str] = []
    check_nodes("NodeAffinity", _builtin_verdicts(), {"pass": ["n1", "n2"]}, failures)
    assert failures == [
        f"NodeAffinity: expected node {n} to pass, but it failed: PreFilter of "
        f"NodeAffinity rejected the pod on every node: {ERR_REASON_CONFLICT}"
        for n in ("n1", "n2")]


def test_fail_with_the_prefilter_reason_holds() -> None:
    failures: list[str] = []
    exp: PolicyExpectation = {"fail": {"n1": ERR_REASON_CONFLICT,
                                       "n2": [ERR_REASON_CONFLICT]}}
    check_nodes("NodeAffinity", _builtin_verdicts(), exp, failures)
    assert failures == []


def test_fail_with_another_reason_says_the_prefilter_rejected() -> None:
    failures: list[str] = []
    check_nodes("NodeAffinity", _builtin_verdicts(),
                {"fail": {"n1": "node(s) didn't match Pod's node affinity/selector"}},
                failures)
    assert failures == [
        f"NodeAffinity: node n1 failed with {ERR_REASON_CONFLICT!r} (PreFilter of "
        "NodeAffinity rejected the pod on every node), expected "
        "\"node(s) didn't match Pod's node affinity/selector\""]


SUITE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicyTest
metadata: {name: prefilter}
spec:
  policies:
    - apiVersion: policyd.io/v1alpha1
      kind: SchedulingPolicy
      metadata: {name: zoned}
      spec:
        pluginName: Zoned
        appliesTo: {labelSelector: {matchLabels: {app: web}}}
        filters:
          - {id: zone, message: "node(s) had no zone", nodeLabels: {matchExpressions: [
              {key: zone, operator: Exists}]}}
  nodes:
    - {name: n1, labels: {zone: a}}
    - {name: n2}
  pods:
    - {name: web, labels: {app: web}}
    - {name: other}
  tests:
    - name: expectations
      pod: {pod}
      policies:
        Zoned: {expectation}
"""


def _run(tmp_path: Path, pod: str, expectation: str) -> list[str]:
    f = tmp_path / "t.yaml"
    f.write_text(SUITE.replace("{pod}", pod).replace("{expectation}", expectation))
    result = run_tests([f])
    assert not result.bad_input, result.problems
    [case] = result.cases
    return case.failures


@pytest.fixture
def policy_rejects_at_prefilter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled policies answer Skip or success at PreFilter today; this makes the
    filter policy reject there, as a future rule kind (or a bug) might."""
    def pre_filter(self: FilterPolicy, *_: object) -> tuple[None, Status]:
        return None, Status.unschedulable("quota for zone exhausted")
    monkeypatch.setattr(FilterPolicy, "pre_filter", pre_filter)


@pytest.mark.usefixtures("policy_rejects_at_prefilter")
def test_a_policy_prefilter_rejection_fails_pass_naming_the_policy(
        tmp_path: Path) -> None:
    assert _run(tmp_path, "web", "{pass: [n1]}") == [
        "Zoned: expected node n1 to pass, but it failed: PreFilter of Zoned rejected "
        "the pod on every node: quota for zone exhausted"]


@pytest.mark.usefixtures("policy_rejects_at_prefilter")
def test_a_policy_prefilter_rejection_holds_for_fail_with_its_reason(
        tmp_path: Path) -> None:
    assert _run(tmp_path, "web",
                "{fail: {n1: quota for zone exhausted, n2: quota for zone exhausted}}") \
        == []
    assert _run(tmp_path, "web", "{fail: {n2: node(s) had no zone}}") == [
        "Zoned: node n2 failed with 'quota for zone exhausted' (PreFilter of Zoned "
        "rejected the pod on every node), expected 'node(s) had no zone'"]


def test_a_prefilter_skip_still_passes_every_node(tmp_path: Path) -> None:
    # The policy does not apply to `other`: PreFilter says Skip, Filter does not run,
    # so every node passes (what upstream does with a Skip), and a `fail:` cannot hold.
    assert _run(tmp_path, "other", "{applies: false, pass: [n1, n2]}") == []
    assert _run(tmp_path, "other", "{fail: {n2: node(s) had no zone}}") == [
        "Zoned: expected node n2 to fail with 'node(s) had no zone', but it passed"]


def test_filters_run_when_prefilter_succeeds(tmp_path: Path) -> None:
    assert _run(tmp_path, "web", "{pass: [n1], fail: {n2: node(s) had no zone}}") == []
    assert _run(tmp_path, "web", "{pass: [n2]}") == [
        "Zoned: expected node n2 to pass, but it failed: node(s) had no zone"]
