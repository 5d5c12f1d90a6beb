"""The node affinity a bound in-tree PV has once translated to CSI (upstream's
tryTranslatePVToCSI, csi-translation-lib's translateTopologyFromInTreeToCSI).

When a node's CSINode lists an in-tree plugin as migrated (the
`storage.alpha.kubernetes.io/migrated-plugins` annotation), upstream checks a bound
PV of that plugin with the affinity the CSI driver would give it: the zone key
(`topology.kubernetes.io/zone`, or the beta `failure-domain.beta.kubernetes.io/zone`)
becomes the driver's own topology key, or, with no zone in the affinity, the PV's zone
label (`a__b` for several zones) becomes a requirement on it; a beta region key becomes
`topology.kubernetes.io/region`. Of the plugins upstream migrates, AWS EBS, GCE PD and
Cinder rewrite topology this way; Azure Disk and Portworx keep theirs, so they need
nothing here. Upstream's translation can also fail on a malformed volume ID, which
policyd does not parse: such a PV is checked as translated all the same.
"""

from __future__ import annotations

import copy
from typing import Any

from policyd.model.records import Node
from policyd.model.storage import StorageObjects
from policyd.plugins.helper.volumes import (
    VolumeNodeAffinity,
    VolumeObjectError,
    compile_volume_node_affinity,
    volume_fits_node,
)
from policyd.plugins.volumebinding.objects import metadata, name_of, spec

MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
MULTI_ZONE_DELIMITER = "__"

# PV source field -> (in-tree plugin name, the CSI driver's zone key)
_TOPOLOGY_MIGRATED = {
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "topology.ebs.csi.aws.com/zone"),
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "topology.gke.io/zone"),
    "cinder": ("kubernetes.io/cinder", "topology.cinder.csi.openstack.org/zone"),
}


def bound_volume_fits_node(storage: StorageObjects, pv: dict[str, Any], node: Node) -> bool:
    """CheckNodeAffinity of the PV as upstream sees it on `node` (translated to CSI
    when the node's CSINode says its plugin is migrated). Raises VolumeObjectError."""
    plugin = _migrated_plugin(pv)
    if plugin is None or not _migrated_on_node(storage, plugin[0], node.name):
        return volume_fits_node(storage, pv, node)
    selector = storage.decoded(pv, "volumebinding/csiAffinity", _translated_affinity)
    if isinstance(selector, VolumeObjectError):
        raise selector
    return selector is None or selector.matches(node.labels)


def _migrated_plugin(pv: dict[str, Any]) -> tuple[str, str] | None:
    s = spec(pv)
    for source, plugin in _TOPOLOGY_MIGRATED.items():
        if s.get(source) is not None:
            return plugin
    return None


def _migrated_on_node(storage: StorageObjects, plugin: str, node_name: str) -> bool:
    csi_node = storage.csi_nodes.get(node_name)
    if csi_node is None:
        return False
    annotations = metadata(csi_node).get("annotations")
    value = annotations.get(MIGRATED_PLUGINS_ANNOTATION) if isinstance(annotations, dict) \
        else None
    return isinstance(value, str) and plugin in value.split(",")


def _translated_affinity(pv: dict[str, Any]
                         ) -> VolumeNodeAffinity | VolumeObjectError | None:
    plugin = _migrated_plugin(pv)
    assert plugin is not None
    csi_key = plugin[1]
    affinity = spec(pv).get("nodeAffinity")
    required = affinity.get("required") if isinstance(affinity, dict) else None
    terms = copy.deepcopy(required.get("nodeSelectorTerms")) \
        if isinstance(required, dict) else None
    terms = terms if isinstance(terms, list) else []
    labels = metadata(pv).get("labels")
    labels = labels if isinstance(labels, dict) else {}
    zone_key, region_key = _topology_labels(terms, labels)
    if _values(terms, zone_key):
        _replace_key(terms, zone_key, csi_key)
    elif zone_key in labels:
        zones = sorted({z.strip() for z in str(labels[zone_key]).split(MULTI_ZONE_DELIMITER)
                        if z.strip()})
        if zones:
            terms = terms or [{}]
            for term in terms:
                if isinstance(term, dict):
                    exprs = list(term.get("matchExpressions") or [])
                    exprs.append({"key": csi_key, "operator": "In", "values": zones})
                    term["matchExpressions"] = exprs
    if region_key == BETA_REGION and _values(terms, BETA_REGION):
        _replace_key(terms, BETA_REGION, REGION)
    if not terms:
        return None
    return compile_volume_node_affinity(terms, name_of(pv))


def _expressions(terms: list[Any]) -> list[dict[str, Any]]:
    return [e for t in terms if isinstance(t, dict)
            for e in (t.get("matchExpressions") or []) if isinstance(e, dict)]


def _topology_labels(terms: list[Any], labels: dict[str, Any]) -> tuple[str, str]:
    """getTopologyLabel: GA or beta zone/region keys, by what the affinity, then the
    labels, use (GA when neither says)."""
    keys = {e.get("key") for e in _expressions(terms)}
    if ZONE in keys:
        return ZONE, REGION
    if BETA_ZONE in keys:
        return BETA_ZONE, BETA_REGION
    if ZONE in labels:
        return ZONE, REGION
    if BETA_ZONE in labels:
        return BETA_ZONE, BETA_REGION
    return ZONE, REGION


def _values(terms: list[Any], key: str) -> list[str]:
    return sorted({str(v) for e in _expressions(terms) if e.get("key") == key
                   for v in (e.get("values") or [])})


def _replace_key(terms: list[Any], old: str, new: str) -> None:
    for e in _expressions(terms):
        if e.get("key") == old:
            e["key"] = new
