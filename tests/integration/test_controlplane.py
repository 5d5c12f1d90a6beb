"""The local control plane is a real Kubernetes API: objects, watches, RBAC, scheduling.

These are the guarantees the rest of the project's integration tests and benchmarks
build on; if one fails, nothing tested against the dev cluster can be trusted.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from policyd.devcluster import ControlPlane, DevClusterError, load_snapshot
from policyd.devcluster.process import proc_start_time
from policyd.kube.official import api_client_from
from tests.builders import PodBuilder, make_node, make_pod
from tests.polling import wait_for

pytestmark = pytest.mark.integration


def _suffix() -> str:
    return uuid.uuid4().hex[:8]


def _node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return (make_node(name).labels(labels).capacity(cpu="4", memory="8Gi", pods="110")
            .ready().raw())


def _pod(name: str) -> PodBuilder:
    return (make_pod(name).for_api()
            .container("main", image="registry.k8s.io/pause:3.10", cpu="100m", memory="64Mi"))


@pytest.fixture
def core(api_client: Any) -> Any:
    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(core: Any) -> Iterator[str]:
    name = f"test-{_suffix()}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        core.delete_namespace(name)


@pytest.fixture
def cleanup_nodes(core: Any) -> Iterator[list[str]]:
    names: list[str] = []
    try:
        yield names
    finally:
        for name in names:
            try:
                core.delete_node(name)
            except ApiException as err:
                if err.status != 404:
                    raise


def test_apiserver_accepts_nodes_and_pods(
    core: Any, namespace: str, cleanup_nodes: list[str]
) -> None:
    node_name = f"node-{_suffix()}"
    cleanup_nodes.append(node_name)
    core.create_node(_node(node_name))
    # The status sent with the create is kept: that is what makes a kubelet-less node
    # schedulable.
    stored = core.read_node(node_name)
    assert stored.status.allocatable["cpu"] == "4"

    core.create_namespaced_pod(namespace, _pod("bound").node(node_name).raw())
    core.create_namespaced_pod(namespace, _pod("pending").scheduler("nobody").raw())
    assert core.read_namespaced_pod("bound", namespace).spec.node_name == node_name
    assert core.read_namespaced_pod("pending", namespace).spec.node_name is None


def test_watch_sees_created_node(core: Any, cleanup_nodes: list[str]) -> None:
    since = core.list_node().metadata.resource_version
    node_name = f"watched-{_suffix()}"
    cleanup_nodes.append(node_name)
    core.create_node(_node(node_name))

    # Watching from a resourceVersion before the create replays it: no thread, no race.
    watcher: Any = watch.Watch()  # type: ignore[no-untyped-call]
    events = watcher.stream(
        core.list_node,
        resource_version=since,
        timeout_seconds=20,
        field_selector=f"metadata.name={node_name}",
    )
    seen = []
    for event in events:
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "ADDED":
            break
    assert ("ADDED", node_name) in seen


def test_rbac_refuses_serviceaccount_without_rights_and_accepts_with(
    control_plane: ControlPlane,
    api_client: Any,
    core: Any,
    namespace: str,
    tmp_path: Path,
) -> None:
    core.create_namespaced_service_account(
        namespace, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "probe"}}
    )
    token_request = core.create_namespaced_service_account_token(
        "probe",
        namespace,
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    token = token_request.status.token
    kubeconfig = control_plane.write_token_kubeconfig(tmp_path / "sa.kubeconfig", token)
    sa_client = api_client_from(kubeconfig)
    try:
        # The token authenticates (so a refusal is 403 Forbidden, not 401)...
        authn: Any = client.AuthenticationV1Api(sa_client)
        review = authn.create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
        assert review.status.user_info.username == f"system:serviceaccount:{namespace}:probe"

        sa_core = client.CoreV1Api(sa_client)
        with pytest.raises(ApiException) as refused:
            sa_core.list_namespaced_pod(namespace)
        assert refused.value.status == 403

        rbac: Any = client.RbacAuthorizationV1Api(api_client)
        rbac.create_namespaced_role(
            namespace,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "pod-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
            },
        )
        rbac.create_namespaced_role_binding(
            namespace,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "probe-reads-pods"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "pod-reader",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "probe", "namespace": namespace}],
            },
        )

        def allowed() -> bool:
            # The RBAC authorizer learns of new bindings through its informers: retry.
            try:
                sa_core.list_namespaced_pod(namespace)
            except ApiException as err:
                if err.status != 403:
                    raise
                return False
            return True

        wait_for(allowed, 15, "the RoleBinding to take effect")
        # ... and only where it was granted.
        with pytest.raises(ApiException) as elsewhere:
            sa_core.list_namespaced_pod("default")
        assert elsewhere.value.status == 403
    finally:
        sa_client.close()


def test_kube_scheduler_schedules_pod(
    control_plane: ControlPlane,
    core: Any,
    namespace: str,
    cleanup_nodes: list[str],
    tmp_path: Path,
) -> None:
    label = f"policyd-test-{_suffix()}"
    node_name = f"sched-{_suffix()}"
    cleanup_nodes.append(node_name)
    core.create_node(_node(node_name, labels={"policyd-test": label}))

    profile = tmp_path / "scheduler.yaml"
    profile.write_text(
        textwrap.dedent("""\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
          - schedulerName: default-scheduler
    """)
    )
    with control_plane.start_kube_scheduler(profile) as scheduler:
        assert scheduler.alive()
        # The node selector keeps the pod off nodes other tests create meanwhile.
        core.create_namespaced_pod(
            namespace,
            _pod("web").scheduler("default-scheduler")
            .node_selector({"policyd-test": label}).raw(),
        )

        def bound() -> bool:
            return core.read_namespaced_pod("web", namespace).spec.node_name is not None

        wait_for(bound, 30, "kube-scheduler to bind the pod")
        assert core.read_namespaced_pod("web", namespace).spec.node_name == node_name
    assert not scheduler.alive()


def test_load_snapshot_creates_nodes_and_pods(
    control_plane: ControlPlane, core: Any, cleanup_nodes: list[str]
) -> None:
    ns, node_name = f"snap-{_suffix()}", f"snap-node-{_suffix()}"
    cleanup_nodes.append(node_name)
    node = _node(node_name)
    node["metadata"].update({"uid": "0b7b-old", "resourceVersion": "12345"})
    running = (_pod("running").node(node_name).set("spec.priorityClassName", f"batch-{ns}")
               .priority(1000).raw())
    running["metadata"]["namespace"] = ns
    running["status"] = {"phase": "Running"}
    done = _pod("done").node(node_name).raw()
    done["metadata"]["namespace"] = ns
    done["status"] = {"phase": "Succeeded"}
    # A Service from another cluster: its cluster IP is outside this cluster's range.
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": ns, "uid": "x"},
        "spec": {
            "clusterIP": "172.20.0.5",
            "clusterIPs": ["172.20.0.5"],
            "selector": {"app": "web"},
            "ports": [{"port": 80}],
        },
    }
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": _pod("x").raw()["spec"]},
        },
        "status": {"replicas": 1},
    }
    snapshot = [
        {"apiVersion": "v1", "kind": "List", "items": [node, running, done]},
        service,
        replicaset,
    ]

    from policyd.devcluster.replay import flatten

    try:
        result = load_snapshot(control_plane.kubeconfig_path, flatten(snapshot))
        assert result.created == {
            "Namespace": 1,
            "PriorityClass": 1,
            "Node": 1,
            "Service": 1,
            "ReplicaSet": 1,
            "Pod": 2,
        }
        assert core.read_node(node_name).status.allocatable["memory"] == "8Gi"
        stored = core.read_namespaced_pod("running", ns)
        assert stored.spec.node_name == node_name
        assert stored.spec.priority == 1000
        assert stored.status.phase == "Running"
        assert core.read_namespaced_pod("done", ns).status.phase == "Succeeded"

        again = load_snapshot(control_plane.kubeconfig_path, flatten(snapshot))
        assert again.created.get("Pod", 0) == 0 and again.skipped["Pod"] == 2
    finally:
        core.delete_namespace(ns)
        client.SchedulingV1Api(control_plane.api_client()).delete_priority_class(f"batch-{ns}")


def _gone(pids: list[int]) -> bool:
    return all(proc_start_time(pid) is None for pid in pids)


def test_stop_leaves_no_process_behind() -> None:
    cp = ControlPlane().start()
    try:
        scheduler = cp.start_kube_scheduler()
        pids = cp.pids
        # etcd, kube-apiserver, kube-controller-manager and the scheduler.
        assert len(pids) == 4 and scheduler.pid in pids
        assert not _gone(pids)
        workdir = cp.workdir
    finally:
        cp.stop()
    assert _gone(pids)
    assert workdir is not None and not workdir.exists()
    cp.stop()  # idempotent


# The owner as a terminal runs it: Ctrl-C raises KeyboardInterrupt. A shell running the
# tests in the background without job control passes SIGINT down ignored, and Python
# then leaves it ignored: the child would sleep through the signal.
_CHILD = textwrap.dedent("""\
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from policyd.devcluster import ControlPlane
    cp = ControlPlane().start()
    cp.start_kube_scheduler()
    print(" ".join(map(str, cp.pids)), flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["sigint", "sigterm", "sigkill"]
)
def test_interrupted_owner_leaves_no_process_behind(sig: signal.Signals) -> None:
    # SIGINT (Ctrl-C): KeyboardInterrupt ends the script, the atexit hook stops them.
    # SIGTERM: the owner's handler unwinds and stops its processes in order.
    # SIGKILL: no Python code runs; PR_SET_PDEATHSIG makes the kernel kill them.
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the KeyboardInterrupt traceback is expected
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 4, f"child printed {line!r}"
        child.send_signal(sig)
        # Each of the four may take its whole grace before SIGKILL (SIGINT's atexit: 5 s
        # and 5 more; SIGTERM's unwinding: 10 and 5): up to a minute on a loaded machine.
        child.wait(timeout=90)
        wait_for(lambda: _gone(pids), 15, f"processes {pids} to end")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue  # ended meanwhile
    return found


def test_failed_start_reports_the_log_tail_and_leaves_nothing(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    broken = tmp_path / "kube-apiserver"
    broken.write_text("#!/bin/sh\necho 'Error: unknown flag: --nonsense' >&2\nexit 3\n")
    broken.chmod(0o755)
    cp = ControlPlane(binaries=dataclasses.replace(control_plane.binaries, kube_apiserver=broken))
    with pytest.raises(DevClusterError) as failed:
        cp.start()
    assert "kube-apiserver exited during startup with code 3" in str(failed.value)
    assert "unknown flag: --nonsense" in failed.value.details
    # etcd had started; it was stopped, and the temporary work dir removed.
    assert cp.workdir is not None and not cp.workdir.exists()
    assert _processes_mentioning(str(cp.workdir)) == []
