"""The status of scheduler-plugins' PodGroups (`scheduling.x-k8s.io/v1alpha1`), written
as its PodGroup controller (pkg/controllers/podgroup_controller.go, v0.34.7) would, so
a cluster running policyd's Coscheduling needs no scheduler-plugins controller.

The controller's Reconcile moves a group one step per call and is called again by its
own write; `desired_status` runs those steps until nothing changes (one write instead
of several, the same end): "" -> Pending; Pending -> Scheduling once minMember pods
exist (occupiedBy: the first pod's owners); then from the pods' phases the counts
running/succeeded/failed and Scheduling, Running (running + succeeded >= minMember),
Failed (a failure among >= minMember that ran) or Finished (succeeded >= minMember);
back to Pending when pods disappear below minMember. Finished and Failed are final.

Differences, on purpose: the pods are those of the group's namespace (upstream lists
the label across every namespace); scheduleStartTime is not written (upstream's
controller never sets it either, and its 48-hour check on it cannot fire).

Fed from the daemon's informers (pods with the label, the PodGroups); only the leader
writes, only while a profile enables Coscheduling, only a status that differs from the
one the watch shows, as a merge patch of the status subresource; a 404 (the group or
the CRD is gone) is dropped quietly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policyd.clock import REAL_CLOCK, Clock
from policyd.kube import api
from policyd.kube.client import ApiError, KubeClient
from policyd.model.pod_groups import COSCHEDULING_LABEL

log = logging.getLogger("policyd.daemon.pod_group_status")

Obj = dict[str, Any]
GroupRef = tuple[str, str]  # namespace, name

PENDING = "Pending"
SCHEDULING = "Scheduling"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"
_FINAL = (FINISHED, FAILED)
# The fields the controller owns; counts of 0 are left out, as its omitempty does.
_FIELDS = ("phase", "occupiedBy", "running", "succeeded", "failed")
RETRY_AFTER_S = 1.0


@dataclass(frozen=True, slots=True)
class MemberPod:
    phase: str  # status.phase
    owners: tuple[str, ...]  # metadata.ownerReferences[].name


def member_of(obj: Obj) -> tuple[str, MemberPod] | None:
    """(group name, the pod as the status reads it), or None for a pod of no group."""
    meta = obj.get("metadata") or {}
    group = (meta.get("labels") or {}).get(COSCHEDULING_LABEL)
    if not isinstance(group, str) or not group:
        return None
    owners = tuple(str(r.get("name", "")) for r in meta.get("ownerReferences") or ()
                   if isinstance(r, dict))
    return group, MemberPod(str((obj.get("status") or {}).get("phase") or ""), owners)


def _step(status: Mapping[str, Any], min_member: int, namespace: str,
          pods: Sequence[MemberPod]) -> dict[str, Any]:
    """One Reconcile of the controller."""
    out = dict(status)
    phase = out.get("phase") or ""
    if phase in _FINAL:
        return out
    if phase == "":
        out["phase"] = PENDING
        return out
    if phase == PENDING:
        if len(pods) >= min_member:
            out["phase"] = SCHEDULING
            if pods and pods[0].owners:
                out["occupiedBy"] = ",".join(sorted(f"{namespace}/{o}" for o in pods[0].owners))
        return out
    running = sum(p.phase == "Running" for p in pods)
    succeeded = sum(p.phase == "Succeeded" for p in pods)
    failed = sum(p.phase == "Failed" for p in pods)
    out["running"], out["succeeded"], out["failed"] = running, succeeded, failed
    if len(pods) < min_member:
        out["phase"] = PENDING
        return out
    if succeeded + running < min_member:
        out["phase"] = SCHEDULING
    if succeeded + running >= min_member:
        out["phase"] = RUNNING
    if failed != 0 and failed + running + succeeded >= min_member:
        out["phase"] = FAILED
    if succeeded >= min_member:
        out["phase"] = FINISHED
    return out


def desired_status(status: Mapping[str, Any], min_member: int, namespace: str,
                   pods: Sequence[MemberPod]) -> dict[str, Any]:
    """Where the controller's Reconciles settle, from `status` (the fields it owns)."""
    current = {k: status.get(k) for k in _FIELDS if status.get(k) not in (None, "", 0)}
    for _ in range(8):  # at most: "" -> Pending -> Scheduling -> counts -> phase
        following = {k: v for k, v in _step(current, min_member, namespace, pods).items()
                     if v not in (None, "", 0)}
        if following == current:
            break
        current = following
    return current


def status_patch(status: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch from `status` to `wanted` over the controller's fields (null
    removes one: a count back to 0), or None when they agree."""
    patch: dict[str, Any] = {}
    for key in _FIELDS:
        old = status.get(key) if status.get(key) not in ("", 0) else None
        new = wanted.get(key)
        if old != new:
            patch[key] = new
    return {"status": patch} if patch else None


def _ref(obj: Obj) -> GroupRef:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


class PodGroupStatusController:
    """Keeps the member pods and the PodGroups from the informers; writes on its own
    thread (`run`)."""

    def __init__(self, client: KubeClient, *, is_leader: Callable[[], bool],
                 enabled: Callable[[], bool], clock: Clock = REAL_CLOCK) -> None:
        self.client = client
        self.is_leader = is_leader
        self.enabled = enabled
        self.clock = clock
        self._lock = threading.Condition()
        self._groups: dict[GroupRef, Obj] = {}
        self._members: dict[GroupRef, dict[str, MemberPod]] = {}
        self._group_of: dict[str, GroupRef] = {}  # pod uid -> its group
        self._dirty: set[GroupRef] = set()
        self.writes = 0  # successful patches (tests, debugging)

    # -- informer hooks (any thread) -------------------------------------------------------

    def on_pod(self, obj: Obj) -> None:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        found = member_of(obj)
        with self._lock:
            self._drop_pod(uid)
            if found is not None:
                group, pod = found
                ref = (_ref(obj)[0], group)
                self._members.setdefault(ref, {})[uid] = pod
                self._group_of[uid] = ref
                self._mark(ref)

    def on_pod_update(self, old: Obj, new: Obj) -> None:
        self.on_pod(new)

    def on_pod_delete(self, obj: Obj) -> None:
        with self._lock:
            self._drop_pod(str((obj.get("metadata") or {}).get("uid") or ""))

    def on_group(self, obj: Obj) -> None:
        ref = _ref(obj)
        with self._lock:
            self._groups[ref] = obj
            self._mark(ref)

    def on_group_update(self, old: Obj, new: Obj) -> None:
        self.on_group(new)

    def on_group_delete(self, obj: Obj) -> None:
        with self._lock:
            self._groups.pop(_ref(obj), None)

    def _drop_pod(self, uid: str) -> None:
        ref = self._group_of.pop(uid, None)
        if ref is None:
            return
        members = self._members.get(ref, {})
        members.pop(uid, None)
        if not members:
            self._members.pop(ref, None)
        self._mark(ref)

    def _mark(self, ref: GroupRef) -> None:
        self._dirty.add(ref)
        self._lock.notify()

    def mark_all(self) -> None:
        """Reconsider every group (a new leader, a profile that now enables it)."""
        with self._lock:
            self._dirty.update(self._groups)
            self._lock.notify()

    # -- the writer ------------------------------------------------------------------------

    def pending_patches(self) -> list[tuple[GroupRef, dict[str, Any]]]:
        """The patches the dirty groups need now (their dirt cleared)."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            out = []
            for ref in sorted(dirty):
                obj = self._groups.get(ref)
                if obj is None:
                    continue
                spec = obj.get("spec") or {}
                min_member = spec.get("minMember") or 0
                if not isinstance(min_member, int):
                    continue
                # Upstream's pod list order is the cache's; policyd's is the order the
                # pods arrived in, whose first is the one occupiedBy names.
                pods = list(self._members.get(ref, {}).values())
                status = obj.get("status") or {}
                patch = status_patch(status, desired_status(status, min_member, ref[0], pods))
                if patch is not None:
                    out.append((ref, patch))
            return out

    def run(self, stop: threading.Event) -> None:
        was_active = False
        while not stop.is_set():
            active = self.is_leader() and self.enabled()
            if active and not was_active:
                self.mark_all()
            was_active = active
            with self._lock:
                if not self._dirty:
                    self._lock.wait(0.5)
            if not active:
                continue
            for ref, patch in self.pending_patches():
                if stop.is_set():
                    return
                self._write(ref, patch)

    def _write(self, ref: GroupRef, patch: dict[str, Any]) -> None:
        namespace, name = ref
        try:
            api.merge_patch_coscheduling_pod_group_status(self.client, namespace, name, patch)
        except ApiError as exc:
            if exc.status == 404:  # the group, or its CRD, is gone
                return
            log.warning("could not write the status of podgroup %s/%s: %s", namespace,
                        name, exc)
            self.clock.sleep(RETRY_AFTER_S)
            with self._lock:
                self._mark(ref)
            return
        except Exception:  # a bug must not end the writer
            log.exception("writing the status of podgroup %s/%s failed", namespace, name)
            return
        self.writes += 1
        log.info("podgroup %s/%s: status %s", namespace, name, patch["status"])
