"""The device side of DRA cases (`tests.gen.dra`): put their DeviceClasses,
ResourceSlices, templates and claims on the API server, write the allocations of the
claims pods on nodes hold, let the resourceclaim controller make the template claims,
make sure both schedulers have seen everything, read it back for policyd, compare the
devices each scheduler allocated, and clean up.

When are the claims read back? After the resourceclaim controller made the pods'
template claims and before any scheduler may allocate them: kube-scheduler's PreBind
writes its allocation into the claims, so a read made after its decision would show
policyd the answer. The pods under test are therefore created with a scheduling gate
(`tests.gen.dra.GATE`): the controller makes their claims all the same (it ignores
gates), the runner waits until every pod's status names its claims, runs the DRA
barrier (`dra_barrier`), reads the classes, slices and claims, and only then removes the
gates. Nothing else writes those objects in between: cases never share a driver, a
class or a claim. (Nodes and pods are read back after the decisions, as for every case.)

The devices compared: for a pod kube-scheduler bound, the allocation it wrote into each
claim it allocated (status.allocation: each result's request, driver, pool and device,
admin access, tolerations, consumed capacity and whether it has a share ID, whose value
is random; and the allocation's node selector) must be what policyd's DynamicResources
Filter allocated on that node in the cycle the engine ran (the allocation Reserve would
take, `DraState.node_allocations`). With the daemon, the twin's claims that `policyd run`
allocated must hold what the engine allocated on the node the daemon chose (read under
the case's names).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policyd.config.plugins import default_framework
from policyd.dra.results import AllocationResult
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.kube.client import ApiError
from policyd.model.dra_objects import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE, DraObjects
from policyd.model.quantity import nano_value
from policyd.model.records import pod_from_dict
from policyd.plugins.dynamicresources.allocation import DraState
from policyd.plugins.dynamicresources.plugin import STATE_KEY
from tests.gen.clusters import HOSTNAME
from tests.gen.differential import CASE_LABEL, UNDER_TEST_LABEL
from tests.gen.dra import API_VERSION, DRA_KINDS, DraCase, allocation_status
from tests.integration.differential.runner import (
    BARRIER_NAMESPACE,
    SCORED,
    ColumnarScores,
    KubeDecision,
    Outcome,
    Runner,
    Tally,
    compare,
    unbound,
)

_GROUP = f"/apis/{API_VERSION}"
# kind -> collection path ({ns} for namespaced kinds), in creation order.
_PATHS = {
    "DeviceClass": f"{_GROUP}/deviceclasses",
    "ResourceSlice": f"{_GROUP}/resourceslices",
    "ResourceClaimTemplate": f"{_GROUP}/namespaces/{{ns}}/resourceclaimtemplates",
    "ResourceClaim": f"{_GROUP}/namespaces/{{ns}}/resourceclaims",
}
# What DynamicResources reads, listed for the read-back.
_LISTS = {
    DEVICE_CLASS: f"{_GROUP}/deviceclasses",
    RESOURCE_SLICE: f"{_GROUP}/resourceslices",
    RESOURCE_CLAIM: f"{_GROUP}/resourceclaims",
}
# Raw objects by kind, as listed (what `attach_dra` puts into a ClusterState).
DraLists = dict[str, list[dict[str, Any]]]


def put_dra(runner: Runner, cases: Sequence[DraCase]) -> None:
    """Create the cases' DRA objects kind by kind (each kind concurrently), once their
    namespaces exist (`Runner.put_scenes`)."""
    for kind, path in _PATHS.items():
        runner.each(lambda o, path=path: runner.post(  # type: ignore[misc]
            path.format(ns=o["metadata"].get("namespace", "")), o),
            [o for c in cases for o in c.objects if o["kind"] == kind])


def write_allocations(runner: Runner, cases: Sequence[DraCase]) -> None:
    """Allocate the claims of pods on nodes (`DraCase.allocations`) as kube-scheduler's
    PreBind would have: the allocation and the pod in reservedFor, through the status
    subresource, once the pod exists (its uid is in the reservation)."""
    def write(item: Any) -> None:
        pod = runner.client.request(
            "GET", f"/api/v1/namespaces/{item.namespace}/pods/{item.pod}")
        runner.client.request(
            "PATCH", f"{_GROUP}/namespaces/{item.namespace}/resourceclaims/"
                     f"{item.claim}/status",
            body={"status": allocation_status(item, pod["metadata"]["uid"])},
            content_type="application/merge-patch+json")

    runner.each(write, [a for c in cases for a in c.allocations])


def template_entries(pod: Mapping[str, Any]) -> set[str]:
    """The names of a pod's spec.resourceClaims entries made from a template."""
    return {e["name"] for e in pod["spec"].get("resourceClaims", ())
            if e.get("resourceClaimTemplateName")}


def wait_for_template_claims(runner: Runner, pods: Sequence[dict[str, Any]]) -> None:
    """Return once the resourceclaim controller has recorded a claim for every template
    entry of `pods` in their status.resourceClaimStatuses; TimeoutError after three
    times the runner's timeout, naming the pods still waiting."""
    want = {(p["metadata"]["namespace"], p["metadata"]["name"]): template_entries(p)
            for p in pods}
    want = {k: v for k, v in want.items() if v}
    deadline = time.monotonic() + 3 * runner.timeout
    while want:
        listed = runner.client.request(
            "GET", "/api/v1/pods", query={"labelSelector": f"{UNDER_TEST_LABEL}=true"})
        for pod in listed.get("items", []):
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            if key in want and want[key] <= claim_names(pod).keys():
                del want[key]
        if not want:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the resourceclaim controller made no claims for "
                               f"{sorted(want)}")
        time.sleep(0.05)


def lost_claim_statuses(pod: Mapping[str, Any]) -> set[str]:
    """The template entries of `pod` whose status names no claim (any once the
    controller recorded them all: see `DraOutcome.lost`)."""
    return template_entries(pod) - claim_names(pod).keys() if pod else set()


def claim_names(pod: Mapping[str, Any]) -> dict[str, str]:
    """Entry name -> claim name for each entry the pod's status or spec names a claim
    for (a template entry the controller decided needs none is left out)."""
    out = {s["name"]: s["resourceClaimName"]
           for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
           if s.get("resourceClaimName")}
    for entry in pod["spec"].get("resourceClaims", ()):
        if entry.get("resourceClaimName"):
            out[entry["name"]] = entry["resourceClaimName"]
    return out


def dra_barrier(runner: Runner, node: str, namespace: str, schedulers: Sequence[str]
                ) -> None:
    """Return once each of `schedulers` has seen every DeviceClass, ResourceSlice and
    ResourceClaim created so far, by `Runner.barrier`'s argument (each kind is a
    watch of its own, delivered in order): a class, a slice on the barrier node and per
    scheduler a claim, all created last, and per scheduler a pod on that node using its
    claim, which the scheduler can bind only once it has seen all three. `cleanup_dra`
    removes them."""
    driver = f"{node}.diff.io"
    labels = {CASE_LABEL: node}
    runner.post(_PATHS["DeviceClass"], {
        "apiVersion": API_VERSION, "kind": "DeviceClass",
        "metadata": {"name": node, "labels": labels},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    runner.post(_PATHS["ResourceSlice"], {
        "apiVersion": API_VERSION, "kind": "ResourceSlice",
        "metadata": {"name": node, "labels": labels},
        "spec": {"driver": driver, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"dev-{i}"} for i in range(len(schedulers))]}})
    names = [f"{node}-dra-{i}" for i in range(len(schedulers))]
    runner.each(lambda name: runner.post(
        _PATHS["ResourceClaim"].format(ns=namespace), {
            "apiVersion": API_VERSION, "kind": "ResourceClaim",
            "metadata": {"name": name, "labels": labels},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": {
                "deviceClassName": node}}]}}}), names)
    runner.create_pods([{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {UNDER_TEST_LABEL: "barrier"}},
        "spec": {"schedulerName": scheduler, "nodeSelector": {HOSTNAME: node},
                 "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "registry/app:1"}],
                 "resourceClaims": [{"name": "dev", "resourceClaimName": name}]}}
        for name, scheduler in zip(names, schedulers, strict=True)])
    deadline = time.monotonic() + runner.timeout
    for name, scheduler in zip(names, schedulers, strict=True):
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        while not runner.client.request("GET", path)["spec"].get("nodeName"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{scheduler} did not bind the DRA barrier pod {name}")
            time.sleep(0.05)


def read_dra(runner: Runner) -> DraLists:
    """Every DeviceClass, ResourceSlice and ResourceClaim as the API server holds them
    now (apiVersion and kind set: list items carry neither)."""
    out: DraLists = {}
    for kind, path in _LISTS.items():
        items = runner.client.request("GET", path)["items"]
        for item in items:
            item["apiVersion"], item["kind"] = API_VERSION, kind
        out[kind] = items
    return out


def attach_dra(lists: DraLists, dra: DraObjects) -> None:
    """Put what `read_dra` read into a cluster's DRA objects, as the informers would."""
    for kind, items in lists.items():
        for item in items:
            dra.upsert(kind, item)


def ungate(runner: Runner, pods: Iterable[dict[str, Any]]) -> None:
    """Remove the pods' scheduling gates: both schedulers may try them now."""
    runner.each(lambda p: runner.client.request(
        "PATCH", f"/api/v1/namespaces/{p['metadata']['namespace']}/pods/"
                 f"{p['metadata']['name']}",
        body={"spec": {"schedulingGates": None}},
        content_type="application/merge-patch+json"), list(pods))


def cleanup_dra(runner: Runner, cases: Sequence[DraCase], namespaces: Sequence[str],
                barriers: Sequence[str]) -> None:
    """Delete the claims and templates of `namespaces` and the cases' and barriers'
    classes and slices, once their pods are gone. A claim a scheduler allocated keeps
    its finalizer until the resourceclaim controller has seen its pods go; nothing waits
    for that: no later case's class selects its devices."""
    for kind in ("ResourceClaim", "ResourceClaimTemplate"):
        runner.each(lambda ns, kind=kind: runner.client.request(  # type: ignore[misc]
            "DELETE", _PATHS[kind].format(ns=ns)), namespaces)
    prefixes = [c.prefix for c in cases] + list(barriers)
    if not prefixes:
        return
    selector = {"labelSelector": f"{CASE_LABEL} in ({','.join(prefixes)})"}
    for kind in ("ResourceSlice", "DeviceClass"):
        runner.client.request("DELETE", _PATHS[kind], query=selector)


# -- the devices allocated --------------------------------------------------------------

def normal_allocation(allocation: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """status.allocation in the form compared: each result's request, driver, pool,
    device, admin access, tolerations, consumed capacity (exact values) and whether it
    has a share ID (a random UID), in order; the node selector; nothing else (not the
    timestamp the writer sets)."""
    if allocation is None:
        return None
    results = []
    for r in (allocation.get("devices") or {}).get("results") or ():
        results.append({
            "request": r.get("request"), "driver": r.get("driver"), "pool": r.get("pool"),
            "device": r.get("device"), "adminAccess": bool(r.get("adminAccess")),
            "tolerations": r.get("tolerations") or [],
            "consumedCapacity": {k: nano_value(v) for k, v in
                                 (r.get("consumedCapacity") or {}).items()},
            "shareID": bool(r.get("shareID")),
        })
    return {"results": results, "nodeSelector": allocation.get("nodeSelector")}


def engine_allocations(result: ScheduleResult, node: str) -> dict[str, dict[str, Any]] | None:
    """Entry name -> the allocation (API form) policyd's DynamicResources Filter made on
    `node` for each claim it had to allocate, in the cycle of `result`; None when the
    cycle kept no allocation for that node (it was not feasible, or no claim needed
    one)."""
    state = result.cycle_state
    data: DraState | None = state.get(STATE_KEY) if state is not None else None
    if data is None:
        return None
    allocations: list[AllocationResult] | None = data.node_allocations.get(node)
    if allocations is None:
        return None
    return {data.claims[i].claim.entry: a.to_api()
            for i, a in zip(data.to_allocate(), allocations, strict=True)}


def allocation_diffs(mine: Mapping[str, Mapping[str, Any]],
                     theirs: Mapping[str, Mapping[str, Any] | None], who: str
                     ) -> list[str]:
    """One line per claim (by the pod's entry name) whose allocation by `who`
    (`theirs`, status.allocation as read from the API server, None when it has none)
    differs from policyd's (`mine`) in the form `normal_allocation` compares."""
    out = []
    for entry in sorted(mine):
        a, b = normal_allocation(mine[entry]), normal_allocation(theirs.get(entry))
        if a != b:
            out.append(f"claim {entry}: {who} allocated {json.dumps(b, sort_keys=True)}, "
                       f"policyd {json.dumps(a, sort_keys=True)}")
    return out


def renamed(obj: Any, old_prefix: str, new_prefix: str) -> Any:
    """`obj` (JSON values) with every name that starts with `old_prefix-` (nodes, pools,
    drivers, namespaces) starting with `new_prefix-` instead: a twin's objects read
    under its case's names."""
    own = re.compile(rf"(?<![\w-]){re.escape(old_prefix)}-")
    return json.loads(own.sub(f"{new_prefix}-", json.dumps(obj)))


def claim_allocations(runner: Runner, pod: Mapping[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Entry name -> status.allocation (None if unallocated or gone) of each claim the
    pod (as last read) names."""
    namespace = pod["metadata"]["namespace"]

    def read(name: str) -> dict[str, Any] | None:
        try:
            claim = runner.client.request(
                "GET", f"{_GROUP}/namespaces/{namespace}/resourceclaims/{name}")
        except ApiError as err:
            if err.status == 404:
                return None
            raise
        allocation = (claim.get("status") or {}).get("allocation")
        return allocation if isinstance(allocation, dict) else None

    return {entry: read(name) for entry, name in claim_names(pod).items()}


# How many FailedScheduling messages of a run said that no node could allocate the
# claims (DynamicResources' Filter reason), counted by `DraTally`.
CANNOT_ALLOCATE = "cannot allocate all claims"


@dataclass
class DraOutcome:
    """One DRA case's comparison: the single-pod `Outcome` (its problems include the
    devices') and how many claims' devices were compared."""

    dra: DraCase
    outcome: Outcome
    # Set, and nothing compared, when a pod of the case (or its twin) lost a template
    # claim from its status after `wait_for_template_claims` saw them all. v1.36's
    # resourceclaim controller can do that: syncPod applies (server-side, as one field
    # manager) only the statuses of claims it did not find in its informer's lister,
    # so with that lister behind its mutation cache it applies some entries and so
    # drops the others it applied before; both schedulers then wait for the claim.
    # The test runs such a case again under new names.
    lost: str = ""
    kube_claims: int = 0  # claims whose devices kube-scheduler's allocation was checked on
    daemon_claims: int = 0  # the same for `policyd run`'s allocation on the twin

    @property
    def ok(self) -> bool:
        return self.outcome.ok


@dataclass
class DraTally:
    """What a run of DRA cases covered: the decisions (`Tally.add_decision`), each kind
    of case (`tests.gen.dra.DRA_KINDS`), the devices compared."""

    decisions: Tally = field(default_factory=Tally)
    kinds: dict[str, int] = field(default_factory=dict)
    kube_devices: int = 0  # pods kube-scheduler bound whose devices were compared
    daemon_devices: int = 0  # twins `policyd run` bound whose devices were compared
    claims: int = 0  # claims compared, both kinds
    cannot_allocate: int = 0  # FailedScheduling messages with CANNOT_ALLOCATE
    daemon: int = 0  # twins decided by `policyd run`

    def add(self, o: DraOutcome) -> None:
        self.decisions.add_decision(o.outcome)
        for kind in o.dra.kinds:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.kube_devices += o.kube_claims > 0
        self.daemon_devices += o.daemon_claims > 0
        self.claims += o.kube_claims + o.daemon_claims
        self.cannot_allocate += CANNOT_ALLOCATE in o.outcome.kube.message
        self.daemon += o.outcome.daemon is not None

    def summary(self) -> str:
        t = self.decisions
        return "; ".join([
            ", ".join(f"{n} {what}" for what, n in {**t.mix, **t.compared}.items()),
            f"{self.cannot_allocate} messages with {CANNOT_ALLOCATE!r}",
            f"devices compared for {self.kube_devices} pods bound by kube-scheduler and "
            f"{self.daemon_devices} twins bound by policyd run ({self.claims} claims)",
            f"{self.daemon} decisions of policyd run (on twins)",
            "kinds: " + ", ".join(f"{self.kinds.get(k, 0)} {k}" for k in DRA_KINDS)])


class DraRunner:
    """Runs batches of DRA cases on the API server of `runner` (its kube-scheduler,
    and its `policyd run` daemon, which places the cases' twins)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def run_batch(self, cases: Sequence[DraCase]) -> list[DraOutcome]:
        """Both schedulers' decisions on each case's pod, and the devices they allocated,
        compared (the module's docstring says in which order things happen and why)."""
        r = self.runner
        twins = [c.twin for c in cases if c.twin is not None]
        scenes = [*cases, *twins]
        namespaces = [ns for c in scenes for ns in c.case.namespaces]
        try:
            r.put_scenes([c.case for c in scenes])
            put_dra(r, scenes)
            write_allocations(r, scenes)
            r.barrier(cases[0].prefix)
            pods = [c.case.pod for c in scenes]
            r.create_pods(pods)
            wait_for_template_claims(r, pods)
            dra_barrier(r, r._barriers[-1], BARRIER_NAMESPACE, r._schedulers())
            lists = read_dra(r)
            ungate(r, pods)
            keys = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}
            decisions = r.wait(keys)
            outcomes = [DraOutcome(c, Outcome(c.case, decisions[_key(c.case.pod)]),
                                   lost=lost_statuses(c, decisions)) for c in cases]
            compared = [d for d in outcomes if not d.lost]
            cluster, test_pods = r.read_back()
            attach_dra(lists, cluster.dra)
            fw = default_framework(seed=r.seed)
            columnar = ColumnarScores(fw)
            scored: list[tuple[Outcome, dict[str, Any]]] = []
            for d in compared:
                o = d.outcome
                pod = test_pods.get(_key(d.dra.case.pod))
                if pod is None:
                    o.problems.append("pod under test missing when read back")
                    continue
                o.policyd = schedule_one(fw, pod_from_dict(unbound(pod)), cluster)
                compare(o)
                if o.ok and o.mix == SCORED:
                    scored.append((o, pod))
            r._compare_scores(scored, fw, cluster, columnar)
            if r.daemon_scheduler is not None:
                # Judged before the devices: the twin round leaves out cases with
                # problems already.
                r._twin_round([d.outcome for d in compared], decisions, fw, cluster)
            for d in compared:
                self._compare_devices(d)
                self._compare_twin_devices(d, decisions)
            return outcomes
        finally:
            barriers = list(r._barriers)  # the runner's clean-up forgets them
            r.cleanup([c.case for c in scenes], namespaces)
            cleanup_dra(r, scenes, [*namespaces, BARRIER_NAMESPACE], barriers)

    def _compare_devices(self, d: DraOutcome) -> None:
        """kube-scheduler's allocation in the claims of the pod it bound against the
        engine's on the same node."""
        o = d.outcome
        if o.kube.node is None or o.policyd is None:
            return
        # None when the node was not feasible for policyd (`compare` said so).
        mine = engine_allocations(o.policyd, o.kube.node) or {}
        if not mine:
            return
        theirs = claim_allocations(self.runner, o.kube.pod)
        o.problems += allocation_diffs(mine, theirs, "kube-scheduler")
        d.kube_claims = len(mine)

    def _compare_twin_devices(self, d: DraOutcome,
                              decisions: Mapping[tuple[str, str], KubeDecision]) -> None:
        """`policyd run`'s allocation in its twin's claims against the engine's on the
        node the daemon chose (read under the case's names)."""
        o, twin = d.outcome, d.dra.twin
        if twin is None or o.daemon is None or o.daemon.node is None or o.policyd is None:
            return
        decision = decisions[_key(twin.case.pod)]
        node = renamed(o.daemon.node, twin.prefix, d.dra.prefix)
        mine = engine_allocations(o.policyd, node) or {}
        if not mine:
            return
        theirs = renamed(claim_allocations(self.runner, decision.pod), twin.prefix,
                         d.dra.prefix)
        o.problems += allocation_diffs(mine, theirs, "policyd run")
        d.daemon_claims = len(mine)


def lost_statuses(case: DraCase, decisions: Mapping[tuple[str, str], KubeDecision]) -> str:
    """What `DraOutcome.lost` says for `case`: its pods' template entries whose claim
    the status no longer names, as last read by the wait, or ""."""
    lost = []
    for scene in (case, case.twin):
        if scene is not None:
            pod = decisions[_key(scene.case.pod)].pod
            lost += [f"{_key(pod)[0]}/{_key(pod)[1]}: {entry}"
                     for entry in sorted(lost_claim_statuses(pod))]
    return "; ".join(lost)


def _key(pod: Mapping[str, Any]) -> tuple[str, str]:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]
