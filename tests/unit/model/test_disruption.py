"""PodDisruptionBudgets and PriorityClasses on the cluster state: what preemption reads
from a budget, decoded once per stored version, and their place in snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policyd.errors import InputFileError
from policyd.model.cluster import ClusterState
from policyd.model.cluster_files import load_snapshot
from policyd.model.disruption import (
    POD_DISRUPTION_BUDGET,
    PRIORITY_CLASS,
    DisruptionBudgets,
    decode_budget,
    disruption_key,
)
from tests.builders import make_pod


def pdb(name: str, selector: Any, allowed: Any = 1, namespace: str = "shop",
        disrupted: dict[str, str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if disrupted is not None:
        status["disruptedPods"] = disrupted
    return {"apiVersion": "policy/v1", "kind": POD_DISRUPTION_BUDGET,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector, "minAvailable": 1}, "status": status}


def priority_class(name: str, value: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": PRIORITY_CLASS,
            "metadata": {"name": name}, "value": value}


WEB = make_pod("web-1", "shop").labels(app="web").obj()


@pytest.mark.parametrize(("selector", "pod_labels", "namespace", "covered"), [
    ({"matchLabels": {"app": "web"}}, {"app": "web"}, "shop", True),
    ({"matchLabels": {"app": "web"}}, {"app": "db"}, "shop", False),
    ({"matchLabels": {"app": "web"}}, {"app": "web"}, "other", False),  # other namespace
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": "x"}, "shop", True),
    # A nil, empty or invalid selector protects nothing (upstream skips the budget).
    (None, {"app": "web"}, "shop", False),
    ({}, {"app": "web"}, "shop", False),
    ({"matchExpressions": [{"key": "app", "operator": "Near"}]}, {"app": "web"}, "shop", False),
    # A pod without labels matches no budget, even a NotIn one.
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]}, {},
     "shop", False),
])
def test_which_pods_a_budget_covers(selector: Any, pod_labels: dict[str, str],
                                    namespace: str, covered: bool) -> None:
    budget = decode_budget(pdb("b", selector))
    pod = make_pod("p", namespace).labels(pod_labels).obj()
    assert budget.covers(pod) is covered


def test_status_fields_are_read_and_malformed_ones_allow_nothing() -> None:
    budget = decode_budget(pdb("b", {"matchLabels": {"app": "web"}}, allowed=3,
                               disrupted={"web-1": "2026-01-01T00:00:00Z"}))
    assert (budget.namespace, budget.name) == ("shop", "b")
    assert budget.disruptions_allowed == 3
    assert budget.disrupted_pods == frozenset({"web-1"})
    for bad in ("3", None, True):
        assert decode_budget(pdb("b", {}, allowed=bad)).disruptions_allowed == 0
    no_status = pdb("b", {})
    del no_status["status"]
    assert decode_budget(no_status).disruptions_allowed == 0


def test_container_keeps_raw_objects_and_decodes_each_version_once() -> None:
    objects = DisruptionBudgets()
    first = pdb("b", {"matchLabels": {"app": "web"}}, allowed=1)
    objects.upsert(POD_DISRUPTION_BUDGET, first)
    objects.upsert(PRIORITY_CLASS, priority_class("high", 1000))
    objects.upsert(PRIORITY_CLASS, priority_class("odd", "1000"))
    assert objects.pdbs == {"shop/b": first}
    [budget] = objects.budgets()
    assert objects.budgets()[0] is budget  # memoized for the same stored object
    generation = objects.generation
    objects.upsert(POD_DISRUPTION_BUDGET, pdb("b", {"matchLabels": {"app": "web"}}, allowed=0))
    assert objects.generation > generation
    assert [b.disruptions_allowed for b in objects.budgets()] == [0]
    assert objects.priority_value("high") == 1000
    assert objects.priority_value("odd") is None
    assert objects.priority_value("missing") is None
    objects.delete(POD_DISRUPTION_BUDGET, "shop/b")
    objects.delete(POD_DISRUPTION_BUDGET, "shop/b")  # gone already: nothing happens
    assert objects.budgets() == []


def test_budgets_come_in_key_order() -> None:
    objects = DisruptionBudgets()
    for name, ns in (("z", "a"), ("a", "b"), ("m", "a")):
        objects.upsert(POD_DISRUPTION_BUDGET, pdb(name, {}, namespace=ns))
    assert [(b.namespace, b.name) for b in objects.budgets()] == [
        ("a", "m"), ("a", "z"), ("b", "a")]


def test_keys() -> None:
    assert disruption_key(POD_DISRUPTION_BUDGET, pdb("b", {}, namespace="x")) == "x/b"
    assert disruption_key(PRIORITY_CLASS, priority_class("high", 1)) == "high"


def test_cluster_state_starts_with_none() -> None:
    cluster = ClusterState()
    assert cluster.disruption_budgets.budgets() == []
    assert cluster.disruption_budgets.priority_classes == {}


SNAPSHOT = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
status: {disruptionsAllowed: 1, currentHealthy: 3, desiredHealthy: 2, expectedPods: 3}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
preemptionPolicy: Never
description: for tests
"""


def test_snapshot_loads_budgets_and_priority_classes(tmp_path: Path) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(SNAPSHOT)
    cluster = load_snapshot(path).cluster()
    [budget] = cluster.disruption_budgets.budgets()
    assert (budget.name, budget.disruptions_allowed) == ("web", 1)
    assert budget.covers(WEB)
    assert cluster.disruption_budgets.priority_value("high") == 1000


@pytest.mark.parametrize(("content", "message"), [
    # Strict fields, as the API server decodes them.
    (SNAPSHOT.replace("minAvailable: 2", "minAvailabel: 2"), "minAvailabel"),
    (SNAPSHOT.replace("description:", "descripton:"), "descripton"),
    (SNAPSHOT + "---\n" + SNAPSHOT.split("---\n")[1], "PriorityClass high is defined twice"),
    ("kind: PodDisruptionBudget\nmetadata: {namespace: shop}\n",
     "PodDisruptionBudget needs metadata.name"),
    ("kind: PriorityClass\nmetadata: [x]\nvalue: 1\n", "metadata"),
])
def test_bad_objects_name_file_and_problem(tmp_path: Path, content: str, message: str
                                           ) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputFileError) as e:
        load_snapshot(path)
    assert message in str(e.value)
    assert str(path) in str(e.value)


def test_pods_only_files_refuse_them(tmp_path: Path) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(SNAPSHOT)
    with pytest.raises(InputFileError, match="unexpected kind 'PodDisruptionBudget'"):
        load_snapshot(path, pods_only=True)
