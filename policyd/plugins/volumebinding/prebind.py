"""PreBind's half of volume binding: upstream's BindPodVolumes (bindAPIUpdate, then
checkBindings polled every second until `bindTimeoutSeconds`).

PreBind runs in the binder, outside the daemon's state lock: every read of the
cluster state goes through `handle.locked`, every write through `handle.update`.
The PV controller does the actual binding; this only starts it (a PV's claimRef, a
claim's selected-node annotation) and waits until every claim is bound as upstream
checks it: on the API server's objects (not the assumed ones), the claim fully bound
(`pv.kubernetes.io/bind-completed`), the PV still fitting the node, and a claim to
provision still annotated with this node (a provisioner removes the annotation to
say it failed and the pod must be scheduled again).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from policyd.framework.interfaces import BindingApiError, BindingHandle
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.model.storage import StaleObjectError, StorageObjects
from policyd.plugins.helper.volumes import VolumeObjectError
from policyd.plugins.volumebinding.binder import (
    DynamicProvision,
    PodVolumes,
    StaticBinding,
    revert_assumed,
)
from policyd.plugins.volumebinding.csi_translation import bound_volume_fits_node
from policyd.plugins.volumebinding.objects import (
    ANN_SELECTED_NODE,
    claim_key,
    claim_volume,
    is_claim_fully_bound,
    metadata,
    name_of,
    resource_version,
    spec,
)

POLL_SECONDS = 1.0  # upstream polls checkBindings every second

# What upstream's wait gives back when its context ends (Go's context errors).
DEADLINE_EXCEEDED = "context deadline exceeded"
CANCELED = "context canceled"


class _BindingFailed(Exception):
    """checkBindings' error: binding failed and the pod must be scheduled again."""


def bind_pod_volumes(handle: BindingHandle, pod: Pod, node_name: str, volumes: PodVolumes,
                     timeout_seconds: float) -> str | None:
    """BindPodVolumes: None when every claim is bound, else upstream's error text."""
    problem = _bind_api_update(handle, volumes)
    if problem is not None:
        return problem
    deadline = handle.now() + timeout_seconds
    while True:
        remaining = deadline - handle.now()
        if remaining <= 0:
            return f"binding volumes: {DEADLINE_EXCEEDED}"
        if handle.wait(min(POLL_SECONDS, remaining)):
            return f"binding volumes: {CANCELED}"
        if handle.now() >= deadline:
            return f"binding volumes: {DEADLINE_EXCEEDED}"
        check = _checker(pod, node_name, volumes)
        try:
            if handle.locked(check):
                return None
        except _BindingFailed as exc:
            return f"binding volumes: {exc}"


def _bind_api_update(handle: BindingHandle, volumes: PodVolumes) -> str | None:
    """bindAPIUpdate: write each chosen PV's claimRef, then each claim's selected
    node. The objects the server returns replace the assumed ones (and are assumed in
    turn, so the next cycle sees them before the informer does); on a failed write
    the assumptions not yet written are undone, and the API server's message is the
    error. Nothing already written is rolled back, as upstream: the PV controller
    settles it."""
    bindings, provisions = volumes.static_bindings, volumes.dynamic_provisions
    done_bindings = done_provisions = 0
    try:
        for binding in bindings:
            stored = handle.update(binding.pv)
            binding.pv = stored
            handle.locked(_assumer(stored, is_pv=True))
            done_bindings += 1
        for provision in provisions:
            stored = handle.update(provision.pvc)
            provision.pvc = stored
            handle.locked(_assumer(stored, is_pv=False))
            done_provisions += 1
    except BindingApiError as exc:
        undo = PodVolumes(list(bindings[done_bindings:]), list(provisions[done_provisions:]))
        handle.locked(lambda cluster: revert_assumed(cluster.storage, undo))
        return str(exc)
    return None


def _assumer(obj: dict[str, Any], *, is_pv: bool) -> Callable[[ClusterState], None]:
    def assume(cluster: ClusterState) -> None:
        cache = cluster.storage.pvs if is_pv else cluster.storage.pvcs
        # StaleObjectError: the informer has shown this write, or a newer one, already.
        with contextlib.suppress(StaleObjectError):
            cache.assume(obj)
    return assume


def _checker(pod: Pod, node_name: str, volumes: PodVolumes
             ) -> Callable[[ClusterState], bool]:
    def check(cluster: ClusterState) -> bool:
        return check_bindings(cluster, pod, node_name, volumes.static_bindings,
                              volumes.dynamic_provisions)
    return check


def check_bindings(cluster: ClusterState, pod: Pod, node_name: str,
                   bindings: list[StaticBinding], provisions: list[DynamicProvision]
                   ) -> bool:
    """checkBindings: True when every claim is fully bound, False to wait longer;
    raises _BindingFailed when binding failed and scheduling must be retried."""
    info = cluster.get(node_name)
    if info is None:
        raise _BindingFailed(f'failed to get node "{node_name}": node "{node_name}" '
                             "not found")
    node = info.node
    if cluster.node_of(pod.uid) is None:
        raise _BindingFailed(f'pod does not exist any more: pod "{pod.name}" not found')
    storage = cluster.storage
    for binding in bindings:
        pv_name = name_of(binding.pv)
        pv = storage.pvs.api_object(pv_name)
        if pv is None:
            raise _BindingFailed(f'failed to check binding: persistentvolumes "{pv_name}" '
                                 "not found")
        pvc_key = claim_key(binding.pvc)
        pvc = storage.pvcs.api_object(pvc_key)
        if pvc is None:
            raise _BindingFailed(f"failed to check binding: persistentvolumeclaims "
                                 f'"{pvc_key}" not found')
        if resource_version(binding.pv) > resource_version(pv):
            return False  # our write has not reached the informer yet
        _check_affinity(storage, pv, node)
        ref = spec(pv).get("claimRef")
        if not isinstance(ref, dict) or not ref.get("uid"):
            raise _BindingFailed(f'ClaimRef got reset for pv "{pv_name}"')
        if not is_claim_fully_bound(pvc):
            return False
    for provision in provisions:
        pvc_key = claim_key(provision.pvc)
        pvc = storage.pvcs.api_object(pvc_key)
        if pvc is None:
            raise _BindingFailed(f"failed to check provisioning pvc: persistentvolumeclaims "
                                 f'"{pvc_key}" not found')
        if resource_version(provision.pvc) > resource_version(pvc):
            return False
        annotations = metadata(pvc).get("annotations")
        if not isinstance(annotations, dict):
            raise _BindingFailed(f'selectedNode annotation reset for PVC "{name_of(pvc)}"')
        if annotations.get(ANN_SELECTED_NODE) != node_name:
            # The provisioner removes the annotation when it fails: reschedule.
            raise _BindingFailed(f'provisioning failed for PVC "{name_of(pvc)}"')
        volume_name = claim_volume(pvc)
        if volume_name:
            pv = storage.pvs.api_object(volume_name)
            if pv is None:
                return False  # not seen yet; a deleted PV unbinds the claim in time
            _check_affinity(storage, pv, node)
        if not is_claim_fully_bound(pvc):
            return False
    return True


def _check_affinity(storage: StorageObjects, pv: dict[str, Any], node: Any) -> None:
    try:
        fits = bound_volume_fits_node(storage, pv, node)
        detail = "no matching NodeSelectorTerms"
    except VolumeObjectError as exc:
        fits, detail = False, str(exc)
    if not fits:
        raise _BindingFailed(f'pv "{name_of(pv)}" node affinity doesn\'t match node '
                             f'"{node.name}": {detail}')
