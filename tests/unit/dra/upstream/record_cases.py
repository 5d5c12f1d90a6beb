"""Records upstream's allocations of the differential test's DRA cases
(`case_scenes.py`) into `tests/unit/dra/data/upstream_case_allocations.json`, which
test_case_scenes.py checks policyd against. Builds `allocate.go` as record.py does
(Go and the dev control plane's module cache, offline); rerun it whenever
tests/gen/dra.py changes what it draws (the test says so when its scenes are not the
recorded ones).

    PYTHONPATH=$PWD .venv/bin/python tests/unit/dra/upstream/record_cases.py
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from tests.unit.dra.case_scenes import CASES, SEED, case_scenes
from tests.unit.dra.upstream.record import build
from tests.unit.dra.upstream_scenes import normalize

OUT = Path(__file__).resolve().parent.parent / "data" / "upstream_case_allocations.json"


def main() -> None:
    scenes = case_scenes()
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(Path(tmp))
        lines = "".join(json.dumps(scene) + "\n" for scene in scenes.values())
        done = subprocess.run([binary], input=lines, capture_output=True, text=True,
                              check=True)
    outputs = [json.loads(line) for line in done.stdout.splitlines()]
    recorded = {key: normalize(output)
                for key, output in zip(scenes, outputs, strict=True)}
    data = {"kubernetes": "v1.36.3", "seed": SEED, "cases": CASES, "scenes": recorded}
    OUT.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{len(recorded)} scenes recorded in {OUT}")


if __name__ == "__main__":
    main()
