"""The NodeDeclaredFeatures share of the generated cases (`tests.gen.clusters`, used by
the differential test): nodes declaring the feature and pods needing it in the
proportions issue 27 measured, valid as the API server wants them, the same in every
process, and enough of them for policyd to reject nodes for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from policyd.config.plugins import default_framework
from policyd.engine.cycle import schedule_one
from policyd.model.cluster import ClusterState
from policyd.model.records import node_from_dict, pod_from_dict
from policyd.plugins.nodedeclaredfeatures.features import (
    RESTART_ALL_CONTAINERS,
    required_features,
)
from policyd.plugins.nodedeclaredfeatures.node_declared_features import ERR_REASON
from tests.gen.differential import gen_case
from tests.gen.volumes import gen_volume_case

CASES = [gen_case(3, i, f"f{i}") for i in range(200)]
ROOT = Path(__file__).resolve().parents[3]


def test_shares_are_the_issues() -> None:
    nodes = [node_from_dict(n) for c in CASES for n in c.nodes]
    declaring = sum(RESTART_ALL_CONTAINERS in n.declared_features for n in nodes)
    needing = sum(bool(required_features(pod_from_dict(c.pod))) for c in CASES)
    assert 0.22 < declaring / len(nodes) < 0.38  # 30% drawn
    assert 0.12 < needing / len(CASES) < 0.30  # 20% drawn
    # Other features, and a name no registry knows, are declared too.
    assert any(n.declared_features and RESTART_ALL_CONTAINERS not in n.declared_features
               for n in nodes)
    assert any("SomeFutureFeature/part" in n.declared_features for n in nodes)


def test_declared_lists_decode_and_rules_are_api_valid() -> None:
    for c in CASES:
        for n in c.nodes:
            features = n["status"].get("declaredFeatures", [])
            assert features == sorted(set(features))
            node_from_dict(n)  # refuses what the API server refuses
        for container in [*c.pod["spec"]["containers"],
                          *c.pod["spec"].get("initContainers", [])]:
            if "restartPolicyRules" in container:
                # The API server requires a container restartPolicy with rules.
                assert container.get("restartPolicy") in ("Never", "OnFailure", "Always")


def test_policyd_rejects_nodes_for_the_feature() -> None:
    """Some cases get as far as NodeDeclaredFeatures, so the differential test's
    minimum of messages with its reason can be met."""
    fw = default_framework(seed=1)
    rejected = 0
    for c in CASES[:100]:
        cluster = ClusterState([node_from_dict(n) for n in c.nodes],
                               [pod_from_dict(p) for p in c.pods])
        result = schedule_one(fw, pod_from_dict(c.pod), cluster)
        rejected += ERR_REASON in result.message
    assert rejected >= 2


def test_volume_cases_carry_no_rules() -> None:
    # VOLUME_MIX keeps its cases to what they test.
    assert not any(required_features(pod_from_dict(gen_volume_case(3, i, f"v{i}").pod))
                   for i in range(40))


_DUMP = ("import json; from tests.gen.differential import gen_case; "
         "print(json.dumps([[c.nodes, c.pod] for c in "
         "(gen_case(3, i, f'f{i}') for i in range(30))], sort_keys=True))")


def test_same_cases_in_every_process() -> None:
    """A seed must replay: the side streams the features are drawn from may not depend
    on anything a process chooses (hash(None) did, before Python 3.12)."""
    runs = [subprocess.run([sys.executable, "-c", _DUMP], cwd=ROOT, check=True,
                           capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2")]
    assert runs[0] == runs[1]
    assert json.loads(runs[0]) == json.loads(json.dumps(
        [[c.nodes, c.pod] for c in CASES[:30]], sort_keys=True))
