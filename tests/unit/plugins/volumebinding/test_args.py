"""VolumeBindingArgs: upstream's defaults and validation."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.features import with_settings
from policyd.framework.status import PluginError
from policyd.plugins.helper.function_shape import ShapePoint
from policyd.plugins.volumebinding.plugin import new

SCORING = with_settings([("StorageCapacityScoring", True)])


def test_default_bind_timeout_is_600_seconds() -> None:
    assert new().args.bind_timeout_seconds == 600
    assert new({"bindTimeoutSeconds": None}).args.bind_timeout_seconds == 600
    assert new({"bindTimeoutSeconds": 0}).args.bind_timeout_seconds == 0
    assert new({"kind": "VolumeBindingArgs", "apiVersion": "kubescheduler.config.k8s.io/v1",
                "bindTimeoutSeconds": 30}).args.bind_timeout_seconds == 30


@pytest.mark.parametrize(("args", "path", "message"), [
    ({"bindTimeoutSeconds": -1}, "bindTimeoutSeconds",
     "Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"),
    ({"bindTimeoutSeconds": "10"}, "bindTimeoutSeconds", "must be an integer, not a string"),
    ({"shape": [{"utilization": 0, "score": 0}]}, "shape",
     'Invalid value: [{"utilization": 0, "score": 0}]: unexpected field `shape`, remove it '
     "or turn on the feature gate StorageCapacityScoring"),
    ({"timeout": 1}, "timeout", "unknown field 'timeout'; known fields: apiVersion, kind, "
     "bindTimeoutSeconds, shape"),
    ({"kind": "NodePortsArgs"}, "kind", "must be 'VolumeBindingArgs', not \"NodePortsArgs\""),
])
def test_invalid_args_are_refused(args: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(PluginError) as info:
        new(args)
    assert info.value.plugin == "VolumeBinding"
    assert [(p.path, p.message) for p in info.value.problems] == [(path, message)]


def test_every_problem_is_reported() -> None:
    with pytest.raises(PluginError) as info:
        new({"bindTimeoutSeconds": -5, "shape": []})
    assert [p.path for p in info.value.problems] == ["bindTimeoutSeconds", "shape"]


# -- shape under StorageCapacityScoring (SetDefaults_VolumeBindingArgs,
# ValidateVolumeBindingArgsWithOptions with AllowStorageCapacityScoring)

def test_shape_follows_the_gate() -> None:
    assert new().args.shape == ()
    assert not new().capacity_scoring
    default = (ShapePoint(0, 10), ShapePoint(100, 0))
    assert new(features=SCORING).args.shape == default
    assert new({"shape": []}, features=SCORING).args.shape == default
    assert new({"shape": None}, features=SCORING).args.shape == default
    mine = [{"utilization": 0, "score": 0}, {"utilization": 80, "score": 10}]
    assert new({"shape": mine}, features=SCORING).args.shape == (
        ShapePoint(0, 0), ShapePoint(80, 10))
    assert new(features=SCORING).capacity_scoring


@pytest.mark.parametrize(("shape", "problems"), [
    ([{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}],
     [("shape[1].utilization", "Invalid value: 50: values must be sorted in increasing order")]),
    ([{"utilization": 101, "score": 11}],
     [("shape[0].utilization", "Invalid value: 101: not in valid range [0, 100]"),
      ("shape[0].score", "Invalid value: 11: not in valid range [0, 10]")]),
    ([{"utilization": 0, "weight": 1}],
     [("shape[0].weight", "unknown field 'weight'; known fields: utilization, score")]),
    ("steep", [("shape", "must be a list, not a string")]),
])
def test_invalid_shape_with_the_gate_on(shape: Any, problems: list[tuple[str, str]]) -> None:
    with pytest.raises(PluginError) as info:
        new({"shape": shape}, features=SCORING)
    assert [(p.path, p.message) for p in info.value.problems] == problems
