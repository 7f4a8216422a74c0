"""NodeInfo.sync_into: a copy synced by replaying the pod-list changes logged since its last
sync is what a whole copy (``copy_into``) would be, pod objects and order included, whatever
the changes (appends, removals and replacements anywhere), however many copies are synced
from one NodeInfo, and past the log's limit."""

from __future__ import annotations

import random

import pytest

from scheduler.framework import node_info as node_info_module
from scheduler.framework.node_info import NodeInfo
from scheduler.objects.pod import PodInfo
from tests.builders import make_node, make_pod


def _info(name: str, *, label: str = "v1", affinity: bool = False) -> PodInfo:
    pod = make_pod(name, cpu="100m", node="node")
    pod["metadata"]["uid"] = f"uid-{name}"
    pod["metadata"]["labels"] = {"version": label}
    if affinity:
        pod["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"version": "v1"}},
             "topologyKey": "kubernetes.io/hostname"}]}}
    return PodInfo.from_pod(pod)


def _view(info: NodeInfo) -> tuple[object, ...]:
    return (list(map(id, info.pods)), list(map(id, info.pods_with_affinity)),
            list(map(id, info.pods_with_required_anti_affinity)), info.generation,
            info.plugin_generation, info.requested.milli_cpu)


def _change(node: NodeInfo, rng: random.Random, serial: list[int]) -> None:
    pods = node.pods
    step = rng.random()
    if step < 0.45 or not pods:
        serial[0] += 1
        node.add_pod(_info(f"p{serial[0]}", affinity=rng.random() < 0.1))
    elif step < 0.75:
        node.remove_pod(rng.choice(pods).pod)
    else:
        held = rng.choice(pods)
        name = held.pod["metadata"]["name"]
        new = _info(name, label="v2", affinity=held.has_affinity)
        assert node.replace_pod(new, reads_alike=rng.random() < 0.5)


@pytest.mark.parametrize("seed", range(6))
def test_synced_copies_are_whole_copies(seed: int) -> None:
    rng = random.Random(seed)
    node = NodeInfo(make_node("node"))
    serial = [0]
    for _ in range(rng.randrange(0, 60)):
        _change(node, rng, serial)
    copies = [node.clone() for _ in range(2)]
    replays = with_affinity = 0
    for _ in range(400):
        for _ in range(rng.choice((0, 1, 1, 2, 5, 40))):
            _change(node, rng, serial)
        target = copies[0] if rng.random() < 0.8 else copies[1]
        lists = target.pods
        node.sync_into(target)
        assert _view(target) == _view(node)
        assert target.pods is not node.pods
        # Replayed: the copy's own list changed in place (else a new whole copy).
        replays += target.pods is lists
        with_affinity += bool(target.pods_with_affinity)
    assert replays > 200 and with_affinity > 0


def test_pods_swapped_alike_sync_only_the_pod_lists() -> None:
    node = NodeInfo(make_node("node"))
    for i in range(10):
        node.add_pod(_info(f"p{i}"))
    copy = node.clone()
    node.sync_into(copy)
    plugin_generation = node.plugin_generation
    new = _info("p3", label="v2")
    assert node.replace_pod(new, reads_alike=True)
    assert node.plugin_generation == plugin_generation
    node.sync_pods_into(copy)
    assert copy.pods[3] is new and _view(copy) == _view(node)


def test_a_copy_not_synced_past_the_log_limit_is_copied_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_info_module, "_POD_LOG_LIMIT", 4)
    node = NodeInfo(make_node("node"))
    for i in range(20):
        node.add_pod(_info(f"p{i}"))
    copy = node.clone()
    node.sync_into(copy)
    for i in range(20, 26):
        node.add_pod(_info(f"p{i}"))
    assert node._pod_log is None  # stopped logging at the limit
    lists = copy.pods
    node.sync_into(copy)
    assert copy.pods is not lists and _view(copy) == _view(node)


def test_clones_log_nothing() -> None:
    node = NodeInfo(make_node("node"))
    node.add_pod(_info("a"))
    copy = node.clone()
    node.sync_into(copy)
    clone = copy.clone()
    clone.add_pod(_info("b"))
    assert copy._pod_log is None and clone._pod_log is None
