"""DynamicResources in whole cycles, on both evaluation paths: the FailedScheduling
text kube-scheduler v1.36.3's default profile gives (observed against the real
kube-scheduler on a local API server: `... 2 Insufficient cpu. no new claims to
deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for
scheduling.`, and `... persistentvolumeclaim "data" not found. not found`).

The Framework is built by hand, in the default profile's order (NodeResourcesFit,
VolumeBinding, ..., DynamicResources, then DefaultPreemption), with a stand-in for
DefaultPreemption that answers as upstream's does when preemption cannot help.
"""

from __future__ import annotations

import pytest

from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.framework import CycleState, Status
from policyd.framework.fit_error import Diagnosis
from policyd.framework.interfaces import PostFilterResult
from policyd.framework.runtime import Framework, WeightedScorePlugin
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.plugins.dynamicresources.plugin import new as dynamic_resources
from policyd.plugins.noderesources.fit import new as node_resources_fit
from policyd.plugins.volumebinding.plugin import new as volume_binding
from tests.builders import PodBuilder, make_node, make_pod

NOT_HELPFUL = "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."


class Preemption:
    """Stands in for DefaultPreemption: says it cannot help, and counts its calls."""

    name = "DefaultPreemption"

    def __init__(self) -> None:
        self.calls = 0

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis
                    ) -> tuple[PostFilterResult | None, Status]:
        self.calls += 1
        return None, Status.unschedulable(NOT_HELPFUL)


def _run(pod: PodBuilder, reference: bool, preemption: Preemption | None = None,
         seed: int = 1) -> ScheduleResult:
    fit, volumes, dra = node_resources_fit(None), volume_binding(None), dynamic_resources(None)
    fw = Framework(
        "default-scheduler",
        pre_filter=[fit, volumes, dra],
        filter=[fit, volumes, dra],
        score=[WeightedScorePlugin(fit, 1), WeightedScorePlugin(dra, 2)],
        post_filter=[dra, *([preemption] if preemption is not None else [])],
        reserve=[volumes, dra],
        pre_bind=[volumes, dra],
        seed=seed,
    )
    nodes = [make_node(n).capacity(cpu="2", memory="4Gi", pods="10").obj()
             for n in ("n1", "n2")]
    return schedule_one(fw, pod.obj(), ClusterState(nodes), reference=reference)


@pytest.mark.parametrize("reference", [False, True])
def test_a_pod_without_claims_ends_with_no_new_claims_to_deallocate(reference: bool) -> None:
    preemption = Preemption()
    r = _run(make_pod("big").req(cpu="3"), reference, preemption)
    assert r.node is None and r.post_filter is None
    assert r.message == ("0/2 nodes are available: 2 Insufficient cpu. "
                         f"no new claims to deallocate, {NOT_HELPFUL}")
    assert preemption.calls == 1
    # Alone at PostFilter, its part is the whole tail.
    r = _run(make_pod("big").req(cpu="3"), reference)
    assert r.message == "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate"


@pytest.mark.parametrize("reference", [False, True])
def test_a_pod_whose_claim_is_missing_is_refused_naming_it(reference: bool) -> None:
    preemption = Preemption()
    r = _run(make_pod("gpu-job").resource_claim("gpu", claim="gpu-claim"), reference,
             preemption)
    assert r.node is None and r.unschedulable and r.error is None
    assert r.message == ('0/2 nodes are available: could not find ResourceClaim '
                         f'"default/gpu-claim". no new claims to deallocate, {NOT_HELPFUL}')
    assert r.diagnosis.unschedulable_plugins == {"DynamicResources"}


@pytest.mark.parametrize("reference", [False, True])
def test_after_an_earlier_unresolvable_pre_filter_the_post_filter_errs_as_upstream(
        reference: bool) -> None:
    # VolumeBinding's PreFilter refuses first, so DynamicResources' never runs; upstream's
    # PostFilter then fails to read its state, which stops the PostFilter run.
    preemption = Preemption()
    r = _run(make_pod().pvc("data").resource_claim("gpu", claim="c1"), reference, preemption)
    assert r.message == ('0/2 nodes are available: persistentvolumeclaim "data" not found.'
                         " not found")
    assert preemption.calls == 0
    assert r.node is None and r.error is None  # still unschedulable, not a failed cycle


@pytest.mark.parametrize("reference", [False, True])
def test_a_pod_that_fits_is_placed_as_without_the_plugin(reference: bool) -> None:
    for seed in range(4):
        with_dra = _run(make_pod().req(cpu="1"), reference, seed=seed)
        fit = node_resources_fit(None)
        fw = Framework("p", pre_filter=[fit], filter=[fit],
                       score=[WeightedScorePlugin(fit, 1)], seed=seed)
        cluster = ClusterState([make_node(n).capacity(cpu="2", memory="4Gi", pods="10").obj()
                                for n in ("n1", "n2")])
        without = schedule_one(fw, make_pod().req(cpu="1").obj(), cluster,
                               reference=reference)
        assert with_dra.node == without.node is not None
    if reference:
        assert with_dra.scores is not None
        [dra] = [p for p in with_dra.scores.plugins if p.plugin == "DynamicResources"]
        assert dra.weight == 2 and dra.normalized == [0, 0]
