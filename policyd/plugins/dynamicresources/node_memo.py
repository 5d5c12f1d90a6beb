"""What the allocator answered per node, kept across pods while nothing it read changed.

Filter asks the structured allocator, for every node, to allocate the pod's
unallocated claims. Upstream does that afresh for each pod (over 16 goroutines); in
one Python thread, at thousands of nodes, that search is most of a cycle. Yet between
two pods with claims of the same shape the answer changes on few nodes: those where
the last pod's devices were taken. So each node's answer is kept with what it was
computed from, and used again only while all of it is unchanged:

- the claims' `spec.devices` (requests, constraints, configuration), in order: the
  allocation reads nothing else of a claim but its name in error texts, and errors
  are never kept;
- the node's name and labels (slice and per-device node selectors);
- every DeviceClass and ResourceSlice (the stores' generations: any change anywhere
  drops every kept answer; classes and slices change seldom, pods all the time);
- the devices taken in each pool the node's search could use: the claim tracker logs
  a pool whenever an allocation naming one of its devices is stored, replaced,
  removed, put in flight or withdrawn (`ClaimCache.pool_changes_since`), and each
  cycle's PreFilter drops the answers of the nodes that could use a pool logged
  since the last (all of them when the log was cut short);
- the plugin's allocator features and CEL cache, fixed for the memo's owner.

Two kinds of answers are never kept, because a fresh search could differ: one that
used a pool with shared counters (the allocator keeps a pool's free counters for the
whole cycle, by pool name across nodes, as v1.36.3 does, so a node's answer can
depend on which node was searched first), and one with a share of a device with
consumable capacity (each share gets a new random ID).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from policyd.dra.allocator import Allocator
from policyd.dra.nodes import Node
from policyd.dra.objects import ResourceClaim
from policyd.dra.pools import Pool
from policyd.dra.results import AllocationResult
from policyd.model.table import BoolArray, IntArray, NodeTable
from policyd.plugins.dynamicresources.store import DraStore

# Claim shapes whose per-node answers are kept at once (least recently used dropped).
MAX_SHAPES = 16


def claims_key(claims: Sequence[Mapping[str, Any]]) -> str:
    """The part of the claims (raw objects, in order) an allocation depends on."""
    return json.dumps([(c.get("spec") or {}).get("devices") for c in claims],
                      sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class _Answer:
    labels: Mapping[str, str]
    # (driver, pool) of every pool the node's search could use
    pools: tuple[tuple[str, str], ...]
    results: list[AllocationResult] | None


class NodeAllocationMemo:
    """Per claim shape and node: the allocator's last answer. One per plugin
    instance; it follows one DRA store at a time (a different store drops all; the
    store is held, not just its id, so that a new store can never pass for it)."""

    def __init__(self) -> None:
        self._store: DraStore | None = None
        self._generations: tuple[int, int] = (-1, -1)
        self._shapes: OrderedDict[str, ShapeAnswers] = OrderedDict()

    def answers_for(self, store: DraStore, key: str) -> ShapeAnswers:
        """The answers still valid for claims of shape `key` (`claims_key`) in
        `store`, taken when the cycle's allocator is built (PreFilter): all are
        dropped when the store, a class or a slice changed; those of the nodes that
        could use a pool whose taken devices changed since the last call are too."""
        generations = (store.classes.generation, store.slices.generation)
        if self._store is not store or generations != self._generations:
            self._shapes.clear()
            self._store = store
            self._generations = generations
        answers = self._shapes.get(key)
        if answers is None:
            answers = self._shapes[key] = ShapeAnswers(store.claims.pool_changes_total)
            while len(self._shapes) > MAX_SHAPES:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(key)
            answers.catch_up(store)
        return answers


class ShapeAnswers:
    """The kept answers, per node, for one claim shape in one store; and, for
    `mask`, the same as NodeTable rows: which rows' answers are known valid, and
    whether each lets the pod through."""

    __slots__ = ("_answers", "_by_pool", "_generation", "_index", "_known", "_passes",
                 "_seen", "_stamp", "hits", "misses")

    def __init__(self, seen: int) -> None:
        self._answers: dict[str, _Answer] = {}
        # (driver, pool) -> the nodes whose kept answer could use that pool
        self._by_pool: dict[tuple[str, str], set[str]] = {}
        # how many of the claim tracker's pool changes are accounted for
        self._seen = seen
        # The rows of the NodeTable `mask` last read (its generation and stamp):
        # `_known[i]` when row i's kept answer was checked against the row's node
        # since it was last written, `_passes[i]` whether that answer allocates.
        self._generation = -1
        self._stamp = 0
        self._index: Mapping[str, int] = {}
        self._known: BoolArray = np.zeros(0, np.bool_)
        self._passes: BoolArray = np.zeros(0, np.bool_)
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._answers)

    def catch_up(self, store: DraStore) -> None:
        """Drop the answers of every node that could use a pool changed since."""
        changed = store.claims.pool_changes_since(self._seen)
        self._seen = store.claims.pool_changes_total
        if changed is None:
            self._answers.clear()
            self._by_pool.clear()
            self._known[:] = False
            return
        for pool in changed:
            for node in self._by_pool.pop(pool, ()):
                self._drop(node)

    def _drop(self, node: str) -> None:
        kept = self._answers.pop(node, None)
        if kept is None:
            return
        row = self._index.get(node)
        if row is not None:
            self._known[row] = False
        for pool in kept.pools:
            nodes = self._by_pool.get(pool)
            if nodes is not None:
                nodes.discard(node)
                if not nodes:
                    del self._by_pool[pool]

    def mask(self, table: NodeTable, idx: IntArray, wanted: int,
             judge: Callable[[int], bool]) -> BoolArray | None:
        """For the rows `idx`: whether the node's answer allocates all `wanted`
        claims. Rows whose answer is not known valid are given to `judge(row)` first
        (the per-node Filter, which allocates and keeps the answer); it returns False
        to stop (None is then returned: the caller takes its per-node path)."""
        self._follow(table)
        known, passes = self._known, self._passes
        todo = idx[~known[idx]]
        if todo.size:
            names, infos = table.names, table.infos
            for row in todo.tolist():
                if not judge(row):
                    return None
                kept = self._answers.get(names[row])
                if kept is None or kept.labels != infos[row].node.labels:
                    # Judged but no answer kept (one that is never kept, or Filter
                    # decided without allocating): this row's verdict is not in
                    # `passes`, so the per-node path decides every row.
                    return None
                known[row] = True
                results = kept.results
                passes[row] = results is not None and len(results) == wanted
        out: BoolArray = passes[idx]
        return out

    def _follow(self, table: NodeTable) -> None:
        """Forget the rows written since the last call (a node update, a pod bound
        there: its labels may differ), all of them when the table was rebuilt."""
        if table.generation != self._generation or self._known.size != len(table):
            self._generation = table.generation
            self._index = table.index
            self._known = np.zeros(len(table), np.bool_)
            self._passes = np.zeros(len(table), np.bool_)
        else:
            self._known[table.rows_written_since(self._stamp)] = False
        self._stamp = table.stamp

    def results_of(self, name: str) -> list[AllocationResult] | None:
        """The results `mask` let the node through with (None if it did not)."""
        row = self._index.get(name)
        if row is None or not self._known[row] or not self._passes[row]:
            return None
        kept = self._answers.get(name)
        return kept.results if kept is not None else None

    def kept(self, name: str, labels: Mapping[str, str]) -> _Answer | None:
        """The kept answer of the node (by name and labels), if still valid."""
        kept = self._answers.get(name)
        if kept is not None and kept.labels == labels:
            self.hits += 1
            return kept
        return None

    def allocate(self, allocator: Allocator, node: Node, claims: Sequence[ResourceClaim],
                 cancelled: Callable[[], str | None] | None = None,
                 ) -> list[AllocationResult] | None:
        """`allocator.allocate(node, claims)`, or the answer kept for the node while
        still valid. Raises what the allocator raises (nothing is kept then)."""
        kept = self.kept(node.name, node.labels)
        if kept is not None:
            return kept.results
        self.misses += 1
        self._drop(node.name)
        pools = allocator.pools_for(node)
        results = allocator.allocate(node, claims, cancelled=cancelled, pools=pools)
        if _keepable(pools, results):
            keys = tuple((p.driver, p.name) for p in pools)
            self._answers[node.name] = _Answer(dict(node.labels), keys, results)
            for pool in keys:
                self._by_pool.setdefault(pool, set()).add(node.name)
        return results


def _keepable(pools: list[Pool], results: list[AllocationResult] | None) -> bool:
    if any(p.counter_sets for p in pools):
        return False
    return results is None or not any(d.share_id is not None
                                      for r in results for d in r.devices)
