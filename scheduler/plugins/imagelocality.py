"""ImageLocality: prefer nodes that already hold the pod's container images.

Each of the pod's images (init containers included) found on the node adds its size scaled by
the share of nodes holding it, so an image present everywhere counts for little (this avoids
piling pods on the few nodes that pulled an image first).  The sum is clamped between 23 MiB
and 1000 MiB per container and mapped linearly onto 0..100.  Score only: it never rejects a
pod, so it registers no events and needs no normalization.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from operator import attrgetter
from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Handle, ScoreExtensions, ScorePlugin
from scheduler.framework.node_info import ImageStateSummary, NodeInfo
from scheduler.framework.status import Status
from scheduler.framework.types import MAX_NODE_SCORE
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.helper import go_div, validate_no_args

NAME = names.IMAGE_LOCALITY

MB = 1024 * 1024
# Bounds of the image-size range that maps onto scores: most registry images fall inside.
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """The name as the container runtime reports it: ``:latest`` added when untagged.

    A ``:`` before the last ``/`` is a registry port, not a tag; a digest (``@sha256:...``)
    already has a ``:`` after the last ``/``, so it is left alone.
    """
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def scaled_image_score(state: ImageStateSummary, total_num_nodes: int) -> int:
    """Image size times the fraction of nodes holding it (float, truncated as upstream)."""
    spread = float(state.num_nodes) / float(total_num_nodes)
    return int(float(state.size) * spread)


_IMAGE_STATES = attrgetter("image_states")


def _container_images(pod: Mapping[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    images: list[str] = []
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or ():
            image = (container.get("image")
                     if type(container) is dict or isinstance(container, Mapping) else None)
            images.append(image if isinstance(image, str) else "")
    return images


def sum_image_scores(node_info: NodeInfo, images: list[str], total_num_nodes: int) -> int:
    total = 0
    states = node_info.image_states
    if not states or total_num_nodes <= 0:
        return 0
    for image in images:
        state = states.get(normalized_image_name(image))
        if state is not None:
            total += scaled_image_score(state, total_num_nodes)
    return total


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """Clamp ``sum_scores`` to [min, max threshold] and map it linearly onto 0..100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return go_div(MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)


class ImageLocality(ScorePlugin):
    NAME = NAME

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        validate_no_args(NAME, args)
        self._handle = handle
        # The last pod's images: (its PodInfo, the list).  A cycle reads them twice (sign,
        # then Score); a PodInfo's pod is never changed, and holding it keeps its id.
        self._last: tuple[PodInfo | None, list[str]] = (None, [])

    def _images(self, pod_info: PodInfo) -> list[str]:
        last = self._last
        if last[0] is pod_info:
            return last[1]
        images = _container_images(pod_info.pod)
        self._last = (pod_info, images)
        return images

    def sign(self, pod_info: PodInfo) -> Hashable:
        """The fields Score reads of the pod (opportunistic batching)."""
        return tuple(self._images(pod_info))

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]:
        total_num_nodes = len(self._handle.snapshot().list())
        images = _container_images(pod_info.pod)
        return calculate_priority(
            sum_image_scores(node_info, images, total_num_nodes), len(images)
        ), None

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[list[int], Status | None]:
        images = self._images(pod_info)
        # Nodes that report no images at all (common on simulated and minimal nodes) score
        # the minimum without looking anything up.
        if not any(map(_IMAGE_STATES, nodes)):
            floor = calculate_priority(0, len(images))
            return [floor] * len(nodes), None
        total_num_nodes = len(self._handle.snapshot().list())
        return [
            calculate_priority(sum_image_scores(node_info, images, total_num_nodes), len(images))
            for node_info in nodes
        ], None

    def score_extensions(self) -> ScoreExtensions | None:
        return None
