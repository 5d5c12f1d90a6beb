"""VolumeBinding's events and queueing hints (upstream's EventsToRegister cases)."""

from __future__ import annotations

from policyd.framework.events import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    QUEUE,
    QUEUE_SKIP,
    STORAGE_CLASS,
    ActionType,
    ClusterEvent,
)
from policyd.plugins.helper.volumes import after_own_or_ephemeral_claim_change
from policyd.plugins.volumebinding import hints
from policyd.plugins.volumebinding.plugin import new
from tests.builders import make_pod
from tests.unit.plugins.volumebinding.storage import ZONE, capacity, csi_driver, pvc, storage_class

ADD_UPDATE = ActionType.ADD | ActionType.UPDATE


def test_registered_events() -> None:
    registered = {(r.event.resource, r.event.action): r.hint is not None
                  for r in new().events_to_register()}
    assert registered == {
        (STORAGE_CLASS, ADD_UPDATE): True,
        (PERSISTENT_VOLUME_CLAIM, ADD_UPDATE): True,
        (PERSISTENT_VOLUME, ADD_UPDATE): False,
        (NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL): False,
        (CSI_NODE, ADD_UPDATE): True,
        (CSI_DRIVER, ActionType.UPDATE): True,
        (CSI_STORAGE_CAPACITY, ADD_UPDATE): True,
    }
    assert ClusterEvent(NODE, ActionType.UPDATE_NODE_TAINT) not in {
        r.event for r in new().events_to_register()}


def test_claim_hint_queues_only_for_the_pods_own_claims() -> None:
    pod = make_pod("p").pvc("a").set(
        "spec.volumes", [{"name": "a", "persistentVolumeClaim": {"claimName": "a"}},
                         {"name": "data", "ephemeral": {}}]).obj()
    assert after_own_or_ephemeral_claim_change(pod, None, pvc("a")) is QUEUE
    assert after_own_or_ephemeral_claim_change(pod, pvc("p-data"), pvc("p-data")) is QUEUE
    assert after_own_or_ephemeral_claim_change(pod, None, pvc("b")) is QUEUE_SKIP
    assert after_own_or_ephemeral_claim_change(pod, None, pvc("a", namespace="other")) is QUEUE_SKIP
    assert after_own_or_ephemeral_claim_change(make_pod("q").obj(), None, pvc("a")) is QUEUE_SKIP
    assert after_own_or_ephemeral_claim_change(pod, None, "not an object") is QUEUE


def test_storage_class_hint() -> None:
    pod = make_pod("p").pvc("a").obj()
    old = storage_class("wait")
    assert hints.after_storage_class_change(pod, None, old) is QUEUE
    changed = storage_class("wait", allowed=[{"matchLabelExpressions": [
        {"key": ZONE, "values": ["a"]}]}])
    assert hints.after_storage_class_change(pod, old, changed) is QUEUE
    relabelled = storage_class("wait")
    relabelled["metadata"]["labels"] = {"x": "y"}
    assert hints.after_storage_class_change(pod, old, relabelled) is QUEUE_SKIP


def test_capacity_hint_queues_when_the_limit_grows() -> None:
    pod = make_pod("p").pvc("a").obj()
    small = capacity("c", "wait", "a", "5Gi")
    assert hints.after_capacity_change(pod, None, small) is QUEUE
    assert hints.after_capacity_change(pod, small, capacity("c", "wait", "a", "6Gi")) is QUEUE
    assert hints.after_capacity_change(pod, small, capacity("c", "wait", "a", "5Gi")) \
        is QUEUE_SKIP
    assert hints.after_capacity_change(pod, small, capacity("c", "wait", "a", "4Gi")) \
        is QUEUE_SKIP
    # maximumVolumeSize counts before capacity.
    assert hints.after_capacity_change(
        pod, capacity("c", "wait", "a", "9Gi", maximum="1Gi"),
        capacity("c", "wait", "a", "9Gi", maximum="2Gi")) is QUEUE
    assert hints.after_capacity_change(
        pod, capacity("c", "wait", "a", "9Gi", maximum="5Gi"),
        capacity("c", "wait", "a", "9Gi")) is QUEUE
    assert hints.after_capacity_change(
        pod, capacity("c", "wait", "a", None), capacity("c", "wait", "a", "1Gi")) is QUEUE


def test_csi_node_hint_looks_at_migrated_plugins() -> None:
    pod = make_pod("p").pvc("a").obj()
    plain = {"metadata": {"name": "n1"}}
    migrated = {"metadata": {"name": "n1", "annotations": {
        hints.MIGRATED_PLUGINS_ANNOTATION: "kubernetes.io/gce-pd"}}}
    assert hints.after_csi_node_change(pod, None, plain) is QUEUE
    assert hints.after_csi_node_change(pod, plain, migrated) is QUEUE
    assert hints.after_csi_node_change(pod, migrated, migrated) is QUEUE_SKIP


def test_csi_driver_hint_queues_when_capacity_tracking_stops_for_an_inline_volume() -> None:
    pod = make_pod("p").set("spec.volumes", [
        {"name": "v", "csi": {"driver": "csi.example.com"}}]).obj()
    on, off = csi_driver("csi.example.com", True), csi_driver("csi.example.com", False)
    assert hints.after_csi_driver_change(pod, on, off) is QUEUE
    assert hints.after_csi_driver_change(pod, off, on) is QUEUE_SKIP
    assert hints.after_csi_driver_change(make_pod("q").pvc("a").obj(), on, off) is QUEUE_SKIP
