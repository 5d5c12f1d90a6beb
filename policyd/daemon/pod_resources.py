"""/metrics/resources as kube-scheduler serves it (pkg/scheduler/metrics/resources):
`kube_pod_resource_request` and `kube_pod_resource_limit`, one gauge sample per pod and
resource, labelled namespace, pod, node, scheduler, priority, resource and unit.

kube-scheduler reads every pod of its informer; policyd reads the pods its cluster
state holds, which is every pod its watch sees but the finished ones (those upstream
skips too, once bound). Requests are `policyd.model.resources.pod_requests` (upstream's
PodRequests); limits are summed here as component-helpers' PodLimits sums them. A zero
amount is left out, as upstream leaves it out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from policyd.model.quantity import NANO, QuantityError, nano_value
from policyd.model.records import Pod
from policyd.model.resources import pod_requests

LABELS = ("namespace", "pod", "node", "scheduler", "priority", "resource", "unit")
_HELP = ("Each unfinished pod's effective resource {} as the scheduler counts them, one "
         "sample per resource, with its unit where it has one.")
# Resources that pod-level spec.resources may set (IsSupportedPodLevelResource).
_POD_LEVEL = ("cpu", "memory", "hugepages-")


def unit_of(resource: str) -> str:
    """The `unit` label upstream gives a resource ("" for extended resources)."""
    if resource == "cpu":
        return "cores"
    if resource in ("memory", "storage", "ephemeral-storage") \
            or resource.startswith("hugepages-"):
        return "bytes"
    if resource.startswith("attachable-volumes-"):
        return "integer"
    return ""


def _amounts(raw: object) -> dict[str, int]:
    """A ResourceList in billionths; an unreadable quantity counts as absent (the pod
    decoded, so only a limit policyd never reads can be one)."""
    out: dict[str, int] = {}
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            try:
                out[str(name)] = nano_value(value)
            except QuantityError:
                continue
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = max(into.get(name, 0), value)


def _limits_of(c: Any) -> dict[str, int]:
    resources = c.get("resources") if isinstance(c, Mapping) else None
    return _amounts(resources.get("limits") if isinstance(resources, Mapping) else None)


def pod_limits_nano(pod: Pod) -> dict[str, int]:
    """PodLimits in billionths: containers summed, sidecars (restartable init
    containers) added and counted under every later init container, the per-resource
    max of those taken, pod-level limits replacing the sum, overhead added to the
    limits that are set."""
    spec = pod.raw.get("spec") or {}
    limits: dict[str, int] = {}
    for c in spec.get("containers") or ():
        _add(limits, _limits_of(c))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in spec.get("initContainers") or ():
        own = _limits_of(c)
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            _add(limits, own)
            _add(sidecars, own)
            use = dict(sidecars)
        else:
            use = dict(own)
            _add(use, sidecars)
        _max(init_max, use)
    _max(limits, init_max)
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping):
        for name, value in _amounts(pod_level.get("limits")).items():
            if name in _POD_LEVEL[:2] or name.startswith(_POD_LEVEL[2]):
                limits[name] = value
    for name, value in _amounts(spec.get("overhead")).items():
        if limits.get(name):
            limits[name] += value
    return limits


def _requests_float(pod: Pod) -> dict[str, float]:
    # pod_requests keeps cpu in millicores, the rest in units.
    return {name: value / 1000 if name == "cpu" else float(value)
            for name, value in pod_requests(pod).items()}


def _samples(pods: Iterable[Pod], kind: str) -> Iterator[tuple[list[str], float]]:
    for pod in pods:
        spec = pod.raw.get("spec") or {}
        priority = spec.get("priority")
        shown_priority = "" if priority is None else str(priority)
        amounts = (_requests_float(pod) if kind == "request"
                   else {n: v / NANO for n, v in pod_limits_nano(pod).items()})
        for name, value in sorted(amounts.items()):
            if value:
                yield ([pod.namespace, pod.name, pod.node_name, pod.scheduler_name,
                        shown_priority, name, unit_of(name)], value)


class PodResourceCollector(Collector):
    """The two gauge families over `pods()`, computed at each scrape."""

    def __init__(self, pods: Callable[[], list[Pod]]) -> None:
        self._pods = pods

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pods = self._pods()
        for kind, verb in (("request", "requests"), ("limit", "limits")):
            family = GaugeMetricFamily(f"kube_pod_resource_{kind}", _HELP.format(verb),
                                       labels=LABELS)
            for labels, value in _samples(pods, kind):
                family.add_metric(labels, value)
            yield family


def resources_page(pods: Callable[[], list[Pod]]) -> Callable[[], bytes]:
    """/metrics/resources' body, rendered from `pods()` at each call."""
    registry = CollectorRegistry()
    registry.register(PodResourceCollector(pods))
    return lambda: generate_latest(registry)
