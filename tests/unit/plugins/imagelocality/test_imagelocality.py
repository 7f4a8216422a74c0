"""ImageLocality: image-size scoring scaled by spread, thresholds, and name normalization."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import pytest

from scheduler.config.errors import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import EnqueueExtensions
from scheduler.framework.node_info import ImageStateSummary, NodeInfo
from scheduler.framework.types import MAX_NODE_SCORE
from scheduler.objects.node import node_images
from scheduler.objects.pod import PodInfo
from scheduler.plugins import names
from scheduler.plugins.imagelocality import (
    MAX_CONTAINER_THRESHOLD,
    MB,
    MIN_THRESHOLD,
    NAME,
    ImageLocality,
    calculate_priority,
    normalized_image_name,
)
from scheduler.plugins.registry import in_tree_registry
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle, node_infos

_DIGEST = "sha256:" + hashlib.sha256(b"app").hexdigest()


def _with_image_states(infos: list[NodeInfo]) -> list[NodeInfo]:
    """Fill ``image_states`` the way the cache does: status.images names as-is, counted per node."""
    spread: Counter[str] = Counter()
    per_node: list[dict[str, int]] = []
    for info in infos:
        assert info.node is not None
        sizes: dict[str, int] = {}
        for image_names, size in node_images(info.node):
            for name in image_names:
                sizes.setdefault(name, size)
        per_node.append(sizes)
        spread.update(sizes.keys())
    for info, sizes in zip(infos, per_node):
        info.image_states = {n: ImageStateSummary(s, spread[n]) for n, s in sizes.items()}
    return infos


def _node(name: str, *images: tuple[list[str] | str, int]) -> dict[str, Any]:
    return NodeBuilder(name).images(*images).obj()


def _pod(*images: str, init: tuple[str, ...] = ()) -> dict[str, Any]:
    b = PodBuilder("p")
    for image in init:
        b.init_container(image=image)
    for image in images:
        b.container(image=image)
    return b.obj()


def test_name_and_registry() -> None:
    plugin = ImageLocality({}, FakeHandle())
    assert NAME == names.IMAGE_LOCALITY == ImageLocality.NAME == plugin.name
    assert in_tree_registry().get(names.IMAGE_LOCALITY) is ImageLocality
    assert plugin.score_extensions() is None
    assert not isinstance(plugin, EnqueueExtensions)  # never rejects a pod


def test_unknown_args_rejected() -> None:
    with pytest.raises(ConfigError, match=r"ImageLocality\.args\.x"):
        ImageLocality({"x": 1}, FakeHandle())


N_APP_DB = [_node("a", ("reg/app:latest", 60 * MB)), _node("b", ("reg/db:latest", 500 * MB))]

SCORE_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, int]]] = [
    # a: 60/2 = 30 MiB -> 100 * 7 / 1977 = 0; b: 500/2 = 250 MiB -> 100 * 227 / 1977 = 11
    ("two images on two nodes, larger wins", _pod("reg/app", "reg/db"), N_APP_DB,
     {"a": 0, "b": 11}),
    # a: (100 + 400) / 2 = 250 MiB -> 11
    ("both images on one node", _pod("reg/app", "reg/db"),
     [_node("a", ("reg/app:latest", 100 * MB), ("reg/db:latest", 400 * MB)), _node("b")],
     {"a": 11, "b": 0}),
    # a: 5000/2 = 2500 MiB, clamped to 2 x 1000 MiB -> 100; b: 10/2 below 23 MiB -> 0
    ("clamped at the max threshold", _pod("reg/big", "reg/small"),
     [_node("a", ("reg/big:latest", 5000 * MB)), _node("b", ("reg/small:latest", 10 * MB))],
     {"a": MAX_NODE_SCORE, "b": 0}),
    # a: 5000/3 MiB -> 100 * (1666.67 - 23) / 1977 = 83
    ("spread over three nodes", _pod("reg/big", "reg/small"),
     [_node("a", ("reg/big:latest", 5000 * MB)), _node("b", ("reg/small:latest", 10 * MB)),
      _node("c")],
     {"a": 83, "b": 0, "c": 0}),
    # spread 2/2: 300 MiB on both -> 100 * 277 / 977 = 28
    ("image everywhere scores the same everywhere", _pod("reg/app"),
     [_node("a", ("reg/app:latest", 300 * MB)), _node("b", ("reg/app:latest", 300 * MB))],
     {"a": 28, "b": 28}),
    # spread 1/2 halves the same image's value: 150 MiB -> 100 * 127 / 977 = 12
    ("image on half the nodes", _pod("reg/app"),
     [_node("a", ("reg/app:latest", 300 * MB)), _node("b")], {"a": 12, "b": 0}),
    # init containers count, and raise the max threshold: 800 MiB / (2 x 1000 MiB) -> 39
    ("init container image counts", _pod("reg/app", init=("reg/tools",)),
     [_node("a", ("reg/tools:latest", 800 * MB))], {"a": 39}),
    # 500/2 = 250 MiB -> 100 * 227 / 977 = 23
    ("tag must match exactly", _pod("reg/app:v2"),
     [_node("a", ("reg/app:v2", 500 * MB)), _node("b", ("reg/app:latest", 500 * MB))],
     {"a": 23, "b": 0}),
    ("untagged pod image does not match a tagged-only node", _pod("reg/app"),
     [_node("a", ("reg/app:v2", 500 * MB))], {"a": 0}),
    ("digest reference matches as is", _pod(f"reg/app@{_DIGEST}"),
     [_node("a", ([f"reg/app@{_DIGEST}", "reg/app:v1"], 500 * MB))], {"a": 48}),  # 477 / 977
    ("registry port is not a tag", _pod("localhost:5000/app"),
     [_node("a", ("localhost:5000/app:latest", 500 * MB))], {"a": 48}),
    # One image, two names used by two containers: counted once per container,
    # 1200 MiB -> 100 * 1177 / 1977 = 59.
    ("two containers share an image under two names", _pod("reg/app", "reg/app:v1"),
     [_node("a", (["reg/app:latest", "reg/app:v1"], 600 * MB))], {"a": 59}),
    ("no images anywhere", _pod("reg/app"), [_node("a"), _node("b")], {"a": 0, "b": 0}),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "want"), [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES]
)
def test_score(pod: dict[str, Any], nodes: list[dict[str, Any]], want: dict[str, int]) -> None:
    infos = _with_image_states(node_infos(nodes))
    plugin = ImageLocality({}, FakeHandle(infos))
    pod_info = PodInfo.from_pod(pod)
    got = {}
    for info in infos:
        score, status = plugin.score(CycleState(), pod_info, info)
        assert status is None
        got[info.name] = score
    assert got == want


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("app", "app:latest"),
        ("gcr.io:5000/app", "gcr.io:5000/app:latest"),
        ("app:tag", "app:tag"),
        (f"app@{_DIGEST}", f"app@{_DIGEST}"),
        ("reg.io/ns/app:1.2", "reg.io/ns/app:1.2"),
        ("", ":latest"),
    ],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want


@pytest.mark.parametrize(
    ("total", "containers", "want"),
    [
        (0, 1, 0),
        (MIN_THRESHOLD, 1, 0),
        (MIN_THRESHOLD + 1, 1, 0),
        (MAX_CONTAINER_THRESHOLD, 1, MAX_NODE_SCORE),
        (MAX_CONTAINER_THRESHOLD * 5, 1, MAX_NODE_SCORE),
        (MAX_CONTAINER_THRESHOLD, 2, 49),  # 100 * 977 / 1977
        ((MIN_THRESHOLD + MAX_CONTAINER_THRESHOLD) // 2, 1, 50),
        (0, 0, 0),  # no containers: no division trouble
    ],
)
def test_calculate_priority(total: int, containers: int, want: int) -> None:
    assert calculate_priority(total, containers) == want
