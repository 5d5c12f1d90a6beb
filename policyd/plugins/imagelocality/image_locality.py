"""ImageLocality: prefer nodes that already hold the pod's images, so pods start sooner.

Each image found on a node adds its size scaled by how widely it is spread (the share
of all nodes holding it), which keeps a big image present on one node from drawing
every pod there. The sum is clamped to [23 MiB, 1000 MiB x number of containers] and
mapped linearly onto 0..100.

As in kube-scheduler 1.36 the images are the init containers', the containers' and
the image volumes' (`spec.volumes[].image.reference`), while the upper bound counts
only init containers and containers (kubernetes/kubernetes#138952, fixed after 1.36.0:
image volumes raise the sum but not the bound). The number of nodes is every node of
the snapshot, not only the feasible ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from policyd.framework import MAX_NODE_SCORE, CycleState, PluginError, Status
from policyd.model.node_info import NodeInfo
from policyd.model.records import Pod
from policyd.model.table import IntArray, NodeTable
from policyd.plugins import names
from policyd.problems import field_problem

DEFAULT_WEIGHT = 1

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB

_PRE_SCORE_KEY = "ImageLocality/spread"
_COUNTS_KEY = "ImageLocality/node_counts"
_POD_CACHE_KEY = "ImageLocality/images"


def normalized_image_name(name: str) -> str:
    """Add the implicit `:latest` when the reference has neither tag nor digest (a ':'
    before the last '/' is a registry port, not a tag)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def pod_images(pod: Pod) -> tuple[tuple[str, ...], int]:
    """(normalized image names, one per init container, container and image volume, in
    that order; the number of init containers and containers). Memoized on the pod."""
    cached = pod.cache.get(_POD_CACHE_KEY)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    images = [normalized_image_name(c.image) for c in pod.init_containers]
    images.extend(normalized_image_name(c.image) for c in pod.containers)
    spec = pod.raw.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    for volume in volumes if isinstance(volumes, list) else ():
        image = volume.get("image") if isinstance(volume, Mapping) else None
        reference = image.get("reference") if isinstance(image, Mapping) else None
        if isinstance(reference, str):
            images.append(normalized_image_name(reference))
    result = (tuple(images), len(pod.init_containers) + len(pod.containers))
    pod.cache[_POD_CACHE_KEY] = result
    return result


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def _node_counts(state: CycleState, images: Sequence[str],
                 all_nodes: Sequence[NodeInfo]) -> dict[str, int]:
    """How many nodes hold each image, counted once per image per cycle."""
    counts: dict[str, int] | None = state.get(_COUNTS_KEY)
    if counts is None:
        counts = {}
        state.write(_COUNTS_KEY, counts)
    table = state.table
    for image in images:
        if image not in counts:
            if table is not None:
                counts[image] = table.image_count(image)
            else:
                counts[image] = sum(1 for n in all_nodes if image in n.node.images)
    return counts


def _spread(state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
            ) -> tuple[tuple[tuple[str, float], ...], int]:
    """(image, share of nodes holding it) for each of the pod's images present on some
    node, and the number of containers the upper bound counts."""
    images, num_containers = pod_images(pod)
    # The snapshot's nodes; a state built without them (unit use) counts `nodes`.
    all_nodes = state.all_nodes or nodes
    total = len(all_nodes)
    counts = _node_counts(state, images, all_nodes)
    spread = tuple((image, counts[image] / total) for image in images if counts[image])
    return spread, num_containers


class ImageLocality:
    name = names.IMAGE_LOCALITY

    def pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        spread, num_containers = _spread(state, pod, nodes)
        if not spread:
            # No node has any of the images: every score would be 0.
            return Status.skip()
        state.write(_PRE_SCORE_KEY, (spread, num_containers))
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        pre = state.get(_PRE_SCORE_KEY)
        if pre is None:  # PreScore did not run; upstream computes it all in Score
            pre = _spread(state, pod, (node,))
        spread, num_containers = pre
        have = node.node.images
        total = 0
        for image, share in spread:
            size = have.get(image)
            if size is not None:
                # Same float64 arithmetic as upstream, truncated like Go's int64().
                total += int(size * share)
        return calculate_priority(total, num_containers)


    def score_vector(self, state: CycleState, pod: Pod, table: NodeTable,
                     idx: IntArray) -> IntArray | None:
        pre = state.get(_PRE_SCORE_KEY)
        if pre is None:
            return None
        spread, num_containers = pre
        total = np.zeros(idx.size, np.int64)
        for image, share in spread:
            sizes = table.image_sizes(image)[idx]
            # float64 product truncated toward zero, as Go's int64(float64) and int().
            total += np.where(sizes >= 0, (sizes * share).astype(np.int64), 0)
        max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
        clipped = np.clip(total, MIN_THRESHOLD, max_threshold)
        scores: IntArray = (MAX_NODE_SCORE * (clipped - MIN_THRESHOLD)
                            // (max_threshold - MIN_THRESHOLD))
        return scores


def new(args: Mapping[str, Any] | None = None) -> ImageLocality:
    if args:
        raise PluginError(names.IMAGE_LOCALITY, [field_problem("",
                                                               "ImageLocality takes no arguments")])
    return ImageLocality()
