"""Listed items carry no kind: the informer fills it in from the path. The storage
objects need it most, since VolumeBinding's PreBind writes copies of them back with a
PUT whose path and body depend on it."""

from __future__ import annotations

import pytest

from policyd.kube.cluster_read import DRA_RESOURCES, STORAGE_RESOURCES, WORKLOAD_RESOURCES
from policyd.kube.informer import _item_api_version, _item_kind


@pytest.mark.parametrize(("path", "kind"), [
    (r.path, r.kind) for r in (*STORAGE_RESOURCES, *DRA_RESOURCES, *WORKLOAD_RESOURCES)])
def test_every_watched_path_gets_its_kind(path: str, kind: str) -> None:
    assert _item_kind(path) == kind


def test_the_api_version_comes_from_the_path() -> None:
    assert _item_api_version("/apis/storage.k8s.io/v1/csinodes") == "storage.k8s.io/v1"
    assert _item_api_version("/api/v1/persistentvolumes") == "v1"
