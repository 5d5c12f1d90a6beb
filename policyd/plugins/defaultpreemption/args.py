"""DefaultPreemptionArgs, defaulted and validated as kube-scheduler v1.36 does it
(SetDefaults_DefaultPreemptionArgs, ValidateDefaultPreemptionArgs)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.framework.status import PluginError
from policyd.plugins.defaultpreemption import NAME
from policyd.plugins.helper.plugin_args import check_envelope, fits_int, parse_int
from policyd.problems import Problem, field_problem

ARGS_KIND = "DefaultPreemptionArgs"
DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100

# Upstream's validation messages, word for word.
PERCENTAGE_RANGE = "not in valid range [0, 100]"
ABSOLUTE_RANGE = "not in valid range [0, inf)"
PERCENTAGE_WITH_ABSOLUTE_ZERO = "cannot be zero at the same time as minCandidateNodesAbsolute"
ABSOLUTE_WITH_PERCENTAGE_ZERO = "cannot be zero at the same time as minCandidateNodesPercentage"

_FIELDS = ("apiVersion", "kind", "minCandidateNodesPercentage", "minCandidateNodesAbsolute")


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    # The dry runs stop once they found this share of the potential nodes as
    # candidates (at least `min_candidate_nodes_absolute`, at most all of them).
    min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE

    def num_candidates(self, num_nodes: int) -> int:
        """calculateNumCandidates: the share of `num_nodes`, floored at the absolute
        minimum, never more than `num_nodes`."""
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        return min(max(n, self.min_candidate_nodes_absolute), num_nodes)


def parse_args(args: Mapping[str, Any] | None) -> DefaultPreemptionArgs:
    """The args with defaults applied; raises PluginError listing every problem."""
    raw = dict(args or {})
    problems: list[Problem] = []
    check_envelope(raw, _FIELDS, ARGS_KIND, problems)
    percentage = _int32(raw, "minCandidateNodesPercentage",
                        DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE, problems)
    absolute = _int32(raw, "minCandidateNodesAbsolute",
                      DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE, problems)
    if percentage is not None and not 0 <= percentage <= 100:
        problems.append(_invalid("minCandidateNodesPercentage", percentage, PERCENTAGE_RANGE))
    if absolute is not None and absolute < 0:
        problems.append(_invalid("minCandidateNodesAbsolute", absolute, ABSOLUTE_RANGE))
    if percentage == 0 and absolute == 0:
        problems.append(_invalid("minCandidateNodesPercentage", 0,
                                 PERCENTAGE_WITH_ABSOLUTE_ZERO))
        problems.append(_invalid("minCandidateNodesAbsolute", 0,
                                 ABSOLUTE_WITH_PERCENTAGE_ZERO))
    if problems:
        raise PluginError(NAME, problems)
    assert percentage is not None and absolute is not None
    return DefaultPreemptionArgs(percentage, absolute)


def _int32(raw: Mapping[str, Any], key: str, default: int, problems: list[Problem]
           ) -> int | None:
    """The field as an int32 (the default when absent); None after a problem."""
    value = raw.get(key)
    if value is None:
        return default
    number = parse_int(value, key, problems)
    if number is not None and not fits_int(number, key, 32, problems):
        return None
    return number


def _invalid(path: str, value: int, detail: str) -> Problem:
    return field_problem(path, f"Invalid value: {value}: {detail}")
