"""A real local Kubernetes control plane for tests, demos and benchmarks.

policyd must be exercised against a real kube-apiserver (not a fake) and compared
with the real kube-scheduler. Release downloads are not available where the project
is developed and tested, so the binaries are built from Go modules by the project
itself (`build`), then etcd, kube-apiserver and kube-controller-manager (only its
volume controllers: the real PV controller, `controllermanager`) are started on loopback
with generated certificates (`ControlPlane`), and a kube-scheduler can be started next
to them as the comparison peer (`ControlPlane.start_kube_scheduler`).

Typical use::

    with ControlPlane() as cp:
        load_snapshot(cp.kubeconfig_path, read_objects(Path("snapshot.yaml")))
        with cp.start_kube_scheduler(Path("profile.yaml")) as scheduler:
            ...
"""

from __future__ import annotations

from policyd.devcluster.assets import ETCD_VERSION, K8S_VERSION, Binaries
from policyd.devcluster.build import resolve_binaries
from policyd.devcluster.controllermanager import KubeControllerManager
from policyd.devcluster.controlplane import ControlPlane, KubeScheduler
from policyd.devcluster.errors import DevClusterError
from policyd.devcluster.replay import LoadResult, load_snapshot, read_objects

__all__ = [
    "ETCD_VERSION",
    "K8S_VERSION",
    "Binaries",
    "ControlPlane",
    "DevClusterError",
    "KubeControllerManager",
    "KubeScheduler",
    "LoadResult",
    "load_snapshot",
    "read_objects",
    "resolve_binaries",
]
