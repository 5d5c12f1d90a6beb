from __future__ import annotations

from typing import Any

import pytest

from policyd.errors import InvalidObjectError
from policyd.model.records import Taint, Toleration, node_from_dict, pod_from_dict
from tests.builders import make_node, make_pod


def test_pod_fields_are_decoded() -> None:
    pod = (make_pod("web", "shop").labels(app="web").priority(10).scheduler("policyd")
           .toleration("k", "v", "NoSchedule").host_port(8080).obj())
    assert pod.key == "shop/web"
    assert pod.labels == {"app": "web"}
    assert pod.priority == 10 and pod.scheduler_name == "policyd"
    assert pod.tolerations == (Toleration("k", "Equal", "v", "NoSchedule"),)
    assert [p.port for c in pod.containers for p in c.ports] == [8080]
    assert pod.containers[0].ports[0].host_ip == "0.0.0.0"


def test_scheduler_name_defaults_like_the_api_server() -> None:
    assert make_pod().obj().scheduler_name == "default-scheduler"


@pytest.mark.parametrize(("mutate", "field", "message"), [
    (lambda d: d["spec"].pop("containers"), "spec.containers", "at least one container"),
    (lambda d: d["spec"]["containers"][0].update(resources={"requests": {"cpu": "lots"}}),
     "spec.containers[0].resources.requests.cpu", "invalid quantity 'lots'"),
    (lambda d: d["metadata"].update(labels={"a": 1}), "metadata.labels.a", "must be a string"),
    (lambda d: d["spec"].update(priority="high"), "spec.priority", "must be an integer"),
    (lambda d: d["spec"].update(priority=2**31), "spec.priority",
     "2147483648 is out of range for an int32 (-2147483648 to 2147483647)"),
    (lambda d: d["spec"].update(priority=-(2**31) - 1), "spec.priority",
     "out of range for an int32"),
    (lambda d: d["spec"].update(priority=10**400), "spec.priority",
     "a very long integer is out of range for an int32"),
    (lambda d: d["spec"].update(nodeSelector={"ssd": True}), "spec.nodeSelector.ssd",
     'must be a string, not a boolean (quote it: "true")'),
    (lambda d: d["spec"]["containers"][0].update(ports=[{"containerPort": 2**32}]),
     "spec.containers[0].ports[0].containerPort", "out of range for an int32"),
    (lambda d: d["spec"]["containers"][0].update(
        resources={"requests": {"memory": "9223372036854775808"}}),
     "spec.containers[0].resources.requests.memory", "larger than 2^63-1"),
    (lambda d: d["spec"].update(tolerations=[{"operator": "Maybe"}]),
     "spec.tolerations[0].operator", "unsupported operator"),
    (lambda d: d.update(kind="Node"), "kind", "expected 'Pod'"),
    (lambda d: d["status"].update(resources={"requests": {"cpu": "lots"}}),
     "status.resources.requests.cpu", "invalid quantity 'lots'"),
    (lambda d: d["status"].update(resources=[]), "status.resources", "must be an object"),
    (lambda d: d["status"].update(allocatedResources={"memory": "-1Gi"}),
     "status.allocatedResources.memory", "must not be negative"),
    (lambda d: d["status"].update(conditions=["PodResizePending"]),
     "status.conditions[0]", "must be an object"),
    (lambda d: d["status"].update(conditions=[{"type": "PodResizePending", "reason": 1}]),
     "status.conditions[0].reason", "must be a string"),
    (lambda d: d["status"].update(containerStatuses=[
        {"name": d["spec"]["containers"][0]["name"], "resources": "big"}]),
     "status.containerStatuses[0].resources", "must be an object"),
])
def test_invalid_pods_name_the_object_and_field(mutate: Any, field: str, message: str) -> None:
    raw = make_pod("bad", "ns").raw()
    mutate(raw)
    with pytest.raises(InvalidObjectError) as e:
        pod_from_dict(raw)
    assert e.value.field == field
    assert message in str(e.value)
    assert e.value.name == "ns/bad"


def test_priority_at_the_int32_limits_is_kept() -> None:
    assert make_pod().priority(2**31 - 1).obj().priority == 2**31 - 1
    assert make_pod().priority(-(2**31)).obj().priority == -(2**31)


@pytest.mark.parametrize(("path", "value", "message"), [
    ("status.images[0].sizeBytes", 2**63, "out of range for an int64"),
    ("status.allocatable.memory", "1e19", "larger than 2^63-1"),
    ("status.allocatable.cpu", "1e30", "larger than 2^63-1"),
])
def test_node_numbers_beyond_int64_are_refused(path: str, value: Any, message: str) -> None:
    raw = make_node("n1").image(100, "a:1").raw()
    if path.startswith("status.images"):
        raw["status"]["images"][0]["sizeBytes"] = value
    else:
        raw["status"]["allocatable"][path.rsplit(".", 1)[1]] = value
    with pytest.raises(InvalidObjectError) as e:
        node_from_dict(raw)
    assert e.value.field == path
    assert message in str(e.value)


def test_pod_without_name() -> None:
    with pytest.raises(InvalidObjectError) as e:
        pod_from_dict({"kind": "Pod", "metadata": {}, "spec": {}})
    assert e.value.field == "metadata.name"


def test_node_fields_and_errors() -> None:
    node = make_node("n1").taint("dedicated", "gpu", "NoExecute").image(100, "a:1", "a@sha").obj()
    assert node.taints == (Taint("dedicated", "gpu", "NoExecute"),)
    assert node.allocatable["cpu"] == 4000 and node.allocatable["pods"] == 110
    assert node.images == {"a:1": 100, "a@sha": 100}
    raw = make_node("n2").raw()
    raw["spec"]["taints"] = [{"key": "k", "effect": "Sometimes"}]
    with pytest.raises(InvalidObjectError) as e:
        node_from_dict(raw)
    assert e.value.field == "spec.taints[0].effect"


def test_toleration_semantics() -> None:
    taint = Taint("k", "v", "NoSchedule")
    assert Toleration("k", "Equal", "v", "NoSchedule").tolerates(taint)
    assert not Toleration("k", "Equal", "other", "NoSchedule").tolerates(taint)
    assert Toleration("k", "Exists", "", "").tolerates(taint)
    assert Toleration("", "Exists", "", "").tolerates(taint)  # tolerates everything
    assert not Toleration("k", "Exists", "", "NoExecute").tolerates(taint)
    assert not Toleration("K", "Exists", "", "").tolerates(taint)  # keys are case-sensitive
