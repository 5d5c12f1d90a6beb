"""Hand-built scenes for tests/integration/test_intended_differences.py: a few nodes and
pods on the real API server, decided by the real kube-scheduler, and the same pods given
to policyd's engine on the cluster read back from that API server.

A scene is judged the way the differential runner judges a generated case: it is built
from the runner's public steps (`Runner.barrier`, `Runner.wait` for kube-scheduler's
decisions, `Runner.read_back`, `Runner.cleanup`; runner.py describes each), not from
copies of them, so that an intended difference shown here is shown under exactly the
conditions in which the generated cases avoid it.

Isolation is the generated cases' (tests/gen/differential.py): every node of a scene
carries `CASE_LABEL=<prefix>`, every pod of it lives in the namespace `<prefix>` and
selects those nodes, so scenes share one kube-scheduler with each other and with
whatever else the session left on the API server.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyd.config.plugins import default_framework
from policyd.engine.cycle import ScheduleResult, schedule_one
from policyd.framework.runtime import Framework
from policyd.model.cluster import ClusterState
from policyd.model.records import pod_from_dict
from tests.gen.clusters import HOSTNAME
from tests.gen.differential import CASE_LABEL, SCHEDULER_NAME, UNDER_TEST_LABEL, Case
from tests.integration.differential.runner import (
    KubeDecision,
    Runner,
    reference_scores,
    unbound,
)
from tests.integration.differential.score_log import KubeScores, read_score_lines

# How long kube-scheduler gets to flush a pod's score lines (it flushes every 100 ms,
# see score_log.SCORE_LOG_ARGS) once the pod is decided.
_SCORE_LINES_WAIT_S = 5.0


@dataclass
class ReadBack:
    """The API server's objects after kube-scheduler decided: the cluster policyd
    schedules in (every pod but the scene's pods under test) and those pods, by name."""

    cluster: ClusterState
    pods: dict[str, dict[str, Any]]  # name -> pod as stored (the scene's namespace only)


@dataclass
class Scene:
    """The objects of one intended difference, in namespace `prefix` on nodes
    labelled `CASE_LABEL=prefix` (node names start with the prefix too)."""

    runner: Runner
    prefix: str
    score_log: Path  # kube-scheduler's log, with the lines `score_log` reads
    fw: Framework = field(default_factory=lambda: default_framework(seed=0))
    _barriers: int = 0

    def __post_init__(self) -> None:
        self.runner.create_namespace((self.prefix, {CASE_LABEL: self.prefix}))

    # -- building ------------------------------------------------------------------------

    def node_name(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    def node(self, short: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
             extended: Mapping[str, str] | None = None,
             images: Sequence[tuple[str, int]] = (),
             labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        """A Node of the scene (not created yet); `images`: (name, sizeBytes)."""
        name = self.node_name(short)
        allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extended or {})}
        status: dict[str, Any] = {"allocatable": allocatable, "capacity": dict(allocatable)}
        if images:
            status["images"] = [{"names": [image], "sizeBytes": size}
                                for image, size in images]
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {
                    HOSTNAME: name, CASE_LABEL: self.prefix, **(labels or {})}},
                "status": status}

    def create_nodes(self, nodes: Sequence[dict[str, Any]], *,
                     in_order: bool = False) -> None:
        """Create `nodes`, concurrently unless `in_order` (kube-scheduler's cache then
        sees them in this order: its informer delivers them as created)."""
        if in_order:
            for n in nodes:
                self.runner.post("/api/v1/nodes", n)
        else:
            self.runner.each(lambda n: self.runner.post("/api/v1/nodes", n), nodes)

    def pod(self, name: str, *, requests: Mapping[str, str] | None = None,
            limits: Mapping[str, str] | None = None, image: str = "registry.example/app:1",
            host_port: int | None = None, node_name: str | None = None,
            pin: str | None = None, under_test: bool = True,
            scheduler: str = SCHEDULER_NAME, node_labels: Mapping[str, str] | None = None,
            spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A Pod of the scene (not created yet), with one container.

        `node_name` binds it at creation (no scheduler involved); otherwise it is for
        `scheduler` and selects the scene's nodes, also matching `node_labels`, or only
        the node `pin` (short name). Pods `under_test` are the ones policyd is asked
        about; the others are part of the cluster it schedules in."""
        container: dict[str, Any] = {"name": "c", "image": image}
        resources = {k: dict(v) for k, v in (("requests", requests), ("limits", limits)) if v}
        if resources:
            container["resources"] = resources
        if host_port is not None:
            container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
        body: dict[str, Any] = {"schedulerName": scheduler, "containers": [container],
                                "terminationGracePeriodSeconds": 0, **(spec or {})}
        if node_name is not None:
            body["nodeName"] = self.node_name(node_name)
        else:
            body["nodeSelector"] = {CASE_LABEL: self.prefix, **(node_labels or {})}
            if pin is not None:
                body["nodeSelector"][HOSTNAME] = self.node_name(pin)
        labels = {UNDER_TEST_LABEL: "true"} if under_test else {}
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": self.prefix, "labels": labels},
                "spec": body}

    def create_pods(self, pods: Sequence[dict[str, Any]]) -> None:
        self.runner.create_pods(pods)

    def delete_pod(self, name: str) -> None:
        self.runner.delete_pod({"metadata": {"namespace": self.prefix, "name": name}})

    def patch_pod(self, name: str, patch: dict[str, Any]) -> None:
        self.runner.client.request(
            "PATCH", f"/api/v1/namespaces/{self.prefix}/pods/{name}", body=patch,
            content_type="application/merge-patch+json")

    def barrier(self) -> None:
        """Return once kube-scheduler has seen every object created so far."""
        self._barriers += 1
        self.runner.barrier(f"{self.prefix}-{self._barriers}")

    # -- kube-scheduler's side -----------------------------------------------------------

    def decisions(self, *names: str) -> dict[str, KubeDecision]:
        """Wait until kube-scheduler bound or rejected each of the pods under test."""
        got = self.runner.wait({(self.prefix, n) for n in names})
        return {name: d for (_, name), d in got.items()}

    def kube_scores(self, name: str) -> KubeScores:
        """kube-scheduler's weighted score of every plugin on every node it scored for
        the pod, and each node's total, from its log (after the pod was decided)."""
        key = f"{self.prefix}/{name}"
        deadline = time.monotonic() + _SCORE_LINES_WAIT_S
        while True:
            logged: dict[str, KubeScores] = {}
            read_score_lines(self.score_log.read_text(errors="replace"), logged)
            s = logged.get(key)
            # The totals are logged after every plugin's lines: all there, all flushed.
            if s is not None and s.totals and set(s.totals) == set(s.plugins):
                return s
            if time.monotonic() > deadline:
                raise AssertionError(f"kube-scheduler logged no complete scores for {key} "
                                     f"in {_SCORE_LINES_WAIT_S}s ({self.score_log})")
            time.sleep(0.1)

    # -- policyd's side ------------------------------------------------------------------

    def read_back(self) -> ReadBack:
        cluster, test_pods = self.runner.read_back()
        return ReadBack(cluster, {name: pod for (ns, name), pod in test_pods.items()
                                  if ns == self.prefix})

    def policyd(self, back: ReadBack, name: str, *,
                cluster: ClusterState | None = None) -> ScheduleResult:
        """policyd's decision for the pod under test `name` as kube-scheduler first saw
        it (unbound), on the reference path, which keeps every node's verdict and score
        (the differential test holds the columnar path to it)."""
        return schedule_one(self.fw, pod_from_dict(unbound(back.pods[name])),
                            back.cluster if cluster is None else cluster, reference=True)

    def cleanup(self) -> None:
        """Delete the scene's pods and nodes and the barriers made for it."""
        case = Case(seed=0, index=0, prefix=self.prefix, namespaces={}, nodes=[], pods=[],
                    pod={})
        self.runner.cleanup([case], [self.prefix])


def policyd_scores(result: ScheduleResult) -> dict[str, dict[str, int]]:
    """node -> plugin -> weighted score, and the node's total under TOTAL."""
    assert result.scores is not None, f"policyd scored nothing: {result.message}"
    return reference_scores(result.scores)


def without_all_zero_skips(theirs: Mapping[str, Mapping[str, int]],
                           mine: Mapping[str, Mapping[str, int]]
                           ) -> dict[str, dict[str, int]]:
    """kube-scheduler's scores minus each plugin that scored 0 on every node and that
    policyd skipped (scored on no node).

    policyd's ImageLocality has a PreScore that skips the plugin when no node holds any
    of the pod's images, since every score would be 0; kube-scheduler's has no
    PreScore and logs a 0 for every node. Same totals, same choice: the scenes' pods use
    an image no node reports, so their ImageLocality is such a plugin. (The generated
    cases never meet this: every cluster of a batch reports the images their pods use.)
    """
    skipped = {plugin for scores in theirs.values() for plugin in scores
               if not any(plugin in m for m in mine.values())
               and all(t.get(plugin, 0) == 0 for t in theirs.values())}
    return {node: {p: v for p, v in scores.items() if p not in skipped}
            for node, scores in theirs.items()}
