"""Mutated profiles never make validation raise, and every problem in the profile has a
real position in it."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyd.config.loader import validate_config_file
from policyd.config.model import PolicydConfig
from tests.unit.config.conftest import ROOT

BASE: dict[str, Any] = {
    "apiVersion": "policyd.io/v1alpha1",
    "kind": "PolicydConfiguration",
    "policies": [str(ROOT / "policies" / "hw-encrypt.yaml"),
                 str(ROOT / "policies" / "low-latency.yaml")],
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 10,
    "percentageOfNodesToScore": 50,
    "parallelism": 4,
    "leaderElection": {"leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s",
                       "retryPeriod": "2s", "resourceLock": "leases",
                       "resourceName": "policyd", "resourceNamespace": "kube-system"},
    "clientConnection": {"qps": 50, "burst": 100, "timeout": "30s"},
    "profiles": [
        {"schedulerName": "policyd",
         "plugins": {"score": {"enabled": [{"name": "LowLatency", "weight": 3}],
                               "disabled": [{"name": "ImageLocality"}]},
                     "filter": {"enabled": [{"name": "HwEncrypt"}]}},
         "pluginConfig": [{"name": "NodeResourcesFit",
                           "args": {"scoringStrategy": {"type": "MostAllocated"}}},
                          {"name": "PodTopologySpread",
                           "args": {"defaultingType": "List", "defaultConstraints": []}}]},
        {"schedulerName": "other",
         "plugins": {"multiPoint": {"disabled": [{"name": "HwEncrypt"}]}}},
    ],
}

VALUES: list[Any] = [
    None, -1, 0, 1, 101, 1.5, True, "", "x", "hwEncrypt", "HwEncrypt", "*", "15s", "0s",
    "-1s", "bogus", [], {}, [{"name": "NodeAffinity"}], {"name": "X"}, [1, "a", None],
    {"enabled": [{"name": "LowLatency", "weight": -3}]}, {"type": "Most"},
    {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}},
    [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesFit"}],
    str(ROOT / "policies"), "missing/dir", {"disabled": [{"name": "*"}]},
]
KEYS = ["name", "weight", "args", "enabled", "disabled", "score", "filter", "queueSort",
        "multiPoint", "schedulerName", "pluginConfig", "bogus", "permit", "timeout"]


def _nodes(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_nodes(v, (*path, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_nodes(v, (*path, i)))
    return out


def _fresh(value: Any) -> Any:
    """A deep copy: the pool of values must never change between examples."""
    return json.loads(json.dumps(value))


def _mutate(doc: Any, rnd: random.Random) -> Any:
    path = rnd.choice(_nodes(doc))
    if not path:
        return _fresh(rnd.choice(VALUES)) if rnd.random() < 0.1 else doc
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    action = rnd.randrange(4)
    if action == 0:
        parent[last] = _fresh(rnd.choice(VALUES))
    elif action == 1:
        del parent[last]
    elif action == 2 and isinstance(parent[last], dict):
        parent[last][rnd.choice(KEYS)] = _fresh(rnd.choice(VALUES))
    elif action == 3 and isinstance(parent, list):
        parent.append(_fresh(parent[last]))
    return doc


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(1, 6), st.booleans())
def test_mutated_profiles_never_raise(rnd: random.Random, mutations: int,
                                      block_style: bool) -> None:
    doc: Any = _fresh(BASE)
    for _ in range(mutations):
        doc = _mutate(doc, rnd)
    text = _to_yaml(doc) if block_style else json.dumps(doc, indent=1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.yaml"
        path.write_text(text)
        config, frameworks, problems = validate_config_file(path)
    assert isinstance(config, PolicydConfig)
    lines = text.count("\n") + 1
    for p in problems:
        assert p.rule and p.message
        if p.file == str(path):
            assert 1 <= p.line <= lines and p.column >= 1, p
    if any(p.is_error for p in problems):
        assert frameworks == {}
    else:
        assert frameworks, "a valid profile has at least one framework"


def _to_yaml(doc: Any) -> str:
    import io

    from ruamel.yaml import YAML

    out = io.StringIO()
    YAML(typ="safe", pure=True).dump(doc, out)
    return out.getvalue()


def test_base_document_is_valid() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.yaml"
        path.write_text(json.dumps(BASE))
        _, frameworks, problems = validate_config_file(path)
    assert problems == []
    assert set(frameworks) == {"policyd", "other"}
