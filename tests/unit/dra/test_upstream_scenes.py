"""policyd's allocator against kube-scheduler v1.36.3's own on generated scenes: the
same results (devices, admin access, tolerations, binding conditions, share and
consumed capacity, class and claim configuration, node selector), the same "cannot
allocate", the same error texts. The expected outputs were produced by upstream's
code (`upstream/record.py` runs `upstream/allocate.go`); the scenes are regenerated
from their seeds (`upstream_scenes.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policyd.dra.selectors import KUBERNETES_CEL
from tests.unit.dra.upstream_scenes import NAMED_SCENES, normalize, run_policyd, scene

DATA: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "upstream_allocations.json").read_text())
RECORDED: dict[str, dict[str, Any]] = DATA["scenes"]
NAMED: dict[str, dict[str, Any]] = DATA["named"]


def test_the_recording_covers_every_kind_of_outcome() -> None:
    outcomes = [next(iter(v)) for v in RECORDED.values()]
    assert len(RECORDED) >= 500
    assert outcomes.count("results") >= 100
    assert outcomes.count("nil") >= 100
    assert outcomes.count("error") >= 50


@pytest.mark.parametrize("seed", sorted(RECORDED, key=lambda seed: int(str(seed))))
def test_same_allocation_as_upstream(seed: str) -> None:
    assert normalize(run_policyd(scene(int(seed))(False))) == RECORDED[seed]


@pytest.mark.parametrize("seed", sorted(RECORDED, key=lambda seed: int(str(seed))))
def test_same_allocation_as_upstream_with_kubernetes_cel(seed: str) -> None:
    """The same scenes with the CEL selectors upstream was given, compiled and run by
    policyd.cel: the allocator and the CEL library together."""
    assert normalize(run_policyd(scene(int(seed))(True), KUBERNETES_CEL)) == RECORDED[seed]


@pytest.mark.parametrize("name", sorted(NAMED_SCENES))
def test_same_error_as_upstream(name: str) -> None:
    assert normalize(run_policyd(NAMED_SCENES[name])) == NAMED[name]
