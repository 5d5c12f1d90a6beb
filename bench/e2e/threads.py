"""policyd's CPU split by thread, read from /proc/PID/task/*/{comm,stat}.

The daemon names its threads at the OS level (policyd/daemon/thread_names.py), so
per-thread CPU needs no profiler: a sampling profiler (py-spy) would have to be
installed, run as a second process on the same two cores, and attribute time by stack,
where the question here is only which loop spends it. The kernel's per-thread utime +
stime is exact, costs nothing while the benchmark runs, and is read at the same two
moments as the process's CPU time.

Groups (GROUPS): the scheduling loop (one thread: pop, filter, score, assume), the
binders (the pool that POSTs Bindings), event posting (the EventSink writers), and the
informers (one thread per watch: reading and decoding the stream, updating the cache
and queue). Everything else (the main thread, /metrics, config reload) is "other".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# (group, predicate on the thread's OS name), first match wins.
GROUPS: tuple[tuple[str, str], ...] = (
    ("scheduling loop", "scheduler"),
    ("binders", "bind"),
    ("event posting", "events-"),
    ("informers", "watch-"),
)
OTHER = "other"
GROUP_NAMES = (*(g for g, _ in GROUPS), OTHER)


def group_of(comm: str) -> str:
    for group, prefix in GROUPS:
        if comm.startswith(prefix):
            return group
    return OTHER


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """{tid: (OS thread name, user + system CPU seconds)} of every live thread."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:  # ended between the listing and the read
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(task.name)] = (comm, (int(fields[11]) + int(fields[12])) / tick)
    return out


def split(before: Mapping[int, tuple[str, float]], after: Mapping[int, tuple[str, float]]
          ) -> dict[str, float]:
    """CPU seconds per group between two readings. A thread started in between counts
    from zero; one that ended in between is lost (the daemon's threads live as long
    as it does, so none does). The group is the thread's name at the second reading."""
    grew = dict.fromkeys(GROUP_NAMES, 0.0)
    for tid, (comm, cpu) in after.items():
        start = before.get(tid)
        grew[group_of(comm)] += cpu - (start[1] if start else 0.0)
    return {g: round(v, 3) for g, v in grew.items()}
