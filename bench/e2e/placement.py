"""Placement checks after every run, over the nodes and pods listed back from the API
server: a scheduler that ignores a constraint must not look fast.

Pure functions of the listed objects (no client), so each check is unit-tested on
hand-made clusters. What a check demands is read from the pods themselves (their
requests, labels, annotation or nodeSelector), not from the benchmark's bookkeeping,
so a pod body changed later is still checked for what it asks.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.e2e.shapes import (
    ANTI_AFFINITY_LABELS,
    BENCH_LABELS,
    HW_ENCRYPT_ANNOTATION,
    HW_ENCRYPT_LABEL,
    SPREAD_MAX_SKEW,
    ZONE_LABEL,
    Obj,
)
from policyd.model.quantity import int_value, milli_value

SHOWN_PROBLEMS = 10


@dataclass
class Check:
    held: bool
    detail: str
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0

    @classmethod
    def of(cls, problems: list[str], detail: str) -> Check:
        return cls(not problems, detail, problems[:SHOWN_PROBLEMS], len(problems))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _node_of(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def every_pod_bound(pods: Iterable[Obj], measured: Iterable[str]) -> Check:
    by_name = {_name(p): p for p in pods}
    wanted = list(measured)
    unbound = sorted(n for n in wanted if not _node_of(by_name.get(n, {})))
    return Check.of([f"{n} not bound" for n in unbound],
                    f"{len(wanted) - len(unbound)}/{len(wanted)} measured pods bound")


def pod_request(pod: Obj) -> tuple[int, int]:
    """(cpu millicores, memory bytes) its containers request. The benchmark's pods have
    no init containers, overhead or pod-level requests."""
    cpu = mem = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        requests = (c.get("resources") or {}).get("requests") or {}
        cpu += milli_value(requests.get("cpu", "0"))
        mem += int_value(requests.get("memory", "0"))
    return cpu, mem


def no_node_over_allocatable(nodes: Iterable[Obj], pods: Iterable[Obj]) -> Check:
    """Every node's bound pods (of any scheduler, init pods included) within its
    allocatable cpu, memory and pod count."""
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for pod in pods:
        node = _node_of(pod)
        if node:
            cpu, mem = pod_request(pod)
            u = used[node]
            u[0] += cpu
            u[1] += mem
            u[2] += 1
    allocatable = {_name(n): (n.get("status") or {}).get("allocatable") or {} for n in nodes}
    problems = []
    for node, (cpu, mem, count) in sorted(used.items()):
        alloc = allocatable.get(node)
        if alloc is None:
            problems.append(f"{node}: {count} pods bound to a node that does not exist")
            continue
        limits = (milli_value(alloc.get("cpu", "0")), int_value(alloc.get("memory", "0")),
                  int_value(alloc.get("pods", "0")))
        if cpu > limits[0] or mem > limits[1] or count > limits[2]:
            problems.append(f"{node}: cpu {cpu}m/{limits[0]}m, memory {mem}/{limits[1]}, "
                            f"pods {count}/{limits[2]}")
    return Check.of(problems, f"{len(used)} nodes hold pods")


def zone_skew_within(nodes: Iterable[Obj], pods: Iterable[Obj], max_skew: int = SPREAD_MAX_SKEW,
                     selector: dict[str, str] | None = None) -> Check:
    """The spread constraint's final state: the pods its selector counts (app=bench,
    init pods included) differ by at most `max_skew` between the fullest and the
    emptiest zone that has nodes."""
    zone_of = {_name(n): _labels(n).get(ZONE_LABEL) for n in nodes}
    counts: Counter[str] = Counter({z: 0 for z in zone_of.values() if z})
    wanted = BENCH_LABELS if selector is None else selector
    for pod in pods:
        zone = zone_of.get(_node_of(pod))
        if zone and _matches(_labels(pod), wanted):
            counts[zone] += 1
    if not counts:
        return Check.of(["no zone has a node"], "no zones")
    skew = max(counts.values()) - min(counts.values())
    detail = f"per zone {dict(sorted(counts.items()))}, skew {skew} (maxSkew {max_skew})"
    return Check.of([detail] if skew > max_skew else [], detail)


def anti_affinity_held(pods: Iterable[Obj], selector: dict[str, str] | None = None) -> Check:
    """No node holds two pods of the anti-affine set (color=green)."""
    wanted = ANTI_AFFINITY_LABELS if selector is None else selector
    per_node: dict[str, list[str]] = defaultdict(list)
    for pod in pods:
        node = _node_of(pod)
        if node and _matches(_labels(pod), wanted):
            per_node[node].append(_name(pod))
    shared = [f"{node}: {sorted(names)}" for node, names in sorted(per_node.items())
              if len(names) > 1]
    return Check.of(shared, f"{sum(map(len, per_node.values()))} anti-affine pods on "
                            f"{len(per_node)} nodes")


def needs_hw_encrypt(pod: Obj) -> bool:
    """Whether a pod asks for a hw-encrypt node, the policy's way (annotation) or the
    built-in way (nodeSelector)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return annotations.get(HW_ENCRYPT_ANNOTATION) == "true" or \
        selector.get(HW_ENCRYPT_LABEL) == "true"


def hw_encrypt_held(nodes: Iterable[Obj], pods: Iterable[Obj]) -> Check:
    """Every bound pod that asks for hardware encryption is on a node that offers it."""
    offers = {_name(n) for n in nodes if _labels(n).get(HW_ENCRYPT_LABEL) == "true"}
    asking = [p for p in pods if needs_hw_encrypt(p) and _node_of(p)]
    broken = [f"{_name(p)} on {_node_of(p)}" for p in asking if _node_of(p) not in offers]
    return Check.of(broken, f"{len(asking)} bound pods need hw-encrypt")


def _claim_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def claims_allocated_on_their_nodes(pods: Iterable[Obj], claims: Iterable[Obj],
                                    measured: Iterable[str]) -> Check:
    """DynamicResources: every measured pod's claims are allocated, with devices of
    the pool of the node it is bound to (each node's slice is its own pool, named
    after it), and reserved for that pod; and no device is allocated to two claims."""
    by_key = {_claim_key(str((c.get("metadata") or {}).get("namespace", "")), _name(c)): c
              for c in claims}
    holders: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for key, claim in sorted(by_key.items()):
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            holders[(result.get("driver", ""), result.get("pool", ""),
                     result.get("device", ""))].append(key)
    problems = [f"{'/'.join(device)} allocated to {keys}"
                for device, keys in sorted(holders.items()) if len(keys) > 1]
    pods_by_name = {_name(p): p for p in pods}
    checked = 0
    for name in measured:
        pod = pods_by_name.get(name, {})
        node = _node_of(pod)
        meta = pod.get("metadata") or {}
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            key = _claim_key(str(meta.get("namespace", "")),
                             str(entry.get("resourceClaimName", "")))
            found = by_key.get(key)
            status = (found or {}).get("status") or {}
            results = ((status.get("allocation") or {}).get("devices") or {}).get(
                "results") or []
            checked += 1
            if found is None:
                problems.append(f"{name}: claim {key} does not exist")
            elif not results:
                problems.append(f"{name}: claim {key} not allocated")
            elif any(r.get("pool") != node for r in results):
                problems.append(f"{name} on {node or 'no node'}: claim {key} has devices "
                                f"{[r.get('pool') + '/' + r.get('device') for r in results]}")
            if found is not None and not any(
                    r.get("uid") == meta.get("uid") and r.get("name") == name
                    for r in status.get("reservedFor") or []):
                problems.append(f"{name}: claim {key} not reserved for it")
    return Check.of(problems, f"{checked} claims of measured pods checked, "
                              f"{len(holders)} devices allocated")


def check_placements(workload: str, nodes: list[Obj], pods: list[Obj],
                     measured: Iterable[str], *, constraints: bool = True,
                     claims: list[Obj] | None = None) -> dict[str, Check]:
    """The checks that apply to `workload` (`claims`: the ResourceClaims listed, for
    DynamicResources). `constraints=False` (the null scheduler, which evaluates
    nothing by design) keeps only "bound" and "allocatable"."""
    measured = list(measured)
    checks = {"every_measured_pod_bound": every_pod_bound(pods, measured),
              "no_node_over_allocatable": no_node_over_allocatable(nodes, pods)}
    if not constraints:
        return checks
    if claims is not None:
        checks["claims_allocated_on_their_nodes"] = claims_allocated_on_their_nodes(
            pods, claims, measured)
    if workload == "TopologySpreading":
        checks["zone_skew_within_max_skew"] = zone_skew_within(nodes, pods)
    elif workload == "PodAntiAffinity":
        checks["anti_affinity_held"] = anti_affinity_held(pods)
    elif workload == "PolicyMix":
        checks["hw_encrypt_held"] = hw_encrypt_held(nodes, pods)
    return checks


def all_held(checks: dict[str, Check]) -> bool:
    return all(c.held for c in checks.values())
