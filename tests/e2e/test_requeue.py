"""Requeue delay on the real API server, policyd against kube-scheduler v1.36.3.

For every kind of event a plugin registers, a pod that no node fits waits in each
scheduler's unschedulable pool; then one change to the cluster makes both pods fit,
and the delay from that change to each pod being bound is measured. policyd must be
within `TOLERANCE` seconds of kube-scheduler in every case (it used to wait for the
5-minute flush when the change was a pod bound or relabelled).

One control plane, one policyd daemon and one kube-scheduler serve every case; each
case has its own node(s), pods pinned to them, and labels of its own, so cases do not
disturb each other. The two schedulers' pods mirror each other (`-p` policyd, `-k`
kube-scheduler) and are made to fit by the same change.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster import ControlPlane
from policyd.kube.client import ConnectionSettings, KubeClient
from tests.e2e.helpers import Cluster, DaemonFactory, write_profile
from tests.integration.differential.runner import kube_scheduler_config
from tests.polling import wait_for

TOLERANCE = 1.0  # seconds policyd may be behind kube-scheduler
BIND_TIMEOUT = 30.0  # far below the 5-minute flush: a missed event fails the case
SETTLE = 1.5  # after both first failures: the 1 s initial backoff is over

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: rq-gold
spec:
  pluginName: RqGold
  appliesTo:
    labelSelector:
      matchLabels: {rq-policy: "yes"}
  filters:
    - id: gold-nodes
      message: node(s) are not gold
      nodeLabels:
        matchLabels: {rq-tier: gold}
"""

SIDES = ("p", "k")  # the policyd pod and the kube-scheduler pod of a case


@dataclass
class Env:
    cluster: Cluster
    schedulers: dict[str, str]  # side -> schedulerName

    @property
    def c(self) -> Cluster:
        return self.cluster

    def pod(self, name: str, side: str, **kw: Any) -> None:
        self.c.pod(f"{name}-{side}", self.schedulers[side], **kw)

    def patch(self, path: str, body: Any, subresource: str = "") -> None:
        self.c.client.request("PATCH", path + subresource, body=body,
                              content_type="application/strategic-merge-patch+json")

    def patch_node(self, name: str, body: Any, status: bool = False) -> None:
        self.patch(f"/api/v1/nodes/{name}", body, "/status" if status else "")

    def patch_pod(self, name: str, body: Any) -> None:
        self.patch(f"/api/v1/namespaces/{self.c.ns}/pods/{name}", body)


@dataclass
class Case:
    name: str
    # Creates nodes and the two pending pods (`<name>-p`, `<name>-k`) and anything
    # they wait on.
    setup: Callable[[Env], None]
    # The change that makes each side's pod fit: called once per side.
    change: Callable[[Env, str], None]
    delays: dict[str, float] = field(default_factory=dict)


def pin(node: str) -> dict[str, Any]:
    return {"nodeSelector": {"kubernetes.io/hostname": node}}


def affinity(kind: str, **labels: str) -> dict[str, Any]:
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": labels},
        "topologyKey": "kubernetes.io/hostname"}]}}}


# -- the cases ------------------------------------------------------------------------

def _peer_bound_elsewhere_setup(e: Env) -> None:
    e.c.node("rq-peer")
    for s in SIDES:
        e.pod("peer-other", s, labels={"rq": "web"},
              **affinity("podAffinity", **{"rq-peer": f"cache-{s}"}))


def _peer_bound_elsewhere(e: Env, s: str) -> None:
    # Created already bound, as another scheduler (or a kubelet) would leave it.
    e.c.pod(f"cache-other-{s}", "nobody", labels={"rq-peer": f"cache-{s}"},
            nodeName="rq-peer")


def _peer_by_scheduler_setup(e: Env) -> None:
    e.c.node("rq-peer2")
    for s in SIDES:
        e.pod("peer-self", s, **affinity("podAffinity", **{"rq-peer2": f"cache-{s}"}))


def _peer_by_scheduler(e: Env, s: str) -> None:
    # The peer is placed by the very scheduler the waiting pod belongs to.
    e.pod("cache-self", s, labels={"rq-peer2": f"cache-{s}"}, **pin("rq-peer2"))


def _blocker_setup(node: str) -> Callable[[Env], None]:
    def setup(e: Env) -> None:
        e.c.node(node)
        for s in SIDES:
            e.c.pod(f"block-{node}-{s}", "nobody", labels={f"{node}-block": s},
                    nodeName=node)
            e.pod(node, s, **pin(node), **affinity("podAntiAffinity", **{f"{node}-block": s}))
    return setup


def _blocker_relabelled(e: Env, s: str) -> None:
    e.patch_pod(f"block-rq-anti-{s}", {"metadata": {"labels": {"rq-anti-block": "gone"}}})


def _blocker_deleted(e: Env, s: str) -> None:
    e.c.delete_pod(f"block-rq-anti2-{s}")


def _node_added_setup(e: Env) -> None:
    for s in SIDES:
        e.pod("node-added", s, nodeSelector={"rq-new": s})


def _node_added(e: Env, s: str) -> None:
    e.c.node(f"rq-new-{s}", labels={"rq-new": s})


def _label_setup(e: Env) -> None:
    for s in SIDES:
        e.c.node(f"rq-label-{s}")
        e.pod("node-label", s, nodeSelector={"rq-label": s})


def _label_added(e: Env, s: str) -> None:
    e.patch_node(f"rq-label-{s}", {"metadata": {"labels": {"rq-label": s}}})


def _taint_setup(e: Env) -> None:
    e.c.node("rq-taint", taints=[{"key": "rq", "value": "x", "effect": "NoSchedule"}])
    for s in SIDES:
        e.pod("taint", s, **pin("rq-taint"))


def _taint_removed(e: Env, s: str) -> None:
    if s == "p":  # one change serves both pods
        e.patch_node("rq-taint", {"spec": {"taints": None}})


def _cordon_setup(e: Env) -> None:
    e.c.node("rq-cordon")
    e.patch_node("rq-cordon", {"spec": {"unschedulable": True}})
    for s in SIDES:
        e.pod("cordon", s, **pin("rq-cordon"))


def _uncordoned(e: Env, s: str) -> None:
    if s == "p":
        e.patch_node("rq-cordon", {"spec": {"unschedulable": False}})


def _alloc_setup(e: Env) -> None:
    e.c.node("rq-alloc", cpu="1")
    for s in SIDES:
        e.pod("alloc", s, cpu="1500m", **pin("rq-alloc"))


def _alloc_grown(e: Env, s: str) -> None:
    if s == "p":
        grown = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        e.patch_node("rq-alloc", {"status": {"allocatable": grown, "capacity": grown}},
                     status=True)


def _freed_setup(e: Env) -> None:
    e.c.node("rq-freed", cpu="2")
    e.c.pod("filler", "nobody", cpu="2", nodeName="rq-freed")
    for s in SIDES:
        e.pod("freed", s, cpu="900m", **pin("rq-freed"))


def _filler_deleted(e: Env, s: str) -> None:
    if s == "p":
        e.c.delete_pod("filler")


def _policy_setup(e: Env) -> None:
    for s in SIDES:
        e.c.node(f"rq-gold-{s}")
    # policyd's pod is refused by the compiled policy; kube-scheduler's, reading the
    # same node label through a nodeSelector, by NodeAffinity.
    e.pod("policy", "p", labels={"rq-policy": "yes"}, **pin("rq-gold-p"))
    e.pod("policy", "k", nodeSelector={"kubernetes.io/hostname": "rq-gold-k",
                                       "rq-tier": "gold"})


def _gold_label(e: Env, s: str) -> None:
    e.patch_node(f"rq-gold-{s}", {"metadata": {"labels": {"rq-tier": "gold"}}})


def _features_setup(e: Env) -> None:
    e.c.node("rq-ndf")
    for s in SIDES:
        # A RestartAllContainers rule: only a node declaring the feature fits.
        e.pod("ndf", s, **pin("rq-ndf"), containers=[{
            "name": "main", "image": "registry.k8s.io/pause:3.10",
            "restartPolicy": "Never", "restartPolicyRules": [{
                "action": "RestartAllContainers",
                "exitCodes": {"operator": "In", "values": [42]}}]}])


def _features_declared(e: Env, s: str) -> None:
    if s == "p":
        e.patch_node("rq-ndf", {"status": {
            "declaredFeatures": ["RestartAllContainersOnContainerExits"]}}, status=True)


CASES = [
    Case("required podAffinity peer bound by another scheduler", _peer_bound_elsewhere_setup,
         _peer_bound_elsewhere),
    Case("the same peer bound by the scheduler itself", _peer_by_scheduler_setup,
         _peer_by_scheduler),
    Case("anti-affinity blocker relabelled", _blocker_setup("rq-anti"), _blocker_relabelled),
    Case("anti-affinity blocker deleted", _blocker_setup("rq-anti2"), _blocker_deleted),
    Case("node added (NodeAffinity)", _node_added_setup, _node_added),
    Case("node label added (NodeAffinity)", _label_setup, _label_added),
    Case("taint removed (TaintToleration)", _taint_setup, _taint_removed),
    Case("node uncordoned (NodeUnschedulable)", _cordon_setup, _uncordoned),
    Case("allocatable grown (NodeResourcesFit)", _alloc_setup, _alloc_grown),
    Case("bound pod deleted (NodeResourcesFit)", _freed_setup, _filler_deleted),
    Case("node label a compiled policy's filter reads", _policy_setup, _gold_label),
    Case("node declares the feature (NodeDeclaredFeatures)", _features_setup,
         _features_declared),
]

# Where the pod names of a case come from (its setup's first argument to `Env.pod`).
POD_OF = {
    CASES[0].name: "peer-other", CASES[1].name: "peer-self", CASES[2].name: "rq-anti",
    CASES[3].name: "rq-anti2", CASES[4].name: "node-added", CASES[5].name: "node-label",
    CASES[6].name: "taint", CASES[7].name: "cordon", CASES[8].name: "alloc",
    CASES[9].name: "freed", CASES[10].name: "policy", CASES[11].name: "ndf",
}


# -- running them -----------------------------------------------------------------------

@pytest.fixture
def env(control_plane: ControlPlane, tmp_path: Path, daemons: DaemonFactory
        ) -> Iterator[Env]:
    suffix = uuid.uuid4().hex[:6]
    schedulers = {"p": f"policyd-rq-{suffix}", "k": f"kube-rq-{suffix}"}
    client = KubeClient.connect(ConnectionSettings(
        kubeconfig=str(control_plane.kubeconfig_path), qps=-1))
    c = Cluster(client, f"e2e-rq-{suffix}")
    c.delete_all_nodes()
    c.create_namespace()
    config = kube_scheduler_config(schedulers["k"])
    config["podMaxBackoffSeconds"] = 10  # upstream's default; policyd's profile below
    kube_config = tmp_path / "kube-scheduler.json"
    kube_config.write_text(json.dumps(config))
    policies = tmp_path / "rq-policies"
    policies.mkdir()
    (policies / "gold.yaml").write_text(POLICY)
    kube = control_plane.start_kube_scheduler(kube_config)
    try:
        daemons.start(write_profile(tmp_path, schedulers["p"], policies=str(policies)))
        yield Env(c, schedulers)
    finally:
        kube.stop()
        c.cleanup()
        client.close()


def _refused(c: Cluster, pod: str) -> bool:
    cond = c.condition(pod)
    return cond is not None and cond.get("status") == "False"


def _run(e: Env, case: Case) -> None:
    base = POD_OF[case.name]
    case.setup(e)
    pods = {s: f"{base}-{s}" for s in SIDES}
    for pod in pods.values():
        wait_for(partial(_refused, e.c, pod), 20, f"{pod} refused first")
    assert all(e.c.node_of(p) is None for p in pods.values()), case.name
    time.sleep(SETTLE)
    changed: dict[str, float] = {}
    for s in SIDES:
        changed[s] = time.monotonic()
        case.change(e, s)
    bound: dict[str, float] = {}
    deadline = time.monotonic() + BIND_TIMEOUT
    while len(bound) < len(SIDES) and time.monotonic() < deadline:
        for s, pod in pods.items():
            if s not in bound and e.c.node_of(pod) is not None:
                bound[s] = time.monotonic()
        time.sleep(0.02)
    for s in SIDES:
        case.delays[s] = bound.get(s, float("inf")) - changed[s]


def test_requeue_delay_matches_kube_scheduler(env: Env) -> None:
    for case in CASES:
        _run(env, case)
    table = ["| change | policyd | kube-scheduler |", "|---|---|---|"]
    table += [f"| {c.name} | {c.delays['p']:.2f} s | {c.delays['k']:.2f} s |" for c in CASES]
    print("\n" + "\n".join(table))
    behind = [f"{c.name}: policyd {c.delays['p']:.2f} s, kube-scheduler "
              f"{c.delays['k']:.2f} s" for c in CASES
              if c.delays["p"] > c.delays["k"] + TOLERANCE]
    assert not behind, "policyd is more than 1 s behind kube-scheduler:\n" + "\n".join(behind)
    # kube-scheduler itself must have been woken by each change (the case is valid).
    slow = [c.name for c in CASES if c.delays["k"] > 10]
    assert not slow, f"kube-scheduler did not react to: {slow}"
