"""policyd's structured allocator against upstream's (v1.36.3, recorded by
`upstream/record_cases.py`) on the differential test's DRA cases, node by node
(`case_scenes.py`): the same devices, in the same order, with the same node selectors,
or the same refusal or error."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from policyd.dra.selectors import KUBERNETES_CEL
from tests.unit.dra.case_scenes import CASES, SEED, case_scenes
from tests.unit.dra.upstream_scenes import normalize, run_policyd

DATA = Path(__file__).parent / "data" / "upstream_case_allocations.json"
RECORD = "PYTHONPATH=$PWD .venv/bin/python tests/unit/dra/upstream/record_cases.py"


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text())
    return data


@pytest.fixture(scope="module")
def scenes() -> dict[str, dict[str, Any]]:
    return case_scenes()


def test_the_recorded_scenes_are_the_generated_ones(
        recorded: dict[str, Any], scenes: dict[str, dict[str, Any]]) -> None:
    assert (recorded["kubernetes"], recorded["seed"], recorded["cases"]) == (
        "v1.36.3", SEED, CASES)
    assert sorted(recorded["scenes"]) == sorted(scenes), \
        f"tests/gen/dra.py draws other cases now: record them again ({RECORD})"
    outcomes = Counter(next(iter(out)) for out in recorded["scenes"].values())
    # Both answers must be there to compare: devices, and none on the node.
    assert outcomes["results"] >= 60 and outcomes["nil"] >= 60, outcomes


def test_policyd_allocates_what_upstream_allocated(
        recorded: dict[str, Any], scenes: dict[str, dict[str, Any]]) -> None:
    differ = []
    for key, scene in scenes.items():
        mine = normalize(run_policyd(scene, KUBERNETES_CEL))
        theirs = recorded["scenes"].get(key)
        if mine != theirs:
            differ.append(f"{key}: upstream {json.dumps(theirs)}\n  policyd {json.dumps(mine)}")
    assert not differ, f"{len(differ)} of {len(scenes)} scenes differ:\n" + "\n".join(
        differ[:5])
