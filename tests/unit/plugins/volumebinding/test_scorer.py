"""VolumeBinding's Score under StorageCapacityScoring (alpha, off in v1.36): upstream's
volume_binding.go PreScore/Score and scorer.go, with the gate on and off."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.features import DEFAULTS, FeatureGates, with_settings
from policyd.framework.status import Code
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.plugins.volumebinding.plugin import VolumeBinding, new
from tests.builders import make_pod
from tests.unit.plugins.volumebinding.storage import (
    capacity,
    cluster,
    csi_driver,
    cycle,
    node,
    pv,
    pvc,
    storage_class,
)

SCORING = with_settings([("StorageCapacityScoring", True)])
DRIVER = "csi.example.com"


def scores(state: ClusterState, pod: Pod, plugin: VolumeBinding) -> dict[str, int] | None:
    """PreFilter, Filter, PreScore, Score on every feasible node; None when PreScore
    says Skip (Score does not run)."""
    cs = cycle(state)
    plugin.pre_filter(cs, pod, cs.all_nodes)
    feasible = [n for n in cs.all_nodes if plugin.filter(cs, pod, n) is None]
    status = plugin.pre_score(cs, pod, feasible)
    if status is not None:
        assert status.code == Code.SKIP
        return None
    return {n.name: plugin.score(cs, pod, n) for n in feasible}


def provisioned(*objects: dict[str, Any], classes: tuple[str, ...] = ("wait",)
                ) -> ClusterState:
    """Nodes n1 (zone a) and n2 (zone b); CSI classes whose driver tracks capacity."""
    return cluster(node("n1", "a"), node("n2", "b"),
                   objects=(csi_driver(DRIVER, True), *objects),
                   classes=tuple(storage_class(c, provisioner=DRIVER) for c in classes))


def pod_with(*claims: str) -> Pod:
    b = make_pod("p")
    for claim in claims:
        b.pvc(claim)
    return b.obj()


# (id, cluster, pod, scores with the gate on)
CASES: list[tuple[str, ClusterState, Pod, dict[str, int]]] = [
    ("provisioned: the emptier pool scores higher (default shape 100 - utilization)",
     provisioned(pvc("a", size="10Gi"), capacity("ca", "wait", "a", "100Gi"),
                 capacity("cb", "wait", "b", "20Gi")),
     pod_with("a"), {"n1": 90, "n2": 50}),
    ("two claims of one class share the pool: its capacity is not summed",
     provisioned(pvc("a", size="50Gi"), pvc("b", size="50Gi"),
                 capacity("ca", "wait", "a", "100Gi"), capacity("cb", "wait", "b", "200Gi")),
     pod_with("a", "b"), {"n1": 0, "n2": 50}),
    ("classes are averaged, rounded half away from zero",
     provisioned(pvc("a", size="50Gi"), pvc("b", sc="slow", size="55Gi"),
                 capacity("ca", "wait", "a", "100Gi"), capacity("sa", "slow", "a", "100Gi"),
                 capacity("cb", "wait", "b", "100Gi"), capacity("sb", "slow", "b", "110Gi"),
                 classes=("wait", "slow")),
     pod_with("a", "b"), {"n1": 48, "n2": 50}),
    ("the capacity object's maximumVolumeSize admits, its capacity scores",
     provisioned(pvc("a", size="10Gi"), capacity("ca", "wait", "a", "40Gi", maximum="10Gi"),
                 capacity("cb", "wait", "b", "20Gi")),
     pod_with("a"), {"n1": 75, "n2": 50}),
    ("a capacity object with maximumVolumeSize only counts capacity 0: shape(100)",
     provisioned(pvc("a", size="10Gi"), capacity("ca", "wait", "a", None, maximum="20Gi"),
                 capacity("cb", "wait", "b", "20Gi")),
     pod_with("a"), {"n1": 0, "n2": 50}),
    ("capacity not tracked by the driver: no class, score 0",
     cluster(node("n1", "a"), objects=(csi_driver(DRIVER, False), pvc("a", size="10Gi")),
             classes=(storage_class("wait", provisioner=DRIVER),)),
     pod_with("a"), {"n1": 0}),
    ("static bindings: the claim's request over the chosen PV's capacity",
     cluster(node("n1", "a"), node("n2", "b"),
             objects=(pvc("a", size="1Gi"), pv("big", "4Gi", node="n1"),
                      pv("small", "2Gi", node="n2"))),
     pod_with("a"), {"n1": 75, "n2": 50}),
    ("a pod without claims: every node 0, still scored",
     provisioned(), make_pod("p").obj(), {"n1": 0, "n2": 0}),
]


@pytest.mark.parametrize(("state", "pod", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_capacity_scores_with_the_gate_on(state: ClusterState, pod: Pod,
                                          want: dict[str, int]) -> None:
    assert scores(state, pod, new(features=SCORING)) == want


@pytest.mark.parametrize(("state", "pod"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_no_score_with_the_gate_off(state: ClusterState, pod: Pod) -> None:
    assert scores(state, pod, new()) is None
    assert scores(state, pod, new(features=DEFAULTS)) is None


def test_configured_shape_scales_scores_by_ten() -> None:
    # Most allocated first: a shape rising from (0, 0) to (100, 10).
    state, pod, _ = CASES[0][1:]
    plugin = new({"shape": [{"utilization": 0, "score": 0},
                            {"utilization": 100, "score": 10}]}, features=SCORING)
    assert scores(state, pod, plugin) == {"n1": 10, "n2": 50}


def test_features_reach_the_plugin_only_through_the_parameter() -> None:
    gates: FeatureGates = with_settings([("StorageCapacityScoring", False)], SCORING)
    assert not new(features=gates).capacity_scoring
