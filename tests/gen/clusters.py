"""Seeded generators of clusters and pods covering what the built-in plugins read:
mixed-case labels, taints and tolerations, node affinity, host ports, resources with
init containers and sidecars, topology spread, pod (anti-)affinity, existing pods.

Used to check the fast path against the reference path, and policyd against
kube-scheduler.
"""

from __future__ import annotations

import random
from typing import Any

from tests.builders import PodBuilder, make_node, make_pod

ZONES = ["zone-a", "zone-b", "zone-c"]
APPS = ["web", "db", "cache"]
TAINT_KEYS = ["dedicated", "gpu", "Dedicated"]


def gen_nodes(rng: random.Random, n: int) -> list[dict[str, Any]]:
    nodes = []
    for i in range(n):
        b = make_node(f"node-{i}").capacity(
            cpu=str(rng.choice([2, 4, 8])), memory=f"{rng.choice([4, 8, 16])}Gi",
            pods=str(rng.choice([4, 10, 110])))
        b.label("topology.kubernetes.io/zone", rng.choice(ZONES))
        if rng.random() < 0.5:
            b.label(rng.choice(["env", "Env"]), rng.choice(["prod", "staging", "Prod"]))
        if rng.random() < 0.3:
            b.label("disk", rng.choice(["ssd", "hdd"]))
        if rng.random() < 0.3:
            b.label("cores", str(rng.randint(1, 64)))
        if rng.random() < 0.25:
            b.taint(rng.choice(TAINT_KEYS), rng.choice(["", "x"]),
                    rng.choice(["NoSchedule", "NoExecute", "PreferNoSchedule"]))
        if rng.random() < 0.05:
            b.unschedulable()
        if rng.random() < 0.3:
            b.image(rng.choice([50, 300, 800]) * 1024 * 1024, "registry/app:1")
        nodes.append(b.raw())
    return nodes


def gen_pod(rng: random.Random, name: str, *, bound_to: str | None = None,
            rich: bool = True) -> PodBuilder:
    b = make_pod(name, rng.choice(["default", "shop"]))
    app = rng.choice(APPS)
    b.label("app", app)
    b.created(f"2026-11-01T10:{rng.randint(0, 59):02d}:00Z")
    reqs: dict[str, str] = {}
    if rng.random() < 0.8:
        reqs["cpu"] = rng.choice(["100m", "500m", "1", "2", "3"])
    if rng.random() < 0.8:
        reqs["memory"] = rng.choice(["128Mi", "1Gi", "2Gi", "6Gi"])
    b.container(image="registry/app:1" if rng.random() < 0.5 else "other:2", **reqs)
    if rich and rng.random() < 0.2:
        b.init_container(sidecar=rng.random() < 0.5, cpu=rng.choice(["200m", "1"]))
    if rich and rng.random() < 0.1:
        b.host_port(rng.choice([80, 443]))
    if rng.random() < 0.3:
        b.toleration(rng.choice(TAINT_KEYS), operator="Exists")
    if bound_to:
        b.node(bound_to).phase("Running")
        if rich and rng.random() < 0.2:
            b.affinity({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}},
                 "topologyKey": "kubernetes.io/hostname"}]}})
        return b
    if not rich:
        return b
    r = rng.random()
    if r < 0.15:
        b.node_selector_kv(rng.choice(["env", "Env"]), rng.choice(["prod", "staging"]))
    elif r < 0.3:
        b.affinity({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "cores", "operator": rng.choice(["Gt", "Lt"]),
                 "values": [str(rng.randint(1, 64))]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": rng.randint(1, 100), "preference": {"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}})
    elif r < 0.4:
        b.affinity({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}},
             "topologyKey": "kubernetes.io/hostname"}]}})
    elif r < 0.5:
        b.affinity({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}},
                                               "topologyKey": "topology.kubernetes.io/zone"}}]}})
    elif r < 0.65:
        b.spread({"maxSkew": rng.randint(1, 2), "topologyKey": "topology.kubernetes.io/zone",
                  "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                  "labelSelector": {"matchLabels": {"app": app}}})
    return b


def gen_cluster(rng: random.Random, nodes: int, pods: int, *, rich: bool = True
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    node_objs = gen_nodes(rng, nodes)
    pod_objs = [gen_pod(rng, f"existing-{i}", rich=rich,
                        bound_to=node_objs[rng.randrange(nodes)]["metadata"]["name"]).raw()
                for i in range(pods)]
    return node_objs, pod_objs
