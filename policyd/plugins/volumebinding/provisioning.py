"""Whether the claims no existing PV serves can be provisioned for a node: upstream's
checkVolumeProvisions and hasEnoughCapacity.

A claim's StorageClass must name a provisioner (not `kubernetes.io/no-provisioner`),
its allowedTopologies must admit the node's labels, and when the provisioner is a
CSIDriver with `storageCapacity: true`, some CSIStorageCapacity of that class that the
node can reach (its nodeTopology selects the node's labels) must hold the claim's
request (maximumVolumeSize if set, else capacity).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policyd.model.records import Node
from policyd.model.selectors import LabelSelector, SelectorError, compile_label_selector
from policyd.model.storage import StorageObjects
from policyd.plugins.volumebinding.objects import (
    NOT_SUPPORTED_PROVISIONER,
    ClaimInfo,
    capacity_limit,
)


class ProvisioningError(Exception):
    """Upstream's error (not a rejection) for a claim it cannot even judge."""


@dataclass(frozen=True, slots=True)
class Provisioning:
    """checkVolumeProvisions' answer: (provisionSatisfied, sufficientStorage) and the
    CSIStorageCapacity each provisioned claim counts on (None: not tracked)."""

    satisfied: bool
    sufficient_storage: bool
    capacities: tuple[dict[str, Any] | None, ...] = ()


def check_volume_provisions(storage: StorageObjects, claims: Sequence[ClaimInfo],
                            node: Node) -> Provisioning:
    """Stops at the first claim that cannot be provisioned, as upstream does. Raises
    ProvisioningError for a claim without a class or whose class is gone."""
    capacities = []
    for claim in claims:
        class_name = claim.storage_class
        if not class_name:
            raise ProvisioningError(f'no class for claim "{claim.key}"')
        storage_class = storage.storage_classes.get(class_name)
        if storage_class is None:
            raise ProvisioningError(f'failed to find storage class "{class_name}"')
        provisioner = str(storage_class.get("provisioner") or "")
        if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
            return Provisioning(False, True)
        if not matches_allowed_topologies(storage_class.get("allowedTopologies"),
                                          node.labels):
            return Provisioning(False, True)
        enough, capacity = has_enough_capacity(storage, provisioner, claim, class_name,
                                               node)
        if not enough:
            return Provisioning(True, False)
        capacities.append(capacity)
    return Provisioning(True, True, tuple(capacities))


def matches_allowed_topologies(terms: Any, labels: Mapping[str, str]) -> bool:
    """MatchTopologySelectorTerms: no terms admit every node; a term admits a node that
    has, for each of its expressions, the key with one of the values; an empty term
    admits none."""
    if not isinstance(terms, list) or not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") if isinstance(term, dict) else None
        if not isinstance(exprs, list) or not exprs:
            continue
        if all(isinstance(e, dict) and labels.get(str(e.get("key"))) in
               (e.get("values") or ()) for e in exprs):
            return True
    return False


def has_enough_capacity(storage: StorageObjects, provisioner: str, claim: ClaimInfo,
                        class_name: str, node: Node
                        ) -> tuple[bool, dict[str, Any] | None]:
    """Whether a CSIStorageCapacity the node reaches holds the claim, and which."""
    if claim.request_bytes is None:
        return True, None  # nothing asked, nothing to check
    driver = storage.csi_drivers.get(provisioner)
    if driver is None:
        return True, None  # not a CSI driver: capacity is not tracked
    driver_spec = driver.get("spec")
    if not isinstance(driver_spec, dict) or driver_spec.get("storageCapacity") is not True:
        return True, None
    # Upstream takes the first match in lister order (arbitrary); by key here.
    for key in sorted(storage.capacities):
        capacity = storage.capacities[key]
        if capacity.get("storageClassName") != class_name:
            continue
        limit = capacity_limit(capacity)
        if limit is not None and limit >= claim.request_bytes \
                and node_has_access(storage, capacity, node):
            return True, capacity
    return False, None


def node_has_access(storage: StorageObjects, capacity: dict[str, Any], node: Node) -> bool:
    """The capacity's nodeTopology selects the node's labels (absent: no node)."""
    selector = storage.decoded(capacity, "volumebinding/nodeTopology", _node_topology)
    return selector is not None and selector.matches(node.labels)


def _node_topology(capacity: dict[str, Any]) -> LabelSelector | None:
    topology = capacity.get("nodeTopology")
    if topology is None:
        return None
    try:
        return compile_label_selector(topology)
    except SelectorError:
        return None  # upstream logs the error and counts the pool unreachable
