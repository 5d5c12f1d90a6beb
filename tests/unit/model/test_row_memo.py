"""RowMemo and the NodeTable's row stamps: a memoized vector must equal the vector
computed from scratch, and the per-node reference, after any sequence of changes; and
it must recompute only the rows that changed."""

from __future__ import annotations

import random

import numpy as np
import pytest

from policyd.model.cluster import ClusterState
from policyd.model.row_memo import FEW_ROWS, RowMemo
from policyd.model.table import IntArray, NodeTable
from tests.builders import make_node, make_pod


def _values(memo: RowMemo[int], table: NodeTable, key: int, idx: IntArray) -> list[int]:
    """`memo.get`'s rows as a list (this compute always gives some)."""
    rows = memo.get(table, key, idx)
    assert rows is not None
    return list(rows.tolist())


class CountingCompute:
    """cpu requested + key on each row, recording which rows it was asked for."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def __call__(self, table: NodeTable, key: int, rows: IntArray) -> IntArray:
        self.calls.append(rows.tolist())
        j = table.resource_column("cpu")
        assert j is not None
        out: IntArray = table.requested[j][rows] + key
        return out


def cluster(n: int) -> ClusterState:
    return ClusterState([make_node(f"n{i}").obj() for i in range(n)])


def test_only_the_rows_written_since_are_recomputed() -> None:
    state = cluster(6)
    compute = CountingCompute()
    memo: RowMemo[int] = RowMemo(compute)
    table = state.table()
    everything = np.arange(6)
    # First use: only the rows asked for, nothing kept (the shape may never recur).
    assert _values(memo, table, 5, np.array([1, 2])) == [5, 5]
    assert compute.calls == [[1, 2]] and len(memo) == 0
    # Second use: every row, kept.
    assert _values(memo, table, 5, everything) == [5] * 6
    assert compute.calls[1:] == [list(range(6))] and len(memo) == 1
    assert _values(memo, table, 5, everything) == [5] * 6
    assert compute.calls[2:] == []  # nothing changed: nothing recomputed
    state.assume(make_pod("p").req(cpu="1").obj(), "n3")
    table = state.table()
    assert _values(memo, table, 5, everything) == [5, 5, 5, 1005, 5, 5]
    assert compute.calls[2:] == [[3]]
    # A heartbeat (a new node record with the same content) rewrites its row too.
    state.upsert_node(make_node("n1").obj())
    state.assume(make_pod("q").req(cpu="2").obj(), "n4")
    table = state.table()
    assert _values(memo, table, 5, np.array([1, 4])) == [5, 2005]
    assert compute.calls[3:] == [[1, 4]]


def test_a_rebuild_recomputes_everything_and_keys_are_separate() -> None:
    state = cluster(3)
    compute = CountingCompute()
    memo: RowMemo[int] = RowMemo(compute)
    for key in (1, 1, 2, 2):
        memo.get(state.table(), key, np.arange(3))
    assert len(compute.calls) == 4 and len(memo) == 2
    state.upsert_node(make_node("n9").obj())  # a new node renumbers the rows
    table = state.table()
    assert _values(memo, table, 1, np.arange(4)) == [1, 1, 1, 1]
    assert compute.calls[4:] == [[0, 1, 2, 3]]


def test_two_tables_never_share_entries() -> None:
    a, b = cluster(2), cluster(2)
    b.assume(make_pod("p").req(cpu="1").obj(), "n0")
    memo: RowMemo[int] = RowMemo(CountingCompute())
    for _ in range(2):  # the second round is served from the cache
        assert _values(memo, a.table(), 0, np.arange(2)) == [0, 0]
        assert _values(memo, b.table(), 0, np.arange(2)) == [1000, 0]


def test_the_memo_is_bounded_least_recently_used_first() -> None:
    state = cluster(2)
    compute = CountingCompute()
    memo: RowMemo[int] = RowMemo(compute, capacity=2)
    table = state.table()
    for key in (1, 1, 2, 2, 1, 3, 3):  # 2 is the least recently used when 3 comes
        memo.get(table, key, np.arange(2))
    assert len(memo) == 2
    calls = len(compute.calls)
    memo.get(table, 1, np.arange(2))
    assert len(compute.calls) == calls  # kept
    memo.get(table, 2, np.arange(2))
    assert len(compute.calls) == calls + 1  # dropped, computed again
    with pytest.raises(ValueError):
        RowMemo(compute, capacity=0)


def test_results_never_alias_the_cache() -> None:
    state = cluster(3)
    memo: RowMemo[int] = RowMemo(CountingCompute())
    table = state.table()
    memo.get(table, 7, np.arange(3))
    first = memo.get(table, 7, np.arange(3))
    assert first is not None and len(memo) == 1
    first[:] = -1
    again = memo.get(table, 7, np.arange(3))
    assert again is not None and again.tolist() == [7, 7, 7]


def test_a_declined_computation_is_not_cached() -> None:
    state = cluster(2)
    answers: list[IntArray | None] = [np.array([4, 4]), None, np.array([4, 4])] * 2

    def compute(table: NodeTable, key: int, rows: IntArray) -> IntArray | None:
        return answers.pop(0)

    memo: RowMemo[int] = RowMemo(compute)
    assert memo.get(state.table(), 0, np.arange(2)) is not None  # first use
    assert memo.get(state.table(), 0, np.arange(2)) is None  # declined: not kept
    assert len(memo) == 0
    result = memo.get(state.table(), 0, np.arange(2))
    assert result is not None and result.tolist() == [4, 4]


def test_rows_written_since_matches_a_scan_of_the_stamps() -> None:
    # The write log and the full scan must agree, for recent and old stamps, including
    # after the log has been trimmed (past 4096 writes).
    rng = random.Random(3)
    state = cluster(80)
    table = state.table()
    seen = [table.stamp]
    for k in range(5000):
        state.assume(make_pod(f"p{k}").req(cpu="10m").obj(), f"n{rng.randrange(80)}")
        table = state.table()
        seen.append(table.stamp)
        recent = seen[-rng.randint(1, min(12, len(seen)))]
        since = recent if rng.random() < 0.8 else rng.choice(seen)
        expected = np.flatnonzero(table.row_stamp > since).tolist()
        assert table.rows_written_since(since).tolist() == expected


def test_a_few_changed_rows_go_through_the_per_row_path_and_more_through_the_vector(
        ) -> None:
    state = cluster(12)
    compute = CountingCompute()
    one_by_one: list[int] = []

    def compute_row(table: NodeTable, key: int, row: int) -> int:
        one_by_one.append(row)
        return int(table.infos[row].requested.get("cpu", 0)) + key

    memo: RowMemo[int] = RowMemo(compute, compute_row=compute_row)
    everything = np.arange(12)
    memo.get(state.table(), 7, everything)
    memo.get(state.table(), 7, everything)  # cached from here
    calls = len(compute.calls)
    few = [1, 5, 9, 11][:FEW_ROWS]
    for row in few:
        state.assume(make_pod(f"p{row}").uid(f"u-p{row}").req(cpu="1").obj(), f"n{row}")
    got = _values(memo, state.table(), 7, everything)
    assert sorted(one_by_one) == few and len(compute.calls) == calls
    assert got == [1007 if i in few else 7 for i in range(12)]
    # The watch confirming a pod already counted there changes no value: no row to redo.
    state.upsert_pod(make_pod(f"p{few[0]}").uid(f"u-p{few[0]}").req(cpu="1")
                     .node(f"n{few[0]}").obj())
    memo.get(state.table(), 7, everything)
    assert sorted(one_by_one) == few and len(compute.calls) == calls
    many = list(range(FEW_ROWS + 1))
    for row in many:
        state.assume(make_pod(f"q{row}").req(cpu="2").obj(), f"n{row}")
    got = _values(memo, state.table(), 7, everything)
    assert compute.calls[calls:] == [many] and sorted(one_by_one) == few
    assert got == [sum((2000 if i in many else 0, 1000 if i in few else 0), 7)
                   for i in range(12)]
