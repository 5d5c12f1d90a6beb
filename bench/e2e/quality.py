"""Placement quality: would kube-scheduler's own scoring have accepted each placement?

The placement checks (bench/e2e/placement.py) see only whether a constraint was broken;
a round-robin scheduler passes them. This check replays the measured pods in the order
the benchmark's watch saw them bound, on the nodes and the pods already bound before
them (init pods, the warm-up pod), and scores every node that fits each pod as the
default profile's resource scoring does, with upstream's integer arithmetic:

- NodeResourcesFit, LeastAllocated over cpu and memory, weight 1 each
  (pkg/scheduler/framework/plugins/noderesources/least_allocated.go,
  `leastResourceScorer` / `leastRequestedScore`);
- NodeResourcesBalancedAllocation over cpu and memory, v1.36's form that scores the
  change in balance the pod makes (balanced_allocation.go, `balancedResourceScorer`:
  50 + (50 + with pod - without pod) / 2).

The default profile's other scorers give every node the same score for these workloads
(no taints, affinity, topology spread constraints or images on the nodes), so these two
order the nodes as kube-scheduler orders them. Fit is NodeResourcesFit's filter: cpu,
memory, extended resources and the pod count within allocatable.

The figure is, per pod, the share of the nodes that fit it which score strictly higher
than the node it got (a node that did not fit counts as 1), averaged over the measured
pods. kube-scheduler scores a sample of at least max(100, adaptive percentage) nodes and
takes the best: were the sample random, the expected share of nodes better than its
best would be 1 / (sample + 1), under 1%. The bound, MAX_BETTER_SHARE = 2%, leaves room
for the rotating (not random) sample and for binds seen in a slightly different order
than the decisions (binds run in parallel). A round-robin scheduler ignores the scores:
it sends a pod to each node holding an init pod per round while emptier nodes wait.
Measured at 500 nodes / 1000 pods (2026-12-02): kube-scheduler 0.0083 on
SchedulingBasic and 0.0013 on MixedShapes, policyd 0.0001 and 0.0010, round-robin 0.039
and 0.287 (114 of 1000 MixedShapes pods on a node without room for them).

Only for workloads whose sole constraint is resources (QUALITY_WORKLOADS); others
have filters and scorers of their own that this replay does not model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.e2e.shapes import ACCEL_RESOURCE, Obj
from policyd.model.quantity import int_value, milli_value

MAX_NODE_SCORE = 100
MAX_BETTER_SHARE = 0.02
QUALITY_WORKLOADS = ("SchedulingBasic", "MixedShapes")

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Quality:
    pods: int  # measured pods replayed
    better_share: float  # mean share of fitting nodes scoring strictly higher
    mean_regret: float  # mean (best score - chosen node's score), in score points
    below_best: float  # share of pods not on a best-scoring node
    did_not_fit: int  # pods on a node that could not hold them at that point
    held: bool
    bound: float = MAX_BETTER_SHARE

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def detail(self) -> str:
        return (f"mean share of fitting nodes scoring higher {self.better_share:.4f} "
                f"(bound {self.bound}), mean regret {self.mean_regret:.2f} points, "
                f"{self.below_best:.1%} of pods below the best score, "
                f"{self.did_not_fit} on a node that did not fit them")


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _node_of(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def requests(pod: Obj) -> tuple[int, int, int]:
    """(cpu millicores, memory bytes, extended resource units) its containers request."""
    cpu = mem = ext = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        r = (c.get("resources") or {}).get("requests") or {}
        cpu += milli_value(r.get("cpu", "0"))
        mem += int_value(r.get("memory", "0"))
        ext += int_value(r.get(ACCEL_RESOURCE, "0"))
    return cpu, mem, ext


def least_allocated(used: Ints, request: int, alloc: Ints) -> Ints:
    """leastRequestedScore per node for one resource (0 where it would not fit)."""
    total = used + request
    safe = np.maximum(alloc, 1)
    score = (alloc - total) * MAX_NODE_SCORE // safe
    return np.where((total > alloc) | (alloc == 0), 0, score)


def _balance(cpu: Ints, mem: Ints, alloc_cpu: Ints, alloc_mem: Ints) -> Ints:
    """balancedResourceScore for two resources: int64((1 - |f_cpu - f_mem| / 2) * 100)."""
    f_cpu = np.minimum(cpu / np.maximum(alloc_cpu, 1), 1.0)
    f_mem = np.minimum(mem / np.maximum(alloc_mem, 1), 1.0)
    std = np.abs((f_cpu - f_mem) / 2)
    return np.trunc((1 - std) * MAX_NODE_SCORE).astype(np.int64)


def scores(used_cpu: Ints, used_mem: Ints, alloc_cpu: Ints, alloc_mem: Ints,
           cpu: int, mem: int) -> Ints:
    """NodeResourcesFit (LeastAllocated) + NodeResourcesBalancedAllocation per node for a
    pod requesting `cpu` millicores and `mem` bytes."""
    fit = (least_allocated(used_cpu, cpu, alloc_cpu)
           + least_allocated(used_mem, mem, alloc_mem)) // 2
    with_pod = _balance(used_cpu + cpu, used_mem + mem, alloc_cpu, alloc_mem)
    without = _balance(used_cpu, used_mem, alloc_cpu, alloc_mem)
    balanced = MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without) // 2
    return fit + balanced


def placement_quality(nodes: Sequence[Obj], pods: Iterable[Obj],
                      bind_order: Sequence[str], bound: float = MAX_BETTER_SHARE
                      ) -> Quality:
    """Replay the pods named in `bind_order` (each bound, in that order) on `nodes`
    holding every other bound pod of `pods`; see the module docstring."""
    index = {_name(n): i for i, n in enumerate(nodes)}
    alloc = np.zeros((4, len(nodes)), dtype=np.int64)  # cpu, memory, pods, extended
    for i, node in enumerate(nodes):
        a = (node.get("status") or {}).get("allocatable") or {}
        alloc[:, i] = (milli_value(a.get("cpu", "0")), int_value(a.get("memory", "0")),
                       int_value(a.get("pods", "0")), int_value(a.get(ACCEL_RESOURCE, "0")))
    used = np.zeros_like(alloc)
    replayed = set(bind_order)
    by_name: dict[str, Obj] = {}
    for pod in pods:
        name, node = _name(pod), _node_of(pod)
        by_name[name] = pod
        if node in index and name not in replayed:
            cpu, mem, ext = requests(pod)
            used[:, index[node]] += (cpu, mem, 1, ext)
    shares: list[float] = []
    regrets: list[int] = []
    misfits = 0
    for name in bind_order:
        pod = by_name.get(name)
        if pod is None or _node_of(pod) not in index:
            continue
        j = index[_node_of(pod)]
        cpu, mem, ext = requests(pod)
        fits = ((used[0] + cpu <= alloc[0]) & (used[1] + mem <= alloc[1])
                & (used[2] + 1 <= alloc[2]))
        if ext:
            fits &= used[3] + ext <= alloc[3]
        total = scores(used[0], used[1], alloc[0], alloc[1], cpu, mem)
        if not fits[j]:
            misfits += 1
            shares.append(1.0)
            regrets.append(int(total[fits].max() - total[j]) if fits.any() else 0)
        else:
            fitting = total[fits]
            shares.append(float(np.count_nonzero(fitting > total[j])) / len(fitting))
            regrets.append(int(fitting.max() - total[j]))
        used[:, j] += (cpu, mem, 1, ext)
    count = len(shares)
    share = sum(shares) / count if count else 0.0
    return Quality(
        pods=count, better_share=round(share, 5),
        mean_regret=round(sum(regrets) / count, 3) if count else 0.0,
        below_best=round(sum(r > 0 for r in regrets) / count, 4) if count else 0.0,
        did_not_fit=misfits, held=misfits == 0 and share <= bound, bound=bound)
