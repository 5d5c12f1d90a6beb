"""Messages about values from a policy or profile spell them as YAML/JSON does (null,
true, 1.5, {"a": 1}), never as Python (None, True, {'a': 1}), wherever the value sits."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from policyd.config.loader import validate_config_file
from policyd.model.spelling import show_value
from tests.unit.policy.conftest import check_docs

PYTHON_SPELLINGS = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\{'|\['|(?<!\.)\b(inf|nan)\b")
BAD_VALUES: list[Any] = [True, False, None, 1.5, {"a": None}, [True, None]]

POLICY: dict[str, Any] = {
    "apiVersion": "policyd.io/v1alpha1",
    "kind": "SchedulingPolicy",
    "metadata": {"name": "p"},
    "spec": {
        "pluginName": "P",
        "weight": 2,
        "appliesTo": {"namespaces": {"include": ["a"]},
                      "labelSelector": {"matchLabels": {"app": "web"}}},
        "filters": [
            {"id": "a", "message": "m", "nodeLabels": {"matchExpressions": [
                {"key": "cores", "operator": "Gt", "values": ["3"]}]}},
            {"id": "b", "message": "m", "headroom": {"resource": "memory",
                                                     "quantity": "1Gi"}},
            {"id": "c", "message": "m", "maxPodsPerNode": 2},
        ],
        "scores": [{"id": "s", "weight": 1, "normalize": "minmax",
                    "numeric": {"label": "cores"}}],
    },
}


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in _leaves(v, (*path, k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in _leaves(v, (*path, i))]
    return [path]


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(data)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


POLICY_CASES = [(path, value) for path in _leaves(POLICY) for value in BAD_VALUES]


@pytest.mark.parametrize(("path", "value"), POLICY_CASES,
                         ids=[f"{'.'.join(map(str, p))}={json.dumps(v)}"
                              for p, v in POLICY_CASES])
def test_policy_messages_spell_values_as_yaml(path: tuple[Any, ...], value: Any) -> None:
    result = check_docs(_set(POLICY, path, value))
    # Every wrong type is reported; 1.5 is a fine quantity.
    assert result.problems or (value == 1.5 and path[-1] == "quantity")
    for p in result.problems:
        assert not PYTHON_SPELLINGS.search(p.message), p


PROFILE = """\
apiVersion: policyd.io/v1alpha1
kind: PolicydConfiguration
percentageOfNodesToScore: {value}
leaderElection: {{leaseDuration: {value}}}
profiles:
- schedulerName: {value}
  plugins: {{filter: {{enabled: [{{name: {value}}}]}}}}
  pluginConfig:
  - name: InterPodAffinity
    args: {{hardPodAffinityWeight: {value}, ignorePreferredTermsOfExistingPods: {value}}}
  - name: PodTopologySpread
    args:
      defaultingType: {value}
      defaultConstraints: [{{maxSkew: {value}, topologyKey: {value},
                             whenUnsatisfiable: {value}}}]
  - name: NodeResourcesFit
    args: {{kind: {value}, scoringStrategy: {{type: {value}}}}}
  - name: NodeAffinity
    args: {{kind: {value}}}
  - name: NodeResourcesBalancedAllocation
    args: {{kind: {value}}}
"""


@pytest.mark.parametrize("value", ["true", "false", "null", "1.5", "{a: null}", "[true]",
                                   ".inf"])
def test_profile_messages_spell_values_as_yaml(tmp_path: Path, value: str) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE.format(value=value))
    problems = validate_config_file(path)[2]
    assert len(problems) >= 3
    for p in problems:
        assert not PYTHON_SPELLINGS.search(p.message), p


@pytest.mark.parametrize(("value", "shown"), [
    (None, "null"), (True, "true"), (False, "false"), (1.5, "1.5"), (3, "3"),
    (float("inf"), ".inf"), (float("-inf"), "-.inf"), (float("nan"), ".nan"),
    ("x", "'x'"), ({"a": None}, '{"a": null}'), ([True, 1], "[true, 1]"),
    ({"k": "v" * 100}, '{"k": "' + "v" * 50 + "..."),
])
def test_show_value(value: Any, shown: str) -> None:
    assert show_value(value) == shown
