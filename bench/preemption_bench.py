"""Preemption benchmark: what one preemption and a burst of preemptors cost policyd,
beside kube-scheduler v1.36.3, and policyd's two dry-run forms in the engine.

    .venv/bin/python -m bench.preemption_bench engine --nodes 1000,5000 --repeats 5
    .venv/bin/python -m bench.preemption_bench side-by-side --nodes 1000,5000 \\
        --singles 5 --burst 100 --repeats 3
    ... --json bench/results/preemption-latest.json [--append]

`engine` (bench/preemption/engine.py): one unschedulable preemptor through
`schedule_one` on full nodes, no API server, in the rerun form (PreFilter rerun per
check, as before PreFilterExtensions) and the incremental form (kube-scheduler's), on
the same cluster; this process's CPU per preemption.

`side-by-side` (bench/preemption/side_by_side.py): each scheduler on its own fresh
local control plane (same nodes, same pods, same client QPS and burst), runs
interleaved per repeat: CPU and wall time per preemptor one at a time, then for a
burst created at once. kube-scheduler runs without contention profiling.

Both run the shapes `uniform` and `affinity` (bench/preemption/shapes.py) unless
`--shapes` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.e2e import schedulers
from bench.preemption import engine, side_by_side
from bench.preemption.shapes import SHAPES
from policyd.devcluster.assets import K8S_VERSION


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else "",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", choices=("engine", "side-by-side"))
    parser.add_argument("--nodes", default="1000,5000", help="comma-separated node counts")
    parser.add_argument("--shapes", default=",".join(SHAPES),
                        help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--repeats", type=int, default=3,
                        help="engine: preemptions per form; side-by-side: runs per "
                             "scheduler, interleaved")
    parser.add_argument("--singles", type=int, default=5,
                        help="side-by-side: preemptors one after another")
    parser.add_argument("--burst", type=int, default=100,
                        help="side-by-side: preemptors created at once")
    parser.add_argument("--schedulers", default=",".join(side_by_side.DEFAULT_SCHEDULERS),
                        help="side-by-side: comma-separated, in the order each repeat "
                             "runs them")
    parser.add_argument("--qps", type=float, default=5000.0)
    parser.add_argument("--client-burst", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="side-by-side: seconds a phase's preemptors may take to bind")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--append", action="store_true",
                        help="keep the rows already in --json and add these")
    args = parser.parse_args(argv)
    try:
        args.node_counts = [int(n) for n in _csv(args.nodes)]
    except ValueError:
        parser.error(f"--nodes: not a list of integers: {args.nodes!r}")
    if not args.node_counts or min(args.node_counts) < 1:
        parser.error("--nodes: at least one node count, each at least 1")
    for shape in _csv(args.shapes):
        if shape not in SHAPES:
            parser.error(f"unknown shape {shape!r} (known: {', '.join(SHAPES)})")
    for scheduler in _csv(args.schedulers):
        if scheduler not in schedulers.SCHEDULERS or schedulers.is_null(scheduler):
            parser.error(f"unknown scheduler {scheduler!r}")
    if args.repeats < 1 or args.singles < 1 or args.burst < 1:
        parser.error("--repeats, --singles and --burst must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = ("python -m bench.preemption_bench "
               + shlex.join(sys.argv[1:] if argv is None else argv))
    doc: dict[str, Any] = {"rows": [], "commands": []}
    if args.append and args.json is not None and args.json.exists():
        doc = json.loads(args.json.read_text())
    doc["commands"].append(command)
    doc["machine"] = (f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                      f"{platform.python_version()}, Kubernetes {K8S_VERSION}")
    doc["date"] = datetime.now(UTC).strftime("%Y-%m-%d")
    failed = False
    for nodes in args.node_counts:
        for shape in _csv(args.shapes):
            if args.bench == "engine":
                rows = engine.measure(nodes, shape, args.repeats)
            else:
                rows = []
                for repeat in range(args.repeats):
                    for scheduler in _csv(args.schedulers):
                        print(f"# {scheduler} {nodes} nodes {shape} repeat {repeat + 1}",
                              file=sys.stderr, flush=True)
                        row = side_by_side.run(
                            scheduler, nodes, shape, args.singles, args.burst,
                            qps=args.qps, client_burst=args.client_burst,
                            timeout=args.timeout)
                        row["repeat"] = repeat
                        rows.append(row)
            for row in rows:
                failed |= bool(row.get("failures")) or row.get("every_one_nominated") is False
                print(json.dumps({k: v for k, v in row.items() if k != "scheduler_config"}),
                      flush=True)
            doc["rows"].extend(rows)
            if args.json is not None:  # after every cell: a long session keeps its rows
                args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
