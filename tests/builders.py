"""Fluent builders for Pods and Nodes in tests: raw Kubernetes dicts, decoded like real input.

`make_pod("web").req(cpu="1", memory="1Gi").node_selector(zone="a").obj()` returns a
`Pod` record; `.raw()` returns the dict. Building raw dicts and decoding them means tests
exercise the same decoding the snapshot loader and the daemon use.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from policyd.model.records import Node, Pod, node_from_dict, pod_from_dict

_uid = itertools.count(1)


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._d: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{next(_uid)}"},
            "spec": {"containers": [{"name": "c0", "image": "pause"}]},
            "status": {},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        return self._d["spec"]  # type: ignore[no-any-return]

    def uid(self, uid: str) -> PodBuilder:
        self._d["metadata"]["uid"] = uid
        return self

    def labels(self, **labels: str) -> PodBuilder:
        self._d["metadata"].setdefault("labels", {}).update(labels)
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._d["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self._d["metadata"].setdefault("annotations", {})[key] = value
        return self

    def created(self, timestamp: str) -> PodBuilder:
        self._d["metadata"]["creationTimestamp"] = timestamp
        return self

    def priority(self, p: int) -> PodBuilder:
        self._spec["priority"] = p
        return self

    def scheduler(self, name: str) -> PodBuilder:
        self._spec["schedulerName"] = name
        return self

    def node(self, name: str) -> PodBuilder:
        self._spec["nodeName"] = name
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._d["status"]["phase"] = phase
        return self

    def node_selector(self, **labels: str) -> PodBuilder:
        self._spec.setdefault("nodeSelector", {}).update(labels)
        return self

    def node_selector_kv(self, key: str, value: str) -> PodBuilder:
        self._spec.setdefault("nodeSelector", {})[key] = value
        return self

    def affinity(self, affinity: dict[str, Any]) -> PodBuilder:
        self._spec["affinity"] = copy.deepcopy(affinity)
        return self

    def toleration(self, key: str = "", value: str = "", effect: str = "",
                   operator: str = "Equal") -> PodBuilder:
        tol: dict[str, Any] = {"key": key, "operator": operator, "effect": effect}
        if value:
            tol["value"] = value
        self._spec.setdefault("tolerations", []).append(tol)
        return self

    def spread(self, constraint: dict[str, Any]) -> PodBuilder:
        self._spec.setdefault("topologySpreadConstraints", []).append(copy.deepcopy(constraint))
        return self

    def container(self, name: str | None = None, image: str = "pause",
                  host_ports: tuple[int, ...] = (), **requests: str) -> PodBuilder:
        """Add a container (the first call replaces the default one)."""
        containers = self._spec["containers"]
        if containers == [{"name": "c0", "image": "pause"}]:
            containers.clear()
        c: dict[str, Any] = {"name": name or f"c{len(containers)}", "image": image}
        if requests:
            c["resources"] = {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}
        if host_ports:
            c["ports"] = [{"containerPort": p, "hostPort": p} for p in host_ports]
        containers.append(c)
        return self

    def req(self, **requests: str) -> PodBuilder:
        """Shorthand: one container with these requests (`ephemeral_storage` ok)."""
        return self.container(**requests)

    def init_container(self, sidecar: bool = False, **requests: str) -> PodBuilder:
        inits = self._spec.setdefault("initContainers", [])
        c: dict[str, Any] = {"name": f"init{len(inits)}", "image": "pause"}
        if requests:
            c["resources"] = {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}
        if sidecar:
            c["restartPolicy"] = "Always"
        inits.append(c)
        return self

    def host_port(self, port: int, protocol: str = "TCP", host_ip: str = "") -> PodBuilder:
        c = self._spec["containers"][0]
        entry: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if host_ip:
            entry["hostIP"] = host_ip
        c.setdefault("ports", []).append(entry)
        return self

    def overhead(self, **resources: str) -> PodBuilder:
        self._spec["overhead"] = dict(resources)
        return self

    def pod_requests(self, **resources: str) -> PodBuilder:
        self._spec["resources"] = {"requests": dict(resources)}
        return self

    def pvc(self, claim: str) -> PodBuilder:
        self._spec.setdefault("volumes", []).append(
            {"name": claim, "persistentVolumeClaim": {"claimName": claim}})
        return self

    def resource_claim(self, name: str, *, claim: str = "", template: str = ""
                       ) -> PodBuilder:
        """A DRA claim in spec.resourceClaims (named directly, or from a template)."""
        entry = {"name": name}
        if claim:
            entry["resourceClaimName"] = claim
        if template:
            entry["resourceClaimTemplateName"] = template
        self._spec.setdefault("resourceClaims", []).append(entry)
        return self

    def set(self, path: str, value: Any) -> PodBuilder:
        """Set any field by dotted path (`spec.hostNetwork`)."""
        target = self._d
        *parents, last = path.split(".")
        for p in parents:
            target = target.setdefault(p, {})
        target[last] = value
        return self

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self._d)

    def obj(self) -> Pod:
        return pod_from_dict(self.raw())


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._d: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
        }

    def uid(self, uid: str) -> NodeBuilder:
        self._d["metadata"]["uid"] = uid
        return self

    def labels(self, **labels: str) -> NodeBuilder:
        self._d["metadata"]["labels"].update(labels)
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._d["metadata"]["labels"][key] = value
        return self

    def annotation(self, key: str, value: str) -> NodeBuilder:
        self._d["metadata"].setdefault("annotations", {})[key] = value
        return self

    def capacity(self, **resources: str) -> NodeBuilder:
        """Replace allocatable with exactly these resources (`ephemeral_storage` ok)."""
        self._d["status"]["allocatable"] = {k.replace("_", "-"): v for k, v in resources.items()}
        return self

    def resource(self, name: str, value: str) -> NodeBuilder:
        self._d["status"]["allocatable"][name] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        self._d["spec"].setdefault("taints", []).append(
            {"key": key, "value": value, "effect": effect})
        return self

    def unschedulable(self, flag: bool = True) -> NodeBuilder:
        self._d["spec"]["unschedulable"] = flag
        return self

    def image(self, size: int, *names: str) -> NodeBuilder:
        self._d["status"].setdefault("images", []).append(
            {"names": list(names), "sizeBytes": size})
        return self

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self._d)

    def obj(self) -> Node:
        return node_from_dict(self.raw())


def make_pod(name: str = "pod", namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str = "node") -> NodeBuilder:
    return NodeBuilder(name)
