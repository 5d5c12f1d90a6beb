"""VolumeBindingArgs, defaulted and validated as kube-scheduler v1.36 does it
(SetDefaults_VolumeBindingArgs, ValidateVolumeBindingArgsWithOptions).

`shape` only means something with the StorageCapacityScoring feature gate, which is
alpha and off by default in v1.36; upstream refuses the field while the gate is off,
so that a configuration written for it does not silently change meaning when the gate
turns on. policyd has no feature gates: the field is always refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.framework.status import PluginError
from policyd.plugins.helper.plugin_args import check_envelope, fits_int, type_name
from policyd.plugins.volumebinding import NAME
from policyd.problems import Problem, field_problem

ARGS_KIND = "VolumeBindingArgs"
DEFAULT_BIND_TIMEOUT_SECONDS = 600

NEGATIVE_TIMEOUT = "invalid BindTimeoutSeconds, should not be a negative value"
SHAPE_WITHOUT_GATE = ("unexpected field `shape`, remove it or turn on the feature gate "
                      "StorageCapacityScoring")

_FIELDS = ("apiVersion", "kind", "bindTimeoutSeconds", "shape")


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    # How long PreBind waits for the PV controller to bind every claim; 0 gives up at
    # the first check (upstream: no waiting).
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS


def parse_args(args: Mapping[str, Any] | None) -> VolumeBindingArgs:
    """The args with defaults applied; raises PluginError listing every problem."""
    raw = dict(args or {})
    problems: list[Problem] = []
    check_envelope(raw, _FIELDS, ARGS_KIND, problems)
    timeout = raw.get("bindTimeoutSeconds")
    if timeout is None:
        timeout = DEFAULT_BIND_TIMEOUT_SECONDS
    elif isinstance(timeout, bool) or not isinstance(timeout, int):
        problems.append(field_problem("bindTimeoutSeconds",
                                      f"must be an integer, not {type_name(timeout)}"))
        timeout = DEFAULT_BIND_TIMEOUT_SECONDS
    elif timeout < 0:
        problems.append(field_problem("bindTimeoutSeconds",
                                      f"Invalid value: {timeout}: {NEGATIVE_TIMEOUT}"))
    elif not fits_int(timeout, "bindTimeoutSeconds", 64, problems):  # an int64 upstream
        timeout = DEFAULT_BIND_TIMEOUT_SECONDS
    shape = raw.get("shape")
    if shape is not None:
        shown = json.dumps(shape, default=str)
        problems.append(field_problem("shape", f"Invalid value: {shown}: {SHAPE_WITHOUT_GATE}"))
    if problems:
        raise PluginError(NAME, problems)
    return VolumeBindingArgs(int(timeout))
