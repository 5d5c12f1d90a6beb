"""Bounded memory on a 50 MB snapshot (issue 26: "a 50 MB input stays under 1 GB RSS"),
read from a file and from a pipe, as YAML and as JSON: the peak RSS of the whole
`policyd simulate` process, measured by the kernel (wait4's rusage).

Here rather than in tests/unit: generating and loading 50 MB twice takes tens of
seconds on a small machine, too long for the fast unit set. It needs no control plane.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGET_BYTES = 50 * 1024**2
MAX_RSS_BYTES = 1024**3

NODE = """\
- apiVersion: v1
  kind: Node
  metadata:
    labels:
      kubernetes.io/hostname: node-{i:05d}
      topology.kubernetes.io/zone: zone-{z}
    name: node-{i:05d}
  status:
    allocatable: {{cpu: "32", memory: 128Gi, pods: "110"}}
"""
POD = """\
- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      note: {note}
    labels:
      app: web-{a}
    name: web-{i:06d}
    namespace: default
  spec:
    containers:
    - image: registry.example/web:1
      name: web
      resources:
        requests: {{cpu: 10m, memory: 16Mi}}
{node}  status:
    phase: {phase}
"""


def write_yaml(path: Path, nodes: int = 500) -> int:
    """A kubectl-layout List of `nodes` Nodes and as many Pods as reach 50 MB, every
    hundredth pending; written piece by piece. Returns the number of pods."""
    note = "x" * 1500
    size = 0
    pods = 0
    with path.open("w") as f:
        f.write("apiVersion: v1\nitems:\n")
        for i in range(nodes):
            f.write(NODE.format(i=i, z=i % 3))
        while size < TARGET_BYTES:
            pending = pods % 100 == 99
            text = POD.format(i=pods, a=pods % 50, note=note,
                              node="" if pending else f"    nodeName: node-{pods % nodes:05d}\n",
                              phase="Pending" if pending else "Running")
            f.write(text)
            size += len(text)
            pods += 1
        f.write("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
    return pods


def write_json(yaml_path: Path, path: Path) -> None:
    """The same List as JSON, converted in a child: the kernel carries a process's peak
    RSS over into what it starts (Linux keeps it across exec), so this process must
    never hold the 50 MB tree itself."""
    code = ("import json, sys, yaml_rs; from pathlib import Path; "
            "Path(sys.argv[2]).write_text(json.dumps(yaml_rs.loads("
            "Path(sys.argv[1]).read_text()), indent=2))")
    subprocess.run([sys.executable, "-c", code, str(yaml_path), str(path)], check=True)


def peak_rss(args: list[str], stdin_file: Path | None = None) -> tuple[int, int, str]:
    """(exit code, peak RSS in bytes, stderr) of `policyd ARGS`, stdin a pipe from
    `cat stdin_file` when given."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    cat = None
    if stdin_file is not None:
        cat = subprocess.Popen(["cat", str(stdin_file)], stdout=subprocess.PIPE)
    proc = subprocess.Popen([sys.executable, "-m", "policyd", *args],
                            stdin=cat.stdout if cat else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    if cat is not None and cat.stdout is not None:
        cat.stdout.close()  # only the child holds the read end now
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    if cat is not None:
        cat.wait()
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024, err


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("big")
    yaml_path = d / "cluster.yaml"
    write_yaml(yaml_path)
    assert yaml_path.stat().st_size >= TARGET_BYTES
    json_path = d / "cluster.json"
    write_json(yaml_path, json_path)
    return yaml_path, json_path


@pytest.mark.parametrize(("fmt", "via"), [("yaml", "file"), ("json", "pipe")])
def test_a_50_mb_snapshot_stays_under_1_gb_rss(snapshot: tuple[Path, Path], fmt: str,
                                               via: str) -> None:
    path = snapshot[0] if fmt == "yaml" else snapshot[1]
    cluster = str(path) if via == "file" else "/dev/stdin"
    code, rss, err = peak_rss(["simulate", "--cluster", cluster, "-o", "json"],
                              path if via == "pipe" else None)
    assert code in (0, 1), err
    assert rss < MAX_RSS_BYTES, f"peak RSS {rss / 2**20:.0f} MiB"
