"""Each built-in plugin's registered events and queueing hints, with plain records:
the hint must say QUEUE exactly when the change can undo that plugin's rejection."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from policyd.framework.events import (
    ASSIGNED_POD,
    QUEUE,
    QUEUE_SKIP,
    ActionType,
    ClusterEvent,
)
from policyd.plugins.interpodaffinity import plugin as inter_pod_affinity
from policyd.plugins.nodeaffinity import node_affinity
from policyd.plugins.nodename import node_name
from policyd.plugins.nodeports import node_ports
from policyd.plugins.noderesources import fit as node_resources_fit
from policyd.plugins.nodeunschedulable import node_unschedulable
from policyd.plugins.podtopologyspread import plugin as pod_topology_spread
from policyd.plugins.tainttoleration import taint_toleration
from tests.builders import make_node, make_pod
from tests.cluster_events import (
    NODE_ADD,
    NODE_ALLOC,
    NODE_LABEL,
    NODE_TAINT,
    OWN_TOLERATION,
    POD_ADD,
    POD_DELETE,
    POD_LABEL,
    hint,
)

A = ActionType


def _affinity(kind: str, **labels: str) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}}


WEB = make_pod("web").uid("w").affinity(_affinity("podAffinity", app="cache")).obj()
LONER = make_pod("loner").uid("l").affinity(_affinity("podAntiAffinity", app="db")).obj()


def test_pod_affinity_peer_bound_queues_only_a_matching_peer() -> None:
    pl = inter_pod_affinity.new()
    cache = make_pod("c").uid("c").labels(app="cache").node("n1").obj()
    other = make_pod("o").uid("o").labels(app="other").node("n1").obj()
    pending_cache = make_pod("pc").uid("pc").labels(app="cache").obj()
    assert hint(pl, POD_ADD, WEB, None, cache) is QUEUE
    assert hint(pl, POD_ADD, WEB, None, other) is QUEUE_SKIP
    assert hint(pl, POD_ADD, WEB, None, pending_cache) is QUEUE_SKIP  # not on a node


def test_pod_affinity_relabel_into_and_out_of_terms() -> None:
    pl = inter_pod_affinity.new()
    before = make_pod("c").uid("c").labels(app="x").node("n1").obj()
    after = make_pod("c").uid("c").labels(app="cache").node("n1").obj()
    assert hint(pl, POD_LABEL, WEB, before, after) is QUEUE
    assert hint(pl, POD_LABEL, WEB, after, before) is QUEUE_SKIP
    blocker = make_pod("b").uid("b").labels(app="db").node("n1").obj()
    freed = make_pod("b").uid("b").labels(app="web").node("n1").obj()
    assert hint(pl, POD_LABEL, LONER, blocker, freed) is QUEUE  # anti-affinity blocker left
    assert hint(pl, POD_LABEL, LONER, freed, blocker) is QUEUE_SKIP


def test_pod_affinity_delete_of_a_blocker_or_of_a_pod_that_repels() -> None:
    pl = inter_pod_affinity.new()
    blocker = make_pod("b").uid("b").labels(app="db").node("n1").obj()
    bystander = make_pod("y").uid("y").labels(app="y").node("n1").obj()
    repeller = make_pod("r").uid("r").node("n1").affinity(
        _affinity("podAntiAffinity", app="web")).obj()
    web_labelled = make_pod("w2").uid("w2").labels(app="web").obj()
    assert hint(pl, POD_DELETE, LONER, blocker, None) is QUEUE
    assert hint(pl, POD_DELETE, LONER, bystander, None) is QUEUE_SKIP
    assert hint(pl, POD_DELETE, web_labelled, repeller, None) is QUEUE


def test_pod_affinity_node_topology_key() -> None:
    pl = inter_pod_affinity.new()
    bare = make_node("n").obj()
    bare.labels.pop("kubernetes.io/hostname")
    assert hint(pl, NODE_ADD, WEB, None, make_node("n").obj()) is QUEUE
    assert hint(pl, NODE_ADD, WEB, None, bare) is QUEUE_SKIP
    assert hint(pl, NODE_LABEL, WEB, bare, make_node("n").obj()) is QUEUE
    assert hint(pl, NODE_TAINT, WEB, bare, make_node("n").obj()) is None  # not registered


def test_node_affinity_node_label_added() -> None:
    pl = node_affinity.new()
    pod = make_pod("p").node_selector(disk="ssd").obj()
    plain, ssd = make_node("n").obj(), make_node("n").label("disk", "ssd").obj()
    assert hint(pl, NODE_LABEL, pod, plain, ssd) is QUEUE
    assert hint(pl, NODE_LABEL, pod, ssd, make_node("n").label("disk", "ssd").label(
        "x", "y").obj()) is QUEUE_SKIP  # matched before too
    assert hint(pl, NODE_ADD, pod, None, plain) is QUEUE_SKIP
    assert hint(pl, NODE_ADD, pod, None, ssd) is QUEUE
    assert hint(pl, POD_DELETE, pod, make_pod("x").node("n").obj(), None) is None


def test_taint_toleration_taint_removed() -> None:
    pl = taint_toleration.new()
    pod = make_pod("p").uid("p").obj()
    tainted = make_node("n").taint("dedicated", "x").obj()
    soft = make_node("n").taint("dedicated", "x", "PreferNoSchedule").obj()
    assert hint(pl, NODE_TAINT, pod, tainted, make_node("n").obj()) is QUEUE
    assert hint(pl, NODE_TAINT, pod, tainted, soft) is QUEUE
    assert hint(pl, NODE_TAINT, pod, make_node("n").obj(), tainted) is QUEUE_SKIP
    assert hint(pl, NODE_ADD, pod, None, tainted) is QUEUE_SKIP
    tolerant = make_pod("p").uid("p").toleration("dedicated", "x", "NoSchedule").obj()
    assert hint(pl, OWN_TOLERATION, tolerant, pod, tolerant) is QUEUE
    # Another pod's new toleration does nothing for this one.
    assert hint(pl, OWN_TOLERATION, pod, pod, dataclasses.replace(tolerant, uid="o")) \
        is QUEUE_SKIP


def test_node_unschedulable_uncordon_and_added_schedulable() -> None:
    pl = node_unschedulable.new()
    pod = make_pod("p").obj()
    cordoned, open_ = make_node("n").unschedulable().obj(), make_node("n").obj()
    assert hint(pl, NODE_TAINT, pod, cordoned, open_) is QUEUE
    assert hint(pl, NODE_TAINT, pod, open_, open_) is QUEUE_SKIP
    assert hint(pl, NODE_ADD, pod, None, open_) is QUEUE
    assert hint(pl, NODE_ADD, pod, None, cordoned) is QUEUE_SKIP
    assert hint(pl, NODE_LABEL, pod, cordoned, open_) is None


def test_node_resources_fit_allocatable_grown_or_pod_deleted() -> None:
    pl = node_resources_fit.new()
    pod = make_pod("p").uid("p").req(cpu="6").obj()
    small, big = make_node("n").obj(), make_node("n").resource("cpu", "8").obj()
    assert hint(pl, NODE_ALLOC, pod, small, big) is QUEUE
    assert hint(pl, NODE_ALLOC, pod, big, small) is QUEUE_SKIP  # shrank: still too small
    assert hint(pl, NODE_ADD, pod, None, small) is QUEUE_SKIP  # can never fit there
    assert hint(pl, NODE_ADD, pod, None, big) is QUEUE
    assert hint(pl, NODE_LABEL, pod, small, big) is None
    bound = make_pod("b").uid("b").req(cpu="1").node("n").obj()
    assert hint(pl, POD_DELETE, pod, bound, None) is QUEUE
    assert hint(pl, POD_DELETE, pod, make_pod("x").uid("x").obj(), None) is QUEUE_SKIP
    assert hint(pl, POD_ADD, pod, None, bound) is None
    shrunk = make_pod("b").uid("b").req(cpu="500m").node("n").obj()
    scale_down = ClusterEvent(ASSIGNED_POD, A.UPDATE_POD_SCALE_DOWN)
    assert hint(pl, scale_down, pod, bound, shrunk) is QUEUE


def test_node_ports_only_a_conflicting_port_freed() -> None:
    pl = node_ports.new()
    pod = make_pod("p").host_port(8080).obj()
    holder = make_pod("h").uid("h").host_port(8080).node("n").obj()
    elsewhere = make_pod("h").uid("h").host_port(9090).node("n").obj()
    assert hint(pl, POD_DELETE, pod, holder, None) is QUEUE
    assert hint(pl, POD_DELETE, pod, elsewhere, None) is QUEUE_SKIP
    assert hint(pl, NODE_ADD, pod, None, make_node("n").obj()) is QUEUE


def test_node_name() -> None:
    pod = make_pod("p").obj()
    assert hint(node_name.new(), NODE_ADD, pod, None, make_node("n").obj()) is QUEUE
    assert hint(node_name.new(), NODE_LABEL, pod, make_node("n").obj(),
                make_node("n").obj()) is None


SPREAD = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
          "labelSelector": {"matchLabels": {"app": "s"}}}


def test_pod_topology_spread_hints() -> None:
    pl = pod_topology_spread.new()
    pod = make_pod("p").uid("p").labels(app="s").spread(SPREAD).obj()
    match = make_pod("m").uid("m").labels(app="s").node("n").obj()
    other_ns = make_pod("m", "other").uid("m2").labels(app="s").node("n").obj()
    unrelated = make_pod("u").uid("u").labels(app="u").node("n").obj()
    assert hint(pl, POD_DELETE, pod, match, None) is QUEUE
    assert hint(pl, POD_DELETE, pod, other_ns, None) is QUEUE_SKIP
    assert hint(pl, POD_DELETE, pod, unrelated, None) is QUEUE_SKIP
    assert hint(pl, POD_LABEL, pod, match, unrelated) is QUEUE
    zoned = make_node("n").label("zone", "a").obj()
    assert hint(pl, NODE_ADD, pod, None, zoned) is QUEUE
    assert hint(pl, NODE_ADD, pod, None, make_node("n").obj()) is QUEUE_SKIP
    assert hint(pl, NODE_LABEL, pod, zoned, make_node("n").label("zone", "b").obj()) is QUEUE


@pytest.mark.parametrize("module", [
    inter_pod_affinity, node_affinity, node_name, node_ports, node_resources_fit,
    node_unschedulable, pod_topology_spread, taint_toleration,
])
def test_every_filtering_builtin_registers_its_events(module: Any) -> None:
    # None may fall back to the wildcard: that would retry its pods on every event.
    assert hasattr(module.new(), "events_to_register")


def test_every_rejecting_builtin_plugin_declares_its_events() -> None:
    """Registering nothing means "every event" (upstream's rule for plugins without
    EnqueueExtensions): a built-in plugin that can reject a pod must say what can undo
    that, so a new plugin cannot silently retry its pods on every change."""
    from policyd.framework.events import EnqueueExtensions
    from policyd.plugins import registry

    for name in registry.builtin_names():
        spec = registry.builtin(name)
        assert spec is not None
        if spec.extension_points & {"filter", "preFilter"}:
            assert isinstance(spec.factory(None), EnqueueExtensions), name
