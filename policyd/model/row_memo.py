"""Per-row results of a vector computation, kept between pods and brought up to date by
recomputing only the rows that changed.

Between two scheduling cycles only a few NodeTable rows change (the node the last pod
was bound to, the nodes whose status was posted), and consecutive pods mostly have the
same shape (requests, tolerations). A plugin's vector over all nodes is therefore
mostly the one it computed for the previous pod: a `RowMemo` keeps, per pod-side key,
the full-length result and the table stamp it reflects, and on the next use recomputes
only `table.rows_written_since(stamp)` (everything after a rebuild).

A key is cached from its second use on: the first time, only the rows asked for are
computed (`idx`, often far fewer than all when filters rejected most nodes), so pods of
one-off shapes cost what they cost without the memo and do not push recurring shapes out.

The invariant that makes this exact: `compute(table, key, rows)[k]` is a pure function
of `key` and of row `rows[k]`'s columns (what `_write_node`/`_write_usage` write, and
the on-demand columns derived from the same node record); it must not read other rows,
the cycle state, or anything outside the table. Whatever the pod contributes belongs in
the key. The memo is bounded (least recently used keys are dropped) and per plugin
instance, so the plugin's configuration is implicitly part of the key. It is not
thread-safe: the engine runs one cycle at a time (the daemon's single scheduling loop).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from policyd.model.table import IntArray, NodeTable

K = TypeVar("K", bound=Hashable)
Rows = npt.NDArray[Any]
RowsFn = Callable[[NodeTable, K, IntArray], Rows | None]
"""(table, key, rows) -> the result for those rows, or None when the computation
cannot be done exactly as a vector (the caller then takes its per-node path)."""
RowFn = Callable[[NodeTable, K, int], Any]
"""(table, key, row) -> the result for one row, from the plugin's per-node path (what the
vector path must equal)."""

# Up to this many changed rows are brought up to date one by one through `compute_row`
# where the plugin gives one: a vector computation costs dozens of numpy calls of about a
# microsecond whatever the row count, and between two pods of a daemon usually one row
# (the last pod's node) changed.
FEW_ROWS = 4

DEFAULT_CAPACITY = 32


class _Entry:
    __slots__ = ("generation", "stamp", "values")

    def __init__(self, generation: int, stamp: int, values: Rows) -> None:
        self.generation = generation
        self.stamp = stamp
        self.values = values


class RowMemo(Generic[K]):
    """`compute` over every row of the table, cached per key (see the module docstring
    for what `compute` may read)."""

    def __init__(self, compute: RowsFn[K], capacity: int = DEFAULT_CAPACITY,
                 compute_row: RowFn[K] | None = None) -> None:
        if capacity < 1:
            raise ValueError("a RowMemo needs room for at least one key")
        self._compute = compute
        self._compute_row = compute_row
        self._capacity = capacity
        self._entries: OrderedDict[K, _Entry] = OrderedDict()
        # Keys used once and not cached (yet): a second use caches them.
        self._seen: OrderedDict[K, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, table: NodeTable, key: K, idx: IntArray) -> Rows | None:
        """`compute(table, key, idx)`, from the cache where the rows have not changed.
        Always a new array (a copy of all rows costs about a microsecond), so nothing
        outside ever aliases the cache."""
        entries = self._entries
        entry = entries.get(key)
        if entry is None:
            if key not in self._seen:
                self._seen[key] = None
                if len(self._seen) > 4 * self._capacity:
                    self._seen.popitem(last=False)
                return self._compute(table, key, idx)
            del self._seen[key]
        values = self._values(table, key, entry)
        if values is None:
            return None
        # `idx` covering every row is 0..n-1 (sorted, complete): see NodeTable.take.
        return values.copy() if idx.size == values.size else values[idx]

    def _values(self, table: NodeTable, key: K, entry: _Entry | None) -> Rows | None:
        """The key's result on every row, brought up to date (None: declined)."""
        entries = self._entries
        if entry is not None and entry.generation == table.generation:
            rows = table.rows_written_since(entry.stamp)
            if rows.size and rows.size <= FEW_ROWS and self._compute_row is not None:
                cached = entry.values
                for row in rows.tolist():
                    cached[row] = self._compute_row(table, key, row)
            elif rows.size:
                fresh = self._compute(table, key, rows)
                if fresh is None:
                    del entries[key]
                    return None
                entry.values[rows] = fresh
            entry.stamp = table.stamp
            entries.move_to_end(key)
            return entry.values
        values = self._compute(table, key, np.arange(len(table), dtype=np.int64))
        if values is None:
            entries.pop(key, None)
            return None
        # A private, writable copy: `compute` may return a table column itself.
        values = np.array(values, copy=True)
        entries[key] = _Entry(table.generation, table.stamp, values)
        entries.move_to_end(key)
        while len(entries) > self._capacity:
            entries.popitem(last=False)
        return values

    def clear(self) -> None:
        self._entries.clear()
        self._seen.clear()
