"""CoschedulingArgs (scheduler-plugins apis/config/v1): the defaults of its
SetDefaults_CoschedulingArgs and the checks of its ValidateCoschedulingArgs, with the
same field names and messages (upstream says "must be greater than 0" of a negative
value, which 0 passes; kept, so a profile copied from scheduler-plugins reads the same)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.plugins.helper.plugin_args import Problems, check_envelope, fits_int, parse_int
from policyd.problems import Problem, field_problem

ARGS_KIND = "CoschedulingArgs"
DEFAULT_PERMIT_WAITING_TIME_S = 60
DEFAULT_POD_GROUP_BACKOFF_S = 0
DEFAULT_POD_GROUP_REJECT_PERCENTAGE = 10
_FIELDS = ("apiVersion", "kind", "permitWaitingTimeSeconds", "podGroupBackoffSeconds",
           "podGroupRejectPercentage")


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    # How long a member waits at Permit for its quorum when its PodGroup sets no
    # scheduleTimeoutSeconds; also how long a group that passed the minResources
    # check is not checked again.
    permit_waiting_time_s: int = DEFAULT_PERMIT_WAITING_TIME_S
    # After PostFilter rejects a complete group, its pods are refused at PreFilter
    # this long (0: never).
    pod_group_backoff_s: int = DEFAULT_POD_GROUP_BACKOFF_S
    # PostFilter leaves the group's waiting pods alone while the share of minMember
    # still unassigned is at most this percentage.
    pod_group_reject_percentage: int = DEFAULT_POD_GROUP_REJECT_PERCENTAGE


def parse_args(raw: Mapping[str, Any] | None, problems: Problems) -> CoschedulingArgs:
    """The args with upstream's defaults filled in; every problem into `problems`."""
    if not raw:
        return CoschedulingArgs()
    check_envelope(raw, _FIELDS, ARGS_KIND, problems)
    wait = _int(raw, "permitWaitingTimeSeconds", DEFAULT_PERMIT_WAITING_TIME_S, 64, problems)
    backoff = _int(raw, "podGroupBackoffSeconds", DEFAULT_POD_GROUP_BACKOFF_S, 64, problems)
    percentage = _int(raw, "podGroupRejectPercentage", DEFAULT_POD_GROUP_REJECT_PERCENTAGE,
                      32, problems)
    if wait < 0:
        problems.append(_invalid("permitWaitingTimeSeconds", wait, "must be greater than 0"))
    if backoff < 0:
        problems.append(_invalid("podGroupBackoffSeconds", backoff, "must be greater than 0"))
    if not 0 <= percentage <= 100:
        problems.append(_invalid("podGroupRejectPercentage", percentage,
                                 "must be between 0 and 100"))
    return CoschedulingArgs(wait, backoff, percentage)


def _int(raw: Mapping[str, Any], key: str, default: int, bits: int, problems: Problems) -> int:
    value = raw.get(key)
    if value is None:
        return default
    number = parse_int(value, key, problems)
    if number is None or not fits_int(number, key, bits, problems):
        return default
    return number


def _invalid(path: str, value: int, detail: str) -> Problem:
    return field_problem(path, f"Invalid value: {value}: {detail}")
