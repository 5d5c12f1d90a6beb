"""VolumeUnsupported: policyd's own stand-in for the volume plugins."""

from __future__ import annotations

import pytest

from policyd.framework import Code, CycleState, PluginError
from policyd.plugins import names
from policyd.plugins.volumeunsupported.volume_unsupported import new
from tests.builders import make_pod


def test_skips_pod_without_claims() -> None:
    names_, status = new().pre_filter(CycleState(), make_pod().obj(), [])
    assert names_ is None
    assert status is not None and status.code is Code.SKIP


def test_rejects_pod_with_claim() -> None:
    pod = make_pod().pvc("data").pvc("logs").obj()
    names_, status = new().pre_filter(CycleState(), pod, [])
    assert names_ is None
    assert status is not None
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (
        'pod uses PersistentVolumeClaim "data": policyd has no volume plugins yet '
        "(see README, known limits)",)


def test_rejects_generic_ephemeral_volume() -> None:
    pod = make_pod("web").set("spec.volumes", [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]).obj()
    _, status = new().pre_filter(CycleState(), pod, [])
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert '"web-scratch"' in status.message


def test_other_volumes_are_fine() -> None:
    pod = make_pod().set("spec.volumes", [{"name": "tmp", "emptyDir": {}}]).obj()
    _, status = new().pre_filter(CycleState(), pod, [])
    assert status is not None and status.code is Code.SKIP


def test_factory() -> None:
    assert new(None).name == names.VOLUME_UNSUPPORTED
    with pytest.raises(PluginError):
        new({"x": 1})
