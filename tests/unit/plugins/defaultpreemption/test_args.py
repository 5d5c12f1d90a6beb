"""DefaultPreemptionArgs: upstream's defaults, validation messages and candidate count."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.framework.status import PluginError
from policyd.plugins.defaultpreemption.args import DefaultPreemptionArgs
from policyd.plugins.defaultpreemption.plugin import DEFAULT_WEIGHT, new


def test_defaults_are_ten_percent_and_one_hundred_nodes() -> None:
    assert new().args == DefaultPreemptionArgs(10, 100)
    assert new({"minCandidateNodesPercentage": None}).args == DefaultPreemptionArgs(10, 100)
    assert new({"kind": "DefaultPreemptionArgs",
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "minCandidateNodesPercentage": 0,
                "minCandidateNodesAbsolute": 5}).args == DefaultPreemptionArgs(0, 5)
    assert DEFAULT_WEIGHT is None


@pytest.mark.parametrize(("args", "problems"), [
    ({"minCandidateNodesPercentage": 101},
     [("minCandidateNodesPercentage", "Invalid value: 101: not in valid range [0, 100]")]),
    ({"minCandidateNodesPercentage": -1},
     [("minCandidateNodesPercentage", "Invalid value: -1: not in valid range [0, 100]")]),
    ({"minCandidateNodesAbsolute": -1},
     [("minCandidateNodesAbsolute", "Invalid value: -1: not in valid range [0, inf)")]),
    ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
     [("minCandidateNodesPercentage", "Invalid value: 0: cannot be zero at the same time as "
       "minCandidateNodesAbsolute"),
      ("minCandidateNodesAbsolute", "Invalid value: 0: cannot be zero at the same time as "
       "minCandidateNodesPercentage")]),
    ({"minCandidateNodesAbsolute": "5"},
     [("minCandidateNodesAbsolute", "must be an integer, not a string")]),
    ({"minCandidateNodesAbsolute": 2**31},
     [("minCandidateNodesAbsolute", "2147483648 does not fit a 32-bit integer")]),
    ({"minCandidates": 1},
     [("minCandidates", "unknown field 'minCandidates'; known fields: apiVersion, kind, "
       "minCandidateNodesPercentage, minCandidateNodesAbsolute")]),
    ({"kind": "NodePortsArgs"}, [("kind", "must be 'DefaultPreemptionArgs', not "
                                          "\"NodePortsArgs\"")]),
])
def test_invalid_args_are_refused_with_every_problem(
        args: dict[str, Any], problems: list[tuple[str, str]]) -> None:
    with pytest.raises(PluginError) as info:
        new(args)
    assert info.value.plugin == "DefaultPreemption"
    assert [(p.path, p.message) for p in info.value.problems] == problems


@pytest.mark.parametrize(("percentage", "absolute", "nodes", "expected"), [
    (10, 100, 5000, 500),   # the share beats the absolute minimum
    (10, 100, 500, 100),    # the absolute minimum beats the share
    (10, 100, 40, 40),      # never more than there are nodes
    (40, 1, 5, 2),          # upstream's "limits to 2" case
    (0, 3, 10, 3),
    (100, 0, 7, 7),
])
def test_number_of_candidates(percentage: int, absolute: int, nodes: int, expected: int
                              ) -> None:
    assert DefaultPreemptionArgs(percentage, absolute).num_candidates(nodes) == expected
