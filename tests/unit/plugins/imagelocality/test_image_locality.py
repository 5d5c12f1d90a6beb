"""ImageLocality, with the cases of upstream's image_locality_test.go."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest

from policyd.framework import Code, CycleState, PluginError
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.plugins import names
from policyd.plugins.imagelocality.image_locality import (
    DEFAULT_WEIGHT,
    MB,
    calculate_priority,
    new,
    normalized_image_name,
)
from tests.builders import make_node, make_pod

# Node image lists as upstream's test declares them: (names, size).
Images = list[tuple[list[str], int]]

NODE_40_300_2000: Images = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
    (["gcr.io/2000:latest"], 2000 * MB),
]
NODE_250_10: Images = [
    (["gcr.io/250:latest"], 250 * MB),
    (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB),
]
NODE_600_40_900: Images = [
    (["gcr.io/600:latest"], 600 * MB), (["gcr.io/40:latest"], 40 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_300_600_900: Images = [
    (["gcr.io/300:latest"], 300 * MB), (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_4000_30: Images = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]
NODE_20_30_40: Images = [
    (["gcr.io/20:latest"], 20 * MB), (["gcr.io/30:latest"], 30 * MB),
    (["gcr.io/40:latest"], 40 * MB),
]
NO_IMAGES: Images = []


def pod_with(containers: Sequence[str], init: Sequence[str] = (),
             volumes: Sequence[str] = ()) -> Pod:
    spec_containers = [{"name": f"c{i}", "image": img} for i, img in enumerate(containers)]
    b = make_pod().set("spec.containers", spec_containers)
    if init:
        b = b.set("spec.initContainers",
                  [{"name": f"i{i}", "image": img} for i, img in enumerate(init)])
    if volumes:
        b = b.set("spec.volumes", [{"name": f"v{i}", "image": {"reference": ref}}
                                   for i, ref in enumerate(volumes)])
    return b.obj()


def node_with(name: str, images: Images) -> NodeInfo:
    b = make_node(name)
    for image_names, size in images:
        b = b.image(size, *image_names)
    return NodeInfo(b.obj())


def run_scores(pod: Pod, nodes: list[NodeInfo]) -> dict[str, int]:
    """PreScore then Score per node (ImageLocality has no NormalizeScore); a Skip
    from PreScore means the plugin adds nothing, i.e. 0 everywhere."""
    plugin = new()
    state = CycleState(nodes)
    status = plugin.pre_score(state, pod, nodes)
    if status is not None:
        assert status.code is Code.SKIP
        return {n.name: 0 for n in nodes}
    return {n.name: plugin.score(state, pod, n) for n in nodes}


@pytest.mark.parametrize(
    ("name", "pod", "nodes", "want"),
    [
        # 40M/2 < 23M -> 0; 100 * (250M/2 - 23M) / (1000M*2 - 23M) = 5
        ("two images spread on two nodes, prefer the larger image one",
         pod_with(["gcr.io/40", "gcr.io/250"]),
         [("node1", NODE_40_300_2000), ("node2", NODE_250_10)], {"node1": 0, "node2": 5}),
        # 100 * ((40M + 300M)/2 - 23M) / (1000M*2 - 23M) = 7
        ("two images on one node, prefer this node",
         pod_with(["gcr.io/40", "gcr.io/300"]),
         [("node1", NODE_40_300_2000), ("node2", NODE_250_10)], {"node1": 7, "node2": 0}),
        # 4000M/2 >= 1000M*2 -> max
        ("if exceed limit, use limit",
         pod_with(["gcr.io/10", "gcr.io/4000"]),
         [("node1", NODE_4000_30), ("node2", NODE_250_10)], {"node1": 100, "node2": 0}),
        # 100 * (4000M/3 - 23M) / (1000M*2 - 23M) = 66
        ("if exceed limit, use limit (with node which has no images present)",
         pod_with(["gcr.io/10", "gcr.io/4000"]),
         [("node1", NODE_4000_30), ("node2", NODE_250_10), ("node3", NO_IMAGES)],
         {"node1": 66, "node2": 0, "node3": 0}),
        # node1: 100 * (600M*2/3 + 900M*2/3 - 23M) / (1000M*3 - 23M) = 32
        # node2: 100 * (300M/3 + 600M*2/3 + 900M*2/3 - 23M) / (1000M*3 - 23M) = 36
        ("pod with multiple large images, node2 is preferred",
         pod_with(["gcr.io/300", "gcr.io/600", "gcr.io/900"]),
         [("node1", NODE_600_40_900), ("node2", NODE_300_600_900), ("node3", NO_IMAGES)],
         {"node1": 32, "node2": 36, "node3": 0}),
        # node1: 100 * (30M + 40M/2 - 23M) / (1000M*2 - 23M) = 1
        ("pod with multiple small images",
         pod_with(["gcr.io/30", "gcr.io/40"]),
         [("node1", NODE_20_30_40), ("node2", NODE_4000_30)], {"node1": 1, "node2": 0}),
        # node1: 100 * (300M/2 - 23M) / (1000M*2 - 23M) = 6
        ("include InitContainers: two images spread on two nodes, prefer the larger one",
         pod_with(["gcr.io/30"], init=["gcr.io/300"]),
         [("node1", NODE_40_300_2000), ("node2", NODE_20_30_40)], {"node1": 6, "node2": 0}),
        # Image volumes (1.36): they add to the sum, but the bound counts only the one
        # container: 100 * (300M/2 - 23M) / (1000M - 23M) = 12 (kubernetes#138952).
        ("image volume counts in the sum, not in the bound",
         pod_with(["gcr.io/30"], volumes=["gcr.io/300"]),
         [("node1", NODE_40_300_2000), ("node2", NODE_20_30_40)], {"node1": 12, "node2": 0}),
        ("no node has any of the images: PreScore skips",
         pod_with(["gcr.io/nothing"]),
         [("node1", NODE_40_300_2000), ("node2", NODE_20_30_40)], {"node1": 0, "node2": 0}),
    ],
)
def test_score(name: str, pod: Pod, nodes: list[tuple[str, Images]],
               want: dict[str, int]) -> None:
    assert run_scores(pod, [node_with(n, imgs) for n, imgs in nodes]) == want


def test_spread_counts_every_node_of_the_snapshot() -> None:
    # Only node1 is feasible, but the image is on 1 of 3 nodes of the snapshot:
    # 100 * (2000M/3 - 23M) / (1000M - 23M) = 65.
    pod = pod_with(["gcr.io/2000"])
    all_nodes = [node_with("node1", NODE_40_300_2000), node_with("node2", NO_IMAGES),
                 node_with("node3", NO_IMAGES)]
    plugin = new()
    state = CycleState(all_nodes)
    assert plugin.pre_score(state, pod, all_nodes[:1]) is None
    assert plugin.score(state, pod, all_nodes[0]) == 65


def test_score_without_pre_score() -> None:
    pod = pod_with(["gcr.io/250"])
    nodes = [node_with("node1", NODE_250_10), node_with("node2", NO_IMAGES)]
    # 100 * (250M/2 - 23M) / (1000M - 23M) = 10
    assert new().score(CycleState(nodes), pod, nodes[0]) == 10


def _digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(
    ("name", "image", "want"),
    [
        ("add :latest postfix 1", "root", "root:latest"),
        ("add :latest postfix 2", "gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("keep it as is 1", "root:tag", "root:tag"),
        ("keep it as is 2", "root@" + _digest("root"), "root@" + _digest("root")),
    ],
)
def test_normalized_image_name(name: str, image: str, want: str) -> None:
    assert normalized_image_name(image) == want


@pytest.mark.parametrize(
    ("total", "containers", "want"),
    [(0, 1, 0), (23 * MB, 1, 0), (1000 * MB, 1, 100), (5000 * MB, 1, 100),
     (2000 * MB, 2, 100), (1000 * MB, 2, 49)],
)
def test_calculate_priority(total: int, containers: int, want: int) -> None:
    assert calculate_priority(total, containers) == want


def test_factory() -> None:
    assert DEFAULT_WEIGHT == 1
    assert new(None).name == names.IMAGE_LOCALITY
    assert not hasattr(new(), "normalize_score")
    with pytest.raises(PluginError):
        new({"x": 1})
