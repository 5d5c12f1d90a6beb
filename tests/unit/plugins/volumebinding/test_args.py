"""VolumeBindingArgs: upstream's defaults and validation."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework.status import PluginError
from policyd.plugins.volumebinding.plugin import new


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
