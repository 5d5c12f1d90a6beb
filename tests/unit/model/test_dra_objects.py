"""The DRA objects' store: the claim tracker (assume cache semantics, in-flight
allocations, listeners), the slice and class indexes, and malformed objects that
must stay out of an index rather than raise."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.model.cluster import ClusterState
from policyd.model.dra_objects import (
    DEVICE_CLASS,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ClaimCache,
    Consumer,
    DraObjects,
    allocated_devices,
    dra_key,
    reserved_for,
)
from policyd.model.storage import DecodeMemo, StaleObjectError

Obj = dict[str, Any]


def claim(name: str, rv: str | None = "5", *, ns: str = "shop", uid: str = "",
          devices: list[Obj] | None = None, reserved: list[Obj] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": ns, "uid": uid or f"uid-{name}"}
    if rv is not None:
        meta["resourceVersion"] = rv
    status: Obj = {}
    if devices is not None:
        status["allocation"] = {"devices": {"results": devices}}
    if reserved is not None:
        status["reservedFor"] = reserved
    obj: Obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": meta, "spec": {"devices": {"requests": []}}}
    if status:
        obj["status"] = status
    return obj


def result(device: str, *, driver: str = "gpu.example.com", pool: str = "node-a",
           **extra: Any) -> Obj:
    return {"request": "gpu", "driver": driver, "pool": pool, "device": device, **extra}


def pod_ref(name: str, uid: str) -> Obj:
    return {"resource": "pods", "name": name, "uid": uid}


def slice_(name: str, *, node: str | None = "node-a", driver: str = "gpu.example.com",
           pool: str = "node-a", **spec: Any) -> Obj:
    body: Obj = {"driver": driver, "pool": {"name": pool, "generation": 1,
                                            "resourceSliceCount": 1}, **spec}
    if node is not None:
        body["nodeName"] = node
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name}, "spec": body}


def device_class(name: str, *, extended: str = "", created: str = "") -> Obj:
    meta: Obj = {"name": name}
    if created:
        meta["creationTimestamp"] = created
    spec: Obj = {"extendedResourceName": extended} if extended else {}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta,
            "spec": spec}


def tracker() -> tuple[ClaimCache, list[tuple[Obj | None, Obj | None]]]:
    cache = ClaimCache(DecodeMemo())
    seen: list[tuple[Obj | None, Obj | None]] = []
    cache.subscribe(lambda old, new: seen.append((old, new)))
    return cache, seen


# -- keys and fields ---------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "obj", "key"), [
    (RESOURCE_CLAIM, claim("gpu"), "shop/gpu"),
    (RESOURCE_CLAIM, {"metadata": {"name": "gpu"}}, "default/gpu"),
    (RESOURCE_SLICE, slice_("s1"), "s1"),
    (DEVICE_CLASS, {"metadata": {"name": "gpu", "namespace": "x"}}, "gpu"),
    (DEVICE_CLASS, {"metadata": "broken"}, ""),
])
def test_keys(kind: str, obj: Obj, key: str) -> None:
    assert dra_key(kind, obj) == key


@pytest.mark.parametrize(("results", "dedicated", "shared"), [
    ([], [], []),
    ([result("gpu-0"), result("gpu-1", pool="p2")],
     [("gpu.example.com", "node-a", "gpu-0"), ("gpu.example.com", "p2", "gpu-1")], []),
    # Admin access takes nothing; a share takes one share of the device.
    ([result("gpu-0", adminAccess=True), result("gpu-1", shareID="abc")],
     [], [("gpu.example.com", "node-a", "gpu-1", "abc")]),
    # adminAccess false is an ordinary allocation; junk entries are left out.
    ([result("gpu-2", adminAccess=False), "junk", 7],
     [("gpu.example.com", "node-a", "gpu-2")], []),
])
def test_allocated_devices(results: list[Any], dedicated: list[Any], shared: list[Any]
                           ) -> None:
    assert allocated_devices(claim("c", devices=results)) == (dedicated, shared)


@pytest.mark.parametrize("status", [None, "x", {"allocation": "x"},
                                    {"allocation": {"devices": {"results": "x"}}},
                                    {"reservedFor": {"a": 1}}, {"reservedFor": [3]}])
def test_malformed_status_reads_as_empty(status: Any) -> None:
    obj = claim("c")
    obj["status"] = status
    assert allocated_devices(obj) == ([], [])
    assert reserved_for(obj) == ()
    cache, _ = tracker()
    cache.upsert(obj)  # indexed without raising
    assert cache.get("shop/c") is obj


# -- the claim tracker -------------------------------------------------------------------

def test_informer_versions_replace_only_when_newer() -> None:
    cache, seen = tracker()
    v5 = claim("gpu", "5")
    assert cache.upsert(v5)
    assert seen == [(None, v5)]
    assert not cache.upsert(claim("gpu", "5"))  # a re-list of the same version
    assert not cache.upsert(claim("gpu", "4"))  # an older one, replayed
    assert cache.get("shop/gpu") is v5 and len(seen) == 1
    v6 = claim("gpu", "6")
    assert cache.upsert(v6)
    assert seen[-1] == (v5, v6) and cache.api_object("shop/gpu") is v6


def test_an_assumed_write_stands_until_a_newer_version_arrives() -> None:
    cache, seen = tracker()
    cache.upsert(claim("gpu", "5"))
    written = claim("gpu", "7", devices=[result("gpu-0")])  # PreBind's reply
    cache.assume(written)
    assert cache.get("shop/gpu") is written and cache.is_assumed("shop/gpu")
    assert seen[-1][1] is written  # an update event, as upstream's Assume pushes
    # The informer delivers that very version, then an older one: nothing changes.
    assert not cache.upsert(claim("gpu", "7", devices=[result("gpu-0")]))
    assert not cache.upsert(claim("gpu", "6"))
    assert cache.get("shop/gpu") is written
    newer = claim("gpu", "8", devices=[result("gpu-0")])
    assert cache.upsert(newer)
    assert cache.get("shop/gpu") is newer and not cache.is_assumed("shop/gpu")


def test_restore_goes_back_to_the_api_servers_version() -> None:
    cache, seen = tracker()
    api = claim("gpu", "5")
    cache.upsert(api)
    cache.restore("shop/gpu")  # nothing assumed: no event
    assert len(seen) == 1
    assumed = claim("gpu", "5", devices=[result("gpu-0")])
    cache.assume(assumed)
    cache.restore("shop/gpu")
    assert cache.get("shop/gpu") is api and seen[-1] == (assumed, api)
    cache.restore("shop/missing")  # unknown: nothing to do


@pytest.mark.parametrize(("stored", "assumed", "message"), [
    (None, claim("gpu", "5"), 'could not find ResourceClaim "shop/gpu"'),
    (claim("gpu", "9"), claim("gpu", "5"),
     'ResourceClaim "shop/gpu" is out of sync (stored: 9, assume: 5)'),
])
def test_assumptions_that_are_refused(stored: Obj | None, assumed: Obj, message: str
                                      ) -> None:
    cache, seen = tracker()
    if stored is not None:
        cache.upsert(stored)
    with pytest.raises(StaleObjectError) as err:
        cache.assume(assumed)
    assert str(err.value) == message
    assert len(seen) == (1 if stored is not None else 0)


def test_the_same_version_may_be_assumed() -> None:
    cache, _ = tracker()
    cache.upsert(claim("gpu", "5"))
    same = claim("gpu", "5", devices=[result("gpu-0")])
    cache.assume(same)
    assert cache.get("shop/gpu") is same


def test_objects_without_versions_replace_each_other() -> None:
    # A snapshot file has no resourceVersions: the last object given counts.
    cache, _ = tracker()
    first, second = claim("gpu", None), claim("gpu", None, devices=[result("gpu-0")])
    cache.upsert(first)
    assert cache.upsert(second) and cache.get("shop/gpu") is second


def test_delete_tells_the_listeners_the_version_the_scheduler_saw() -> None:
    cache, seen = tracker()
    cache.upsert(claim("gpu", "5"))
    assumed = claim("gpu", "6", devices=[result("gpu-0")])
    cache.assume(assumed)
    cache.delete("shop/gpu")
    assert seen[-1] == (assumed, None)
    assert "shop/gpu" not in cache and len(cache) == 0
    assert cache.allocated_device_ids() == set()
    before = len(seen)
    cache.delete("shop/gpu")  # already gone: no event
    assert len(seen) == before


def test_reserved_for_index_follows_the_version_the_scheduler_sees() -> None:
    cache, _ = tracker()
    cache.upsert(claim("a", "5", reserved=[pod_ref("web-0", "p0")]))
    cache.upsert(claim("b", "5", reserved=[pod_ref("web-0", "p0"), pod_ref("web-1", "p1"),
                                           {"apiGroup": "example.com", "resource": "jobs",
                                            "name": "j", "uid": "p2"}]))
    assert cache.reserved_for_pod("p0") == {"shop/a", "shop/b"}
    assert cache.reserved_for_pod("p1") == {"shop/b"}
    assert cache.reserved_for_pod("p2") == frozenset()  # not a pod
    # PreBind adds web-2 to a: assumed, then confirmed, then the claim is freed.
    cache.assume(claim("a", "6", reserved=[pod_ref("web-0", "p0"), pod_ref("web-2", "p3")]))
    assert cache.reserved_for_pod("p3") == {"shop/a"}
    cache.restore("shop/a")
    assert cache.reserved_for_pod("p3") == frozenset()
    cache.upsert(claim("a", "7", reserved=[]))
    assert cache.reserved_for_pod("p0") == {"shop/b"}
    cache.delete("shop/b")
    assert cache.reserved_for_pod("p0") == cache.reserved_for_pod("p1") == frozenset()
    assert reserved_for(claim("x", reserved=[pod_ref("w", "u")])) == (
        Consumer("", "pods", "w", "u"),)


def test_allocated_devices_of_stored_claims_and_allocations_in_flight() -> None:
    cache, _ = tracker()
    cache.upsert(claim("a", "5", devices=[result("gpu-0"), result("gpu-1", shareID="s1")]))
    cache.upsert(claim("b", "5"))
    gpu = "gpu.example.com"
    assert cache.allocated_device_ids() == {(gpu, "node-a", "gpu-0")}
    assert cache.allocated_shares() == {(gpu, "node-a", "gpu-1", "s1")}
    # Without consumable capacity a share takes its whole device.
    assert cache.allocated_device_ids(consumable_capacity=False) == {
        (gpu, "node-a", "gpu-0"), (gpu, "node-a", "gpu-1")}
    # Reserve decides b's allocation: in flight, its device is taken at once.
    decided = claim("b", "5", devices=[result("gpu-2")])
    cache.signal_pending_allocation("uid-b", decided)
    assert (gpu, "node-a", "gpu-2") in cache.allocated_device_ids()
    assert cache.pending_allocation("uid-b") is decided
    assert list(cache.pending_allocations()) == [decided]
    # A second pod sharing b while in flight: one removal leaves it in flight.
    cache.signal_pending_allocation("uid-b", claim("b", "5", devices=[result("gpu-9")]))
    assert cache.pending_allocation("uid-b") is decided  # the first decision stands
    assert not cache.remove_pending_allocation("uid-b")
    assert cache.remove_pending_allocation("uid-b")
    assert cache.pending_allocation("uid-b") is None
    assert (gpu, "node-a", "gpu-2") not in cache.allocated_device_ids()
    assert not cache.remove_pending_allocation("uid-b")  # redundant: nothing happens
    cache.signal_pending_allocation("uid-b", decided)
    cache.signal_pending_allocation("uid-b", decided)
    assert cache.remove_pending_allocation("uid-b", force=True)
    # a's allocation goes when the claim is deallocated.
    cache.upsert(claim("a", "6"))
    assert cache.allocated_device_ids() == set() and cache.allocated_shares() == set()


def test_the_live_view_of_taken_devices_follows_claims_and_allocations_in_flight(
) -> None:
    cache, _ = tracker()
    gpu = "gpu.example.com"
    taken = cache.taken_devices()  # one view, read again after each change
    cache.upsert(claim("a", "5", devices=[result("gpu-0"), result("gpu-1", adminAccess=True)]))
    assert (gpu, "node-a", "gpu-0") in taken and (gpu, "node-a", "gpu-1") not in taken
    cache.signal_pending_allocation("uid-b", claim("b", devices=[result("gpu-2")]))
    assert set(taken) == cache.allocated_device_ids() == {
        (gpu, "node-a", "gpu-0"), (gpu, "node-a", "gpu-2")}
    assert len(taken) == 2
    assert cache.remove_pending_allocation("uid-b")
    assert (gpu, "node-a", "gpu-2") not in taken
    cache.upsert(claim("a", "6"))
    assert len(taken) == 0 and not cache.has_shares()
    cache.signal_pending_allocation("uid-c", claim("c", devices=[result("g", shareID="s")]))
    assert cache.has_shares() and len(taken) == 0  # a share is not the whole device
    cache.remove_pending_allocation("uid-c")
    assert not cache.has_shares()
    cache.upsert(claim("d", "5", devices=[result("g", shareID="s")]))
    assert cache.has_shares()


def test_every_change_to_the_devices_taken_in_a_pool_is_logged() -> None:
    """The pool change log DynamicResources' allocation memo follows: each way the
    devices taken in a pool can change names that pool, and nothing else does."""
    cache, _ = tracker()
    gpu = "gpu.example.com"
    seen = cache.pool_changes_total

    def changed() -> list[tuple[str, str]] | None:
        nonlocal seen
        found = cache.pool_changes_since(seen)
        seen = cache.pool_changes_total
        return found

    cache.upsert(claim("a", "5"))
    assert changed() == []  # not allocated: no pool touched
    cache.upsert(claim("a", "6", devices=[result("gpu-0"), result("g", pool="node-b")]))
    assert changed() == [(gpu, "node-a"), (gpu, "node-b")]
    cache.upsert(claim("a", "7"))  # deallocated: the old allocation's pools
    assert changed() == [(gpu, "node-a"), (gpu, "node-b")]
    decided = claim("b", "5", devices=[result("gpu-1", pool="node-c")])
    cache.upsert(claim("b", "5"))
    assert changed() == []
    cache.signal_pending_allocation("uid-b", decided)
    assert changed() == [(gpu, "node-c")]
    cache.signal_pending_allocation("uid-b", decided)  # a second sharer: same devices
    assert changed() == []
    assert not cache.remove_pending_allocation("uid-b")
    assert changed() == []
    assert cache.remove_pending_allocation("uid-b")
    assert changed() == [(gpu, "node-c")]
    cache.assume(claim("b", "6", devices=[result("gpu-1", pool="node-c")]))
    assert changed() == [(gpu, "node-c")]
    cache.restore("shop/b")
    assert changed() == [(gpu, "node-c")]
    cache.upsert(claim("c", "5", devices=[result("gpu-2", adminAccess=True)]))
    assert changed() == [(gpu, "node-a")]  # admin access too: a superset is safe
    cache.delete("shop/c")
    assert changed() == [(gpu, "node-a")]
    # A reader from the future, or one so far behind that the log was cut, starts
    # afresh.
    assert cache.pool_changes_since(cache.pool_changes_total + 1) is None


def test_a_reader_further_behind_than_the_pool_log_is_told_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import policyd.model.dra_objects as dra_objects
    monkeypatch.setattr(dra_objects, "POOL_CHANGE_LOG", 3)
    cache, _ = tracker()
    for rv in range(5, 10):
        cache.upsert(claim("a", str(rv), devices=[result("gpu-0", pool=f"p{rv}")]))
    total = cache.pool_changes_total
    assert total == 9  # the first version adds one pool, each later one two
    assert cache.pool_changes_since(total - 3) == [
        ("gpu.example.com", "p8"), ("gpu.example.com", "p8"), ("gpu.example.com", "p9")]
    assert cache.pool_changes_since(total - 4) is None


def test_a_device_listed_by_two_claims_stays_taken_until_both_let_go() -> None:
    cache, _ = tracker()
    cache.upsert(claim("a", "5", devices=[result("gpu-0")]))
    cache.upsert(claim("b", "5", devices=[result("gpu-0")]))
    cache.delete("shop/a")
    assert cache.allocated_device_ids() == {("gpu.example.com", "node-a", "gpu-0")}
    cache.delete("shop/b")
    assert cache.allocated_device_ids() == set()


def test_generation_moves_on_every_change() -> None:
    cache, _ = tracker()
    marks = [cache.generation]
    cache.upsert(claim("a", "5"))
    marks.append(cache.generation)
    cache.assume(claim("a", "6"))
    marks.append(cache.generation)
    cache.signal_pending_allocation("uid-a", claim("a", "6"))
    marks.append(cache.generation)
    cache.remove_pending_allocation("uid-a")
    marks.append(cache.generation)
    assert marks == sorted(set(marks))


# -- slices ------------------------------------------------------------------------------

def names(objs: list[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_slices_by_node_and_by_pool() -> None:
    dra = DraObjects()
    dra.upsert(RESOURCE_SLICE, slice_("a-gpu", node="node-a", pool="node-a"))
    dra.upsert(RESOURCE_SLICE, slice_("a-nic", node="node-a", driver="nic.example.com",
                                      pool="node-a"))
    dra.upsert(RESOURCE_SLICE, slice_("b-gpu", node="node-b", pool="node-b"))
    dra.upsert(RESOURCE_SLICE, slice_("net-1", node=None, pool="fabric", allNodes=True))
    dra.upsert(RESOURCE_SLICE, slice_("net-2", node=None, pool="fabric", allNodes=True))
    assert names(dra.slices.on_node("node-a")) == ["a-gpu", "a-nic"]
    assert names(dra.slices.node_independent()) == ["net-1", "net-2"]
    assert names(dra.slices.in_pool("gpu.example.com", "fabric")) == ["net-1", "net-2"]
    assert dra.slices.pools() == [("gpu.example.com", "fabric"), ("gpu.example.com",
                                  "node-a"), ("gpu.example.com", "node-b"),
                                  ("nic.example.com", "node-a")]
    # A slice moving to another node (a new version) leaves the old node's index.
    dra.upsert(RESOURCE_SLICE, slice_("a-gpu", node="node-b", pool="node-a"))
    assert names(dra.slices.on_node("node-a")) == ["a-nic"]
    assert names(dra.slices.on_node("node-b")) == ["a-gpu", "b-gpu"]
    dra.delete(RESOURCE_SLICE, "a-nic")
    dra.delete(RESOURCE_SLICE, "missing")
    assert dra.slices.on_node("node-a") == []
    assert ("nic.example.com", "node-a") not in dra.slices.pools()
    assert len(dra.slices) == 4 and "a-nic" not in dra.slices


def test_a_malformed_slice_is_kept_but_indexed_under_empty_names() -> None:
    dra = DraObjects()
    dra.upsert(RESOURCE_SLICE, {"metadata": {"name": "odd"}, "spec": "x"})
    dra.upsert(RESOURCE_SLICE, {"metadata": {"name": "odd2"},
                                "spec": {"nodeName": 3, "pool": [1]}})
    assert len(dra.slices.node_independent()) == 2
    assert dra.slices.pools() == [("", "")]


# -- device classes ----------------------------------------------------------------------

def test_classes_serve_their_extended_resources() -> None:
    dra = DraObjects()
    gpu = device_class("gpu", extended="example.com/gpu", created="2026-01-01T00:00:00Z")
    dra.upsert(DEVICE_CLASS, gpu)
    assert dra.classes.for_extended_resource("example.com/gpu") is gpu
    assert dra.classes.for_extended_resource(
        "deviceclass.resource.kubernetes.io/gpu") is gpu
    assert dra.classes.extended_resource_of("gpu") == "example.com/gpu"
    assert dra.classes.extended_resource_of("missing") == ""
    # Renamed resource: the old name no longer maps.
    gpu2 = device_class("gpu", extended="example.com/accel", created="2026-01-01T00:00:00Z")
    dra.upsert(DEVICE_CLASS, gpu2)
    assert dra.classes.for_extended_resource("example.com/gpu") is None
    assert dra.classes.for_extended_resource("example.com/accel") is gpu2
    dra.delete(DEVICE_CLASS, "gpu")
    assert dra.classes.for_extended_resource("example.com/accel") is None
    assert dra.classes.for_extended_resource(
        "deviceclass.resource.kubernetes.io/gpu") is None


@pytest.mark.parametrize(("first", "second", "winner"), [
    # The one created later wins, in either order of arrival.
    (("old", "2026-01-01T00:00:00Z"), ("new", "2026-02-01T00:00:00Z"), "new"),
    (("new", "2026-02-01T00:00:00Z"), ("old", "2026-01-01T00:00:00Z"), "new"),
    # Created together: the smaller name.
    (("b", "2026-01-01T00:00:00Z"), ("a", "2026-01-01T00:00:00Z"), "a"),
    (("a", "2026-01-01T00:00:00Z"), ("b", "2026-01-01T00:00:00Z"), "a"),
    # No timestamp counts as the oldest.
    (("x", ""), ("y", "2026-01-01T00:00:00Z"), "y"),
])
def test_two_classes_naming_one_extended_resource(first: tuple[str, str],
                                                  second: tuple[str, str],
                                                  winner: str) -> None:
    dra = DraObjects()
    for name, created in (first, second):
        dra.upsert(DEVICE_CLASS, device_class(name, extended="example.com/gpu",
                                              created=created))
    found = dra.classes.for_extended_resource("example.com/gpu")
    assert found is not None and found["metadata"]["name"] == winner


def test_a_losing_class_maps_not_even_its_own_default_name() -> None:
    # Upstream's cache returns before any mapping when a class loses the explicit name.
    dra = DraObjects()
    dra.upsert(DEVICE_CLASS, device_class("new", extended="example.com/gpu",
                                          created="2026-02-01T00:00:00Z"))
    dra.upsert(DEVICE_CLASS, device_class("old", extended="example.com/gpu",
                                          created="2026-01-01T00:00:00Z"))
    assert dra.classes.for_extended_resource("deviceclass.resource.kubernetes.io/old") \
        is None
    # Deleting the loser drops the explicit name even though the winner held it.
    dra.delete(DEVICE_CLASS, "old")
    assert dra.classes.for_extended_resource("example.com/gpu") is None
    assert dra.classes.get("new") is not None


# -- the whole store ---------------------------------------------------------------------

def test_store_routes_kinds_and_memoizes_decodes() -> None:
    dra = DraObjects()
    calls: list[str] = []
    c = claim("gpu", "5")
    dra.upsert(RESOURCE_CLAIM, c)
    dra.upsert(DEVICE_CLASS, device_class("gpu"))
    dra.upsert(RESOURCE_SLICE, slice_("s1"))
    assert dra.get(RESOURCE_CLAIM, "shop/gpu") is c
    assert dra.get(DEVICE_CLASS, "gpu") is not None
    assert dra.get(RESOURCE_SLICE, "s1") is not None

    def decode(obj: Obj) -> str:
        calls.append("x")
        return str(obj["metadata"]["name"])

    assert dra.decoded(c, "name", decode) == dra.decoded(c, "name", decode) == "gpu"
    assert calls == ["x"]
    before = dra.generation
    for kind, key in ((RESOURCE_CLAIM, "shop/gpu"), (DEVICE_CLASS, "gpu"),
                      (RESOURCE_SLICE, "s1")):
        dra.delete(kind, key)
        assert dra.get(kind, key) is None
    assert dra.generation > before
    with pytest.raises(ValueError, match="not a DRA kind"):
        dra.upsert("Pod", c)
    with pytest.raises(ValueError, match="not a DRA kind"):
        dra.delete("Pod", "x")


def test_cluster_state_holds_a_store() -> None:
    state = ClusterState()
    state.dra.upsert(RESOURCE_CLAIM, claim("gpu"))
    assert "shop/gpu" in state.dra.claims
