"""The volume cases of the differential test (`tests.gen.volumes`) without an API server:
deterministic, isolated from other cases, valid for the API server, settled as the
runner expects (every claim it waits for can be bound, the unbound Immediate one
cannot), and drawing every kind often enough for the test's own minimum."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from policyd.model.quantity import parse_quantity
from tests.gen.clusters import HOSTNAME, ZONE
from tests.gen.differential import CASE_LABEL, HOLD_FINALIZER, SCHEDULER_NAME
from tests.gen.volumes import (
    DRIVER,
    EPHEMERAL_TAKEN,
    INLINE,
    LIMITS,
    LOST,
    SETTLES_TO,
    TERMINATING,
    UNBOUND_IMMEDIATE,
    VOLUME_KINDS,
    gen_volume_case,
)
from tests.integration.differential.runner import KubeDecision, Outcome, Tally
from tests.integration.test_differential import DEFAULT_VOLUME_CASES, MIN_PER_VOLUME_KIND

Obj = dict[str, Any]


def _of(case_storage: list[Obj], kind: str) -> list[Obj]:
    return [o for o in case_storage if o["kind"] == kind]


def _claim_volumes(pod: Obj) -> list[str]:
    return [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"].get("volumes", [])
            if "persistentVolumeClaim" in v]


def test_volume_cases_are_a_function_of_seed_and_index() -> None:
    a, b = gen_volume_case(5, 3, "x"), gen_volume_case(5, 3, "x")
    assert json.dumps([a.storage, a.pods, a.pod, a.bind_first], sort_keys=True) == \
        json.dumps([b.storage, b.pods, b.pod, b.bind_first], sort_keys=True)
    c = gen_volume_case(5, 4, "x")
    assert json.dumps(c.storage, sort_keys=True) != json.dumps(a.storage, sort_keys=True)


@pytest.mark.parametrize("index", range(20))
def test_a_twin_is_its_case_under_another_prefix(index: int) -> None:
    # The daemon's decision on the twin is judged against kube-scheduler's on the case:
    # the two scenes must differ in nothing but names and the pod's scheduler.
    case = gen_volume_case(19, index, f"a{index}", twin=(f"b{index}", "other"))
    twin = case.twin
    assert twin is not None and twin.twin is None
    assert twin.pod["spec"]["schedulerName"] == "other"
    twin.pod["spec"]["schedulerName"] = SCHEDULER_NAME
    mine = json.dumps([case.nodes, case.pods, case.pod, case.storage, case.bind_first,
                       case.namespaces], sort_keys=True)
    theirs = json.dumps([twin.nodes, twin.pods, twin.pod, twin.storage, twin.bind_first,
                         twin.namespaces], sort_keys=True)
    assert theirs == mine.replace(f'"a{index}-', f'"b{index}-').replace(
        f'"a{index}"', f'"b{index}"').replace(f'/a{index}-', f'/b{index}-')
    assert twin.volume_kinds == case.volume_kinds


@pytest.mark.parametrize("index", range(40))
def test_volume_cases_stay_inside_their_prefix(index: int) -> None:
    prefix = f"v{index}"
    case = gen_volume_case(17, index, prefix)
    nodes = set(case.node_names)
    case_zones = {f"{prefix}-z{z}" for z in "abc"}
    assert {n["metadata"]["labels"].get(ZONE) for n in case.nodes} - {None} <= case_zones
    classes = {o["metadata"]["name"] for o in _of(case.storage, "StorageClass")}
    assert classes == {f"{prefix}-local", f"{prefix}-imm", f"{prefix}-dyn"}
    for obj in case.storage:
        meta = obj["metadata"]
        # Clean-up deletes cluster-scoped objects by this label.
        assert meta["labels"][CASE_LABEL] == prefix
        if obj["kind"] == "PersistentVolumeClaim":
            assert meta["namespace"] in case.namespaces
            assert obj["spec"]["storageClassName"] in classes
        else:
            assert "namespace" not in meta
            assert meta["name"].startswith(f"{prefix}-")
    for node in _of(case.storage, "CSINode"):
        assert node["metadata"]["name"] in nodes
        assert all(d["name"] == DRIVER for d in node["spec"]["drivers"])
    for pv in _of(case.storage, "PersistentVolume"):
        assert pv["spec"]["storageClassName"] in classes
        assert pv["metadata"]["labels"].get(ZONE, f"{prefix}-za") in case_zones
        for term in (pv["spec"].get("nodeAffinity") or {}).get("required", {}).get(
                "nodeSelectorTerms", []):
            assert term.get("matchExpressions") or term.get("matchFields")
            for expr in term.get("matchExpressions", []):
                if expr["key"] != ZONE or expr["operator"] != "Exists":
                    assert set(expr["values"]) <= (nodes if expr["key"] == HOSTNAME
                                                   else case_zones)
            for expr in term.get("matchFields", []):
                assert expr["key"] == "metadata.name" and len(expr["values"]) == 1
                assert set(expr["values"]) <= nodes
    for pod in [*case.pods, case.pod]:
        for volume in pod["spec"].get("volumes", []):
            for source in ("gcePersistentDisk", "awsElasticBlockStore"):
                if source in volume:
                    assert str(next(iter(volume[source].values()))).startswith(f"{prefix}-")
    claims = {o["metadata"]["name"] for o in _of(case.storage, "PersistentVolumeClaim")}
    for pod in [*case.pods, case.pod]:
        assert set(_claim_volumes(pod)) <= claims
    assert case.pod["spec"]["schedulerName"] == SCHEDULER_NAME
    assert case.pod["spec"]["nodeSelector"][CASE_LABEL] == prefix


@pytest.mark.parametrize("index", range(60))
def test_volume_cases_are_valid_and_settle(index: int) -> None:
    """What the API server's validation requires, and what `differential.volumes.settle`
    waits for: each claim of `bind_first` has a PV that can take it, which no other
    claim can take first (pre-bound to it, or the one Immediate PV of its exact size);
    an unbound Immediate claim has none."""
    case = gen_volume_case(23, index, f"s{index}")
    pvs = _of(case.storage, "PersistentVolume")
    claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c
              for c in _of(case.storage, "PersistentVolumeClaim")}
    for obj in [*pvs, *claims.values()]:
        modes = obj["spec"]["accessModes"]
        assert modes and ("ReadWriteOncePod" not in modes or modes == ["ReadWriteOncePod"])
    for pv in pvs:
        if "local" in pv["spec"]:
            assert pv["spec"]["nodeAffinity"]  # required for local volumes

    def can_take(pv: Obj, claim: Obj) -> bool:
        return (pv["spec"]["storageClassName"] == claim["spec"]["storageClassName"]
                and set(claim["spec"]["accessModes"]) <= set(pv["spec"]["accessModes"])
                and parse_quantity(pv["spec"]["capacity"]["storage"])
                >= parse_quantity(claim["spec"]["resources"]["requests"]["storage"]))

    prebound = {f"{p['spec']['claimRef']['namespace']}/{p['spec']['claimRef']['name']}": p
                for p in pvs if "claimRef" in p["spec"]
                and "uid" not in p["spec"]["claimRef"]}
    free = [p for p in pvs if "claimRef" not in p["spec"]
            and p["spec"]["storageClassName"].endswith("-imm")]
    unbound = [claims[k] for k in case.bind_first
               if k not in prebound and not claims[k]["spec"].get("volumeName")]
    by_name = {p["metadata"]["name"]: p for p in pvs}
    for key in case.bind_first:
        pinned = claims[key]["spec"].get("volumeName")
        if key in prebound:
            assert can_take(prebound[key], claims[key])
        elif pinned:
            # A claim naming its PV: the PV controller binds the two, unbound as it is.
            assert can_take(by_name[pinned], claims[key])
            assert "claimRef" not in by_name[pinned]["spec"]
        else:
            assert claims[key]["spec"]["storageClassName"].endswith("-imm")
    for key, claim in claims.items():
        pinned = claim["spec"].get("volumeName")
        if pinned and key not in case.bind_first:
            # Pinned to a PV that is missing or cannot take it: it stays Pending (or,
            # bind-completed, goes Lost), never bound.
            assert pinned not in by_name or not can_take(by_name[pinned], claim)
    for pv in pvs:
        ref = pv["spec"].get("claimRef", {})
        if ref.get("uid"):
            # Released (Retain) or Failed (Delete): what settle waits for.
            assert ref["uid"] not in {c["metadata"].get("uid") for c in claims.values()}
            phase = pv["metadata"]["labels"][SETTLES_TO]
            policy = pv["spec"]["persistentVolumeReclaimPolicy"]
            assert (phase, policy) in {("Released", "Retain"), ("Failed", "Delete")}
        else:
            assert SETTLES_TO not in pv["metadata"]["labels"]
    # The PV controller gives a claim the smallest free PV that can take it, in no set
    # order of claims: each claim's smallest must be a PV no smaller claim wants, so
    # that every order binds the same pairs (a case and its twin alike).
    def size(obj: Obj) -> Any:
        spec = obj["spec"]
        return parse_quantity(spec["capacity"]["storage"] if "capacity" in spec
                              else spec["resources"]["requests"]["storage"])

    assert len(free) == len(unbound)
    for claim in unbound:
        fits = sorted((p for p in free if can_take(p, claim)), key=size)
        assert fits and size(fits[0]) == size(claim)
        assert len({size(p) for p in free}) == len(free)
    for key, claim in claims.items():
        if claim["spec"]["storageClassName"].endswith("-imm") and key not in case.bind_first:
            assert not any(can_take(p, claim) for p in pvs)


def test_every_volume_kind_is_drawn_often_enough_for_the_test() -> None:
    # The integration test fails a default-sized run that has a kind fewer than
    # MIN_PER_VOLUME_KIND times; the generator must not make that a matter of luck.
    for seed in range(20):
        kinds: Counter[str] = Counter()
        for i in range(DEFAULT_VOLUME_CASES):
            kinds.update(gen_volume_case(seed, i, f"k{i}").volume_kinds)
        assert min(kinds[k] for k in VOLUME_KINDS) >= MIN_PER_VOLUME_KIND + 2, (seed, kinds)


def test_kinds_say_what_the_pod_uses() -> None:
    for i in range(80):
        case = gen_volume_case(29, i, f"w{i}")
        used = set(_claim_volumes(case.pod))
        volumes = case.pod["spec"].get("volumes", [])
        inline = [v for v in volumes if "gcePersistentDisk" in v or "awsElasticBlockStore" in v]
        ephemeral = [v["name"] for v in volumes if "ephemeral" in v]
        if not used and not inline and not ephemeral:
            assert case.volume_kinds == ()
        assert (INLINE in case.volume_kinds) == bool(inline)
        assert (EPHEMERAL_TAKEN in case.volume_kinds) == bool(ephemeral)
        names = {c["metadata"]["name"]: c for c in _of(case.storage, "PersistentVolumeClaim")}
        for volume in ephemeral:
            # The claim an ephemeral volume would get is there already, not the pod's.
            taken = names[f"{case.pod['metadata']['name']}-{volume}"]
            assert "ownerReferences" not in taken["metadata"]
        by_kind = {LOST: "Lost", TERMINATING: "Terminating"}
        for kind, phase in by_kind.items():
            settles = {n for n, c in names.items()
                       if c["metadata"]["labels"].get(SETTLES_TO) == phase}
            assert (kind in case.volume_kinds) == bool(used & settles), (i, kind)
        for name in used:
            claim = names[name]
            if claim["metadata"]["labels"].get(SETTLES_TO) == "Lost":
                assert claim["spec"]["volumeName"] not in {
                    p["metadata"]["name"] for p in _of(case.storage, "PersistentVolume")}
                assert claim["metadata"]["annotations"] == {
                    "pv.kubernetes.io/bind-completed": "yes"}
            if claim["metadata"]["labels"].get(SETTLES_TO) == "Terminating":
                assert claim["metadata"]["finalizers"] == [HOLD_FINALIZER]
        if UNBOUND_IMMEDIATE in case.volume_kinds:
            big = {c["metadata"]["name"] for c in _of(case.storage, "PersistentVolumeClaim")
                   if c["spec"]["resources"]["requests"]["storage"] == "50Gi"}
            assert used & big
        if LIMITS in case.volume_kinds:
            assert any("count" in d.get("allocatable", {})
                       for n in _of(case.storage, "CSINode") for d in n["spec"]["drivers"])


def test_tally_counts_volume_kinds() -> None:
    tally = Tally()
    for i in range(3):
        case = gen_volume_case(31, i, f"t{i}")
        tally.add(Outcome(case, KubeDecision(node=case.node_names[0])))
    summary = tally.summary()
    assert "3 volume cases: " in summary
    assert all(kind in summary for kind in VOLUME_KINDS)
    # Volume cases are neither probed nor given to the daemon: no counts of either.
    assert "probes" not in summary
    assert sum(tally.volume_kinds.values()) == sum(
        len(gen_volume_case(31, i, f"t{i}").volume_kinds) for i in range(3))
