"""DynamicResourcesArgs: upstream's defaults and validation (v1.36, default gates)."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework.status import PluginError
from policyd.plugins.dynamicresources.plugin import new


def test_defaults_are_ten_seconds_and_ten_minutes() -> None:
    for args in (None, {}, {"filterTimeout": None, "bindingTimeout": None}):
        assert new(args).args.filter_timeout_seconds == 10
        assert new(args).args.binding_timeout_seconds == 600


@pytest.mark.parametrize(("args", "filter_timeout", "binding_timeout"), [
    # kube-scheduler's own defaulted configuration, as it logs it.
    ({"kind": "DynamicResourcesArgs", "apiVersion": "kubescheduler.config.k8s.io/v1",
      "filterTimeout": "10s", "bindingTimeout": "10m0s"}, 10, 600),
    ({"filterTimeout": "0"}, 0, 600),  # zero switches the timeout off
    ({"filterTimeout": "1m30s", "bindingTimeout": "1s"}, 90, 1),
    ({"bindingTimeout": "1.5s"}, 10, 1.5),
])
def test_valid_args(args: dict[str, Any], filter_timeout: float,
                    binding_timeout: float) -> None:
    parsed = new(args).args
    assert parsed.filter_timeout_seconds == pytest.approx(filter_timeout)
    assert parsed.binding_timeout_seconds == pytest.approx(binding_timeout)


@pytest.mark.parametrize(("args", "path", "message"), [
    ({"filterTimeout": "-1s"}, "filterTimeout",
     'Invalid value: "-1s": must be zero or positive'),
    ({"bindingTimeout": "500ms"}, "bindingTimeout",
     'Invalid value: "500ms": must be at least 1 second'),
    ({"bindingTimeout": "0"}, "bindingTimeout",
     'Invalid value: "0": must be at least 1 second'),
    ({"filterTimeout": 10}, "filterTimeout",
     "must be a duration such as 10s, not an integer"),
    ({"bindingTimeout": "ten minutes"}, "bindingTimeout",
     'Invalid value: "ten minutes": must be a duration such as 10m0s'),
    ({"timeout": "1s"}, "timeout", "unknown field 'timeout'; known fields: apiVersion, "
     "kind, filterTimeout, bindingTimeout"),
    ({"kind": "VolumeBindingArgs"}, "kind",
     "must be 'DynamicResourcesArgs', not \"VolumeBindingArgs\""),
])
def test_invalid_args_are_refused(args: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(PluginError) as info:
        new(args)
    assert info.value.plugin == "DynamicResources"
    assert [(p.path, p.message) for p in info.value.problems] == [(path, message)]


def test_every_problem_is_reported() -> None:
    with pytest.raises(PluginError) as info:
        new({"filterTimeout": "-2s", "bindingTimeout": "0.2s", "extra": 1})
    assert [p.path for p in info.value.problems] == [
        "extra", "filterTimeout", "bindingTimeout"]
