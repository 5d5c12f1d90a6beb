"""`policyd.model.file_kinds`: what a file is from its kind, and which command takes it;
the names it knows are the ones the schemas define."""

from __future__ import annotations

import pytest

from policyd.config import profile_schema
from policyd.model import file_kinds as fk
from policyd.policy import policy_schema
from policyd.policytest import schema as policytest_schema


def test_the_kinds_are_the_schemas_kinds() -> None:
    assert fk.KINDS[profile_schema.KIND] is fk.PROFILE
    assert fk.KINDS[policy_schema.KIND] is fk.POLICY
    assert fk.KINDS[f"{policy_schema.KIND}List"] is fk.POLICY
    assert fk.KINDS[policytest_schema.KIND] is fk.POLICY_TEST


@pytest.mark.parametrize(("data", "kind"), [
    ({"kind": "PolicydConfiguration"}, fk.PROFILE),
    ({"kind": "SchedulingPolicy"}, fk.POLICY),
    ({"kind": "PolicyTest"}, fk.POLICY_TEST),
    ({"kind": "Node"}, fk.SNAPSHOT),
    ({"kind": "List", "items": [{"kind": "Pod"}, {"kind": "Node"}]}, fk.SNAPSHOT),
    ({"kind": "List", "items": [{"kind": "SchedulingPolicy"}]}, fk.POLICY),
    ({"kind": "KubeSchedulerConfiguration"}, fk.PROFILE),  # read as one, unchanged
    ({"kind": "List", "items": []}, None),
    ({"kind": "List", "items": "x"}, None),
    ({"kind": "ConfigMap"}, None),
    ({"kind": ["SchedulingPolicy"]}, None),  # not a string: the schema says what is wrong
    ({}, None),
    ("kind: SchedulingPolicy", None),
    (None, None),
])
def test_file_kind(data: object, kind: fk.FileKind | None) -> None:
    assert fk.file_kind(data) is kind


def test_wrong_file_names_the_file_what_it_is_and_the_command() -> None:
    assert fk.wrong_file({"kind": "PolicydConfiguration"}, "x.yaml", fk.POLICY) == (
        "x.yaml is a PolicydConfiguration (a profile), not a SchedulingPolicy (a policy): "
        "check it with `policyd check-config x.yaml`; explain, simulate, audit and run "
        "take it with --config")
    assert fk.wrong_file({"kind": "PolicyTest"}, "t.yaml", fk.SNAPSHOT) == (
        "t.yaml is a PolicyTest, not a cluster snapshot (Kubernetes objects): run it with "
        "`policyd test t.yaml`")
    # Its own kind, and kinds policyd does not know, are the caller's to word.
    assert fk.wrong_file({"kind": "SchedulingPolicy"}, "p.yaml", fk.POLICY) is None
    assert fk.wrong_file({"kind": "Deployment"}, "d.yaml", fk.SNAPSHOT) is None
