"""NodeDeclaredFeatures, with the cases of upstream's nodedeclaredfeatures_test.go and
the registry's inference tests (k8s.io/component-helpers v0.36.3), and what the
default profile does with it."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.config.plugins import build_framework
from policyd.engine.cycle import schedule_one
from policyd.features import turning_off, with_settings
from policyd.framework import Code, CycleState, PluginError, Status
from policyd.framework.events import NODE, ActionType, ClusterEvent, node_update_events
from policyd.framework.events import QUEUE as QUEUE_
from policyd.framework.events import QUEUE_SKIP as SKIP
from policyd.model.cluster import ClusterState
from policyd.model.node_info import NodeInfo
from policyd.plugins import names, registry
from policyd.plugins.nodedeclaredfeatures.features import (
    REGISTRY,
    RESTART_ALL_CONTAINERS,
    USER_NAMESPACES_HOST_NETWORK,
    required_features,
)
from policyd.plugins.nodedeclaredfeatures.node_declared_features import ERR_REASON, new
from tests.builders import PodBuilder, make_node, make_pod
from tests.cluster_events import NODE_ADD, NODE_LABEL, OWN_UPDATE, hint
from tests.plugin_harness import filter_statuses, run_filter

REJECT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON,))
NODE_FEATURES = ClusterEvent(NODE, ActionType.UPDATE_NODE_DECLARED_FEATURE)
RULE = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}


def _with_rules(pod: PodBuilder, *rules: dict[str, Any], where: str = "containers",
                restart_policy: str = "Never") -> PodBuilder:
    spec = pod.raw()["spec"]
    if where == "containers":
        target = spec["containers"][0]
    else:
        spec.setdefault(where, []).append({"name": f"x-{where}", "image": "pause"})
        target = spec[where][-1]
    target["restartPolicy"] = restart_policy
    target["restartPolicyRules"] = list(rules)
    return pod.set("spec", spec)


def restart_all(**kw: Any) -> PodBuilder:
    return _with_rules(make_pod(), RULE, **kw)


def user_ns_host_network() -> PodBuilder:
    return make_pod().set("spec.hostNetwork", True).set("spec.hostUsers", False)


@pytest.mark.parametrize(("name", "pod", "want"), [
    ("no rules", make_pod(), set()),
    ("RestartAllContainers in a container", restart_all(), {RESTART_ALL_CONTAINERS}),
    ("RestartAllContainers in an init container", restart_all(where="initContainers"),
     {RESTART_ALL_CONTAINERS}),
    ("RestartAllContainers in a sidecar",
     restart_all(where="initContainers", restart_policy="Always"), {RESTART_ALL_CONTAINERS}),
    ("only Restart rules",
     _with_rules(make_pod(), {**RULE, "action": "Restart"}), set()),
    ("one rule of several", _with_rules(make_pod(), {**RULE, "action": "Restart"}, RULE),
     {RESTART_ALL_CONTAINERS}),
    # Upstream looks at containers and init containers only.
    ("ephemeral containers do not count", make_pod().set("spec.ephemeralContainers", [
        {"name": "e", "image": "pause", "restartPolicyRules": [RULE]}]), set()),
    ("user namespace with host network", user_ns_host_network(),
     {USER_NAMESPACES_HOST_NETWORK}),
    ("host network with the host's users", make_pod().set("spec.hostNetwork", True)
     .set("spec.hostUsers", True), set()),
    ("host network, hostUsers unset", make_pod().set("spec.hostNetwork", True), set()),
    ("user namespace without host network", make_pod().set("spec.hostUsers", False), set()),
    ("both", _with_rules(user_ns_host_network(), RULE),
     {RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK}),
    ("a malformed rule list is no rule",
     make_pod().set("spec.containers", [{"name": "c", "image": "pause",
                                         "restartPolicyRules": "RestartAllContainers"}]),
     set()),
])
def test_inference(name: str, pod: PodBuilder, want: set[str]) -> None:
    assert required_features(pod.obj()) == want


def test_registry_is_v136s() -> None:
    # All five features of AllFeatures, sorted; three never infer at scheduling time.
    assert list(REGISTRY) == sorted(REGISTRY) == [
        "ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling",
        "InPlacePodVerticalScalingInitContainers", RESTART_ALL_CONTAINERS,
        USER_NAMESPACES_HOST_NETWORK]
    assert [n for n, infer in REGISTRY.items() if infer is not None] == [
        RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK]


@pytest.mark.parametrize(("name", "pod", "declared", "want"), [
    ("pod without needs fits a node declaring nothing", make_pod(), (), None),
    ("needs met", restart_all(), (RESTART_ALL_CONTAINERS,), None),
    ("needs met among others", restart_all(),
     ("ExtendWebSocketsToKubelet", RESTART_ALL_CONTAINERS), None),
    ("node declares nothing", restart_all(), (), REJECT),
    ("node declares another feature", restart_all(), ("ExtendWebSocketsToKubelet",), REJECT),
    # Names the registry does not know are ignored, never an error.
    ("unknown names are ignored", restart_all(), ("FutureFeature", "Zeta/sub"), REJECT),
    ("one of two needs missing", _with_rules(user_ns_host_network(), RULE),
     (RESTART_ALL_CONTAINERS,), REJECT),
    ("both needs met", _with_rules(user_ns_host_network(), RULE),
     (RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK), None),
])
def test_filter(name: str, pod: PodBuilder, declared: tuple[str, ...],
                want: Status | None) -> None:
    plugin = new()
    info = NodeInfo(make_node("n").declared_features(*declared).obj())
    p = pod.obj()
    state = CycleState()
    plugin.pre_filter(state, p, [info])
    assert plugin.filter(state, p, info) == want
    assert filter_statuses(plugin, p, info) == [want]


def test_pre_filter_skips_pods_without_needs() -> None:
    _, status = new().pre_filter(CycleState(), make_pod().obj(), [])
    assert status is not None and status.is_skip
    _, status = new().pre_filter(CycleState(), restart_all().obj(), [])
    assert status is None


def test_mask_over_mixed_nodes() -> None:
    """The columnar form per distinct feature list, on a subset of the rows."""
    nodes = [make_node(f"n{i}").declared_features(*f).obj() for i, f in enumerate([
        (), (RESTART_ALL_CONTAINERS,), ("ExtendWebSocketsToKubelet",),
        (RESTART_ALL_CONTAINERS,), ("ExtendWebSocketsToKubelet", RESTART_ALL_CONTAINERS)])]
    out = run_filter(new(), restart_all().obj(), ClusterState(nodes), [1, 2, 4])
    assert out.columnar
    assert out.by_node() == {"n1": None, "n2": REJECT, "n4": None}


def test_table_follows_a_node_update() -> None:
    cluster = ClusterState([make_node("n").obj()])
    pod = restart_all().obj()
    assert run_filter(new(), pod, cluster).statuses == [REJECT]
    cluster.upsert_node(make_node("n").declared_features(RESTART_ALL_CONTAINERS).obj())
    assert run_filter(new(), pod, cluster).statuses == [None]


def test_events_and_hints() -> None:
    pl = new()
    pod = restart_all().uid("p").obj()
    bare, declaring = make_node("n").obj(), make_node("n").declared_features(
        RESTART_ALL_CONTAINERS).obj()
    assert hint(pl, NODE_ADD, pod, None, bare) is QUEUE_
    assert hint(pl, NODE_FEATURES, pod, bare, declaring) is QUEUE_
    assert hint(pl, NODE_FEATURES, pod, declaring, bare) is QUEUE_  # any change
    assert hint(pl, NODE_FEATURES, pod, declaring, declaring) is SKIP
    assert hint(pl, NODE_LABEL, pod, bare, bare) is None  # not registered
    # The pod's own update: only when what it needs changed.
    assert hint(pl, OWN_UPDATE, pod, pod, restart_all().uid("p").obj()) is SKIP
    assert hint(pl, OWN_UPDATE, pod, pod, make_pod().uid("p").obj()) is QUEUE_
    assert hint(pl, OWN_UPDATE, pod, make_pod().uid("o").obj(),
                restart_all().uid("o").obj()) is SKIP  # another pod


def test_node_update_event_for_declared_features() -> None:
    a = make_node("n").obj()
    b = make_node("n").declared_features(RESTART_ALL_CONTAINERS).obj()
    assert [e.action for e in node_update_events(a, b)] == [
        ActionType.UPDATE_NODE_DECLARED_FEATURE]
    assert node_update_events(b, make_node("n").declared_features(
        RESTART_ALL_CONTAINERS).obj()) == []
    assert NODE_FEATURES.label == "NodeUpdateNodeDeclaredFeature"


def test_factory() -> None:
    assert new(None).name == names.NODE_DECLARED_FEATURES
    with pytest.raises(PluginError):
        new({"x": 1})


def test_last_in_the_default_profile() -> None:
    # v1.36 appends it after DefaultBinder (and GangScheduling, off by default, after
    # it); filters run in this order, so a node that fails an earlier filter is
    # reported with that one.
    assert registry.default_profile_order()[-1] == names.NODE_DECLARED_FEATURES
    assert registry.DEFAULT_PROFILE_ORDER[-2:] == (names.NODE_DECLARED_FEATURES,
                                                   names.GANG_SCHEDULING)
    spec = registry.builtin(names.NODE_DECLARED_FEATURES)
    assert spec is not None and spec.default_weight is None
    assert spec.extension_points == {"preFilter", "filter"}


def _issue_cluster() -> ClusterState:
    new_node = make_node("new-node").capacity(cpu="2", memory="4Gi", pods="110") \
        .declared_features(RESTART_ALL_CONTAINERS).obj()
    old_node = make_node("old-node").capacity(cpu="4", memory="4Gi", pods="110").obj()
    return ClusterState([new_node, old_node])


@pytest.mark.parametrize("reference", [False, True])
def test_issue_27_example(reference: bool) -> None:
    """The issue's measurement: kube-scheduler binds to new-node, the only node that
    declares the feature, though old-node has more room."""
    fw = build_framework({"schedulerName": "default-scheduler"}, {})
    result = schedule_one(fw, restart_all().req(cpu="500m").obj(), _issue_cluster(),
                          reference=reference)
    assert result.node == "new-node"


@pytest.mark.parametrize("reference", [False, True])
def test_message_when_no_node_fits(reference: bool) -> None:
    """new-node too small for the pod even empty (NodeResourcesFit runs first),
    old-node without the feature: preemption helps on neither."""
    fw = build_framework({"schedulerName": "default-scheduler"}, {})
    result = schedule_one(fw, restart_all().req(cpu="3").obj(), _issue_cluster(),
                          reference=reference)
    assert result.node is None
    assert result.message == (
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's required features. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")


@pytest.mark.parametrize("reference", [False, True])
def test_preemption_never_picks_a_node_without_the_feature(reference: bool) -> None:
    """Unresolvable: old-node has room for the pod, but only new-node's victim can make
    it fit."""
    cluster = _issue_cluster()
    cluster.assume(make_pod("victim").uid("v").req(cpu="1500m").node("new-node").obj(),
                   "new-node")
    fw = build_framework({"schedulerName": "default-scheduler"}, {})
    result = schedule_one(fw, restart_all().priority(10).req(cpu="1").obj(), cluster,
                          reference=reference)
    assert result.node is None
    assert result.post_filter is not None
    assert result.post_filter.nominated_node == "new-node"
    assert [v.name for v in result.post_filter.victims] == ["victim"]


GATE_OFF = with_settings(turning_off("NodeDeclaredFeatures"))


@pytest.mark.parametrize("reference", [False, True])
def test_gate_off_leaves_it_out_of_the_default_profile(reference: bool) -> None:
    """applyFeatureGates (apis/config/v1/default_plugins.go) appends the plugin only
    with its gate on: off, the issue's pod goes where the scores send it."""
    fw = build_framework({"schedulerName": "default-scheduler"}, {}, features=GATE_OFF)
    assert names.NODE_DECLARED_FEATURES not in [p.name for p in fw.filter_plugins]
    assert fw.features is GATE_OFF
    result = schedule_one(fw, restart_all().req(cpu="500m").obj(), _issue_cluster(),
                          reference=reference)
    assert result.node == "old-node"
    assert registry.default_profile_order(GATE_OFF) == registry.default_profile_order()[:-1]


@pytest.mark.parametrize("reference", [False, True])
def test_enabled_by_the_profile_with_the_gate_off_it_does_nothing(reference: bool) -> None:
    """Upstream's New with the gate off builds a plugin that skips every pod and
    registers no event (nodedeclaredfeatures.go), so the profile stays valid."""
    profile = {"schedulerName": "s", "plugins": {"multiPoint": {"enabled": [
        {"name": names.NODE_DECLARED_FEATURES}]}}}
    fw = build_framework(profile, {}, features=GATE_OFF)
    assert names.NODE_DECLARED_FEATURES in [p.name for p in fw.filter_plugins]
    result = schedule_one(fw, restart_all().req(cpu="500m").obj(), _issue_cluster(),
                          reference=reference)
    assert result.node == "old-node"
    plugin = new(None, features=GATE_OFF)
    pod = restart_all().obj()
    node = NodeInfo(make_node("old").obj())
    assert plugin.pre_filter(CycleState(), pod, [node])[1] == Status.skip()
    assert plugin.filter(CycleState(), pod, node) is None
    assert plugin.events_to_register() == ()
    assert new(None).events_to_register() != ()
    spec = registry.builtin(names.NODE_DECLARED_FEATURES)
    assert spec is not None and spec.gated
