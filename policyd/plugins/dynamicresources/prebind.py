"""PreBind's half of DynamicResources: upstream's bindClaim for each claim not yet
reserved for the pod, then the wait for binding conditions (v1.36.3).

For each such claim: the allocation Reserve decided (if any) and the pod in
`status.reservedFor` are written with one status update, after a normal update that
adds the delete-protection finalizer when it is missing. The stored claim is then
assumed in the claim tracker, so the next cycle sees it before the informer does,
and its allocation is no longer in flight. With binding conditions (on by default)
the allocation gets its `allocationTimestamp`, and PreBind then waits, polling every
5 seconds up to `bindingTimeout`, until every device's binding conditions are True.

The status update needs a binding handle that can write a claim's status
(`ClaimStatusWriter`); without one PreBind fails with `NO_STATUS_WRITER`, and
Unreserve withdraws the allocation. PreBind runs in the binder, outside the state
lock: every read and write of the cluster state goes through `handle.locked`.

A write that conflicts (the claim changed since it was read: the claim controller, a
driver) is retried as upstream's retry.RetryOnConflict(retry.DefaultRetry): up to five
attempts 10 ms apart, each on the claim read again from the API server and checked
again (deleted, allocated elsewhere meanwhile).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from policyd.framework.interfaces import BindingApiError, BindingHandle
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.model.storage import StaleObjectError
from policyd.plugins.dynamicresources.allocation import ClaimInfo
from policyd.plugins.dynamicresources.binding import binding_state
from policyd.plugins.dynamicresources.claims import PodClaim
from policyd.plugins.dynamicresources.store import Obj, dra_of

log = logging.getLogger(__name__)

CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
POLL_SECONDS = 5.0  # upstream polls binding conditions every 5 seconds
NO_STATUS_WRITER = ("policyd cannot write ResourceClaim status here: the claim's "
                    "allocation and reservedFor are not written")
# ErrDeviceBindingTimeout / ErrDeviceBindingFailed, and Go's context error.
BINDING_TIMEOUT = "device binding timeout"
BINDING_FAILED = "device binding failed"
DEADLINE_EXCEEDED = "context deadline exceeded"
CANCELED = "context canceled"
# retry.DefaultRetry: Steps 5, Duration 10 ms (its 10% jitter left out).
CONFLICT_ATTEMPTS = 5
CONFLICT_BACKOFF_SECONDS = 0.01


@runtime_checkable
class ClaimStatusWriter(Protocol):
    def update(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace `obj`'s status (the status subresource); what the server stored.
        Raises `BindingApiError`."""

    def get(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` as the API server has it now. Raises `BindingApiError`."""

    def patch_status(self, obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        """A strategic-merge patch of `obj`'s status subresource; what the server
        stored. Raises `BindingApiError`."""


def unreserve_claims(handle: BindingHandle, pod: Pod, claims: list[ClaimInfo]) -> None:
    """Upstream's Unreserve writes: the pod out of `status.reservedFor` of each of its
    allocated claims that lists it (as PreBind left them), with a strategic-merge
    patch that removes that one entry whatever else changed, guarded by the claim's
    uid. A failure is logged, as upstream's: the pod's next attempt finds the claim
    still reserved for it and uses it."""
    if not isinstance(handle, ClaimStatusWriter):
        return
    for info in claims:
        claim = info.claim.obj
        status = claim.get("status")
        if not (isinstance(status, dict) and status.get("allocation") is not None
                and _reserved_for(claim, pod.uid)):
            continue
        meta = claim.get("metadata") or {}
        patch = {"metadata": {"uid": meta.get("uid")},
                 "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]}}
        try:
            handle.patch_status(claim, patch)
        except BindingApiError as err:
            log.error("unreserve: removing %s from the reservedFor of ResourceClaim %s "
                      "failed: %s", pod.key, info.claim.key, err,
                      extra={"pod": pod.key, "claim": info.claim.key})


def bind_claims(handle: BindingHandle, pod: Pod, claims: list[ClaimInfo], *,
                binding_conditions: bool, timeout_seconds: float,
                then: Callable[[], tuple[str | None, ClaimInfo | None]] | None = None
                ) -> str | None:
    """Every claim not reserved for the pod written, then `then` (the claim for the
    pod's extended resources, which comes last upstream: its error, or the claim it
    wrote); then, with binding conditions, the wait for them all. None on success,
    else upstream's error text."""
    for info in claims:
        if _reserved_for(info.claim.obj, pod.uid):
            continue
        problem = _bind_claim(handle, pod, info, binding_conditions=binding_conditions)
        if problem is not None:
            return problem
    waiting = list(claims)
    if then is not None:
        problem, written = then()
        if problem is not None:
            return problem
        if written is not None:
            waiting.append(written)
    if not binding_conditions or not any(_has_binding_conditions(i.claim.obj)
                                         for i in waiting):
        return None
    return _wait_for_binding(handle, waiting, timeout_seconds)


def _bind_claim(handle: BindingHandle, pod: Pod, info: ClaimInfo, *,
                binding_conditions: bool) -> str | None:
    allocation = info.allocation.to_api() if info.allocation is not None else None
    written: Obj | None = None
    try:
        if not isinstance(handle, ClaimStatusWriter):
            return NO_STATUS_WRITER
        written, problem = write_claim(handle, pod, info.claim.obj, info.claim.key,
                                       allocation, binding_conditions=binding_conditions)
        if written is None:
            return problem
        info.claim = PodClaim(info.claim.entry, info.claim.key, written)
        return None
    finally:
        if allocation is not None:
            handle.locked(_settle(info, written))


def write_claim(handle: BindingHandle, pod: Pod, obj: Obj, name: str,
                allocation: Obj | None, *, binding_conditions: bool
                ) -> tuple[Obj | None, str | None]:
    """bindClaim's writes for one claim: (the stored claim, None), or (None, upstream's
    error text). retry.RetryOnConflict(retry.DefaultRetry): a benign concurrent change
    (the claim controller, a driver) makes a write conflict; the claim is read again
    and tried again, checked anew."""
    if not isinstance(handle, ClaimStatusWriter):
        return None, NO_STATUS_WRITER
    claim = copy.deepcopy(obj)
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        if attempt > 1:
            if handle.wait(CONFLICT_BACKOFF_SECONDS):
                return None, CANCELED
            try:
                claim = handle.get(claim)
            except BindingApiError as err:
                return None, f"get updated claim {name} after conflict: {err}"
        try:
            return _try_bind(handle, pod, claim, name, allocation,
                             binding_conditions=binding_conditions), None
        except _Refused as refused:
            return None, str(refused)
        except BindingApiError as err:
            if not err.conflict or attempt == CONFLICT_ATTEMPTS:
                return None, str(err)
    raise AssertionError("unreachable: the last attempt returns")


class _Refused(Exception):
    """The claim as read cannot take this pod's allocation or reservation."""


def _try_bind(handle: ClaimStatusWriter, pod: Pod, claim: Obj, name: str,
              allocation: Obj | None, *, binding_conditions: bool) -> Obj:
    """One attempt of bindClaim's update: the finalizer (normal update) if the
    allocation is new, then allocation and reservedFor (status update). Returns the
    stored claim; raises _Refused, or BindingApiError with upstream's wording."""
    meta = claim.setdefault("metadata", {})
    if meta.get("deletionTimestamp") is not None:
        raise _Refused(f"claim {name} got deleted in the meantime")
    status = claim.setdefault("status", {})
    if allocation is not None:
        if status.get("allocation") is not None:
            raise _Refused(f"claim {name} got allocated elsewhere in the meantime")
        if CLAIM_FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), CLAIM_FINALIZER]
            try:
                claim = handle.update(claim)
            except BindingApiError as err:
                raise BindingApiError(f"add finalizer to claim {name}: {err}",
                                      conflict=err.conflict) from err
            status = claim.setdefault("status", {})
        status["allocation"] = copy.deepcopy(allocation)
    status["reservedFor"] = [*(status.get("reservedFor") or []),
                             {"resource": "pods", "name": pod.name, "uid": pod.uid}]
    if binding_conditions:
        if status.get("allocation") is None:
            raise _Refused(f"claim {name} got deallocated elsewhere in the meantime")
        status["allocation"].setdefault("allocationTimestamp", _now_rfc3339())
    try:
        return handle.update_status(claim)
    except BindingApiError as err:
        what = "allocation and reservation" if allocation is not None else "reservation"
        raise BindingApiError(f"add {what} to claim {name}: {err}",
                              conflict=err.conflict) from err


def _settle(info: ClaimInfo, written: Obj | None) -> Callable[[ClusterState], None]:
    """The written claim assumed; the in-flight allocation gone once it is (one sharer
    fewer otherwise, as upstream's deferred MaybeRemoveClaimPendingAllocation)."""
    def settle(cluster: ClusterState) -> None:
        store = dra_of(cluster)
        if store is None:
            return
        assumed = False
        if written is not None:
            # StaleObjectError: the informer has shown this write, or a newer one.
            with contextlib.suppress(StaleObjectError):
                store.claims.assume(written)
                assumed = True
        store.claims.remove_pending_allocation(info.decoded.uid, force=assumed)
    return settle


def _wait_for_binding(handle: BindingHandle, claims: list[ClaimInfo],
                      timeout_seconds: float) -> str | None:
    deadline = handle.now() + timeout_seconds
    while True:
        failed = handle.locked(_readiness(claims))
        if failed is None:
            return None
        if failed:
            return f"{BINDING_FAILED}: {failed}"
        remaining = deadline - handle.now()
        if remaining <= 0:
            return f"{BINDING_TIMEOUT}: {DEADLINE_EXCEEDED}"
        if handle.wait(min(POLL_SECONDS, remaining)):
            return CANCELED


def _readiness(claims: list[ClaimInfo]) -> Callable[[ClusterState], str | None]:
    """None when every claim is ready; "" while some are not; the failed claim's name
    when binding failed (upstream's isPodReadyForBinding, on the tracker's claims)."""
    def check(cluster: ClusterState) -> str | None:
        store = dra_of(cluster)
        for info in claims:
            current = store.claims.get(info.claim.key) if store is not None else None
            if current is None:
                return f"claim {info.claim.key} not found"
            ready, failure = binding_state(current)
            if failure is not None:
                return failure
            if not ready:
                return ""
        return None
    return check


def _reserved_for(claim: Obj, uid: str) -> bool:
    status = claim.get("status")
    entries = status.get("reservedFor") if isinstance(status, dict) else None
    return any(isinstance(e, dict) and e.get("uid") == uid for e in entries or ())


def _has_binding_conditions(claim: Obj) -> bool:
    status = claim.get("status")
    allocation = status.get("allocation") if isinstance(status, dict) else None
    devices = allocation.get("devices") if isinstance(allocation, dict) else None
    results = devices.get("results") if isinstance(devices, dict) else None
    return any(isinstance(r, dict) and r.get("bindingConditions")
               for r in results or ())


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
