"""The binding cycle around PreBind, policyd against kube-scheduler v1.36.3 on the same
API server (issue 27 §2): each scene is played once per scheduler, on a node of its
own (pods select it by hostname), and what the API server shows must be the same.

- NominatedNodeNameForExpectation (beta, on by default): a pod whose PreBind has work
  (a WaitForFirstConsumer claim to provision) shows `status.nominatedNodeName` while
  PreBind waits, before it is bound; the API server clears it with the binding
  (ClearingNominatedNodeNameAfterBinding). A pod with nothing to PreBind is never
  nominated. With the gate off, neither is.
- A victim still in PreBind: preemption calls its binding off instead of deleting it.
  It stays (not Terminating, no DisruptionTarget), gets a `Preempted` event that says
  so, fails its binding cycle with the cancellation's cause, goes back to the queue,
  and the preemptor is bound in its place.

The claims' class has a provisioner name nobody serves until the test starts the test
provisioner (tests/e2e/provisioner.py): until then PreBind waits, which is how a pod is
held in PreBind. kube-scheduler runs with its own process per gate setting; policyd's
daemon runs in this process, the gate set by its profile's `featureGates`.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from policyd.devcluster import ControlPlane
from policyd.kube.client import ApiError, ConnectionSettings, KubeClient, WatchStream
from tests.e2e.helpers import Cluster, DaemonFactory, claim_volumes, write_profile
from tests.e2e.provisioner import SELECTED_NODE, Provisioner, volume_name
from tests.integration.differential.runner import kube_scheduler_config
from tests.polling import wait_for

Obj = dict[str, Any]
SIDES = ("k", "p")  # kube-scheduler's pods, policyd's pods
HOSTNAME = "kubernetes.io/hostname"
GATE = "NominatedNodeNameForExpectation"
# Long enough that no PreBind of these scenes times out while the test holds it.
BIND_TIMEOUT_SECONDS = 300
HOLD = 3.0  # how long a scene watches a pod held in PreBind
CANCELLED = 'running PreBind plugin "VolumeBinding": preempted by DefaultPreemption'


class PodHistory:
    """Every state of the namespace's pods the API server sent on a watch, per pod
    name: (bound node or None, status.nominatedNodeName or None), repeats collapsed."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.states: dict[str, list[tuple[str | None, str | None]]] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        listed = client.request("GET", self.path)
        for pod in listed.get("items") or []:
            self._record(pod)
        self._thread = threading.Thread(
            target=self._run, args=(str(listed["metadata"]["resourceVersion"]),),
            daemon=True)
        self._thread.start()

    def _record(self, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        state = ((pod.get("spec") or {}).get("nodeName") or None,
                 (pod.get("status") or {}).get("nominatedNodeName") or None)
        with self._lock:
            seen = self.states.setdefault(name, [])
            if not seen or seen[-1] != state:
                seen.append(state)

    def _run(self, version: str) -> None:
        while not self._stop.is_set():
            try:
                stream = self.client.stream(self.path, query={
                    "watch": "true", "resourceVersion": version})
                self._stream = stream
                for event in stream.events():
                    obj = event.get("object") or {}
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._record(obj)
                        version = str(obj["metadata"]["resourceVersion"])
            except ApiError as exc:
                if not self._stop.is_set():
                    self.errors.append(str(exc))
                    self._stop.wait(0.2)

    def of(self, name: str) -> list[tuple[str | None, str | None]]:
        with self._lock:
            return list(self.states.get(name, []))

    def close(self) -> None:
        self._stop.set()
        if self._stream is not None:
            self._stream.interrupt()
        self._thread.join(10)


@dataclass
class Scene:
    c: Cluster
    schedulers: dict[str, str]
    driver: str  # a WaitForFirstConsumer class whose provisioner nobody serves yet
    history: PodHistory
    classes: dict[str, str] = field(default_factory=dict)

    def node(self, side: str, cpu: str = "2") -> str:
        name = f"n-{side}-{self.c.ns[-8:]}"
        self.c.node(name, cpu=cpu)
        return name

    def pod(self, name: str, side: str, node: str, *, cpu: str = "100m",
            claim: str | None = None, priority: str | None = None) -> Obj:
        spec: Obj = {"nodeSelector": {HOSTNAME: node}}
        if claim is not None:
            self.c.pvc(claim, self.driver)
            spec["volumes"] = claim_volumes(claim)
        if priority is not None:
            spec["priorityClassName"] = self.classes[priority]
        return self.c.pod(name, self.schedulers[side], cpu=cpu, **spec)

    def in_pre_bind(self, claim: str, node: str) -> None:
        """PreBind has written the claim's node: it now waits for a volume."""
        wait_for(lambda: ((self.c.get_pvc(claim) or {}).get("metadata") or {})
                 .get("annotations", {}).get(SELECTED_NODE) == node, 30,
                 f"{claim}: selected-node {node}")

    def nominated(self, pod: str) -> str | None:
        return ((self.c.get_pod(pod) or {}).get("status") or {}).get("nominatedNodeName")

    def priority_class(self, name: str, value: int) -> None:
        unique = f"{self.c.ns}-{name}"
        self.c._create_cluster_object("/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": unique}, "value": value})
        self.classes[name] = unique

    def serve_volumes(self) -> Provisioner:
        """The driver's provisioner, at last; its PVs are deleted at cleanup."""
        return Provisioner(self.c.client, self.driver)


@pytest.fixture(params=[True, False], ids=["gate-on", "gate-off"])
def scene(request: pytest.FixtureRequest, control_plane: ControlPlane, tmp_path: Path,
          daemons: DaemonFactory) -> Iterator[Scene]:
    gate_on: bool = request.param
    suffix = uuid.uuid4().hex[:8]
    schedulers = {"k": f"kube-pb-{suffix}", "p": f"policyd-pb-{suffix}"}
    client = KubeClient.connect(ConnectionSettings(
        kubeconfig=str(control_plane.kubeconfig_path), qps=-1))
    c = Cluster(client, f"e2e-pb-{suffix}")
    c.delete_all_nodes()
    c.create_namespace()
    driver = f"{suffix}.prebind.policyd.test"
    c.storage_class(driver, provisioner=driver)
    config = kube_scheduler_config(schedulers["k"])
    config["profiles"][0]["pluginConfig"] = [{"name": "VolumeBinding", "args": {
        "bindTimeoutSeconds": BIND_TIMEOUT_SECONDS}}]
    kube_config = tmp_path / "kube-scheduler.json"
    kube_config.write_text(json.dumps(config))
    kube = control_plane.start_kube_scheduler(
        kube_config, extra_args=() if gate_on else (f"--feature-gates={GATE}=false",))
    history = PodHistory(client, c.ns)
    try:
        daemon = daemons.start(write_profile(
            tmp_path, schedulers["p"], policies=None,
            extra="" if gate_on else f"featureGates:\n  {GATE}: false\n"))
        assert daemon.scheduler.binder.nominate_for_expectation == gate_on
        yield Scene(c, schedulers, driver, history)
        assert history.errors == []
    finally:
        history.close()
        kube.stop()
        # The PVs the provisioner made are cluster-scoped: delete them with the rest.
        c.created += [f"/api/v1/persistentvolumes/{volume_name(claim)}"
                      for claim in _claims(client, c.ns)]
        c.cleanup()
        client.close()


def _claims(client: KubeClient, namespace: str) -> list[Obj]:
    path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    return list(client.request("GET", path).get("items") or [])


def _same_for_both(check: Callable[[str], Any]) -> Any:
    """`check(side)` for both schedulers; the answers must agree (and are returned)."""
    answers = {side: check(side) for side in SIDES}
    assert answers["k"] == answers["p"], f"kube-scheduler {answers['k']!r}, " \
                                         f"policyd {answers['p']!r}"
    return answers["k"]


def _gate_on(request: pytest.FixtureRequest) -> bool:
    return "gate-on" in request.node.callspec.id


def test_a_pod_with_pre_bind_work_is_nominated_before_it_is_bound(
        scene: Scene, request: pytest.FixtureRequest) -> None:
    gate_on = _gate_on(request)
    nodes = {side: scene.node(side) for side in SIDES}
    for side in SIDES:
        scene.pod(f"plain-{side}", side, nodes[side])
        scene.pod(f"app-{side}", side, nodes[side], claim=f"data-{side}")
    for side in SIDES:
        assert scene.c.wait_bound(f"plain-{side}", 30) == nodes[side]
        scene.in_pre_bind(f"data-{side}", nodes[side])
    # Held in PreBind: nominated to its node with the gate, not without.
    expected = "N" if gate_on else None
    wait_for(lambda: all((scene.nominated(f"app-{s}") is not None) == gate_on
                         for s in SIDES), 10, "the nomination, as the gate says")
    threading.Event().wait(HOLD)
    held = _same_for_both(lambda s: "N" if scene.nominated(f"app-{s}") == nodes[s]
                          else scene.nominated(f"app-{s}"))
    assert held == expected
    assert all(scene.c.node_of(f"app-{s}") is None for s in SIDES)

    with scene.serve_volumes() as prov:
        for side in SIDES:
            assert scene.c.wait_bound(f"app-{side}", 60) == nodes[side]
        assert prov.errors == []
    wait_for(lambda: all(scene.nominated(f"app-{s}") is None for s in SIDES), 10,
             "the nomination gone with the binding")

    def course(side: str) -> tuple[list[Any], list[Any]]:
        """Each pod's states on the watch, node names replaced by N."""
        def n(states: list[tuple[str | None, str | None]]) -> list[Any]:
            return [tuple("N" if v == nodes[side] else v for v in st) for st in states]
        return n(scene.history.of(f"app-{side}")), n(scene.history.of(f"plain-{side}"))

    app, plain = _same_for_both(course)
    # Nominated while unbound, then bound with the nomination cleared (by the API
    # server, in the binding's own write).
    assert app == ([(None, None), (None, "N"), ("N", None)] if gate_on
                   else [(None, None), ("N", None)])
    assert plain == [(None, None), ("N", None)]  # nothing to PreBind: never nominated


def test_a_victim_in_pre_bind_is_sent_back_to_the_queue_not_deleted(
        scene: Scene, request: pytest.FixtureRequest) -> None:
    gate_on = _gate_on(request)
    scene.priority_class("low", 10)
    scene.priority_class("high", 1000)
    nodes = {side: scene.node(side, cpu="1") for side in SIDES}
    for side in SIDES:
        scene.pod(f"victim-{side}", side, nodes[side], cpu="600m", claim=f"data-{side}",
                  priority="low")
    for side in SIDES:
        scene.in_pre_bind(f"data-{side}", nodes[side])
    if gate_on:
        wait_for(lambda: all(scene.nominated(f"victim-{s}") == nodes[s] for s in SIDES),
                 10, "the victims nominated before PreBind")
    preemptors = {side: scene.pod(f"high-{side}", side, nodes[side], cpu="600m",
                                  priority="high") for side in SIDES}
    for side in SIDES:
        assert scene.c.wait_bound(f"high-{side}", 60) == nodes[side]

    def victim(side: str) -> Obj:
        name = f"victim-{side}"
        pod = scene.c.get_pod(name)
        assert pod is not None, f"{name} was deleted"
        preempted = wait_for(lambda: scene.c.events(name, "Preempted"), 15,
                             f"{name}: Preempted event")
        uid = preemptors[side]["metadata"]["uid"]
        messages = [e["message"].replace(uid, "UID").replace(nodes[side], "N")
                    for e in preempted]
        failed = wait_for(lambda: [e for e in scene.c.events(name, "FailedScheduling")
                                   if e["message"] == CANCELLED], 15,
                          f"{name}: the cancelled binding cycle's FailedScheduling")
        wait_for(lambda: scene.nominated(name) is None, 10, f"{name}: nomination cleared")
        return {
            "terminating": bool(pod["metadata"].get("deletionTimestamp")),
            "disruption_target": scene.c.condition(name, "DisruptionTarget"),
            "bound": scene.c.node_of(name),
            "preempted": messages,
            "failed": [(e["type"], e["message"]) for e in failed],
            "nominated_while_held": (None, "N") in [
                tuple("N" if v == nodes[side] else v for v in st)
                for st in scene.history.of(name)],
        }

    seen = _same_for_both(victim)
    assert seen == {
        "terminating": False, "disruption_target": None, "bound": None,
        "preempted": ["Preempted by pod UID on node N (in kube-scheduler memory)."],
        "failed": [("Warning", CANCELLED)], "nominated_while_held": gate_on,
    }
