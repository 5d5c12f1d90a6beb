"""The differential test's DRA cases (`tests.gen.dra`) as allocator scenes: for each
case and each of its nodes, the claims of the pod under test that need allocating,
every slice and class of the case, and the claims allocated for pods on nodes, as
kube-scheduler's DynamicResources hands them to its allocator on that node.

Upstream's allocator (`upstream/allocate.go`) has allocated them once
(`upstream/record_cases.py` wrote `data/upstream_case_allocations.json`) and
`test_case_scenes.py` holds policyd's allocator to its answers: what the differential
test compares against a real kube-scheduler, checked here without an API server.

The objects are given the API server's defaults first (allocationMode ExactCount and
count 1, a toleration's operator Equal): upstream's allocator reads the stored objects,
which have them. Cases whose claim names a class that does not exist are left out
(PreFilter refuses them before any allocation), as are cases with nothing to allocate.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.gen.dra import gen_dra_case, read_back_offline

# The run the recorded scenes come from: large enough to draw every kind of case.
SEED = 11
CASES = 96


def with_defaults(claim: dict[str, Any]) -> dict[str, Any]:
    """A copy of `claim` with the defaults the API server sets on create."""
    out = copy.deepcopy(claim)
    for request in out["spec"]["devices"]["requests"]:
        for exact in [request["exactly"]] if "exactly" in request \
                else request["firstAvailable"]:
            exact.setdefault("allocationMode", "ExactCount")
            if exact["allocationMode"] == "ExactCount":
                exact.setdefault("count", 1)
            for toleration in exact.get("tolerations", ()):
                toleration.setdefault("operator", "Equal")
    return out


def _class_names(claim: dict[str, Any]) -> set[str]:
    names = set()
    for request in claim["spec"]["devices"]["requests"]:
        for exact in [request["exactly"]] if "exactly" in request \
                else request["firstAvailable"]:
            names.add(exact["deviceClassName"])
    return names


def case_scenes(seed: int = SEED, count: int = CASES) -> dict[str, dict[str, Any]]:
    """`<index>/<node>` -> the allocator scene (the harness's input: claims, slices,
    classes, node, allocated) of case `index` of the run with `seed` on that node."""
    out: dict[str, dict[str, Any]] = {}
    for index in range(count):
        case = gen_dra_case(seed, index, f"u{index}")
        back = read_back_offline(case)
        claims = {o["metadata"]["name"]: o for o in back.objects
                  if o["kind"] == "ResourceClaim"}
        names = {s["name"]: s["resourceClaimName"]
                 for s in back.pod["status"]["resourceClaimStatuses"]}
        names.update({e["name"]: e["resourceClaimName"]
                      for e in back.pod["spec"]["resourceClaims"]
                      if "resourceClaimName" in e})
        pods_claims = [claims[names[e["name"]]] for e in back.pod["spec"]["resourceClaims"]]
        todo = [with_defaults(c) for c in pods_claims if "status" not in c]
        classes = [o for o in back.objects if o["kind"] == "DeviceClass"]
        known = {c["metadata"]["name"] for c in classes}
        if not todo or any(_class_names(c) - known for c in todo):
            continue
        allocated = [with_defaults(c) for c in claims.values() if "status" in c]
        slices = [o for o in back.objects if o["kind"] == "ResourceSlice"]
        for node in case.case.nodes:
            meta = node["metadata"]
            out[f"{index}/{meta['name']}"] = {
                "claims": todo, "slices": slices, "classes": classes,
                "node": {"metadata": {"name": meta["name"], "labels": meta["labels"]}},
                "allocated": allocated}
    return out
