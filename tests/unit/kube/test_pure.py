"""The kube adapter's pure parts: backoff, rate limit, error classes, watch lines,
relist diffs, request bodies, lease decisions. No cluster, no client."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from policyd.kube import api
from policyd.kube.backoff import Backoff, Failure, GiveUp, RetryPolicy, TokenBucket
from policyd.kube.client import ApiError, api_error_from, decode_watch_line, is_transient
from policyd.kube.informer import diff_relist, object_key, object_uid
from policyd.kube.leaderelection import lease_spec, may_acquire, released_spec
from tests.clocks import ManualClock


def test_backoff_grows_caps_and_resets() -> None:
    b = Backoff(initial=0.5, maximum=4.0, jitter=0.0)
    assert [b.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    b.reset()
    assert b.next_delay() == 0.5
    assert b.base_delay(10_000) == 4.0  # no float overflow


def test_backoff_jitter_stays_within_bounds() -> None:
    b = Backoff(initial=1.0, maximum=8.0, jitter=0.2, rng=random.Random(1))
    for attempt in range(1, 20):
        d = b.next_delay()
        base = b.base_delay(attempt)
        assert base <= d <= base * 1.2


def test_token_bucket_allows_a_burst_then_paces_at_qps() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)  # queued behind the previous waiter
    now[0] = 10.0  # refilled, but never beyond the burst
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() > 0


def test_token_bucket_unlimited() -> None:
    bucket = TokenBucket(qps=-1, burst=1, clock=lambda: 0.0)
    assert all(bucket.reserve() == 0 for _ in range(1000))


@pytest.mark.parametrize(("status", "transient"), [
    (0, True), (429, True), (500, True), (503, True), (504, True),
    (400, False), (401, False), (403, False), (404, False), (409, False), (422, False),
])
def test_transient_statuses(status: int, transient: bool) -> None:
    assert is_transient(status) is transient
    assert ApiError(status, "x").transient is transient
    assert ApiError(status, "x").failure is (Failure.TEMPORARY if transient
                                             else Failure.PERMANENT)


def test_the_retry_policy_decides_on_the_failure_type_not_the_message() -> None:
    clock = ManualClock()
    retries = RetryPolicy(initial=1.0, maximum=4.0, deadline=10.0).begin(clock.now)
    # A permanent failure ends it whatever its message or Retry-After says.
    assert retries.after(ApiError(422, "Invalid", "try again later",
                                  retry_after=1.0)) is GiveUp.PERMANENT
    delay = retries.after(ApiError(503, "ServiceUnavailable", "bad request"))
    assert isinstance(delay, float) and 1.0 <= delay <= 1.2 * 1.0
    delay = retries.after(ApiError(429, "TooManyRequests", retry_after=5.0))
    assert isinstance(delay, float) and delay >= 5.0


def test_the_retry_policy_gives_up_when_the_next_try_would_start_too_late() -> None:
    clock = ManualClock()
    retries = RetryPolicy(initial=1.0, maximum=4.0, deadline=10.0).begin(clock.now)
    assert isinstance(retries.after(ApiError(0, "Refused")), float)
    clock.advance(5.0)
    # Asked to wait 6 s: the attempt would start past the 10 s window.
    assert retries.after(ApiError(429, "x", retry_after=6.0)) is GiveUp.OUT_OF_TIME
    clock.advance(5.0)
    assert retries.after(ApiError(0, "Refused")) is GiveUp.OUT_OF_TIME
    assert retries.attempts == 3


def test_api_error_reads_the_status_body_and_retry_after() -> None:
    body = json.dumps({"kind": "Status", "reason": "Conflict", "code": 409,
                       "message": "pod p is already assigned to node n1"}).encode()
    # A Retry-After means something on a 429 or 5xx only (client-go's checkWait).
    err = api_error_from(409, "Conflict", body, {"Retry-After": "3"})
    assert (err.status, err.reason, err.retry_after) == (409, "Conflict", None)
    assert err.message == "pod p is already assigned to node n1"
    assert api_error_from(502, "Bad Gateway", b"<html>").message == "<html>"


def test_decode_watch_line() -> None:
    ev = decode_watch_line(b'{"type":"ADDED","object":{"kind":"Pod"}}')
    assert ev["type"] == "ADDED"
    for bad in (b"{", b"[]", b'{"object":{}}'):
        with pytest.raises(ApiError) as info:
            decode_watch_line(bad)
        assert info.value.status == 0


def _obj(name: str, rv: str, ns: str = "default", uid: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv,
                         "uid": uid or name}}


def test_object_keys() -> None:
    assert object_key(_obj("p", "1")) == "default/p"
    assert object_key({"metadata": {"name": "n1"}}) == "n1"


def test_relist_diff_reports_what_the_gap_hid() -> None:
    cached = {object_uid(o): o for o in (_obj("same", "1"), _obj("changed", "1"),
                                          _obj("gone", "1"))}
    listed = [_obj("same", "1"), _obj("changed", "5"), _obj("new", "6")]
    added, updated, deleted = diff_relist(cached, listed)
    assert [object_key(o) for o in added] == ["default/new"]
    assert [(object_key(o), object_key(n)) for o, n in updated] == [
        ("default/changed", "default/changed")]
    assert [object_key(o) for o in deleted] == ["default/gone"]


def test_binding_body_carries_the_uid_precondition() -> None:
    assert api.binding_body("ns", "p", "u-1", "n1") == {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}


def test_event_body_is_what_kubectl_describe_shows() -> None:
    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    body = api.event_body(api.pod_ref("ns", "p", "u"), event_type="Warning",
                          reason="FailedScheduling", message="0/1 nodes are available.",
                          action="Scheduling", component="policyd", instance="me", now=t)
    assert body["metadata"]["namespace"] == "ns"
    assert body["metadata"]["name"].startswith("p.")
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "ns",
                                      "name": "p", "uid": "u"}
    assert (body["type"], body["reason"], body["message"]) == (
        "Warning", "FailedScheduling", "0/1 nodes are available.")
    assert body["source"] == {"component": "policyd"}
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2026-01-02T03:04:05Z"


def test_pod_scheduled_patch() -> None:
    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert api.pod_scheduled_patch("msg", now=t) == {"status": {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "msg", "lastProbeTime": None,
        "lastTransitionTime": "2026-01-02T03:04:05Z"}]}}


def test_lease_spec_acquire_renew_and_takeover() -> None:
    first = lease_spec("a", 15, None, "t1")
    assert first == {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": "t1",
                     "renewTime": "t1", "leaseTransitions": 0}
    renewed = lease_spec("a", 15, first, "t2")
    assert (renewed["acquireTime"], renewed["renewTime"],
            renewed["leaseTransitions"]) == ("t1", "t2", 0)
    taken = lease_spec("b", 15, renewed, "t3")
    assert (taken["holderIdentity"], taken["acquireTime"],
            taken["leaseTransitions"]) == ("b", "t3", 1)
    after_release = lease_spec("b", 15, released_spec(renewed, "t4"), "t5")
    assert after_release["leaseTransitions"] == 0


@pytest.mark.parametrize(("holder", "age", "expected"), [
    ("", 0.0, True),  # released or never held
    ("me", 0.0, True),  # renewing our own
    ("other", 14.9, False),  # held and fresh
    ("other", 15.0, True),  # not renewed for a whole lease duration
])
def test_may_acquire(holder: str, age: float, expected: bool) -> None:
    spec = {"holderIdentity": holder, "leaseDurationSeconds": 15}
    assert may_acquire(spec, "me", age, 15.0) is expected


def test_the_objects_prebind_writes_have_their_api_paths() -> None:
    def obj(kind: str, ns: str | None = "team a") -> dict[str, Any]:
        meta = {"name": "x/y", **({"namespace": ns} if ns else {})}
        return {"kind": kind, "metadata": meta}

    assert api.object_path(obj("PersistentVolume", None)) == "/api/v1/persistentvolumes/x%2Fy"
    assert api.object_path(obj("PersistentVolumeClaim")) == (
        "/api/v1/namespaces/team%20a/persistentvolumeclaims/x%2Fy")
    assert api.object_path(obj("ResourceClaim")) == (
        "/apis/resource.k8s.io/v1/namespaces/team%20a/resourceclaims/x%2Fy")
    with pytest.raises(ValueError, match="does not write objects of kind 'Pod'"):
        api.object_path(obj("Pod"))
    with pytest.raises(ValueError, match=r"ResourceClaim x/y without metadata\.namespace"):
        api.object_path(obj("ResourceClaim", None))


def test_collection_path_is_where_a_claim_named_by_the_server_is_created() -> None:
    """DynamicResources creates the claim of a pod's extended resources with
    generateName: no name, so the namespace's collection."""
    claim = {"kind": "ResourceClaim", "metadata": {"namespace": "team a",
                                                   "generateName": "p-extended-resources-"}}
    assert api.collection_path(claim) == (
        "/apis/resource.k8s.io/v1/namespaces/team%20a/resourceclaims")
    assert api.collection_path({"kind": "PersistentVolume", "metadata": {}}) == (
        "/api/v1/persistentvolumes")
    with pytest.raises(ValueError, match="does not write objects of kind 'Pod'"):
        api.collection_path({"kind": "Pod", "metadata": {"namespace": "a"}})
    with pytest.raises(ValueError, match=r"ResourceClaim without metadata\.namespace"):
        api.collection_path({"kind": "ResourceClaim", "metadata": {}})
