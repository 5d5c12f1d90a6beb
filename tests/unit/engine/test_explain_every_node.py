"""explain's answer names every node, each once with the verdict that decided it
(issue 26, class 6), in an order people can read: the chosen node first, then by
score, then the rejected nodes grouped by reason; rejections say their numbers."""

from __future__ import annotations

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.engine.report import explain_json, explain_text, node_order
from policyd.model.cluster import ClusterState
from policyd.model.records import Pod
from policyd.model.resources import show_amount
from tests.builders import make_node, make_pod


def nominee(name: str, *, node: str, cpu: str, priority: int = 10) -> Pod:
    b = make_pod(name).uid(name).priority(priority).req(cpu=cpu)
    return b.set("status.nominatedNodeName", node).obj()


def cluster_of(*pods: Pod, nodes: tuple[str, ...] = ("n1", "n2"), cpu: str = "4"
               ) -> ClusterState:
    cluster = ClusterState([make_node(n).capacity(cpu=cpu, memory="16Gi", pods="110").obj()
                            for n in nodes], pods)
    for p in pods:
        cluster.sync_nomination(p, None)
    return cluster


def reasons(result_json: dict[str, object]) -> dict[str, dict[str, str]]:
    nodes = result_json["nodes"]
    assert isinstance(nodes, list)
    return {n["name"]: n["reasons"] for n in nodes}


def test_a_node_rejected_with_another_pods_nomination_counted_is_in_the_answer() -> None:
    # The case: n1 holds room nominated to a higher-priority pod, n2 is full.
    # The message counts both nodes; the table, the reasons and nodes[] did only n2.
    busy = make_pod("busy").uid("busy").node("n2").req(cpu="3").obj()
    cluster = cluster_of(nominee("nom", node="n1", cpu="3", priority=100), busy)
    pod = make_pod("web").uid("web").req(cpu="2").obj()
    r = schedule_one(default_framework(seed=1), pod, cluster, explain=True)
    assert r.node is None
    assert r.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert set(r.filter_details) == {"n1", "n2"}
    doc = explain_json(r)
    assert [n["name"] for n in doc["nodes"]] == ["n1", "n2"]
    n1 = doc["nodes"][0]
    assert n1["rejectedBy"] == "NodeResourcesFit" and n1["feasible"] is False
    assert n1["filters"]["NodeResourcesFit"] == "Insufficient cpu"
    assert n1["nominatedPods"] == ["default/nom"]
    assert n1["reasons"]["NodeResourcesFit"].startswith(
        "Insufficient cpu (requests 2, free 1 of 4 allocatable); counting default/nom, "
        "nominated here by preemption")
    assert doc["nodes"][1]["nominatedPods"] == []
    text = explain_text(r)
    assert "  n1    rejected by NodeResourcesFit" in text
    assert "  n1  NodeResourcesFit: Insufficient cpu (requests 2, free 1 of 4" in text


def test_the_pods_own_nominated_node_that_does_not_fit_is_shown_once() -> None:
    pod = nominee("big", node="n1", cpu="8")
    r = schedule_one(default_framework(seed=1), pod, cluster_of(pod), explain=True)
    doc = explain_json(r)
    assert [n["name"] for n in doc["nodes"]] == ["n1", "n2"]
    assert doc["nominatedNode"] == "n1"
    assert "it does not fit there, so every node was tried" in doc["nomination"]
    # Requests beyond the whole node: the numbers say so.
    assert reasons(doc)["n1"] == {
        "NodeResourcesFit": "Insufficient cpu (requests 8, free 4 of 4 allocatable)"}
    assert explain_text(r).count("  n1  NodeResourcesFit:") == 1


def test_a_nominated_node_that_fits_is_chosen_and_every_node_still_shown() -> None:
    # n1 is busier (n2 would score higher), but the nominee tries its node first, alone.
    busy = make_pod("busy").uid("busy").node("n1").req(cpu="1").obj()
    pod = nominee("nom", node="n1", cpu="2")
    r = schedule_one(default_framework(seed=1), pod, cluster_of(pod, busy), explain=True)
    assert r.node == "n1"
    doc = explain_json(r)
    assert [(n["name"], n["chosen"], n["feasible"]) for n in doc["nodes"]] == [
        ("n1", True, True), ("n2", False, True)]
    assert "it fits, so it was chosen without scoring" in doc["nomination"]
    assert "tried first, alone" in explain_text(r).splitlines()[1]


def test_a_nominated_node_that_is_not_in_the_cluster_is_said_so() -> None:
    pod = nominee("lost", node="gone", cpu="1")
    r = schedule_one(default_framework(seed=1), pod, cluster_of(pod), explain=True)
    assert r.node in ("n1", "n2")
    doc = explain_json(r)
    assert doc["nominatedNode"] == "gone"
    assert "gone (status.nominatedNodeName), which is not in the cluster" in doc["nomination"]
    assert {n["name"] for n in doc["nodes"]} == {"n1", "n2"}


def test_the_own_node_taken_by_another_nominee_shows_that_nominees_verdict() -> None:
    # Both pods nominated to n1; the other has higher priority and takes the room.
    other = nominee("other", node="n1", cpu="3", priority=100)
    pod = nominee("mine", node="n1", cpu="2", priority=5)
    busy = make_pod("busy").uid("busy").node("n2").req(cpu="4").obj()
    r = schedule_one(default_framework(seed=1), pod, cluster_of(other, pod, busy),
                     explain=True)
    assert r.node is None
    assert r.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    doc = explain_json(r)
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert set(by_name) == {"n1", "n2"}
    assert by_name["n1"]["nominatedPods"] == ["default/other"]
    assert reasons(doc)["n2"] == {
        "NodeResourcesFit": "Insufficient cpu (requests 2, free 0 of 4 allocatable)"}


def test_nominees_of_lower_priority_are_not_counted_and_not_named() -> None:
    low = nominee("low", node="n1", cpu="3", priority=1)
    pod = make_pod("web").uid("web").priority(50).req(cpu="2").obj()
    r = schedule_one(default_framework(seed=1), pod, cluster_of(low), explain=True)
    assert r.node in ("n1", "n2")
    assert r.nominated_counted == {}
    assert all(n["nominatedPods"] == [] for n in explain_json(r)["nodes"])


def test_rows_go_chosen_first_then_by_score_then_rejected_grouped_by_reason() -> None:
    # n0..n2 fit with different loads (LeastAllocated ranks the emptiest first), n3 and
    # n5 lack cpu, n4 is cordoned: the two cpu rejections form the larger group.
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="16Gi", pods="110").obj()
             for i in range(6)]
    nodes[4] = make_node("n4").capacity(cpu="4", memory="16Gi", pods="110").unschedulable(
    ).obj()
    load = {"n0": "2", "n1": "1", "n3": "4", "n5": "3.5"}
    bound = [make_pod(f"b-{n}").uid(f"b-{n}").node(n).req(cpu=c).obj()
             for n, c in load.items()]
    pod = make_pod("web").uid("web").req(cpu="1").obj()
    r = schedule_one(default_framework(seed=1), pod, ClusterState(nodes, bound),
                     explain=True)
    assert r.node == "n2"
    assert node_order(r) == ["n2", "n1", "n0", "n3", "n5", "n4"]
    doc = explain_json(r)
    assert [n["name"] for n in doc["nodes"]] == node_order(r)
    assert reasons(doc)["n5"] == {
        "NodeResourcesFit": "Insufficient cpu (requests 1, free 0.5 of 4 allocatable)"}
    table = explain_text(r).split("\n\n")[1].splitlines()
    assert [line.split()[1] if line.startswith("*") else line.split()[0]
            for line in table[1:]] == node_order(r)


def test_top_shows_the_first_nodes_and_counts_the_rest_by_reason() -> None:
    nodes = [make_node(f"n{i:02d}").capacity(cpu="4", memory="16Gi", pods="110").obj()
             for i in range(30)]
    full = [make_pod(f"b{i}").uid(f"b{i}").node(f"n{i:02d}").req(cpu="4").obj()
            for i in range(5, 30)]
    pod = make_pod("web").uid("web").req(cpu="1").obj()
    r = schedule_one(default_framework(seed=1), pod, ClusterState(nodes, full),
                     explain=True)
    text = explain_text(r, top=7)
    assert "... 23 more node(s) (--top 0 shows all" in text
    table = text.split("\n\n")[1].splitlines()
    assert len(table) == 1 + 7 + 1  # the header, 7 nodes, the "more" line
    assert table[1].startswith("*")
    assert "  and of the nodes not shown: 23 Insufficient cpu" in text
    assert text.count("NodeResourcesFit: Insufficient cpu (requests 1, free 0") == 2
    everything = explain_text(r)
    assert "more node(s)" not in everything and "not shown" not in everything
    assert everything.count("NodeResourcesFit: Insufficient cpu (") == 25
    assert len(explain_json(r)["nodes"]) == 30


def test_every_reason_of_a_node_gets_its_numbers() -> None:
    node = make_node("tiny").capacity(cpu="1", memory="1Gi", pods="1").obj()
    there = make_pod("there").uid("there").node("tiny").req(cpu="500m").obj()
    pod = make_pod("web").uid("web").req(cpu="750m", memory="1536Mi").obj()
    r = schedule_one(default_framework(seed=1), pod, ClusterState([node], [there]),
                     explain=True)
    assert reasons(explain_json(r))["tiny"] == {"NodeResourcesFit": (
        "Too many pods (1 pods on it, 1 allowed), "
        "Insufficient cpu (requests 0.75, free 0.5 of 1 allocatable), "
        "Insufficient memory (requests 1536Mi, free 1Gi of 1Gi allocatable)")}
    # The message stays kube-scheduler's, without numbers.
    assert r.message.startswith("0/1 nodes are available: 1 Insufficient cpu, "
                                "1 Insufficient memory, 1 Too many pods.")


def test_amounts_are_written_as_in_a_manifest() -> None:
    assert [show_amount("cpu", m) for m in (0, 500, 1000, 1250, 4000, 1)] == [
        "0", "0.5", "1", "1.25", "4", "0.001"]
    assert [show_amount("memory", b) for b in (0, 1024, 3 << 30, 1500 * 10**6, 1000, 7)] == [
        "0", "1Ki", "3Gi", "1500M", "1k", "7"]
    assert show_amount("nvidia.com/gpu", 2) == "2"


def only_on(*names: str) -> dict[str, object]:
    """Required node affinity on metadata.name: NodeAffinity's PreFilter narrows."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(names)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}


def test_a_node_prefilter_narrowed_away_keeps_prefilters_verdict_despite_a_nominee() -> None:
    busy = make_pod("busy").uid("busy").node("n2").req(cpu="3").obj()
    cluster = cluster_of(nominee("nom", node="n1", cpu="3", priority=100), busy)
    pod = make_pod("web").uid("web").req(cpu="2").affinity(only_on("n2")).obj()
    fw = default_framework(seed=1)
    r = schedule_one(fw, pod, cluster, explain=True)
    assert r.message == schedule_one(fw, pod, cluster).message  # the fast path's
    assert r.message.startswith("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) "
                                "didn't satisfy plugin(s) [NodeAffinity].")
    doc = explain_json(r)
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["n1"]["filters"] == {
        "PreFilter": "node(s) didn't satisfy plugin(s) [NodeAffinity]"}
    assert by_name["n1"]["nominatedPods"] == []
    assert by_name["n2"]["filters"]["NodeResourcesFit"] == "Insufficient cpu"


def test_the_own_nominated_node_narrowed_away_shows_the_verdict_it_got_when_tried() -> None:
    # Tried alone first whatever PreFilter says (evaluateNominatedNode), and too full.
    pod = (make_pod("mine").uid("mine").priority(5).req(cpu="3").affinity(only_on("n2"))
           .set("status.nominatedNodeName", "n1").obj())
    busy = [make_pod(f"b{n}").uid(f"b{n}").node(n).req(cpu="2").obj() for n in ("n1", "n2")]
    cluster = cluster_of(pod, *busy)
    fw = default_framework(seed=1)
    r = schedule_one(fw, pod, cluster, explain=True)
    assert r.node is None
    assert r.message == schedule_one(fw, pod, cluster).message
    # n1's reason is its own filters' (the first failing one counts), not PreFilter's.
    assert r.message.startswith("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) "
                                "didn't match Pod's node affinity/selector.")
    doc = explain_json(r)
    cpu = "Insufficient cpu (requests 3, free 2 of 4 allocatable)"
    assert {n["name"]: n["reasons"] for n in doc["nodes"]} == {
        "n1": {"NodeAffinity": "node(s) didn't match Pod's node affinity/selector",
               "NodeResourcesFit": cpu},
        "n2": {"NodeResourcesFit": cpu}}


def test_nodes_left_out_by_top_are_still_counted_by_reason_and_hint() -> None:
    # Three feasible nodes fill --top 2; the rejected ones and the hints are all hidden.
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="16Gi", pods="110").obj()
             for i in range(5)]
    full = [make_pod(f"b{i}").uid(f"b{i}").node(f"n{i}").req(cpu="4").obj() for i in (3, 4)]
    pod = make_pod("web").uid("web").req(cpu="1").obj()
    r = schedule_one(default_framework(seed=1), pod, ClusterState(nodes, full),
                     explain=True)
    hints = {"n2": {"P": ['node has label "Env", policy wants "env"']}}
    text = explain_text(r, top=2, hints=hints)
    assert ("Why nodes were rejected (every filter, not only the first):\n"
            "  of the nodes not shown: 2 Insufficient cpu") in text
    assert ("Label keys that differ from a policy's only by case:\n"
            "  1 node(s) not shown (-o json: each node's hints)") in text
    shown = explain_text(r, hints=hints)
    assert "  n2  P: node has label \"Env\", policy wants \"env\"" in shown
    assert "not shown" not in shown
