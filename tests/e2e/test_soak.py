"""The chaos soak at CI size (`bench.soak`, the same code as the full run by hand):
two leader-elected `policyd run` replicas behind fault proxies, a few hundred pods, and
every fault at least once (leader kill -9, kube-apiserver SIGKILL + restart after an
etcd compaction, connections cut and frozen, 429/500/503/swallowed replies). The
invariants are read from the API server and its audit log."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench.soak import SoakConfig, run_soak


def test_chaos_soak_ci_size_keeps_every_invariant(tmp_path: Path) -> None:
    cfg = SoakConfig.ci()
    t0 = time.monotonic()
    result = run_soak(cfg, tmp_path / "soak")
    report = json.dumps({"invariants": result.invariants, "faults": result.faults,
                         "replicas": result.replicas}, indent=1)
    broken = sorted(name for name, inv in result.invariants.items() if not inv["held"])
    assert not broken, f"invariants broken: {broken} (logs in {tmp_path})\n{report}"
    # Every invariant was actually evaluated, and on the whole stream.
    assert set(result.invariants) == {
        "every_fitting_pod_bound", "no_node_over_allocatable",
        "unfitting_pods_marked_unschedulable", "constraints_respected",
        "no_replica_crashed", "only_lease_holder_bound", "each_pod_bound_once"}
    assert result.pods == cfg.pods and result.bound == result.fitting > 0
    assert result.unschedulable > 0
    # Every fault happened at least once, and the proxies did inject errors into binds.
    for kind in ("cut", "freeze", "leader_kill", "apiserver_restart", "compaction",
                 "stale_takeover"):
        assert result.faults.get(kind, 0) >= 1, report
    injected = result.faults["injected_by_proxies"]
    assert any(k.startswith("bind:") for k in injected), report
    # Both replica slots scheduled at some point: the kill moved the lease.
    assert sum(1 for r in result.replicas if r["killed"]) == \
        cfg.leader_kills + cfg.stale_takeovers
    assert time.monotonic() - t0 < 180, "the CI soak must stay under 3 minutes"
