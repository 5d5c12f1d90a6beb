"""Audit mode against the real API server: a policy in Audit mode places pods as if it
were absent while counting its would-be rejections (the metric, one Normal event per
pod), and the same policy switched to Enforce in its file rejects the next pod."""

from __future__ import annotations

import time
import uuid
from functools import partial
from pathlib import Path

from tests.e2e.helpers import Cluster, DaemonFactory, metric, scrape, scrape_when, write_profile
from tests.polling import wait_for

HW = {"myorg.io/require-hw-encrypt": "true"}
HW_LABEL = {"node.kubernetes.io/hw-encrypt": "true"}
VIOLATIONS = "policyd_policy_violations_total"
RULE = {"policy": "hw-encrypt", "rule": "hw-encrypt-node"}
REASON = "node(s) didn't offer hardware encryption"


def test_audit_counts_and_tells_then_enforce_rejects(
        cluster: Cluster, daemons: DaemonFactory, policy_dir: Path) -> None:
    sched = f"policyd-{uuid.uuid4().hex[:6]}"
    # Three roomy nodes without hardware encryption, one small node with it: without
    # the policy every pod prefers a roomy node (NodeResourcesFit, BalancedAllocation),
    # exactly the nodes the policy would reject.
    plain = [f"plain-{i}" for i in range(3)]
    for name in plain:
        cluster.node(name, cpu="8")
    cluster.node("hw", labels=HW_LABEL, cpu="1")
    hw_policy = policy_dir / "hw-encrypt.yaml"
    enforce = hw_policy.read_text()
    assert "  pluginName: HwEncrypt\n" in enforce
    hw_policy.write_text(enforce.replace("  pluginName: HwEncrypt\n",
                                         "  pluginName: HwEncrypt\n  mode: Audit\n"))
    d = daemons.start(write_profile(policy_dir.parent, sched))
    port = d.http.port  # type: ignore[union-attr]

    secure = [f"secure-{i}" for i in range(3)]
    for name in secure:
        cluster.pod(name, sched, cpu="500m", annotations=HW)
    cluster.pod("ordinary", sched, cpu="500m")
    for name in secure:
        assert cluster.wait_bound(name) in plain  # where the policy would not let it
    assert cluster.wait_bound("ordinary") in plain

    text = scrape_when(port, VIOLATIONS, len(secure), 15.0, **RULE)
    for name in secure:
        events = wait_for(partial(cluster.events, pod=name, reason="PolicyViolation"),
                          10, f"the PolicyViolation event of {name}")
        assert len(events) == 1 and events[0]["type"] == "Normal"
        node = cluster.node_of(name)
        assert events[0]["message"] == (
            "policy hw-encrypt (Audit), rule hw-encrypt-node: would not fit on 3 of 4 "
            f"feasible nodes (the chosen node {node} among them): {REASON}")
        assert events[0]["source"]["component"] == sched
        assert len(cluster.events(pod=name, reason="Scheduled")) == 1
    assert cluster.events(pod="ordinary", reason="PolicyViolation") == []
    time.sleep(1)  # nothing more arrives: one event per pod, one count per pod
    for name in secure:
        assert len(cluster.events(pod=name, reason="PolicyViolation")) == 1
    _, text = scrape(port)
    assert metric(text, VIOLATIONS, **RULE) == len(secure)

    # Enforce, by editing the file: the running daemon picks it up and the policy
    # rejects again, with the usual FailedScheduling message.
    hw_policy.write_text(enforce)
    wait_for(lambda: d.watcher.reloads == 1, 10, "the reload to Enforce")
    cluster.delete_node("hw")
    cluster.pod("secure-late", sched, cpu="500m", annotations=HW)
    # 30 s, not 10: a CI run met a pods watch that ended at once (ShortWatch) just here,
    # and the relist after the retry ate most of a 10 s window.
    events = wait_for(lambda: cluster.events(pod="secure-late", reason="FailedScheduling"),
                      30, "FailedScheduling from the enforced policy")
    assert events[0]["message"] == (
        f"0/3 nodes are available: 3 {REASON}. no new claims to deallocate, preemption: "
        "0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    assert cluster.node_of("secure-late") is None
    assert cluster.events(pod="secure-late", reason="PolicyViolation") == []
    _, text = scrape(port)
    assert metric(text, VIOLATIONS, **RULE) == len(secure)
