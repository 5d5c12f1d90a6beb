"""VolumeBindingArgs, defaulted and validated as kube-scheduler v1.36 does it
(SetDefaults_VolumeBindingArgs, ValidateVolumeBindingArgsWithOptions).

`shape` only means something with the StorageCapacityScoring feature gate, which is
alpha and off by default in v1.36. As upstream: while the gate is off the field is
refused, so that a configuration written for it does not silently change meaning when
the gate turns on; while it is on, a missing or empty shape defaults to
[{utilization: 0, score: 10}, {utilization: 100, score: 0}] (most free capacity
first) and any shape must pass validateFunctionShape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.features import DEFAULTS, FeatureGates
from policyd.framework.status import PluginError
from policyd.plugins.helper.function_shape import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    ShapePoint,
    parse_shape,
)
from policyd.plugins.helper.plugin_args import check_envelope, fits_int, type_name
from policyd.plugins.volumebinding import NAME
from policyd.problems import Problem, field_problem

ARGS_KIND = "VolumeBindingArgs"
DEFAULT_BIND_TIMEOUT_SECONDS = 600

NEGATIVE_TIMEOUT = "invalid BindTimeoutSeconds, should not be a negative value"
SHAPE_WITHOUT_GATE = ("unexpected field `shape`, remove it or turn on the feature gate "
                      "StorageCapacityScoring")

_FIELDS = ("apiVersion", "kind", "bindTimeoutSeconds", "shape")

STORAGE_CAPACITY_SCORING = "StorageCapacityScoring"
# SetDefaults_VolumeBindingArgs' shape when the gate is on.
DEFAULT_SHAPE = (ShapePoint(0, MAX_CUSTOM_PRIORITY_SCORE), ShapePoint(MAX_UTILIZATION, 0))


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    # How long PreBind waits for the PV controller to bind every claim; 0 gives up at
    # the first check (upstream: no waiting).
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    # The utilization shape of capacity scoring; empty while StorageCapacityScoring is
    # off (upstream then builds no scorer at all).
    shape: tuple[ShapePoint, ...] = ()


def parse_args(args: Mapping[str, Any] | None, features: FeatureGates = DEFAULTS
               ) -> VolumeBindingArgs:
    """The args with defaults applied (the shape's following `features`); raises
    PluginError listing every problem."""
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
    points: tuple[ShapePoint, ...] = ()
    if features.enabled(STORAGE_CAPACITY_SCORING):
        points = (DEFAULT_SHAPE if shape is None or shape == []
                  else tuple(parse_shape(shape, "shape", problems)))
    elif shape is not None:
        shown = json.dumps(shape, default=str)
        problems.append(field_problem("shape", f"Invalid value: {shown}: {SHAPE_WITHOUT_GATE}"))
    if problems:
        raise PluginError(NAME, problems)
    return VolumeBindingArgs(int(timeout), points)
