"""policyd's CPU split: thread names to groups, and the growth between two readings."""

from __future__ import annotations

import threading
from pathlib import Path

from bench.e2e import threads
from bench.e2e.cluster import scheduled_pod
from policyd.daemon import thread_names


def test_groups_follow_the_daemons_thread_names() -> None:
    names = {"scheduler": "scheduling loop", "bind_0": "binders", "bind_15": "binders",
             "events-3": "event posting", "watch-pods": "informers",
             "watch-nodes": "informers", "python": "other", "reload": "other"}
    for comm, group in names.items():
        assert threads.group_of(comm) == group
    # What the daemon tells the kernel is what the groups match.
    assert thread_names.native_name("policyd-scheduler") == "scheduler"
    assert thread_names.native_name("policyd-watch-persistentvolumeclaims") == "watch-persisten"
    assert len(thread_names.native_name("policyd-" + "x" * 40).encode()) == 15


def test_split_counts_growth_and_new_threads_from_zero() -> None:
    before = {1: ("scheduler", 1.0), 2: ("bind_0", 0.5)}
    after = {1: ("scheduler", 3.0), 2: ("bind_0", 0.75), 3: ("events-0", 0.25)}
    assert threads.split(before, after) == {
        "scheduling loop": 2.0, "binders": 0.25, "event posting": 0.25, "informers": 0.0,
        "other": 0.0}


def test_a_named_thread_is_read_back_from_proc() -> None:
    seen: dict[str, str] = {}

    def body() -> None:
        tid = threading.get_native_id()
        seen["comm"] = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
        seen["grouped"] = threads.thread_cpu(__import__("os").getpid())[tid][0]

    t = threading.Thread(target=thread_names.named(body), name="policyd-bind_7")
    t.start()
    t.join()
    assert seen == {"comm": "bind_7", "grouped": "bind_7"}


def test_only_scheduled_events_of_pods_count() -> None:
    core = {"reason": "Scheduled", "involvedObject": {"kind": "Pod", "name": "pod-1"}}
    assert scheduled_pod(core) == "pod-1"
    assert scheduled_pod({**core, "reason": "FailedScheduling"}) is None
    assert scheduled_pod({"reason": "Scheduled",
                          "involvedObject": {"kind": "Node", "name": "n"}}) is None
