"""Bound in-tree PVs are checked with their CSI topology on nodes whose CSINode says
the plugin is migrated (upstream's TestFindPodVolumesWithCSIMigration, our data)."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework.status import Code, Status
from policyd.plugins.volumebinding.binder import ERR_REASON_NODE_CONFLICT
from policyd.plugins.volumebinding.csi_translation import (
    MIGRATED_PLUGINS_ANNOTATION,
    bound_volume_fits_node,
)
from policyd.plugins.volumebinding.plugin import new
from tests.builders import make_node, make_pod
from tests.unit.plugins.volumebinding.storage import cluster, cycle, info, pv, pvc

GKE_ZONE = "topology.gke.io/zone"


def gce_pv(labels: dict[str, str] | None = None,
           affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    volume = pv("v1", phase="Bound", labels=labels, affinity=affinity)
    volume["spec"]["gcePersistentDisk"] = {"pdName": "disk", "fsType": "ext4"}
    return volume


def csi_node(plugins: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": "n1", "annotations": {MIGRATED_PLUGINS_ANNOTATION: plugins}}}


def verdict(volume: dict[str, Any], node_zone: str, *extra: dict[str, Any]) -> Status | None:
    n1 = make_node("n1").labels({GKE_ZONE: node_zone}).obj()
    state = cluster(n1, objects=(pvc("a", volume="v1", bound=True), volume, *extra))
    cs = cycle(state)
    pod = make_pod("p").pvc("a").obj()
    plugin = new()
    plugin.pre_filter(cs, pod, cs.all_nodes)
    return plugin.filter(cs, pod, info(state, "n1"))


CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_NODE_CONFLICT,))
ZONE_LABEL = {"topology.kubernetes.io/zone": "us-east-1"}


def test_migrated_pv_takes_its_zone_label_as_csi_topology() -> None:
    assert verdict(gce_pv(ZONE_LABEL), "us-east-1", csi_node("kubernetes.io/gce-pd")) is None
    assert verdict(gce_pv(ZONE_LABEL), "us-east-2",
                   csi_node("kubernetes.io/aws-ebs,kubernetes.io/gce-pd")) == CONFLICT


@pytest.mark.parametrize("extra", [(), (csi_node(""),), (csi_node("kubernetes.io/aws-ebs"),)])
def test_not_migrated_on_the_node_means_untranslated(extra: tuple[dict[str, Any], ...]
                                                     ) -> None:
    # No affinity at all before translation: any node fits.
    assert verdict(gce_pv(ZONE_LABEL), "us-east-2", *extra) is None


def test_zone_in_the_affinity_is_renamed() -> None:
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In",
         "values": ["us-east-1"]}]}]}}
    migrated = csi_node("kubernetes.io/gce-pd")
    assert verdict(gce_pv(affinity=affinity), "us-east-1", migrated) is None
    assert verdict(gce_pv(affinity=affinity), "us-east-3", migrated) == CONFLICT


def test_regional_disk_label_admits_each_zone() -> None:
    volume = gce_pv({"topology.kubernetes.io/zone": "us-east-1__us-east-2"})
    migrated = csi_node("kubernetes.io/gce-pd")
    assert verdict(volume, "us-east-2", migrated) is None
    assert verdict(volume, "us-east-3", migrated) == CONFLICT


def test_csinode_marking_the_plugin_migrated_later_changes_the_answer() -> None:
    # The translated affinity is kept per PV version; whether it applies is read from
    # the node's CSINode at each check.
    n1 = make_node("n1").labels({GKE_ZONE: "us-east-2"}).obj()
    volume = gce_pv(ZONE_LABEL)
    state = cluster(n1, objects=(volume,))
    assert bound_volume_fits_node(state.storage, volume, n1)
    state.storage.upsert("CSINode", csi_node("kubernetes.io/gce-pd"))
    assert not bound_volume_fits_node(state.storage, volume, n1)
    state.storage.upsert("CSINode", csi_node(""))
    assert bound_volume_fits_node(state.storage, volume, n1)


def test_translated_affinity_skips_match_fields_too() -> None:
    # Translation adds the zone to every term; a term's matchFields still count for
    # nothing on the label-only node (issue 33), translated or not.
    by_name = {"required": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["elsewhere"]}]}]}}
    migrated = csi_node("kubernetes.io/gce-pd")
    assert verdict(gce_pv(ZONE_LABEL, by_name), "us-east-1", migrated) is None
    assert verdict(gce_pv(ZONE_LABEL, by_name), "us-east-2", migrated) == CONFLICT
    assert verdict(gce_pv(ZONE_LABEL, by_name), "us-east-2") is None
