"""`policyd diff` benchmark: a policy change's impact on a big cluster, the whole command.

    .venv/bin/python -m bench.diff_bench                    # 5,000 nodes, 50,000 pods
    .venv/bin/python -m bench.diff_bench --nodes 500 --pods 5000 --pending-every 10

Writes one cluster as `kubectl get nodes,pods -A -o json` prints it (the objects of
`bench.snapshot_bench`, with an `env` label on nodes and a `tier` label on pods for the
policies to read; every --pending-every-th pod pending, the others bound evenly), and
two policy directories: the old one (a filter keeping `tier: prod` pods on `env: prod`
nodes, and a score rule) and the new one (that filter narrowed, so some bound pods
become violations and others are freed; a new policy with a filter; the score rule
unchanged). Then it runs `policyd diff OLD NEW --cluster FILE -o json` in a fresh
process, --runs times, and reports the wall time and peak RSS of each, the snapshot
load alone (`bench.snapshot_bench --child-load`, for the share of the time it takes),
and the diff's summary, as JSON in bench/results/diff-latest.json (--json to change).
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

from bench.snapshot_bench import _node, _pod

RESULTS = Path(__file__).parent / "results" / "diff-latest.json"
ENVS = ("prod", "staging", "dev")
TIERS = ("prod", "batch", "web", "prod")  # half the pods are prod

OLD_POLICIES = {
    "env-prod.yaml": """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: env-prod}
spec:
  pluginName: EnvProd
  appliesTo: {labelSelector: {matchLabels: {tier: prod}}}
  filters:
    - id: prod-nodes
      message: node(s) are not production or staging nodes
      nodeLabels:
        matchExpressions: [{key: env, operator: In, values: [prod, staging]}]
""",
    "spread-zones.yaml": """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: prefer-zone-a}
spec:
  pluginName: PreferZoneA
  scores:
    - id: zone-a
      weight: 10
      normalize: none
      labelValue: {label: topology.kubernetes.io/zone, values: {zone-a: 100, zone-b: 50}}
""",
}
NEW_POLICIES = {
    **OLD_POLICIES,
    # Narrowed: prod pods on staging nodes become violations.
    "env-prod.yaml": OLD_POLICIES["env-prod.yaml"].replace("[prod, staging]", "[prod]")
    .replace("production or staging", "production"),
    "batch-off-prod.yaml": """\
apiVersion: policyd.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: batch-off-prod}
spec:
  pluginName: BatchOffProd
  appliesTo: {labelSelector: {matchLabels: {tier: batch}}}
  filters:
    - id: not-prod
      message: batch pods stay off production nodes
      nodeLabels:
        matchExpressions: [{key: env, operator: NotIn, values: [prod]}]
""",
}


def _objects(nodes: int, pods: int, pending_every: int) -> Iterator[dict[str, Any]]:
    for i in range(nodes):
        node = _node(i)
        node["metadata"]["labels"]["env"] = ENVS[i % len(ENVS)]
        yield node
    for i in range(pods):
        pending = i % pending_every == pending_every - 1
        # Pods of one tier land on every kind of node: bound pods fill nodes evenly.
        pod = _pod(i, None if pending else f"node-{(i * 7) % nodes:05d}")
        pod["metadata"]["labels"]["tier"] = TIERS[i % len(TIERS)]
        yield pod


def write_cluster(nodes: int, pods: int, pending_every: int, path: Path) -> None:
    with path.open("w") as f:
        f.write('{"apiVersion": "v1", "kind": "List", "items": [\n')
        for n, obj in enumerate(_objects(nodes, pods, pending_every)):
            f.write((",\n" if n else "") + json.dumps(obj))
        f.write("\n]}\n")


def write_policies(files: dict[str, str], directory: Path) -> Path:
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def _diff_once(old: Path, new: Path, cluster: Path) -> dict[str, Any]:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "policyd", "diff", str(old), str(new),
                             "--cluster", str(cluster), "-o", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        detail = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"diff exited {code}: {detail}")
    summary = json.loads(out)["summary"]
    return {"seconds": wall, "peak_rss_mb": usage.ru_maxrss / 1024, "exit": code,
            "summary": summary}


def _load_once(cluster: Path) -> float:
    out = subprocess.run([sys.executable, "-m", "bench.snapshot_bench", "--child-load",
                          str(cluster)], check=True, capture_output=True, text=True)
    seconds: float = json.loads(out.stdout)["seconds"]
    return seconds


def markdown(runs: list[dict[str, Any]]) -> str:
    """docs/performance.md's table: one row per results file (`bench.readme_tables`)."""
    lines = ["| cluster | pending | file | snapshot load | `policyd diff` (median, min–max) "
             "| peak RSS | bound pods judged | new violations | pending: same / moves "
             "| measured with |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in runs:
        s = r["summary"]
        secs = r["diffSeconds"]
        spread = f" ({min(secs):.1f}–{max(secs):.1f}, {len(secs)} runs)" if len(secs) > 1 \
            else " (1 run)"
        lines.append(
            f"| {r['nodes']:,} nodes, {r['pods']:,} pods | {s['pending']:,} "
            f"| {r['fileMB']:.0f} MiB | {r['snapshotLoadSeconds']:.1f} s "
            f"| {r['diffSecondsMedian']:.1f} s{spread} | {r['peakRssMB']:,.0f} MiB "
            f"| {s['boundChecked']:,} | {s['newViolations']:,} "
            f"| {s.get('same', 0):,} / {s.get('moves', 0):,} "
            f"| `{r['command']}`, {r['date']}, {r['machine']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--pending-every", type=int, default=100,
                        help="every Nth pod is pending (default 100: 1%%)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="policyd-diff-bench-") as tmp:
        work = Path(tmp)
        cluster = work / "cluster.json"
        write_cluster(args.nodes, args.pods, args.pending_every, cluster)
        old = write_policies(OLD_POLICIES, work / "old")
        new = write_policies(NEW_POLICIES, work / "new")
        load = _load_once(cluster)
        runs = [_diff_once(old, new, cluster) for _ in range(args.runs)]
        size_mb = cluster.stat().st_size / 2**20
    secs = [r["seconds"] for r in runs]
    doc = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"Python {platform.python_version()}",
        "command": "python -m bench.diff_bench " + " ".join(sys.argv[1:]),
        "nodes": args.nodes, "pods": args.pods, "pendingEvery": args.pending_every,
        "fileMB": round(size_mb, 1),
        "snapshotLoadSeconds": round(load, 2),
        "diffSeconds": [round(s, 2) for s in secs],
        "diffSecondsMedian": round(statistics.median(secs), 2),
        "peakRssMB": round(max(r["peak_rss_mb"] for r in runs), 1),
        "exit": runs[0]["exit"],
        "summary": runs[0]["summary"],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    print(f"policyd diff at {args.nodes:,} nodes, {args.pods:,} pods: median "
          f"{doc['diffSecondsMedian']} s of {args.runs} (snapshot load alone "
          f"{doc['snapshotLoadSeconds']} s), peak RSS {doc['peakRssMB']} MiB; "
          f"reproduce: {doc['command']}", file=sys.stderr)


if __name__ == "__main__":
    main()
