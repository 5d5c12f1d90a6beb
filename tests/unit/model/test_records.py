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
    (lambda d: d["spec"].update(tolerations=[{"operator": "Maybe"}]),
     "spec.tolerations[0].operator", "unsupported operator"),
    (lambda d: d.update(kind="Node"), "kind", "expected 'Pod'"),
])
def test_invalid_pods_name_the_object_and_field(mutate: Any, field: str, message: str) -> None:
    raw = make_pod("bad", "ns").raw()
    mutate(raw)
    with pytest.raises(InvalidObjectError) as e:
        pod_from_dict(raw)
    assert e.value.field == field
    assert message in str(e.value)
    assert e.value.name == "ns/bad"


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
