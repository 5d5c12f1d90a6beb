"""DynamicResourcesArgs, defaulted and validated as kube-scheduler v1.36 does it
(SetDefaults_DynamicResourcesArgs, ValidateDynamicResourcesArgs) with v1.36's default
feature gates: DRASchedulerFilterTimeout, DRADeviceBindingConditions and
DRAResourceClaimDeviceStatus are all on, so both fields are accepted and defaulted.

`filterTimeout` bounds each node's allocation search in Filter; `bindingTimeout` is
how long an allocated claim's binding conditions may stay unmet before Filter treats
it as unavailable (PreBind's wait for them is not written yet).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.framework.status import PluginError
from policyd.model.duration import DurationTooLong, parse_duration
from policyd.plugins.dynamicresources import NAME
from policyd.plugins.helper.plugin_args import check_envelope, type_name
from policyd.problems import Problem, field_problem

ARGS_KIND = "DynamicResourcesArgs"
# DynamicResourcesFilterTimeoutDefault and DynamicResourcesBindingTimeoutDefault.
DEFAULT_FILTER_TIMEOUT = "10s"
DEFAULT_BINDING_TIMEOUT = "10m0s"

NEGATIVE_FILTER_TIMEOUT = "must be zero or positive"
SHORT_BINDING_TIMEOUT = "must be at least 1 second"

_FIELDS = ("apiVersion", "kind", "filterTimeout", "bindingTimeout")


@dataclass(frozen=True, slots=True)
class DynamicResourcesArgs:
    filter_timeout_seconds: float = parse_duration(DEFAULT_FILTER_TIMEOUT)
    """`filterTimeout`: how long Filter may search for devices on one node (0: no limit)."""
    binding_timeout_seconds: float = parse_duration(DEFAULT_BINDING_TIMEOUT)
    """`bindingTimeout`: how long PreBind waits for devices' binding conditions."""


def parse_args(args: Mapping[str, Any] | None) -> DynamicResourcesArgs:
    """The args with defaults applied; raises PluginError listing every problem."""
    raw = dict(args or {})
    problems: list[Problem] = []
    check_envelope(raw, _FIELDS, ARGS_KIND, problems)
    filter_timeout = _duration(raw, "filterTimeout", DEFAULT_FILTER_TIMEOUT, problems)
    if filter_timeout is not None and filter_timeout < 0:
        problems.append(_invalid(raw, "filterTimeout", NEGATIVE_FILTER_TIMEOUT))
    binding_timeout = _duration(raw, "bindingTimeout", DEFAULT_BINDING_TIMEOUT, problems)
    if binding_timeout is not None and binding_timeout < 1:
        problems.append(_invalid(raw, "bindingTimeout", SHORT_BINDING_TIMEOUT))
    if problems:
        raise PluginError(NAME, problems)
    assert filter_timeout is not None and binding_timeout is not None
    return DynamicResourcesArgs(filter_timeout, binding_timeout)


def _duration(raw: Mapping[str, Any], key: str, default: str, problems: list[Problem]
              ) -> float | None:
    """Seconds of the field (its default when absent or null), None when unreadable."""
    value = raw.get(key)
    if value is None:
        return parse_duration(default)
    if not isinstance(value, str):
        problems.append(field_problem(key, f"must be a duration such as {default}, "
                                           f"not {type_name(value)}"))
        return None
    try:
        return parse_duration(value)
    except DurationTooLong as exc:
        problems.append(field_problem(key, f"Invalid value: {json.dumps(value)}: {exc}"))
        return None
    except ValueError:
        problems.append(field_problem(key, f"Invalid value: {json.dumps(value)}: must be "
                                           f"a duration such as {default}"))
        return None


def _invalid(raw: Mapping[str, Any], key: str, detail: str) -> Problem:
    # Upstream shows the value as Go prints the duration ("-1s"); the text written here
    # is shown as written, which is the same for durations written the usual way.
    return field_problem(key, f"Invalid value: {json.dumps(raw[key])}: {detail}")
