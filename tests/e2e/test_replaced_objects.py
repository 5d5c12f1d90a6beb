"""Objects replaced under their name while the watch was down (issue 12, item 2).

The issue's sequence on the real API server: a pod bound on a node that it nearly
fills; the daemon's watch is cut and the API server restarted after an etcd
compaction, so the watch gets 410 Gone and re-lists; meanwhile the pod was deleted and
re-created under the same name (new uid), pending or bound elsewhere. A new pod that
fits only without the old uid's requests must be bound within seconds (before the fix
it was refused with `Insufficient cpu` until policyd restarted).
"""

from __future__ import annotations

import time
from pathlib import Path

from policyd.devcluster import ControlPlane
from policyd.devcluster.faultproxy import FaultProxy
from policyd.devcluster.process import ManagedProcess
from policyd.kube.client import ConnectionSettings, KubeClient
from tests.e2e.helpers import Cluster, DaemonFactory, node_body, write_profile
from tests.polling import wait_for


def _restart_apiserver(cp: ControlPlane) -> None:
    apiserver = next(p for p in cp.processes if p.name == "kube-apiserver")
    apiserver.stop()
    time.sleep(2)
    restarted = ManagedProcess.start(apiserver.name, apiserver.argv, apiserver.log_path)
    cp.processes[cp.processes.index(apiserver)] = restarted
    wait_for(cp.safe_ready, 60, "kube-apiserver back")


def _uid(obj: dict[str, object]) -> str:
    return str(obj["metadata"]["uid"])  # type: ignore[index]


def test_pods_and_nodes_recreated_while_the_watch_was_down(
        tmp_path: Path, policy_dir: Path) -> None:
    # Its own control plane: restarting the shared one would disturb other tests.
    with ControlPlane() as cp:
        assert cp.apiserver_port is not None
        client = KubeClient.connect(ConnectionSettings(kubeconfig=str(cp.kubeconfig_path),
                                                       qps=-1))
        cluster = Cluster(client, "replaced")
        cluster.create_namespace()
        sched = "policyd-replaced"
        for name in ("n1", "n2", "n3"):
            cluster.node(name, cpu="1")
        spare = cluster.node("spare", cpu="1", labels={"zone": "a"})
        proxy = FaultProxy.for_control_plane(cp)
        # The daemon reaches the API server only through the proxy, so its watches can
        # be cut while the test keeps writing. A lease that outlives the outage.
        daemons = DaemonFactory(proxy.kubeconfig(cp, tmp_path), tmp_path)
        try:
            d = daemons.start(write_profile(policy_dir.parent, sched, lease_duration="90s",
                                            renew_deadline="80s"))
            # web-0 on n1 and web-1 on n2, 500m each: half of each node, bound by policyd.
            old = {}
            for pod, node in (("web-0", "n1"), ("web-1", "n2")):
                old[pod] = _uid(cluster.pod(pod, sched, cpu="500m", nodeSelector={
                    "kubernetes.io/hostname": node}))
                assert cluster.wait_bound(pod) == node
            relists = (d.pods.relists, d.nodes.relists)

            # The watch goes down.
            proxy.refusing = True
            proxy.cut()
            # Re-created under the same names, new uids: web-0 pending (a scheduler that
            # does not exist), web-1 bound elsewhere (n3). The spare node is deleted and
            # re-created with other labels.
            cluster.delete_pod("web-0")
            cluster.delete_pod("web-1")
            wait_for(lambda: cluster.get_pod("web-0") is None
                     and cluster.get_pod("web-1") is None, 15, "old pods gone")
            new0 = _uid(cluster.pod("web-0", "nobody", cpu="500m"))
            new1 = _uid(cluster.pod("web-1", "nobody", cpu="500m", nodeName="n3"))
            assert new0 != old["web-0"] and new1 != old["web-1"]
            cluster.delete_node("spare")
            spare2 = client.request("POST", "/api/v1/nodes",
                                    body=node_body("spare", cpu="1", labels={"zone": "b"}))
            assert _uid(spare2) != _uid(spare)
            # An etcd compaction and an API server restart: the watches' resourceVersion
            # is gone, so they get 410 and must re-list.
            cp.compact_etcd()
            _restart_apiserver(cp)
            proxy.refusing = False
            wait_for(lambda: d.pods.relists > relists[0] and d.nodes.relists > relists[1],
                     90, "both informers re-listed")

            # 600m fits n1 or n2 only if the old web-0/web-1 no longer count there.
            start = time.monotonic()
            for pod, node in (("big-1", "n1"), ("big-2", "n2")):
                cluster.pod(pod, sched, cpu="600m",
                            nodeSelector={"kubernetes.io/hostname": node})
            for pod, node in (("big-1", "n1"), ("big-2", "n2")):
                assert cluster.wait_bound(pod, timeout=10) == node
            assert time.monotonic() - start < 10
            cluster.pod("zoned", sched, nodeSelector={"zone": "b"})
            assert cluster.wait_bound("zoned", timeout=10) == "spare"

            with d.scheduler.lock:
                state = d.scheduler.cluster
                assert state.node_of(old["web-0"]) is None
                assert state.node_of(old["web-1"]) is None
                assert state.node_of(new1) == "n3"
                assert new0 in {p.uid for p in state.pending_pods()}
                n3, sp = state.get("n3"), state.get("spare")
                assert n3 is not None and n3.requested["cpu"] == 500
                assert sp is not None and sp.node.uid == _uid(spare2)
        finally:
            daemons.stop_all()
            proxy.close()
            client.close()
