"""The DRA cases of the differential test (`tests.gen.dra`) without an API server:
deterministic, isolated from other cases, well-formed (decoded by policyd's DRA
decoders, shaped as the API server's validation wants), decided by policyd's engine
without an internal error, and drawing every kind often enough for the test's own
minimum; and the comparison's helpers (`differential.dra`) on plain values."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from policyd.config.plugins import default_framework
from policyd.dra.objects import (
    decode_device_class,
    decode_resource_claim,
    decode_resource_slice,
)
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.model.cluster import ClusterState
from policyd.model.dra_objects import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE
from policyd.model.quantity import nano_value
from policyd.model.records import node_from_dict, pod_from_dict
from tests.gen.clusters import HOSTNAME
from tests.gen.differential import CASE_LABEL, SCHEDULER_NAME, UNDER_TEST_LABEL
from tests.gen.dra import (
    ADMIN,
    ADMIN_ACCESS_LABEL,
    ALL,
    DISTINCT,
    DRA_KINDS,
    FIRST_AVAILABLE,
    GATE,
    MATCH,
    MISSING_CLASS,
    SHARED,
    TEMPLATE,
    DraCase,
    allocation_status,
    drivers,
    gen_dra_case,
    read_back_offline,
)
from tests.integration.differential.dra import (
    DraOutcome,
    DraTally,
    allocation_diffs,
    claim_names,
    engine_allocations,
    lost_claim_statuses,
    lost_statuses,
    normal_allocation,
    renamed,
    template_entries,
)
from tests.integration.differential.runner import KubeDecision, Outcome
from tests.integration.test_differential_dra import DEFAULT_CASES, MIN_PER_KIND

Obj = dict[str, Any]
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _of(case: DraCase, kind: str) -> list[Obj]:
    return [o for o in case.objects if o["kind"] == kind]


def _dump(case: DraCase) -> str:
    c = case.case
    return json.dumps([c.nodes, c.pods, c.pod, c.namespaces, case.objects,
                       [a.status for a in case.allocations]], sort_keys=True)


def test_dra_cases_are_a_function_of_seed_and_index() -> None:
    assert _dump(gen_dra_case(5, 3, "x")) == _dump(gen_dra_case(5, 3, "x"))
    assert _dump(gen_dra_case(5, 4, "x")) != _dump(gen_dra_case(5, 3, "x"))
    assert _dump(gen_dra_case(6, 3, "x")) != _dump(gen_dra_case(5, 3, "x"))


@pytest.mark.parametrize("index", range(20))
def test_a_twin_is_its_case_under_another_prefix(index: int) -> None:
    case = gen_dra_case(19, index, f"a{index}", twin=(f"b{index}", "other"))
    twin = case.twin
    assert twin is not None and twin.twin is None and case.case.twin is twin.case
    assert twin.case.pod["spec"]["schedulerName"] == "other"
    twin.case.pod["spec"]["schedulerName"] = SCHEDULER_NAME
    # Names start with the prefix; the case label is the prefix itself.
    theirs = json.dumps(renamed(json.loads(_dump(twin)), f"b{index}", f"a{index}"))
    assert theirs.replace(f'"b{index}"', f'"a{index}"') == json.dumps(json.loads(
        _dump(case)))
    assert twin.kinds == case.kinds


@pytest.mark.parametrize("index", range(40))
def test_dra_cases_stay_inside_their_prefix(index: int) -> None:
    prefix = f"d{index}"
    case = gen_dra_case(17, index, prefix)
    own = set(drivers(prefix))
    for obj in case.objects:
        meta = obj["metadata"]
        # Clean-up deletes the cluster-scoped ones by this label.
        assert meta["labels"][CASE_LABEL] == prefix
        assert meta["name"].startswith(f"{prefix}-") or meta.get("namespace") \
            in case.case.namespaces
    for cls in _of(case, "DeviceClass"):
        # The driver is checked first: no selector reads another case's device.
        first = cls["spec"]["selectors"][0]["cel"]["expression"]
        assert re.fullmatch(r'device\.driver == "([^"]+)"', first)
        assert first.split('"')[1] in own
    for s in _of(case, "ResourceSlice"):
        assert s["spec"]["driver"] in own
    classes = {c["metadata"]["name"] for c in _of(case, "DeviceClass")}
    for request in _requests(case):
        assert request["deviceClassName"] in classes | {f"{prefix}-missing"}
    pod = case.case.pod
    assert pod["spec"]["nodeSelector"][CASE_LABEL] == prefix
    assert pod["spec"]["schedulingGates"] == [{"name": GATE}]
    assert pod["metadata"]["labels"][UNDER_TEST_LABEL] == "true"


def _requests(case: DraCase) -> list[Obj]:
    """Every device request (exactly, or a subrequest) of the case's claims and
    templates."""
    out: list[Obj] = []
    for obj in _of(case, "ResourceClaim") + _of(case, "ResourceClaimTemplate"):
        spec = obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]
        for r in spec["devices"]["requests"]:
            out += [r["exactly"]] if "exactly" in r else r["firstAvailable"]
    return out


@pytest.mark.parametrize("index", range(60))
def test_dra_objects_decode_and_have_the_shape_the_api_server_wants(index: int) -> None:
    case = gen_dra_case(23, index, f"w{index}")
    for cls in _of(case, "DeviceClass"):
        decode_device_class(cls)
    pools: dict[tuple[str, str], list[Obj]] = {}
    for s in _of(case, "ResourceSlice"):
        decoded = decode_resource_slice(s, nano_value)
        spec = s["spec"]
        pools.setdefault((spec["driver"], spec["pool"]["name"]), []).append(spec)
        assert len(spec["driver"]) <= 63
        where = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
                 if k in spec]
        assert len(where) == 1, spec
        assert ("devices" in spec) != ("sharedCounters" in spec)
        for device in spec.get("devices", []):
            assert DNS_LABEL.match(device["name"])
            own = [k for k in ("nodeName", "nodeSelector", "allNodes") if k in device]
            assert len(own) == (1 if spec.get("perDeviceNodeSelection") else 0)
        assert len(decoded.devices) == len(spec.get("devices", []))
    for (_, _), specs in pools.items():
        # Every slice of a pool is there, and counters consumed are the pool's.
        assert {s["pool"]["resourceSliceCount"] for s in specs} == {len(specs)}
        counter_sets = {c["name"] for s in specs for c in s.get("sharedCounters", [])}
        for s in specs:
            for device in s.get("devices", []):
                for use in device.get("consumesCounters", []):
                    assert use["counterSet"] in counter_sets
    for claim in _of(case, "ResourceClaim"):
        decode_resource_claim(claim, nano_value)
    for template in _of(case, "ResourceClaimTemplate"):
        decode_resource_claim({**template, "kind": "ResourceClaim",
                               "spec": template["spec"]["spec"]}, nano_value)
    if ADMIN in case.kinds:
        assert case.case.namespaces[case.case.pod["metadata"]["namespace"]][
            ADMIN_ACCESS_LABEL] == "true"


@pytest.mark.parametrize("index", range(40))
def test_allocations_for_pods_on_nodes_name_their_devices(index: int) -> None:
    case = gen_dra_case(29, index, f"p{index}")
    devices = {(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]): s
               for s in _of(case, "ResourceSlice") for d in s["spec"].get("devices", [])}
    claims = {c["metadata"]["name"]: c for c in _of(case, "ResourceClaim")}
    pods = {p["metadata"]["name"]: p for p in case.case.pods}
    taken = []
    for a in case.allocations:
        status = allocation_status(a, "uid-1")
        assert status["reservedFor"] == [{"resource": "pods", "name": a.pod, "uid": "uid-1"}]
        [result] = status["allocation"]["devices"]["results"]
        key = (result["driver"], result["pool"], result["device"])
        taken.append(key)
        node = pods[a.pod]["spec"]["nodeName"]
        assert devices[key]["spec"]["nodeName"] == node
        assert status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0][
            "matchFields"][0]["values"] == [node]
        claim = {**claims[a.claim], "status": status}
        decoded = decode_resource_claim(claim, nano_value)
        assert decoded.allocated is not None
        assert [d.request for d in decoded.allocated] == [
            r["name"] for r in claim["spec"]["devices"]["requests"]]
        assert pods[a.pod]["spec"]["resourceClaims"] == [
            {"name": "dev", "resourceClaimName": a.claim}]
    assert len(taken) == len(set(taken))
    assert "uid" not in json.dumps([a.status for a in case.allocations])


def offline_cluster(case: DraCase) -> tuple[ClusterState, dict[str, Any]]:
    """The case as the runner reads it back (`read_back_offline`), in a ClusterState;
    and the pod under test."""
    back = read_back_offline(case)
    cluster = ClusterState([node_from_dict(n) for n in case.case.nodes],
                           [pod_from_dict(p) for p in back.pods])
    kinds = {"DeviceClass": DEVICE_CLASS, "ResourceSlice": RESOURCE_SLICE,
             "ResourceClaim": RESOURCE_CLAIM}
    for obj in back.objects:
        cluster.dra.upsert(kinds[obj["kind"]], obj)
    return cluster, back.pod


def _decide(case: DraCase) -> ScheduleResult:
    cluster, pod = offline_cluster(case)
    return schedule_one(default_framework(seed=1), pod_from_dict(pod), cluster)


@pytest.mark.parametrize("index", range(48))
def test_policyd_decides_every_case_without_an_internal_error(index: int) -> None:
    """Selectors compile and evaluate, objects decode: what the differential test
    compares is a decision, never an error of the generator's making."""
    case = gen_dra_case(31, index, f"e{index}")
    result = _decide(case)
    assert result.error is None, result.message
    if MISSING_CLASS in case.kinds:
        assert result.node is None
        assert f"device class e{index}-missing does not exist" in result.message
    if result.node is not None:
        mine = engine_allocations(result, result.node)
        shared = {e["name"] for e in case.case.pod["spec"]["resourceClaims"]
                  if e.get("resourceClaimName", "").startswith("pre")}
        entries = {e["name"] for e in case.case.pod["spec"]["resourceClaims"]} - shared
        assert set(mine or {}) == entries
        for allocation in (mine or {}).values():
            assert allocation["devices"]["results"]


def test_the_engine_both_places_and_refuses_dra_cases() -> None:
    # The comparison needs both outcomes, and devices on nodes to compare.
    results = [_decide(gen_dra_case(37, i, f"b{i}")) for i in range(DEFAULT_CASES)]
    placed = sum(r.node is not None for r in results)
    refused = [r.message for r in results if r.node is None]
    assert placed >= 15, placed
    assert sum("cannot allocate all claims" in m for m in refused) >= 5, refused


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_dra_kind_is_drawn_often_enough_for_the_test(seed: int) -> None:
    # A run of the default size fails when a kind was drawn fewer than MIN_PER_KIND
    # times; the generator must not make that a matter of luck.
    kinds: Counter[str] = Counter()
    for i in range(DEFAULT_CASES):
        kinds.update(gen_dra_case(seed, i, f"k{i}").kinds)
    assert min(kinds[k] for k in DRA_KINDS) >= MIN_PER_KIND + 1, (seed, kinds)


def test_kinds_say_what_the_claims_use() -> None:
    for i in range(60):
        case = gen_dra_case(41, i, f"s{i}")
        entries = case.case.pod["spec"]["resourceClaims"]
        assert (TEMPLATE in case.kinds) == any(
            "resourceClaimTemplateName" in e for e in entries)
        shared = {a.claim for a in case.allocations}
        assert (SHARED in case.kinds) == any(
            e.get("resourceClaimName") in shared for e in entries)
        specs = [o["spec"] for o in _of(case, "ResourceClaim")
                 if o["metadata"]["name"] not in shared] + [
            o["spec"]["spec"] for o in _of(case, "ResourceClaimTemplate")]
        text = json.dumps(specs)
        assert (FIRST_AVAILABLE in case.kinds) == ('"firstAvailable"' in text)
        assert (ALL in case.kinds) == ('"All"' in text)
        assert (MATCH in case.kinds) == ('"matchAttribute"' in text)
        assert (DISTINCT in case.kinds) == ('"distinctAttribute"' in text)
        assert template_entries(case.case.pod) == {
            e["name"] for e in entries if "resourceClaimTemplateName" in e}
        assert case.case.pod["spec"]["containers"][0]["resources"]["claims"] == [
            {"name": e["name"]} for e in entries]


# -- the comparison's helpers -------------------------------------------------------------

def _allocation(*devices: tuple[str, str], selector: str | None = "n1", **extra: Any) -> Obj:
    results = [{"request": r, "driver": "d.io", "pool": "n1", "device": d, **extra}
               for r, d in devices]
    out: Obj = {"devices": {"results": results}}
    if selector is not None:
        out["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [selector]}]}]}
    return out


def test_allocations_compare_devices_capacity_and_node_selector() -> None:
    mine = {"c0": _allocation(("r0", "gpu-0"), ("r0", "gpu-1")), "c1": _allocation(
        ("r0", "nic-0"), consumedCapacity={"bandwidth": "2Gi"}, shareID="a-b")}
    same = {"c0": {**_allocation(("r0", "gpu-0"), ("r0", "gpu-1")),
                   "allocationTimestamp": "2026-01-01T00:00:00Z"},
            "c1": _allocation(("r0", "nic-0"),
                              consumedCapacity={"bandwidth": "2147483648"},
                              shareID="c-d")}
    assert allocation_diffs(mine, same, "kube-scheduler") == []
    other_device = {**same, "c0": _allocation(("r0", "gpu-0"), ("r0", "gpu-2"))}
    [diff] = allocation_diffs(mine, other_device, "kube-scheduler")
    assert diff.startswith("claim c0: kube-scheduler allocated ") and "gpu-2" in diff
    order = {**same, "c0": _allocation(("r0", "gpu-1"), ("r0", "gpu-0"))}
    assert len(allocation_diffs(mine, order, "x")) == 1
    assert len(allocation_diffs(mine, {**same, "c0": _allocation(
        ("r0", "gpu-0"), ("r0", "gpu-1"), selector="n2")}, "x")) == 1
    assert len(allocation_diffs(mine, {**same, "c0": _allocation(
        ("r0", "gpu-0"), ("r0", "gpu-1"), selector=None)}, "x")) == 1
    assert len(allocation_diffs(mine, {**same, "c1": _allocation(
        ("r0", "nic-0"), consumedCapacity={"bandwidth": "1Gi"}, shareID="x")}, "x")) == 1
    assert len(allocation_diffs(mine, {**same, "c1": _allocation(
        ("r0", "nic-0"), consumedCapacity={"bandwidth": "2Gi"})}, "x")) == 1
    missing = allocation_diffs(mine, {"c1": same["c1"]}, "policyd run")
    assert missing == [f"claim c0: policyd run allocated null, policyd "
                       f"{json.dumps(normal_allocation(mine['c0']), sort_keys=True)}"]
    tolerated = _allocation(("r0", "gpu-0"), ("r0", "gpu-1"), tolerations=[
        {"operator": "Exists"}])
    assert len(allocation_diffs(mine, {**same, "c0": tolerated}, "x")) == 1


def test_renamed_reads_a_twin_under_its_cases_names() -> None:
    twin = {"driver": "s1-gpu.diff.io", "pool": "s1-n0", "node": ["s1-n0"],
            "other": "s10-n0", "inner": "xs1-n0", "device": "gpu-0"}
    assert renamed(twin, "s1", "r1") == {
        "driver": "r1-gpu.diff.io", "pool": "r1-n0", "node": ["r1-n0"],
        "other": "s10-n0", "inner": "xs1-n0", "device": "gpu-0"}


def test_engine_allocations_are_by_entry_and_only_for_feasible_nodes() -> None:
    for i in range(40):
        case = gen_dra_case(43, i, f"f{i}")
        result = _decide(case)
        if result.node is None or not engine_allocations(result, result.node):
            continue
        names = {n["metadata"]["name"] for n in case.case.nodes}
        for node in names - set(result.feasible):
            assert engine_allocations(result, node) is None
        mine = engine_allocations(result, result.node)
        assert mine is not None
        for entry, allocation in mine.items():
            selector = json.dumps(allocation.get("nodeSelector"))
            # A per-node device's allocation names its node; network ones their nodes.
            if any(r["pool"] == result.node for r in allocation["devices"]["results"]):
                assert result.node in selector, (entry, allocation)
        return
    raise AssertionError("no case placed with devices allocated")


def test_hostname_label_is_what_network_pools_select() -> None:
    case = next(c for c in (gen_dra_case(47, i, f"h{i}") for i in range(40))
                if any("nodeSelector" in s["spec"] for s in _of(c, "ResourceSlice")))
    for s in _of(case, "ResourceSlice"):
        for term in s["spec"].get("nodeSelector", {}).get("nodeSelectorTerms", []):
            for expr in term["matchExpressions"]:
                assert expr["key"] == HOSTNAME
                assert set(expr["values"]) <= set(case.case.node_names)


def test_tally_counts_kinds_devices_and_refusals() -> None:
    tally = DraTally()
    cases = [gen_dra_case(53, i, f"t{i}") for i in range(3)]
    refused = KubeDecision(reason="Unschedulable", message=(
        "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable"))
    tally.add(DraOutcome(cases[0], Outcome(cases[0].case, refused)))
    tally.add(DraOutcome(cases[1], Outcome(cases[1].case, KubeDecision(node="t1-n0")),
                         kube_claims=2, daemon_claims=1))
    tally.add(DraOutcome(cases[2], Outcome(cases[2].case, KubeDecision(node="t2-n0")),
                         kube_claims=0))
    assert (tally.kube_devices, tally.daemon_devices, tally.claims) == (1, 1, 3)
    assert tally.cannot_allocate == 1
    assert sum(tally.kinds.values()) == sum(len(c.kinds) for c in cases)
    summary = tally.summary()
    assert "1 messages with 'cannot allocate all claims'" in summary
    assert "devices compared for 1 pods bound by kube-scheduler and 1 twins" in summary
    assert all(kind in summary for kind in DRA_KINDS)


def test_claim_names_follow_the_pod_and_the_controller() -> None:
    case = next(c for c in (gen_dra_case(59, i, f"n{i}") for i in range(40))
                if {"resourceClaimName", "resourceClaimTemplateName"} <= {
                    k for e in c.case.pod["spec"]["resourceClaims"] for k in e})
    entries = case.case.pod["spec"]["resourceClaims"]
    named = {e["name"]: e["resourceClaimName"] for e in entries if "resourceClaimName" in e}
    # Before the controller made the template claims: only the named ones.
    assert claim_names(case.case.pod) == named
    back = read_back_offline(case)
    made = {s["name"]: s["resourceClaimName"]
            for s in back.pod["status"]["resourceClaimStatuses"]}
    assert claim_names(back.pod) == {**named, **made}
    assert set(claim_names(back.pod)) == {e["name"] for e in entries}
    # A template entry the controller decided needs no claim has none.
    back.pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"] = None
    skipped = back.pod["status"]["resourceClaimStatuses"][0]["name"]
    assert skipped not in claim_names(back.pod)


def _key(pod: dict[str, Any]) -> tuple[str, str]:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]


def test_a_claim_dropped_from_the_status_sets_the_case_aside() -> None:
    case = next(c for c in (gen_dra_case(61, i, f"l{i}", twin=(f"m{i}", "other"))
                            for i in range(40))
                if len(template_entries(c.case.pod)) >= 2)
    back = read_back_offline(case)
    twin_pod = case.twin.case.pod if case.twin is not None else {}
    decisions = {_key(back.pod): KubeDecision(pod=back.pod),
                 _key(twin_pod): KubeDecision(pod=twin_pod)}
    # The twin, as created, has no statuses yet: all its template entries are missing.
    twin_entries = sorted(template_entries(twin_pod))
    assert lost_statuses(case, decisions) == "; ".join(
        f"{_key(twin_pod)[0]}/{_key(twin_pod)[1]}: {e}" for e in twin_entries)
    decisions[_key(twin_pod)] = KubeDecision(pod=back.pod)
    assert lost_statuses(case, decisions) == ""
    assert lost_claim_statuses(back.pod) == set()
    # The controller's later apply names one claim only: the other entry is lost.
    statuses = back.pod["status"]["resourceClaimStatuses"]
    kept = next(s for s in statuses if s["name"] in template_entries(back.pod))
    back.pod["status"]["resourceClaimStatuses"] = [kept]
    assert lost_claim_statuses(back.pod) == template_entries(back.pod) - {kept["name"]}
    assert lost_statuses(case, decisions) != ""
