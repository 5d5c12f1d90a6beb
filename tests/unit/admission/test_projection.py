"""Projecting policies into a pod's own constraints (policyd.admission): what each rule
kind becomes, how requirements join existing node affinity, idempotency, and the
equivalence the issue asks for on generated cases: with every rule that applies
visible, kube-scheduler's default profile (no policies) admits for the admitted pod
exactly the nodes policyd admits for the original pod; with some invisible, a subset
of them (policyd is stricter, never looser)."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from policyd.admission.mutation import (
    INVISIBLE_ANNOTATION,
    VISIBLE_ANNOTATION,
    admit,
)
from policyd.admission.projection import project_pod
from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict, pod_from_dict
from policyd.policy.compiler import CompiledPolicy, compile_policy
from tests.gen.policies import policy_doc, policy_node, policy_pod
from tests.unit.policy.conftest import make_policy

Obj = dict[str, Any]


def _compiled(*filters: Obj, mode: str = "Enforce", applies: Obj | None = None,
              name: str = "p") -> CompiledPolicy:
    spec: Obj = {"filters": list(filters), "mode": mode}
    if applies:
        spec["appliesTo"] = applies
    compiled = compile_policy(make_policy(name, name.capitalize(), **spec))
    assert isinstance(compiled, CompiledPolicy)
    return compiled


LABELS = {"id": "prod", "message": "not prod",
          "nodeLabels": {"matchLabels": {"env": "prod"},
                         "matchExpressions": [{"key": "Tier", "operator": "NotIn",
                                               "values": ["spot"]},
                                              {"key": "n", "operator": "Gt",
                                               "values": ["4"]}]}}
HW = {"id": "hw", "message": "no hw",
      "annotationToNodeLabel": {"annotation": "hw", "value": "true",
                                "label": "node.kubernetes.io/hw-encrypt",
                                "labelValue": "true"}}
HEADROOM = {"id": "room", "message": "full",
            "headroom": {"resource": "cpu", "percent": 20}}
GPU = {"id": "gpu", "message": "no gpu",
       "requireExtendedResource": {"name": "example.com/gpu", "quantity": 1}}


def _pod(**spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop",
                         "annotations": spec.pop("annotations", {})},
            "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def _admitted(pod: Obj, *policies: CompiledPolicy, scheduler: str | None = "policyd",
              **kw: Any) -> Any:
    return admit(pod, project_pod(pod_from_dict(pod), policies), scheduler_name=scheduler,
                 **kw)


def test_label_rules_become_required_node_affinity_in_the_exact_case() -> None:
    a = _admitted(_pod(annotations={"hw": "true"}), _compiled(LABELS, HW, HEADROOM))
    terms = a.pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [
        {"key": "env", "operator": "In", "values": ["prod"]},
        {"key": "Tier", "operator": "NotIn", "values": ["spot"]},
        {"key": "n", "operator": "Gt", "values": ["4"]},
        {"key": "node.kubernetes.io/hw-encrypt", "operator": "In", "values": ["true"]}]}]
    assert a.pod["spec"]["schedulerName"] == "policyd"
    annotations = a.pod["metadata"]["annotations"]
    assert annotations[VISIBLE_ANNOTATION] == "p/prod,p/hw"
    assert annotations[INVISIBLE_ANNOTATION] == (
        "p/room: a headroom rule has no kube-scheduler equivalent")
    assert a.warnings == [
        "policyd: spec.schedulerName set to policyd",
        "policyd: required node affinity gained env In [prod] (p/prod)",
        "policyd: required node affinity gained Tier NotIn [spot] (p/prod)",
        "policyd: required node affinity gained n Gt [4] (p/prod)",
        "policyd: required node affinity gained node.kubernetes.io/hw-encrypt In [true] "
        "(p/hw)",
        "policyd: p/room is not visible to autoscalers (a headroom rule has no "
        "kube-scheduler equivalent)"]
    assert [op["path"] for op in a.patch] == [
        "/spec/schedulerName", "/spec/affinity", "/metadata/annotations"]


def test_every_existing_term_gains_the_requirements_and_admitting_twice_changes_nothing(
        ) -> None:
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": ["n7"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [
                {"key": "disk", "operator": "Exists"}]}}]}}
    pod = _pod(affinity=own, nodeSelector={"os": "linux"}, annotations={"hw": "true"})
    policy = _compiled(HW)
    a = _admitted(pod, policy)
    node = a.pod["spec"]["affinity"]["nodeAffinity"]
    hw = {"key": "node.kubernetes.io/hw-encrypt", "operator": "In", "values": ["true"]}
    assert node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, hw]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n7"]}],
         "matchExpressions": [hw]}]
    # Preferences and the nodeSelector are not required terms: left as they were.
    assert node["preferredDuringSchedulingIgnoredDuringExecution"] == own[
        "nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert a.pod["spec"]["nodeSelector"] == {"os": "linux"}
    assert pod["spec"]["affinity"] == own  # the input is not changed
    again = _admitted(a.pod, policy)
    assert again.pod == a.pod and again.patch == [] and again.warnings == []


def test_a_pod_naming_another_scheduler_is_left_alone_unless_overridden() -> None:
    pod = _pod(schedulerName="volcano", annotations={"hw": "true"})
    assert _admitted(pod, _compiled(HW)).patch == []
    forced = _admitted(pod, _compiled(HW), override_scheduler=True)
    assert forced.pod["spec"]["schedulerName"] == "policyd"
    # default-scheduler (or none) is what a pod says when it does not choose.
    assert _admitted(_pod(schedulerName="default-scheduler"), _compiled(HW)).pod[
        "spec"]["schedulerName"] == "policyd"


@pytest.mark.parametrize(("policy", "pod", "visible", "invisible"), [
    # Inactive for the pod (no annotation): nothing to project or annotate.
    (_compiled(HW), _pod(), None, None),
    # Audit mode filters nothing.
    (_compiled(LABELS, mode="Audit"), _pod(), None, None),
    # appliesTo decides.
    (_compiled(LABELS, applies={"namespaces": {"include": ["other"]}}), _pod(), None, None),
    # A required extended resource the pod requests itself is seen through its request.
    (_compiled(GPU), _pod(containers=[{"name": "c", "image": "i", "resources": {
        "requests": {"example.com/gpu": "2"}}}]), "p/gpu", None),
    (_compiled(GPU), _pod(), None,
     "p/gpu: a requireExtendedResource rule asks that nodes offer example.com/gpu, "
     "which no kube-scheduler constraint says unless the pod requests it"),
])
def test_what_each_rule_kind_projects(policy: CompiledPolicy, pod: Obj, visible: str | None,
                                      invisible: str | None) -> None:
    annotations = _admitted(pod, policy).pod["metadata"].get("annotations") or {}
    assert annotations.get(VISIBLE_ANNOTATION) == visible
    assert annotations.get(INVISIBLE_ANNOTATION) == invisible


def _feasible(policies: list[CompiledPolicy], pod: Obj, nodes: list[Obj]) -> set[str]:
    fw = default_framework(policies)
    state = ClusterState([node_from_dict(n) for n in nodes])
    return set(schedule_one(fw, pod_from_dict(pod), state).feasible)


def test_kube_scheduler_sees_what_policyd_filters_on_generated_cases() -> None:
    visible_cases = invisible_cases = 0
    for seed in range(12):
        visible, invisible = _compare_seed(seed)
        visible_cases += visible
        invisible_cases += invisible
    # Both sides of the claim were exercised, not only trivially.
    assert visible_cases >= 20 and invisible_cases >= 20, (visible_cases, invisible_cases)


def _compare_seed(seed: int) -> tuple[int, int]:
    """20 pods, each with 1-3 generated policies, on 12 generated nodes; returns how
    many had rules applying that were all visible, and how many had an invisible one."""
    rng = random.Random(seed)
    nodes = [policy_node(rng, f"n{i}") for i in range(12)]
    visible_cases = invisible_cases = 0
    for k in range(20):
        policies = []
        label_rules_only = rng.random() < 0.6  # else every kind, most of them invisible
        for j in range(rng.randint(1, 3)):
            doc = policy_doc(rng)
            doc["metadata"]["name"] = f"p{j}"
            doc["spec"]["pluginName"] = f"P{j}"
            if label_rules_only:
                doc["spec"]["filters"] = [f for f in doc["spec"]["filters"]
                                          if "nodeLabels" in f or "annotationToNodeLabel" in f]
            policies.append(compile_policy(doc))
        pod = policy_pod(rng, f"pod{k}")
        pod["spec"].pop("nodeName", None)
        projections = project_pod(pod_from_dict(pod), policies)
        admitted = admit(copy.deepcopy(pod), projections, scheduler_name="policyd",
                         override_scheduler=True).pod
        policyd_nodes = _feasible(policies, pod, nodes)
        kube_nodes = _feasible([], admitted, nodes)
        if all(not p.invisible for p in projections):
            assert kube_nodes == policyd_nodes, (seed, k, projections)
            visible_cases += bool(projections)
        else:
            assert policyd_nodes <= kube_nodes, (seed, k, projections)
            invisible_cases += 1
    return visible_cases, invisible_cases


def test_a_projection_changes_what_spreading_that_honors_node_affinity_counts() -> None:
    """Why the equivalence leaves out pods with a DoNotSchedule spread constraint under
    nodeAffinityPolicy Honor (the default), once the projection adds requirements: the
    admitted pod's constraint counts only the nodes its affinity now admits. Three
    zones, one node each, the policy rejects zone a's. With minDomains 3 and one pod
    per zone the original pod fits b and c (skew 1) where the admitted pod sees two
    domains, fewer than 3 (global minimum 0, skew 2); with zone a empty and no
    minDomains it is the other way round. policyd, scheduling the admitted pod as the
    webhook leaves it, agrees with kube-scheduler's default profile both times."""
    zone = "topology.kubernetes.io/zone"

    def node(name: str, env: str) -> Obj:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, zone: f"z{name}", "env": env}},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "20"}}}

    def pod(name: str, on: str | None = None, spread: Obj | None = None) -> Obj:
        out = _pod()
        out["metadata"].update(name=name, uid=name, labels={"app": "web"})
        if on:
            out["spec"]["nodeName"] = on
        if spread is not None:
            out["spec"]["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}, **spread}]
        return out

    policy = _compiled({"id": "prod", "message": "not prod",
                        "nodeLabels": {"matchLabels": {"env": "prod"}}})
    for on, spread, original, admitted in [
            (["a", "b", "c"], {"minDomains": 3}, ["b", "c"], []),
            (["b", "c"], {}, [], ["b", "c"])]:
        nodes = [node("a", "dev"), node("b", "prod"), node("c", "prod")]
        cluster = ClusterState([node_from_dict(n) for n in nodes],
                               [pod_from_dict(pod(f"e{n}", n)) for n in on])
        raw = pod("t", spread=spread)
        admitted_raw = _admitted(raw, policy, scheduler="policyd").pod
        with_policy, plain = default_framework([policy]), default_framework([])
        assert schedule_one(with_policy, pod_from_dict(raw), cluster).feasible == original
        for fw in (plain, with_policy):
            assert schedule_one(fw, pod_from_dict(admitted_raw), cluster).feasible == admitted
