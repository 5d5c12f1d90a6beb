"""Fluent builders for Pods and Nodes in tests: raw Kubernetes dicts, decoded like real input.

`make_pod("web").req(cpu="1", memory="1Gi").node_selector(zone="a").obj()` returns a
`Pod` record; `.raw()` returns the dict. Building raw dicts and decoding them means tests
exercise the same decoding the snapshot loader and the daemon use.

Every test builds its pods and nodes here instead of writing a `pod()`/`node()` of its
own. Methods taking labels or resources accept a mapping as well as keywords, for names
that are not Python identifiers (`example.com/gpu`, `topology.kubernetes.io/zone`);
keyword resource names have `_` turned into `-` (`ephemeral_storage`).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

from policyd.model.records import Node, Pod, node_from_dict, pod_from_dict

_uid = itertools.count(1)


def _merged(mapping: Mapping[str, str] | None, keywords: Mapping[str, str]) -> dict[str, str]:
    """A mapping's entries, then keyword entries with `_` in names turned into `-`."""
    return {**(mapping or {}), **{k.replace("_", "-"): v for k, v in keywords.items()}}


def _container(name: str, requests: Mapping[str, str], image: str = "pause"
               ) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image}
    if requests:
        c["resources"] = {"requests": dict(requests)}
    return c


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._d: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{next(_uid)}"},
            "spec": {"containers": [{"name": "c0", "image": "pause"}]},
            "status": {},
        }

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> PodBuilder:
        """Start from a pod dict (a copy of it), e.g. one from tests.gen."""
        b = cls.__new__(cls)
        b._d = copy.deepcopy(dict(raw))
        return b

    def for_api(self) -> PodBuilder:
        """Only what a client sends to create it: no uid, no status, and no namespace
        (the request's namespace applies)."""
        for key in ("uid", "namespace"):
            self._d["metadata"].pop(key, None)
        self._d.pop("status", None)
        return self

    @property
    def _spec(self) -> dict[str, Any]:
        return self._d["spec"]  # type: ignore[no-any-return]

    def uid(self, uid: str) -> PodBuilder:
        self._d["metadata"]["uid"] = uid
        return self

    def labels(self, mapping: Mapping[str, str] | None = None, /, **labels: str
               ) -> PodBuilder:
        self._d["metadata"].setdefault("labels", {}).update({**(mapping or {}), **labels})
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._d["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self._d["metadata"].setdefault("annotations", {})[key] = value
        return self

    def annotations(self, mapping: Mapping[str, str] | None = None, /, **annotations: str
                    ) -> PodBuilder:
        self._d["metadata"].setdefault("annotations", {}).update(
            {**(mapping or {}), **annotations})
        return self

    def resource_version(self, rv: str) -> PodBuilder:
        self._d["metadata"]["resourceVersion"] = rv
        return self

    def created(self, timestamp: str) -> PodBuilder:
        self._d["metadata"]["creationTimestamp"] = timestamp
        return self

    def terminating(self, since: str = "2026-01-01T00:00:00Z") -> PodBuilder:
        """Deleted, not gone yet (metadata.deletionTimestamp set)."""
        self._d["metadata"]["deletionTimestamp"] = since
        return self

    def owner(self, kind: str, name: str, api_version: str = "apps/v1", uid: str = "x",
              controller: bool = True) -> PodBuilder:
        """Owned by a workload (a controller reference unless `controller=False`)."""
        self._d["metadata"].setdefault("ownerReferences", []).append(
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
             "controller": controller})
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

    def node_selector(self, mapping: Mapping[str, str] | None = None, /, **labels: str
                      ) -> PodBuilder:
        self._spec.setdefault("nodeSelector", {}).update({**(mapping or {}), **labels})
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

    def req(self, mapping: Mapping[str, str] | None = None, /, **requests: str
            ) -> PodBuilder:
        """Shorthand: one container with these requests (`ephemeral_storage` ok)."""
        containers = self._spec["containers"]
        if containers == [{"name": "c0", "image": "pause"}]:
            containers.clear()
        containers.append(_container(f"c{len(containers)}", _merged(mapping, requests)))
        return self

    def containers(self, *requests: Mapping[str, str]) -> PodBuilder:
        """Replace the containers with one per mapping of requests, named c0, c1, ...
        (an empty mapping: a container without requests; none at all: the default
        container)."""
        self._spec["containers"] = [_container(f"c{i}", r) for i, r in enumerate(requests)
                                    ] or [{"name": "c0", "image": "pause"}]
        return self

    def init_container(self, mapping: Mapping[str, str] | None = None, /,
                       sidecar: bool = False, **requests: str) -> PodBuilder:
        """Append an init container (a sidecar: restartPolicy Always) named init0, ..."""
        inits = self._spec.setdefault("initContainers", [])
        c = _container(f"init{len(inits)}", _merged(mapping, requests))
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

    def overhead(self, mapping: Mapping[str, str] | None = None, /, **resources: str
                 ) -> PodBuilder:
        self._spec["overhead"] = {**(mapping or {}), **resources}
        return self

    def pod_requests(self, mapping: Mapping[str, str] | None = None, /, **resources: str
                     ) -> PodBuilder:
        """Pod-level requests (spec.resources)."""
        self._spec["resources"] = {"requests": {**(mapping or {}), **resources}}
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

    def labels(self, mapping: Mapping[str, str] | None = None, /, **labels: str
               ) -> NodeBuilder:
        self._d["metadata"]["labels"].update({**(mapping or {}), **labels})
        return self

    def exact_labels(self, mapping: Mapping[str, str] | None = None, /, **labels: str
                     ) -> NodeBuilder:
        """Exactly these labels, without the default hostname label (as upstream's
        plugin tests build their nodes)."""
        self._d["metadata"]["labels"] = {**(mapping or {}), **labels}
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._d["metadata"]["labels"][key] = value
        return self

    def annotation(self, key: str, value: str) -> NodeBuilder:
        self._d["metadata"].setdefault("annotations", {})[key] = value
        return self

    def annotations(self, mapping: Mapping[str, str] | None = None, /, **annotations: str
                    ) -> NodeBuilder:
        self._d["metadata"].setdefault("annotations", {}).update(
            {**(mapping or {}), **annotations})
        return self

    def resource_version(self, rv: str) -> NodeBuilder:
        self._d["metadata"]["resourceVersion"] = rv
        return self

    def capacity(self, mapping: Mapping[str, str] | None = None, /, **resources: str
                 ) -> NodeBuilder:
        """Replace allocatable with exactly these resources (`ephemeral_storage` ok)."""
        self._d["status"]["allocatable"] = _merged(mapping, resources)
        return self

    def ready(self) -> NodeBuilder:
        """Status as a kubelet reports it for a healthy node, for nodes created in a
        real API server: condition Ready=True, capacity equal to allocatable."""
        status = self._d["status"]
        status["capacity"] = dict(status["allocatable"])
        status["conditions"] = [{"type": "Ready", "status": "True"}]
        return self

    def address(self, ip: str, kind: str = "InternalIP") -> NodeBuilder:
        self._d["status"].setdefault("addresses", []).append({"type": kind, "address": ip})
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

    def declared_features(self, *features: str) -> NodeBuilder:
        """status.declaredFeatures, as given (the API server wants them sorted)."""
        self._d["status"]["declaredFeatures"] = list(features)
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
