"""Records upstream's allocations of the scenes of `upstream_scenes.py` into
`tests/unit/dra/data/upstream_allocations.json` (the data test_upstream_scenes.py
checks policyd against).

Needs Go and the module cache the dev control plane builds from: it builds
`allocate.go` against k8s.io/kubernetes v1.36.3's module set (the go.mod of
tools/controlplane/kube), offline, then runs every scene through it. Scenes upstream
needs more than 20 ms for are left out, so the unit test stays quick.

    PYTHONPATH=$PWD .venv/bin/python tests/unit/dra/upstream/record.py [SCENES]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.unit.dra.upstream_scenes import NAMED_SCENES, normalize, scene

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
OUT = HERE.parent / "data" / "upstream_allocations.json"
KUBE_MODULE = ROOT / "tools" / "controlplane" / "kube"
SLOW_MS = 20.0


def build(workdir: Path) -> Path:
    go_mod = (KUBE_MODULE / "go.mod").read_text().splitlines()
    module = next(i for i, line in enumerate(go_mod) if line.startswith("module "))
    go_mod[module] = "module dratestharness"
    (workdir / "go.mod").write_text("\n".join(go_mod) + "\n")
    shutil.copy(KUBE_MODULE / "go.sum", workdir / "go.sum")
    shutil.copy(HERE / "allocate.go", workdir / "main.go")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    subprocess.run(["go", "build", "-o", "allocate", "."], cwd=workdir, env=env, check=True)
    return workdir / "allocate"


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(Path(tmp))
        harness = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True)

        def allocate(data: dict[str, object]) -> dict[str, object]:
            assert harness.stdin is not None and harness.stdout is not None
            harness.stdin.write(json.dumps(data) + "\n")
            harness.stdin.flush()
            output: dict[str, object] = json.loads(harness.stdout.readline())
            return output

        recorded: dict[str, object] = {}
        for seed in range(count):
            output = allocate(scene(seed)(True))
            if float(str(output["millis"])) > SLOW_MS or "aborted" in str(output.get("error")):
                continue
            recorded[str(seed)] = normalize(output)
        named = {name: normalize(allocate(data)) for name, data in NAMED_SCENES.items()}
        if harness.stdin is not None:
            harness.stdin.close()
        harness.wait()
    data = {"kubernetes": "v1.36.3", "scenes": recorded, "named": named}
    OUT.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{len(recorded)} of {count} scenes recorded in {OUT}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 800)
