"""Placement quality: would kube-scheduler's own scoring have placed the pods so?

The placement checks (bench/e2e/placement.py) see only whether a constraint was broken;
a round-robin scheduler passes them. This module scores placements as the default
profile's resource scoring does, with upstream's integer arithmetic:

- NodeResourcesFit, LeastAllocated over cpu and memory, weight 1 each
  (pkg/scheduler/framework/plugins/noderesources/least_allocated.go,
  `leastResourceScorer` / `leastRequestedScore`);
- NodeResourcesBalancedAllocation over cpu and memory, v1.36's form that scores the
  change in balance the pod makes (balanced_allocation.go, `balancedResourceScorer`:
  50 + (50 + with pod - without pod) / 2).

The benchmark's pods all request cpu and memory, so LeastAllocated's non-zero requests
are their actual requests. The default profile's other scorers give every node the same
score for these workloads (no taints, affinity, topology spread constraints or images
on the nodes), so these two order the nodes as kube-scheduler orders them. Fit is
NodeResourcesFit's filter: cpu, memory, extended resources and the pod count within
allocatable.

The check (`held`) uses only what does not depend on the order the pods were decided
in, which the benchmark cannot see (binds run in parallel: kube-scheduler's, one
goroutine per pod, land hundreds out of decision order behind a backlog):

- no pod on a node that could not hold it, replayed in the order the binds were seen
  (a subset of a node's final pods fits wherever all of them do, so a scheduler that
  never overcommits passes whatever the order);
- the spread (population standard deviation over the nodes) of the final utilisation,
  each node's mean of its cpu and memory requested / allocatable, at most
  MAX_SPREAD_RATIO times that of the reference: the same pods placed one by one, in
  the order they are listed, each on the best-scoring node that fits (every node
  scored, as policyd does; kube-scheduler scores a sample and takes its best).

Beside it, for information, the per-pod replay in bind order: the mean share of the
nodes that fit each pod which score strictly higher than the one it got. Round-robin
ignores the scores; on SchedulingBasic its final placement is least-allocated's (every
node ends with two or three pods either way), so only this per-pod figure shows its
loss there, and the check can fail it only on MixedShapes.

Measured at 500 nodes / 1000 MixedShapes pods (2026-12-02, one run each): spread ratio
kube-scheduler 0.99, policyd 0.98, round-robin 1.33 with 114 pods on a node without
room; in bind order 0.0104, 0.0011 and 0.287 of fitting nodes scored higher. The bound,
1.15, sits between them.

Only for workloads whose sole constraint is resources (QUALITY_WORKLOADS); others
have filters and scorers of their own that this does not model.
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
MAX_SPREAD_RATIO = 1.15
QUALITY_WORKLOADS = ("SchedulingBasic", "MixedShapes")

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Quality:
    pods: int  # measured pods replayed
    did_not_fit: int  # pods on a node that could not hold them at that point
    spread: float  # std of the nodes' final utilisation
    reference_spread: float  # the same after the greedy best-score placement
    spread_ratio: float  # spread / reference_spread (1.0 when both are 0)
    held: bool
    # Information, replayed in bind order (see the module docstring):
    better_share: float  # mean share of fitting nodes scoring strictly higher
    mean_regret: float  # mean (best score - chosen node's score), in score points
    below_best: float  # share of pods not on a best-scoring node
    max_spread_ratio: float = MAX_SPREAD_RATIO

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def detail(self) -> str:
        return (f"{self.did_not_fit} pods on a node that did not fit them; utilisation "
                f"spread {self.spread:.4f} = {self.spread_ratio:.2f} x the best-score "
                f"placement's {self.reference_spread:.4f} (bound {self.max_spread_ratio}); "
                f"in bind order {self.better_share:.4f} of fitting nodes scored higher")


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
    balance: Ints = np.trunc((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return balance


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


def _allocatable(nodes: Sequence[Obj]) -> Ints:
    alloc = np.zeros((4, len(nodes)), dtype=np.int64)  # cpu, memory, pods, extended
    for i, node in enumerate(nodes):
        a = (node.get("status") or {}).get("allocatable") or {}
        alloc[:, i] = (milli_value(a.get("cpu", "0")), int_value(a.get("memory", "0")),
                       int_value(a.get("pods", "0")), int_value(a.get(ACCEL_RESOURCE, "0")))
    return alloc


def _fits(used: Ints, alloc: Ints, cpu: int, mem: int, ext: int) -> npt.NDArray[np.bool_]:
    fits: npt.NDArray[np.bool_] = (
        (used[0] + cpu <= alloc[0]) & (used[1] + mem <= alloc[1]) & (used[2] + 1 <= alloc[2]))
    if ext:
        fits &= used[3] + ext <= alloc[3]
    return fits


def utilisation_spread(used: Ints, alloc: Ints) -> float:
    """Population std over the nodes of each node's mean cpu and memory utilisation."""
    if used.shape[1] == 0:
        return 0.0
    cpu = used[0] / np.maximum(alloc[0], 1)
    mem = used[1] / np.maximum(alloc[1], 1)
    return float(np.std((cpu + mem) / 2))


def placement_quality(nodes: Sequence[Obj], pods: Iterable[Obj],
                      bind_order: Sequence[str],
                      max_spread_ratio: float = MAX_SPREAD_RATIO) -> Quality:
    """Replay the pods named in `bind_order` (each bound, in that order) on `nodes`
    holding every other bound pod of `pods`, and place the same pods, in the order
    `pods` lists them, on the best-scoring node for the reference spread; see the
    module docstring."""
    index = {_name(n): i for i, n in enumerate(nodes)}
    alloc = _allocatable(nodes)
    used = np.zeros_like(alloc)
    replayed = set(bind_order)
    by_name: dict[str, Obj] = {}
    listed: list[str] = []
    for pod in pods:
        name, node = _name(pod), _node_of(pod)
        by_name[name] = pod
        if name in replayed:
            listed.append(name)
        elif node in index:
            cpu, mem, ext = requests(pod)
            used[:, index[node]] += (cpu, mem, 1, ext)
    reference = used.copy()
    shares: list[float] = []
    regrets: list[int] = []
    misfits = 0
    for name in bind_order:
        bound = by_name.get(name)
        if bound is None or _node_of(bound) not in index:
            continue
        j = index[_node_of(bound)]
        cpu, mem, ext = requests(bound)
        fits = _fits(used, alloc, cpu, mem, ext)
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
    for name in listed:
        if _node_of(by_name[name]) not in index:
            continue
        cpu, mem, ext = requests(by_name[name])
        fits = _fits(reference, alloc, cpu, mem, ext)
        if not fits.any():
            continue
        total = np.where(fits, scores(reference[0], reference[1], alloc[0], alloc[1],
                                      cpu, mem), -1)
        reference[:, int(np.argmax(total))] += (cpu, mem, 1, ext)
    spread, ref = utilisation_spread(used, alloc), utilisation_spread(reference, alloc)
    ratio = spread / ref if ref > 0 else (1.0 if spread == 0 else float("inf"))
    count = len(shares)
    return Quality(
        pods=count, did_not_fit=misfits, spread=round(spread, 5),
        reference_spread=round(ref, 5), spread_ratio=round(ratio, 3),
        held=misfits == 0 and ratio <= max_spread_ratio,
        better_share=round(sum(shares) / count, 5) if count else 0.0,
        mean_regret=round(sum(regrets) / count, 3) if count else 0.0,
        below_best=round(sum(r > 0 for r in regrets) / count, 4) if count else 0.0,
        max_spread_ratio=max_spread_ratio)
