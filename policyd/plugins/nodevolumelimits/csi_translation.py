"""In-tree volumes as CSI volumes, for counting them against CSI limits: what
NodeVolumeLimits needs of csi-translation-lib v0.36 (the driver an in-tree plugin
migrated to, and the volume handle its translation produces) and of the plugin's own
isCSIMigrationOn.

csi-translation-lib knows seven in-tree plugins. In v1.36 the scheduler treats the
migration of five of them as on, on every node that has a CSINode: AWS EBS, GCE PD,
Azure Disk, OpenStack Cinder and Portworx. The CSINode's
`storage.kubernetes.io/migrated-plugins` annotation is not read any more (the
feature gates it stood for are locked on). Azure File and vSphere are translatable
(so a pod with such an inline volume is not skipped in PreFilter) but never counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

MULTI_ZONE_DELIMITER = "__"
UNSPECIFIED = "UNSPECIFIED"
ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
ZONE = "topology.kubernetes.io/zone"


class TranslationError(ValueError):
    """An in-tree volume the translation refuses (csi-translation-lib's error text)."""


def _text(source: Mapping[str, Any], field: str) -> str:
    value = source.get(field)
    return value if isinstance(value, str) else ""


def ebs_volume_id(kubernetes_id: str) -> str:
    """KubernetesVolumeIDToEBSVolumeID: `aws://<zone>/vol-...` to `vol-...`; a bare ID
    is taken as it is."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id
    try:
        path = unquote(urlsplit(kubernetes_id).path)
    except ValueError as exc:
        raise TranslationError(f"Invalid disk name ({kubernetes_id}): {exc}") from exc
    aws_id = path.strip("/")
    if not aws_id.startswith("vol-") or "/" in aws_id:
        raise TranslationError(f"Invalid format for AWS volume ({kubernetes_id})")
    return aws_id


def _aws_handle(source: Mapping[str, Any]) -> str:
    try:
        return ebs_volume_id(_text(source, "volumeID"))
    except TranslationError as exc:
        raise TranslationError(
            f"failed to translate Kubernetes ID to EBS Volume ID {exc}") from exc


def _azure_disk_handle(source: Mapping[str, Any]) -> str:
    kind = source.get("kind")
    if kind is not None and str(kind).lower() != "managed":
        raise TranslationError(f"kind({kind}) is not supported in csi migration")
    return _text(source, "diskURI")


def _gce_inline_handle(source: Mapping[str, Any]) -> str:
    return f"projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{_text(source, 'pdName')}"


def _gce_region(zones: list[str]) -> str:
    regions = set()
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            raise TranslationError("zone in unexpected format, expected: "
                                   f"{{locale}}-{{region}}-{{zone}}, got: {zone}")
        regions.add("-".join(parts[:2]))
    if len(regions) != 1:
        raise TranslationError(f"multiple or no regions gotten from zones, got: {regions}")
    return regions.pop()


def _gce_pv_handle(source: Mapping[str, Any], labels: Mapping[str, Any]) -> str:
    """The PV form names the zone (or region, for a regional disk) from the PV's zone
    label, where the inline form cannot."""
    disk = _text(source, "pdName")
    label = labels.get(ZONE_BETA) or labels.get(ZONE) or ""
    zones = str(label).split(MULTI_ZONE_DELIMITER)
    if len(zones) == 1 and zones[0]:
        return f"projects/{UNSPECIFIED}/zones/{zones[0]}/disks/{disk}"
    if len(zones) > 1:
        try:
            region = _gce_region(zones)
        except TranslationError as exc:
            raise TranslationError(f"failed to get region from zones: {exc}") from exc
        return f"projects/{UNSPECIFIED}/regions/{region}/disks/{disk}"
    return _gce_inline_handle(source)


@dataclass(frozen=True, slots=True)
class InTreePlugin:
    source: str  # the volume source's field in a pod volume or a PV spec
    plugin: str  # the in-tree plugin's name (a StorageClass provisioner)
    driver: str  # the CSI driver it migrated to
    counted: bool  # isCSIMigrationOn (given a CSINode)
    inline_handle: Callable[[Mapping[str, Any]], str]
    pv_handle: Callable[[Mapping[str, Any], Mapping[str, Any]], str]


def _volume_id(source: Mapping[str, Any]) -> str:
    return _text(source, "volumeID")


IN_TREE_PLUGINS = (
    InTreePlugin("awsElasticBlockStore", "kubernetes.io/aws-ebs", "ebs.csi.aws.com", True,
                 _aws_handle, lambda s, _: _aws_handle(s)),
    InTreePlugin("gcePersistentDisk", "kubernetes.io/gce-pd", "pd.csi.storage.gke.io", True,
                 _gce_inline_handle, _gce_pv_handle),
    InTreePlugin("azureDisk", "kubernetes.io/azure-disk", "disk.csi.azure.com", True,
                 _azure_disk_handle, lambda s, _: _azure_disk_handle(s)),
    InTreePlugin("cinder", "kubernetes.io/cinder", "cinder.csi.openstack.org", True,
                 _volume_id, lambda s, _: _volume_id(s)),
    InTreePlugin("portworxVolume", "kubernetes.io/portworx-volume", "pxd.portworx.com", True,
                 _volume_id, lambda s, _: _volume_id(s)),
    # Translatable, never counted: only their driver names matter (queueing hints).
    InTreePlugin("azureFile", "kubernetes.io/azure-file", "file.csi.azure.com", False,
                 lambda s: "", lambda s, _: ""),
    InTreePlugin("vsphereVolume", "kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com",
                 False, lambda s: "", lambda s, _: ""),
)
BY_PROVISIONER = {p.plugin: p for p in IN_TREE_PLUGINS}


def in_tree_plugin(volume_or_spec: Mapping[str, Any]) -> InTreePlugin | None:
    """The migratable in-tree plugin of a pod volume or a PV spec (IsInlineMigratable,
    IsPVMigratable), or None."""
    for plugin in IN_TREE_PLUGINS:
        if volume_or_spec.get(plugin.source) is not None:
            return plugin
    return None


def source_of(plugin: InTreePlugin, volume_or_spec: Mapping[str, Any]) -> Mapping[str, Any]:
    source = volume_or_spec.get(plugin.source)
    # The API server checks the source's shape; a malformed one reads as empty.
    return source if isinstance(source, dict) else {}
