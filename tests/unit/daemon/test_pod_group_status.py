"""scheduler-plugins' PodGroup status as policyd writes it: the phases its controller
moves through, the counts, occupiedBy, and the merge patch written only on change."""

from __future__ import annotations

from typing import Any

from policyd.daemon.pod_group_status import (
    MemberPod,
    PodGroupStatusController,
    desired_status,
    status_patch,
)
from policyd.model.pod_groups import COSCHEDULING_LABEL


def _pods(*phases: str, owners: tuple[str, ...] = ("job",)) -> list[MemberPod]:
    return [MemberPod(p, owners) for p in phases]


def test_phases_as_the_controller_reaches_them() -> None:
    assert desired_status({}, 4, "ns", _pods("Pending")) == {"phase": "Pending"}
    assert desired_status({}, 4, "ns", _pods(*["Pending"] * 4)) == {
        "phase": "Scheduling", "occupiedBy": "ns/job"}
    assert desired_status({}, 2, "ns", _pods("Running", "Running", "Pending")) == {
        "phase": "Running", "occupiedBy": "ns/job", "running": 2}
    assert desired_status({"phase": "Running"}, 2, "ns", _pods("Succeeded", "Succeeded"))[
        "phase"] == "Finished"
    assert desired_status({"phase": "Running"}, 2, "ns", _pods("Failed", "Running")) == {
        "phase": "Failed", "running": 1, "failed": 1}
    # Final phases stay.
    assert desired_status({"phase": "Finished"}, 2, "ns", []) == {"phase": "Finished"}
    # Pods gone below minMember: back to Pending (counts kept as computed).
    assert desired_status({"phase": "Scheduling", "occupiedBy": "ns/job"}, 3, "ns",
                          _pods("Pending")) == {"phase": "Pending", "occupiedBy": "ns/job"}
    # occupiedBy: every owner of the first pod, sorted.
    assert desired_status({}, 1, "ns", _pods("Pending", owners=("b", "a")))[
        "occupiedBy"] == "ns/a,ns/b"


def test_the_patch_names_only_what_changed() -> None:
    status = {"phase": "Running", "running": 2, "occupiedBy": "ns/job"}
    assert status_patch(status, dict(status)) is None
    assert status_patch(status, {"phase": "Running", "running": 1, "failed": 1,
                                 "occupiedBy": "ns/job"}) == {
        "status": {"running": 1, "failed": 1}}
    # A count back to 0 is removed, as omitempty leaves it out.
    assert status_patch(status, {"phase": "Pending", "occupiedBy": "ns/job"}) == {
        "status": {"phase": "Pending", "running": None}}


def _pod(name: str, group: str, phase: str = "Pending") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "labels": {COSCHEDULING_LABEL: group},
                         "ownerReferences": [{"name": "job", "kind": "Job"}]},
            "status": {"phase": phase}}


def test_the_controller_follows_the_informers() -> None:
    ctl = PodGroupStatusController(client=None,  # type: ignore[arg-type]
                                   is_leader=lambda: True, enabled=lambda: True)
    group = {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 2}}
    ctl.on_group(group)
    ctl.on_pod(_pod("a", "pg"))
    ctl.on_pod({"metadata": {"name": "stranger", "namespace": "ns", "uid": "s"}})
    assert ctl.pending_patches() == [(("ns", "pg"), {"status": {"phase": "Pending"}})]
    assert ctl.pending_patches() == []  # nothing changed since
    ctl.on_pod(_pod("b", "pg"))
    assert ctl.pending_patches() == [(("ns", "pg"), {"status": {
        "phase": "Scheduling", "occupiedBy": "ns/job"}})]
    # The watch shows what was written: then nothing more to write.
    ctl.on_group_update(group, {**group, "status": {"phase": "Scheduling",
                                                   "occupiedBy": "ns/job"}})
    assert ctl.pending_patches() == []
    ctl.on_pod_update(_pod("a", "pg"), _pod("a", "pg", "Running"))
    ctl.on_pod_update(_pod("b", "pg"), _pod("b", "pg", "Running"))
    assert ctl.pending_patches() == [(("ns", "pg"), {"status": {
        "phase": "Running", "running": 2}})]
    # A pod deleted: the group is looked at again.
    ctl.on_pod_delete(_pod("b", "pg"))
    assert ctl.pending_patches() == [(("ns", "pg"), {"status": {
        "phase": "Pending", "running": 1}})]
