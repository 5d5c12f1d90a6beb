"""Snapshot loading benchmark: `kubectl get nodes,pods -A -o yaml|json` of big clusters.

    .venv/bin/python -m bench.snapshot_bench                       # the docs/performance.md table
    .venv/bin/python -m bench.snapshot_bench --sizes 500x22000 --runs 5

For each size it writes one cluster twice, as kubectl prints it: JSON (`-o json`, 4-space
indent) and YAML (`-o yaml`: sorted keys, block style, list items at the parent's
indentation). Objects look like a real cluster's: nodes with conditions and 30 images,
pods with probes, env, a projected service-account volume, container statuses; 1% of
the pods are pending, for the default scheduler. Each measurement is a fresh process:

- load: `load_snapshot` alone, timed inside the process (best and median of --runs);
- simulate: the whole `policyd simulate --cluster FILE --format json` command, wall time
  and peak RSS of the process (it loads the snapshot, then schedules the pending pods).

Writes JSON to bench/results/snapshot-latest.json and prints the markdown table that
`python -m bench.readme_tables` puts in docs/performance.md from it (`markdown`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ZONES = ("zone-a", "zone-b", "zone-c")
TS = "2026-01-01T00:00:00Z"
RESULTS = Path(__file__).parent / "results" / "snapshot-latest.json"


def _node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": f"6a1e0000-0000-4000-8000-{i:012d}",
            "resourceVersion": str(1000 + i), "creationTimestamp": TS,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": ZONES[i % 3],
                       "node.kubernetes.io/instance-type": "m5.2xlarge"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24",
                 "providerID": f"aws:///{ZONES[i % 3]}/i-{i:017x}"},
        "status": {
            "addresses": [{"type": "InternalIP", "address": f"10.200.{i // 256 % 256}.{i % 256}"},
                          {"type": "Hostname", "address": name}],
            "allocatable": {"cpu": "7910m", "ephemeral-storage": "95551679124",
                            "memory": "31482Mi", "pods": "110"},
            "capacity": {"cpu": "8", "ephemeral-storage": "104845292Ki", "memory": "32386Mi",
                         "pods": "110"},
            "conditions": [{"type": t, "status": "False" if t != "Ready" else "True",
                            "lastHeartbeatTime": TS, "lastTransitionTime": TS,
                            "reason": f"Kubelet{t}", "message": f"kubelet reports {t}"}
                           for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
            "images": [{"names": [f"registry.example.com/team{j}/app@sha256:{j:064x}",
                                  f"registry.example.com/team{j}/app:v{j}"],
                        "sizeBytes": 50_000_000 + 1_000_000 * j} for j in range(30)],
            "nodeInfo": {"architecture": "amd64", "containerRuntimeVersion": "containerd://2.0.0",
                         "kernelVersion": "6.1.0", "kubeProxyVersion": "v1.36.0",
                         "kubeletVersion": "v1.36.0", "operatingSystem": "linux",
                         "osImage": "Debian GNU/Linux 12 (bookworm)"}}}


def _pod(i: int, node: str | None) -> dict[str, Any]:
    app = f"app-{i % 300}"
    name = f"{app}-7c9d8f6b5-{i:06d}"
    container: dict[str, Any] = {
        "name": "main", "image": f"registry.example.com/team{i % 30}/app:v{i % 30}",
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                "fieldPath": "metadata.name"}}},
                {"name": "LOG_LEVEL", "value": "info"}],
        "resources": {"requests": {"cpu": f"{50 + 10 * (i % 10)}m", "memory": "128Mi"},
                      "limits": {"memory": "256Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                           "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1,
                           "failureThreshold": 3},
        "volumeMounts": [{"name": "kube-api-access-x1y2z", "readOnly": True,
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "generateName": f"{app}-7c9d8f6b5-", "namespace": f"team-{i % 40}",
            "uid": f"7c1e0000-0000-4000-8000-{i:012d}", "resourceVersion": str(5000 + i),
            "creationTimestamp": TS, "labels": {"app": app, "pod-template-hash": "7c9d8f6b5"},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-7c9d8f6b5",
                "blockOwnerDeletion": True, "controller": True,
                "uid": f"5b1e0000-0000-4000-8000-{i % 300:012d}"}]},
        "spec": {
            "containers": [container], "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "securityContext": {},
            "serviceAccount": "default", "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"effect": "NoExecute", "key": f"node.kubernetes.io/{k}",
                             "operator": "Exists", "tolerationSeconds": 300}
                            for k in ("not-ready", "unreachable")],
            "volumes": [{"name": "kube-api-access-x1y2z", "projected": {
                "defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt",
                                   "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                        "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}]},
        "status": {"phase": "Pending", "qosClass": "Burstable"}}
    if node is not None:
        pod["spec"]["nodeName"] = node
        pod["status"] = {
            "phase": "Running", "qosClass": "Burstable", "hostIP": "10.200.0.1",
            "podIP": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}", "startTime": TS,
            "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": TS}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{
                "name": "main", "image": container["image"], "ready": True, "started": True,
                "imageID": f"registry.example.com/team{i % 30}/app@sha256:{i % 30:064x}",
                "containerID": f"containerd://{i:064x}", "restartCount": 0,
                "state": {"running": {"startedAt": TS}}, "lastState": {}}]}
    return pod


def _objects(nodes: int, pods: int) -> Iterator[dict[str, Any]]:
    for i in range(nodes):
        yield _node(i)
    for i in range(pods):
        # Bound pods fill nodes evenly; every hundredth pod is pending.
        yield _pod(i, None if i % 100 == 99 else f"node-{i % nodes:05d}")


def write_snapshots(nodes: int, pods: int, directory: Path) -> tuple[Path, Path]:
    """The same List as kubectl's JSON and YAML, written item by item (bounded memory)."""
    # PyYAML, as kubectl's layout: block style, sorted keys, indentless lists
    import yaml  # type: ignore[import-untyped]

    json_path = directory / f"cluster-{nodes}x{pods}.json"
    yaml_path = directory / f"cluster-{nodes}x{pods}.yaml"
    with json_path.open("w") as jf, yaml_path.open("w") as yf:
        jf.write('{\n    "apiVersion": "v1",\n    "items": [\n')
        yf.write("apiVersion: v1\nitems:\n")
        for n, obj in enumerate(_objects(nodes, pods)):
            if n:
                jf.write(",\n")
            jf.write("        " + json.dumps(obj, indent=4).replace("\n", "\n        "))
            yf.write(yaml.dump([obj], Dumper=yaml.CSafeDumper, default_flow_style=False,
                               sort_keys=True, width=10**9))
        jf.write('\n    ],\n    "kind": "List",\n    "metadata": {\n'
                 '        "resourceVersion": ""\n    }\n}\n')
        yf.write("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
    return json_path, yaml_path


def _child_load(path: str) -> None:
    from policyd.model.cluster_files import load_snapshot

    start = time.perf_counter()
    snap = load_snapshot(Path(path))
    print(json.dumps({"seconds": time.perf_counter() - start, "nodes": len(snap.nodes),
                      "pods": len(snap.pods)}))


def _load_once(path: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "bench.snapshot_bench", "--child-load",
                          str(path)], check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _simulate_once(path: Path) -> dict[str, float]:
    """Wall time and peak RSS of the whole `policyd simulate` command."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "policyd", "simulate", "--cluster",
                             str(path), "--format", "json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        detail = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"simulate exited {code}: {detail}")
    return {"seconds": wall, "peak_rss_mb": usage.ru_maxrss / 1024}


def run(sizes: list[tuple[int, int]], runs: int, workdir: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for nodes, pods in sizes:
        json_path, yaml_path = write_snapshots(nodes, pods, workdir)
        row: dict[str, Any] = {"nodes": nodes, "pods": pods}
        for fmt, path in (("json", json_path), ("yaml", yaml_path)):
            loads = [_load_once(path) for _ in range(runs)]
            assert loads[0]["nodes"] == nodes and loads[0]["pods"] == pods, loads[0]
            secs = [r["seconds"] for r in loads]
            sim = _simulate_once(path)
            row[fmt] = {"file_mb": path.stat().st_size / 2**20, "load_min": min(secs),
                        "load_median": statistics.median(secs), "load_max": max(secs),
                        "simulate_seconds": sim["seconds"],
                        "simulate_peak_rss_mb": sim["peak_rss_mb"]}
        row["yaml_over_json"] = row["yaml"]["load_median"] / row["json"]["load_median"]
        rows.append(row)
        json_path.unlink()
        yaml_path.unlink()
        print(f"progress: {row_line(row)}", file=sys.stderr, flush=True)
    return rows


COLUMNS = ("cluster", "JSON / YAML file", "JSON load", "YAML load", "YAML / JSON",
           "simulate, JSON", "simulate, YAML")


def _seconds(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def _load(fmt: dict[str, Any]) -> str:
    """Median (min–max) with three significant figures at the median's scale."""
    digits = 1 if fmt["load_median"] >= 10 else 2
    return (f"{_seconds(fmt['load_median'], digits)} s ({_seconds(fmt['load_min'], digits)}"
            f"–{_seconds(fmt['load_max'], digits)})")


def _memory(mib: float) -> str:
    # ru_maxrss and the file sizes are in binary units: say so rather than round to GB.
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def _simulate(fmt: dict[str, Any]) -> str:
    return f"{fmt['simulate_seconds']:.1f} s, {_memory(fmt['simulate_peak_rss_mb'])}"


def row_line(row: dict[str, Any]) -> str:
    j, y = row["json"], row["yaml"]
    cells = [f"{row['nodes']:,} nodes, {row['pods']:,} pods",
             f"{j['file_mb']:.0f} / {y['file_mb']:.0f} MiB", _load(j), _load(y),
             f"{row['yaml_over_json']:.2f}x", _simulate(j), _simulate(y)]
    return "| " + " | ".join(cells) + " |"


def markdown(doc: dict[str, Any]) -> str:
    """docs/performance.md's table from bench/results/snapshot-latest.json (`main` writes it)."""
    lines = [f"Measured {doc['date']}, Python {doc['python']}, {doc['cpus']} CPUs: "
             f"`{doc['command'].strip()}`; load is the median (min–max) of the runs, "
             "simulate one run.", "",
             "| " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * (len(COLUMNS) - 1)]
    lines += [row_line(row) for row in doc["rows"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500x22000,5000x100000",
                        help="comma-separated NODESxPODS")
    parser.add_argument("--runs", type=int, default=3, help="load runs per file")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--child-load", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_load:
        _child_load(args.child_load)
        return
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        rows = run([(n, p) for n, p in sizes], args.runs, Path(tmp))
    doc = {"command": "python -m bench.snapshot_bench " + " ".join(sys.argv[1:]),
           "python": platform.python_version(), "cpus": os.cpu_count(),
           "date": time.strftime("%Y-%m-%d"), "rows": rows}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    print(markdown(doc), end="")


if __name__ == "__main__":
    main()
