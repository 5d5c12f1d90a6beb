"""Each claim's verdict per node, which explain shows beside the node's reasons."""

from __future__ import annotations

from policyd.framework.interfaces import Verdict
from policyd.plugins.volumebinding.plugin import new
from tests.builders import make_pod
from tests.unit.plugins.volumebinding.storage import (
    ZONE,
    cluster,
    cycle,
    info,
    node,
    pv,
    pvc,
    storage_class,
)


def test_verdicts_name_the_claim_at_fault() -> None:
    allowed = [{"matchLabelExpressions": [{"key": ZONE, "values": ["a"]}]}]
    state = cluster(node("n1", "a"), node("n2", "b"), objects=(
        pvc("bound", volume="v0", bound=True), pv("v0", node="n1", phase="Bound"),
        pvc("local", "wait"), pv("v1", node="n1"),
        pvc("dyn", "csi", size="5Gi")),
        classes=(storage_class("wait"),
                 storage_class("csi", provisioner="csi.example.com", allowed=allowed)))
    plugin = new()
    cs = cycle(state)
    pod = make_pod("p").pvc("bound").pvc("local").pvc("dyn").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    n1, n2 = info(state, "n1"), info(state, "n2")
    assert plugin.filter(cs, pod, n1) is None
    assert plugin.filter(cs, pod, n2) is not None
    assert plugin.verdicts(cs, pod, n1) == (
        Verdict("default/bound", True, "is bound to PersistentVolume v0"),
        Verdict("default/local", True, "binds PersistentVolume v1"),
        Verdict("default/dyn", True, "is provisioned on this node (StorageClass csi)"),
    )
    assert plugin.verdicts(cs, pod, n2) == (
        Verdict("default/bound", False, "is bound to PersistentVolume v0, whose node "
                                             "affinity does not match the node"),
        Verdict("default/local", False, "no available PersistentVolume fits the claim "
                                             "and the node, and StorageClass wait does not "
                                             "provision"),
        Verdict("default/dyn", False, "no available PersistentVolume fits the claim and "
                                           "the node, and the node is outside StorageClass "
                                           "csi's allowedTopologies"),
    )


def test_no_verdicts_for_a_pod_without_claims() -> None:
    state = cluster(node("n1"))
    cs = cycle(state)
    plugin = new()
    pod = make_pod("p").obj()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    assert plugin.verdicts(cs, pod, info(state, "n1")) == ()
