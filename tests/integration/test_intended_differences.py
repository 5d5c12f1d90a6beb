"""Every intended difference from kube-scheduler that docs/compatibility.md lists, shown
happening and shown to be the only difference, against the real kube-scheduler v1.36.

The generated differential test (test_differential.py) avoids these differences on
purpose; a list of avoided differences proves nothing unless each one is seen to happen
as described. So each test here builds the smallest situation that shows one of them on
the real API server, lets the real kube-scheduler decide (its per-plugin scores read
from its log, as the differential test reads them) and gives policyd's engine the same
pods in the cluster read back from the API server, then asserts
  (a) the difference, exactly as docs/compatibility.md states it, and
  (b) agreement on everything else in the scene: the other nodes' verdicts, every other
      plugin's score, the FailedScheduling messages.
Should kube-scheduler ever stop behaving as docs/compatibility.md says, (a) fails: the
page's list is then wrong and must change, not the test.

Two items cannot be compared with kube-scheduler, and say so where they are tested:
invalid affinity or spread in a pod (the API server refuses such a pod, so only a
snapshot file can hold one; the test shows the refusal and policyd's message on a
snapshot), and the order of several "Insufficient <extended resource>" reasons on one
node (kube-scheduler never shows a node's own reasons: its FailedScheduling message
counts reasons over all nodes, sorted, so the test shows that message is identical and
policyd's per-node order is sorted). "NodeResourcesFit scores ignore pod-level
requests" is a match, not a difference: the test shows both schedulers agree.

One kube-scheduler serves the module, with the differential test's profile (every node
scored) plus a second profile left at the default percentageOfNodesToScore; each test
works in its own namespace on its own labelled nodes (see differential/intended.py).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from policyd.daemon.queue import SchedulingQueue
from policyd.devcluster import ControlPlane
from policyd.engine.cycle import schedule_one
from policyd.framework.events import ASSIGNED_POD_DELETE
from policyd.framework.status import Code
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient
from policyd.model.cluster_files import load_snapshot
from policyd.model.records import pod_from_dict
from tests.gen.differential import SCHEDULER_NAME
from tests.integration.differential.intended import (
    Scene,
    policyd_scores,
    without_all_zero_skips,
)
from tests.integration.differential.runner import (
    TOTAL,
    Runner,
    kube_scheduler_config,
    kube_weighted,
    parse_fit_error,
    score_diffs,
    start_kube_scheduler,
    unbound,
)
from tests.polling import wait_for

# The second profile: kube-scheduler's default percentageOfNodesToScore (adaptive).
SAMPLING_SCHEDULER = "policyd-intended-sampling"

NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
NODE_SELECTOR = "node(s) didn't match Pod's node affinity/selector"


def _ports_preemption(n_nodes: int) -> str:
    """DefaultPreemption's part for a pod pinned to a node whose port is taken by pods
    of its own priority: no victims there, and another node's selector is final."""
    return (f"no new claims to deallocate, preemption: 0/{n_nodes} nodes are available: "
            f"1 No preemption victims found for incoming pod, {n_nodes - 1} Preemption is "
            "not helpful for scheduling.")
MB = 1024 * 1024

# A random tag per run, so that a rerun on the same API server (whose namespaces are
# never deleted: no namespace controller runs) uses fresh names.
_RUN = f"{random.SystemRandom().randrange(16**4):04x}"


@dataclasses.dataclass
class Env:
    runner: Runner
    score_log: Path


@pytest.fixture(scope="module")
def env(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Env]:
    config = kube_scheduler_config()
    sampling = copy.deepcopy(config["profiles"][0])
    sampling["schedulerName"] = SAMPLING_SCHEDULER
    del sampling["percentageOfNodesToScore"]  # the default: 0, adaptive
    config["profiles"].append(sampling)
    client = KubeClient.connect(ConnectionSettings(
        kubeconfig=str(control_plane.kubeconfig_path), qps=2000, burst=2000, timeout=15))
    scheduler = start_kube_scheduler(
        control_plane, config, tmp_path_factory.mktemp("intended") / "kube-scheduler.json")
    runner = Runner(client, timeout=15.0, probes=0)
    try:
        yield Env(runner, scheduler.log_path)
    finally:
        runner.close()
        scheduler.stop()
        client.close()


@pytest.fixture
def scene(env: Env) -> Iterator[Callable[[str], Scene]]:
    """scene(tag) -> a fresh Scene, cleaned up after the test."""
    made: list[Scene] = []

    def make(tag: str) -> Scene:
        s = Scene(env.runner, f"intended-{_RUN}-{tag}", env.score_log)
        made.append(s)
        return s

    yield make
    for s in made:
        s.cleanup()


def _wait_pod(s: Scene, name: str, ready: Callable[[dict[str, Any]], bool],
              what: str, timeout: float = 15.0) -> dict[str, Any]:
    """The pod, once `ready` says so."""
    path = f"/api/v1/namespaces/{s.prefix}/pods/{name}"

    def check() -> dict[str, Any] | None:
        pod = s.runner.client.request("GET", path)
        return pod if ready(pod) else None

    pod: dict[str, Any] = wait_for(check, timeout, f"{s.prefix}/{name}: {what}", 0.05)
    return pod


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in pod.get("status", {}).get("conditions", []))


# -- Host ports: counted per node ------------------------------------------------------------


def test_host_port_stays_taken_when_one_of_two_holders_leaves(
        scene: Callable[[str], Scene]) -> None:
    """docs/compatibility.md: "Host ports are counted per node, so when one of two pods holding the
    same port leaves, the port stays taken; kube-scheduler keeps a set and forgets it."

    Two pods bound straight to node a (no scheduler checks a pod created with
    nodeName) hold hostPort 8080. While both are there, both schedulers refuse a pod
    pinned to a that asks for 8080. Once one holder is deleted, kube-scheduler binds
    such a pod to a (its set lost 8080), policyd refuses it with NodePorts' reason (one
    holder still counts); on the other nodes both agree, scores included."""
    s = scene("ports")
    a, b, c = (s.node_name(n) for n in "abc")
    s.create_nodes([s.node("a"), s.node("b"), s.node("c")])
    s.create_pods([s.pod(f"holder-{i}", node_name="a", host_port=8080, under_test=False)
                   for i in (1, 2)])
    s.barrier()

    # Both holders there: both schedulers agree that 8080 is taken on a.
    s.create_pods([s.pod("before", pin="a", host_port=8080)])
    before = s.decisions("before")["before"]
    back = s.read_back()
    n_nodes = len(back.cluster.node_infos())
    refused = (f"0/{n_nodes} nodes are available: 1 {NODE_PORTS}, "
               f"{n_nodes - 1} {NODE_SELECTOR}. {_ports_preemption(n_nodes)}")
    assert (before.node, before.message) == (None, refused)
    assert s.policyd(back, "before").message == refused
    s.delete_pod("before")

    # One holder leaves.
    s.delete_pod("holder-1")
    s.barrier()

    # (a) kube-scheduler now binds a pod pinned to a; policyd refuses it.
    s.create_pods([s.pod("after", pin="a", host_port=8080)])
    after = s.decisions("after")["after"]
    back = s.read_back()
    on_a = back.cluster.get(a)
    assert on_a is not None and [p.name for p in on_a.pods.values()] == ["holder-2"]
    assert after.node == a, after.message
    mine = s.policyd(back, "after")
    n_nodes = len(back.cluster.node_infos())
    assert (mine.node, mine.message) == (None, f"0/{n_nodes} nodes are available: "
                                         f"1 {NODE_PORTS}, {n_nodes - 1} {NODE_SELECTOR}. "
                                         f"{_ports_preemption(n_nodes)}")
    s.delete_pod("after")  # kube-scheduler's set forgets 8080 again, as before

    # (b) A pod free to go anywhere: kube-scheduler finds a, b, c feasible, policyd
    # b and c; on b and c every plugin's score is the same.
    s.create_pods([s.pod("anywhere", host_port=8080)])
    assert s.decisions("anywhere")["anywhere"].node is not None
    theirs = s.kube_scores("anywhere")
    mine = s.policyd(s.read_back(), "anywhere")
    assert sorted(theirs.totals) == [a, b, c]
    assert sorted(mine.feasible) == [b, c]
    assert mine.diagnosis.node_to_status[a].reasons == (NODE_PORTS,)
    mine_scores = policyd_scores(mine)
    diffs = score_diffs(without_all_zero_skips(kube_weighted(theirs), mine_scores),
                        mine_scores)
    # a's scores are kube-scheduler's alone; nothing else differs.
    assert {node for node, _ in diffs} == {a}, diffs
    assert all(mine_score is None for _, mine_score in diffs.values()), diffs


# -- ImageLocality: each node's own image size -------------------------------------------


def test_image_locality_uses_each_nodes_own_image_size(scene: Callable[[str], Scene]) -> None:
    """docs/compatibility.md: "ImageLocality uses each node's own reported image size;
    kube-scheduler keeps one size per image name for the whole cluster (the first
    node's)."

    Node `first` reports the pod's image at 500 MB, then node `second` reports the same
    image at 1400 MB, node `none` lacks it. kube-scheduler scores second as if it
    reported first's size: exactly what policyd scores once second's status says 500 MB.
    Nothing but second's ImageLocality score (and so its total) differs."""
    s = scene("images")
    first, second, none = (s.node_name(n) for n in ("first", "second", "none"))
    image = f"registry.example/{s.prefix}/app:1"  # a name no other test's node reports
    # In this order: kube-scheduler's cache takes the size from the first node it sees.
    s.create_nodes([s.node("first", images=[(image, 500 * MB)]),
                    s.node("second", images=[(image, 1400 * MB)]),
                    s.node("none")], in_order=True)
    # kube-scheduler's snapshot counts an image's nodes as of each node's own last change
    # (ImageStateSummary.Snapshot): had it copied `first` before `second` existed, first
    # would score as the only holder. Touching both once both exist takes that timing
    # out, so what remains is the size difference alone.
    for node in (first, second):
        s.runner.client.request(
            "PATCH", f"/api/v1/nodes/{node}",
            body={"metadata": {"labels": {"policyd.test/touched": "1"}}},
            content_type="application/merge-patch+json")
    s.barrier()
    s.create_pods([s.pod("app", image=image)])
    assert s.decisions("app")["app"].node is not None
    theirs = kube_weighted(s.kube_scores("app"))
    back = s.read_back()
    mine = policyd_scores(s.policyd(back, "app"))

    # (a) and (b): only second's ImageLocality score differs, policyd's the higher.
    diffs = score_diffs(theirs, mine)
    assert set(diffs) == {(second, "ImageLocality"), (second, TOTAL)}, diffs
    kube_second, mine_second = diffs[(second, "ImageLocality")]
    assert kube_second is not None and mine_second is not None
    assert mine_second > kube_second == theirs[first]["ImageLocality"] > 0
    assert theirs[none]["ImageLocality"] == 0

    # By the expected amount: with second reporting first's size, policyd scores
    # every plugin on every node exactly as kube-scheduler did.
    s.runner.client.request(
        "PATCH", f"/api/v1/nodes/{second}/status",
        body={"status": {"images": [{"names": [image], "sizeBytes": 500 * MB}]}},
        content_type="application/merge-patch+json")
    as_upstream = policyd_scores(s.policyd(s.read_back(), "app"))
    assert score_diffs(theirs, as_upstream) == {}


# -- Extended resources: reasons sorted by name -----------------------------------------------


def test_short_extended_resources_give_one_sorted_reason_each(
        scene: Callable[[str], Scene]) -> None:
    """docs/compatibility.md: "When several extended resources are short on a node, their
    reasons are sorted by name (upstream lists them in Go map order)."

    Not comparable node by node: kube-scheduler shows a node's reasons nowhere (its
    FailedScheduling message, event and condition count each reason over all nodes and
    sort the counts; its log prints that message). So this shows what both show, the
    message, identical (three short resources on each of two nodes, counted once per
    node), and that policyd's own per-node list (`explain`) is sorted by name."""
    s = scene("extended")
    short = {"example.com/zeta": "1", "example.com/alpha": "1", "example.com/mid": "1"}
    s.create_nodes([s.node("a", extended=short), s.node("b", extended=short)])
    s.barrier()
    wanted = dict.fromkeys(short, "2")
    s.create_pods([s.pod("greedy", requests=wanted, limits=wanted)])
    kube = s.decisions("greedy")["greedy"]
    back = s.read_back()
    mine = s.policyd(back, "greedy")
    n_nodes = len(back.cluster.node_infos())
    reasons = sorted(f"Insufficient {r}" for r in short)

    assert kube.node is None and kube.reason == "Unschedulable", kube
    assert parse_fit_error(kube.message) == (
        n_nodes, {**dict.fromkeys(reasons, 2), NODE_SELECTOR: n_nodes - 2})
    assert mine.message == kube.message
    for node in (s.node_name("a"), s.node_name("b")):
        assert mine.diagnosis.node_to_status[node].reasons == tuple(reasons)


# -- PrioritySort: creation time, not queue-entry time ----------------------------------------


def test_equal_priorities_go_by_creation_time_not_queue_entry(
        scene: Callable[[str], Scene]) -> None:
    """docs/compatibility.md: "PrioritySort orders equal priorities by creation time (upstream: time
    the pod entered the queue)."

    Pod `earlier` is created gated, `later` a second after it (creation timestamps have
    whole seconds). One node, full: `later` is tried and fails first; then `earlier` is
    ungated, tried and fails, so it (re-)entered the queue last. When the pod filling the
    node leaves, both are retried at once for the one free slot: kube-scheduler binds
    `later`; policyd's queue, driven through the same steps with the same pods, pops
    `earlier`. Apart from the order, both schedulers judge each pod alike."""
    s = scene("queue")
    only = s.node_name("only")
    s.create_nodes([s.node("only", cpu="1")])
    blocker = s.pod("blocker", node_name="only", requests={"cpu": "1"}, under_test=False)
    s.create_pods([blocker])
    s.barrier()
    gate = {"schedulingGates": [{"name": "example.com/hold"}]}
    s.create_pods([s.pod("earlier", requests={"cpu": "600m"}, spec=gate)])
    time.sleep(1.1)
    s.create_pods([s.pod("later", requests={"cpu": "600m"})])
    _wait_pod(s, "later", _unschedulable, "kube-scheduler's first attempt")
    s.patch_pod("earlier", {"spec": {"schedulingGates": None}})
    _wait_pod(s, "earlier", _unschedulable, "kube-scheduler's first attempt after ungating")

    # Both pending: both schedulers give each pod the same verdict.
    back = s.read_back()
    earlier, later = (pod_from_dict(unbound(back.pods[n])) for n in ("earlier", "later"))
    assert earlier.priority == later.priority
    assert earlier.creation_timestamp < later.creation_timestamp
    kube_pending = s.decisions("earlier", "later")
    for name in ("earlier", "later"):
        result = s.policyd(back, name)
        assert result.node is None
        assert result.message == kube_pending[name].message, name
    rejected_by = set(s.policyd(back, "later").diagnosis.unschedulable_plugins)

    # Past both backoffs (1 s in this profile), so the freed slot finds both in activeQ.
    time.sleep(2.5)
    s.delete_pod("blocker")
    bound = _wait_pod(s, "later", lambda p: bool(p["spec"].get("nodeName")),
                      "a bind", timeout=10)
    # (a) kube-scheduler: the pod that entered the queue first.
    assert bound["spec"]["nodeName"] == only
    assert not s.decisions("earlier")["earlier"].node

    # (a) policyd's queue through the same steps: the pod created first.
    clock = [0.0]
    queue = SchedulingQueue(s.fw.less, clock=lambda: clock[0], initial_backoff=1.0,
                            max_backoff=1.0)
    queue.set_hints({SCHEDULER_NAME: s.fw.queueing_hints()})
    queue.add(dataclasses.replace(earlier, scheduling_gates=("example.com/hold",)))
    clock[0] += 1.1
    queue.add(later)
    for expected, ungate in (("later", None), ("earlier", earlier)):
        if ungate is not None:
            queue.add(ungate)  # the update that removed the gate
        tried = queue.pop()
        assert tried is not None and tried.pod.name == expected
        queue.requeue(tried, unschedulable=True, plugins=rejected_by)
        clock[0] += 0.1
    clock[0] += 2.5
    gone = pod_from_dict({**blocker, "metadata": {**blocker["metadata"], "uid": "blocker"},
                          "spec": {**blocker["spec"], "nodeName": only}})
    assert len(queue.move(ASSIGNED_POD_DELETE, gone, None)) == 2
    first = queue.pop()
    assert first is not None and first.pod.name == "earlier"

    # (b) Alone on the freed node, each pod fits it for policyd, as `later` did for
    # kube-scheduler; with `later` there, `earlier` gets kube-scheduler's message.
    back = s.read_back()
    for name in ("earlier", "later"):
        assert s.policyd(back, name).node == only, name
    back.cluster.assume(pod_from_dict(unbound(back.pods["later"])), only)
    kube_earlier = s.decisions("earlier")["earlier"]
    assert s.policyd(back, "earlier").message == kube_earlier.message


# -- percentageOfNodesToScore: every node evaluated -------------------------------------------


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler looks for before it stops filtering and
    scores those (numFeasibleNodesToFind in pkg/scheduler/schedule_one.go, v1.36)."""
    if num_all_nodes < 100:
        return num_all_nodes
    if percentage == 0:
        percentage = max(5, 50 - num_all_nodes // 125)
    return max(100, num_all_nodes * percentage // 100)


def test_every_node_is_evaluated(scene: Callable[[str], Scene]) -> None:
    """docs/compatibility.md: "Every node is evaluated. kube-scheduler stops after
    percentageOfNodesToScore of the nodes are found feasible; policyd filters and
    scores all of them."

    More feasible nodes than kube-scheduler's default profile looks for (100 under 204
    nodes in the cluster), all fitting the pod, with different sizes so that resource
    scores differ per node: kube-scheduler scores exactly as many as its rule says,
    policyd all of them; on every node kube-scheduler scored, every plugin's score is
    policyd's."""
    s = scene("sampling")
    existing = len(s.runner.client.request("GET", "/api/v1/nodes")["items"])
    count = 110
    while count <= num_feasible_nodes_to_find(existing + count + 1):  # + the barrier
        count += 10
    s.create_nodes([s.node(f"n{i}", cpu=str(2 + i % 7), memory=f"{4 + (3 * i) % 11}Gi")
                    for i in range(count)])
    s.barrier()
    s.create_pods([s.pod("sampled", scheduler=SAMPLING_SCHEDULER,
                         requests={"cpu": "100m", "memory": "128Mi"})])
    assert s.decisions("sampled")["sampled"].node is not None
    back = s.read_back()
    result = s.policyd(back, "sampled")
    mine = policyd_scores(result)
    theirs = without_all_zero_skips(kube_weighted(s.kube_scores("sampled")), mine)
    to_find = num_feasible_nodes_to_find(len(back.cluster.node_infos()))

    # (a) kube-scheduler scored as many nodes as its rule says; policyd every one.
    assert len(theirs) == to_find < count
    assert len(result.feasible) == len(mine) == count
    assert set(theirs) < set(mine)
    # (b) Where both scored, every plugin's score agrees.
    assert score_diffs(theirs, {n: mine[n] for n in theirs}) == {}
    assert len({scores[TOTAL] for scores in mine.values()}) > 1  # scores that could differ
    print(f"{len(back.cluster.node_infos())} nodes, {count} feasible: kube-scheduler "
          f"scored {len(theirs)}, policyd {len(mine)}")


# -- NodeResourcesFit and pod-level requests: matched on purpose ------------------------------


def test_pod_level_requests_scored_as_kube_scheduler_does(
        scene: Callable[[str], Scene]) -> None:
    """docs/compatibility.md: "NodeResourcesFit *scores* ignore pod-level
    spec.resources.requests, as kube-scheduler v1.36 does (its filter and
    BalancedAllocation honour them)": a match, not a difference.

    A pod with pod-level requests (1 cpu, 2Gi) over its container's (100m, 128Mi) and
    a twin without them, each on its own copy of three nodes: both schedulers agree on
    every score of both pods; the filter honours the pod level (a 500m node fits only
    the twin); NodeResourcesFit scores the two pods alike (container requests), and
    BalancedAllocation does not."""
    s = scene("podlevel")
    shapes = {"a": ("4", "8Gi"), "b": ("8", "4Gi"), "small": ("500m", "8Gi")}
    groups = ("pod", "containers")
    s.create_nodes([s.node(f"{g}-{n}", cpu=cpu, memory=mem, labels={"group": g})
                    for g in groups for n, (cpu, mem) in shapes.items()])
    s.barrier()
    containers = {"cpu": "100m", "memory": "128Mi"}
    try:
        s.create_pods([
            s.pod("pod", requests=containers, node_labels={"group": "pod"},
                  spec={"resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}),
            s.pod("containers", requests=containers, node_labels={"group": "containers"})])
    except ApiError as err:
        pytest.fail(f"the API server refused pod-level resources: {err}")
    stored = s.runner.client.request("GET", f"/api/v1/namespaces/{s.prefix}/pods/pod")
    assert stored["spec"]["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}
    decided = s.decisions(*groups)
    back = s.read_back()
    theirs, mine = {}, {}
    for g in groups:
        assert decided[g].node is not None, decided[g]
        mine[g] = policyd_scores(s.policyd(back, g))
        theirs[g] = without_all_zero_skips(kube_weighted(s.kube_scores(g)), mine[g])
        # Both agree on every score.
        assert score_diffs(theirs[g], mine[g]) == {}, g
    # The filter honours pod-level requests: 1 cpu does not fit the 500m node.
    assert sorted(theirs["pod"]) == [s.node_name("pod-a"), s.node_name("pod-b")]
    assert len(theirs["containers"]) == 3
    # NodeResourcesFit scores the container requests (the same for both pods);
    # BalancedAllocation the pod-level ones.
    for n in ("a", "b"):
        p, c = theirs["pod"][s.node_name(f"pod-{n}")], theirs["containers"][
            s.node_name(f"containers-{n}")]
        assert p["NodeResourcesFit"] == c["NodeResourcesFit"], n
        assert p["NodeResourcesBalancedAllocation"] != c["NodeResourcesBalancedAllocation"], n


# -- Invalid affinity or spread: only in snapshot files ----------------------------------------

# The pod's invalid field, and what policyd's reason names: the field's path in the pod,
# except for pod affinity, whose terms are named by their place in the list that
# InterPodAffinity compiles from required pod affinity (as upstream's error does).
_INVALID_FIELD = {
    "required node affinity": "spec.affinity.nodeAffinity.requiredDuringScheduling"
                              "IgnoredDuringExecution.nodeSelectorTerms[0]."
                              "matchExpressions[0].values[0]: ",
    "pod affinity": "requiredAffinityTerms[0].labelSelector: invalid label value ",
    "topology spread": "spec.topologySpreadConstraints[0].maxSkew: ",
}
_INVALID: dict[str, dict[str, Any]] = {
    "required node affinity": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In",
                                   "values": ["not a label value!"]}]}]}}}},
    "pod affinity": {"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In",
                                                    "values": ["not a label value!"]}]}}]}}},
    "topology spread": {"topologySpreadConstraints": [{
        "maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "x"}}}]},
}


@pytest.mark.parametrize("what", sorted(_INVALID))
def test_invalid_affinity_or_spread_only_in_snapshots(
        what: str, scene: Callable[[str], Scene], tmp_path: Path) -> None:
    """docs/compatibility.md: "Invalid affinity or spread constraints in a pod (possible only in
    snapshot files; the API server rejects them) give one clear
    UnschedulableAndUnresolvable reason naming the field."

    No kube-scheduler comparison exists: the API server refuses the pod (422), so
    kube-scheduler can never be given one. policyd can, from a snapshot file, and
    rejects it on every node with one reason naming the field."""
    s = scene(f"invalid-{what.split()[-1]}")
    pod = s.pod("bad", spec=_INVALID[what])
    with pytest.raises(ApiError) as refused:
        s.create_pods([pod])
    assert refused.value.status == 422

    node = s.node("a")
    path = tmp_path / "cluster.json"
    pod["spec"].pop("nodeSelector")
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, pod]}))
    snap = load_snapshot(path)
    result = schedule_one(s.fw, snap.pods[0], snap.cluster(), explain=True)
    assert result.node is None and result.error is None
    status = next(iter(result.diagnosis.node_to_status.values()), None) \
        or result.diagnosis.absent_nodes_status
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert len(status.reasons) == 1 and _INVALID_FIELD[what] in status.reasons[0]
    assert "not a label value!" in status.reasons[0] or "got 0" in status.reasons[0]
    # Refused in PreFilter, DynamicResources' PreFilter never ran: its PostFilter says
    # "not found" and stops PostFilter, as kube-scheduler v1.36's does; refused in
    # Filter, both PostFilter plugins speak.
    tail = ("not found" if result.diagnosis.pre_filter_message else
            "no new claims to deallocate, preemption: 0/1 nodes are available: 1 "
            "Preemption is not helpful for scheduling.")
    assert result.message == f"0/1 nodes are available: {status.reasons[0]}. {tail}"
