"""A confirmation or an update that changes nothing a node sums (the binding's echo, the
kubelet's status writes) puts the new pod in the held one's place instead of taking the
node's sums apart and back: the node must end exactly as a cache that only ever added the
final pods, hold the new pod object, and show a new generation (the snapshot takes it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.cache import Cache, Snapshot
from scheduler.objects.pod import PodInfo
from tests.builders import NodeBuilder, PodBuilder
from tests.unit.cache.test_assume_symmetry import exact_view


def _neighbour() -> dict[str, Any]:
    return (PodBuilder("neighbour").uid("u-n").node("a").req(cpu="100m").host_port(80)
            .pvc("c1").resource_version(1).obj())


def _subject() -> PodBuilder:
    return (PodBuilder("subject").uid("u-s").node("a").req(cpu="500m", memory="1Gi")
            .host_port(8080).pvc("c1").resource_version(1))


def _started(pod: dict[str, Any]) -> None:
    pod["status"] = {"phase": "Running", "containerStatuses": [
        {"name": "c0", "containerID": "x://1", "state": {"running": {}}}]}


# (what the newer version changes, whether the node's sums stay the same)
CASES: list[tuple[str, Callable[[dict[str, Any]], None], bool]] = [
    ("nothing but the resourceVersion", lambda p: None, True),
    ("the kubelet's status", _started, True),
    ("labels", lambda p: p["metadata"].__setitem__("labels", {"app": "x"}), True),
    ("requests", lambda p: p["spec"]["containers"][0]["resources"]["requests"].__setitem__(
        "cpu", "2"), False),
    ("a resize reported", lambda p: p.__setitem__("status", {"containerStatuses": [
        {"name": "c0", "allocatedResources": {"cpu": "3"}}]}), False),
    ("host port gone", lambda p: p["spec"]["containers"][0].pop("ports"), False),
    ("PVC gone", lambda p: p["spec"].pop("volumes"), False),
    ("anti-affinity added", lambda p: p["spec"].__setitem__("affinity", {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}},
             "topologyKey": "kubernetes.io/hostname"}]}}), False),
]


@pytest.mark.parametrize("confirm", [True, False], ids=["confirm", "update"])
@pytest.mark.parametrize(("label", "change", "same"), CASES, ids=[c[0] for c in CASES])
def test_replace_in_place_ends_as_a_fresh_add(
    label: str, change: Callable[[dict[str, Any]], None], same: bool, confirm: bool
) -> None:
    cache = Cache()
    cache.add_node(NodeBuilder("a").capacity(cpu="8", memory="32Gi", pods=110).obj())
    cache.add_pod(PodInfo.from_pod(_neighbour()))
    first = _subject().obj()
    if confirm:
        cache.assume_pod(PodInfo.from_pod(first))
    else:
        cache.add_pod(PodInfo.from_pod(first))
    node = cache.get_node_info("a")
    assert node is not None
    before = exact_view(node)
    generation = node.generation

    newer = _subject().resource_version(2).obj()
    change(newer)
    info = PodInfo.from_pod(newer)
    if confirm:
        cache.add_pod(info)
    else:
        cache.update_pod(first, info)

    fresh = Cache()
    fresh.add_node(NodeBuilder("a").capacity(cpu="8", memory="32Gi", pods=110).obj())
    fresh.add_pod(PodInfo.from_pod(_neighbour()))
    fresh.add_pod(PodInfo.from_pod(newer))
    node = cache.get_node_info("a")  # a copy: taken again
    assert node is not None
    after, expected = exact_view(node), exact_view(fresh.get_node_info("a"))
    assert after is not None and expected is not None
    # the pods' order on the node is no part of what it sums
    for view in (after, expected):
        for name in ("pods", "affinity", "anti"):
            view[name] = sorted(view[name])
    assert after == expected
    assert before is not None
    for name in ("pods", "affinity", "anti"):
        before[name] = sorted(before[name])
    assert (after == before) is same
    assert [p.pod for p in node.pods if p.uid == "u-s"] == [newer]
    assert node.generation > generation
    assert not cache.is_assumed_pod(newer)
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    held = snapshot.get("a")
    assert held is not None and newer in [p.pod for p in held.pods]


def _scheduled(pod: dict[str, Any]) -> None:
    pod["status"] = {**(pod.get("status") or {}),
                     "conditions": [{"type": "PodScheduled", "status": "True"}]}


# (what the newer version changes, whether every plugin reads the node alike after it)
READS: list[tuple[str, Callable[[dict[str, Any]], None], bool]] = [
    ("nothing but the resourceVersion", lambda p: None, True),
    ("the binding's PodScheduled condition", _scheduled, True),
    ("the kubelet's Running phase", _started, False),
    ("labels", lambda p: p["metadata"].__setitem__("labels", {"app": "x"}), False),
    ("annotations", lambda p: p["metadata"].__setitem__("annotations", {"a": "b"}), False),
    ("deletionTimestamp", lambda p: p["metadata"].__setitem__(
        "deletionTimestamp", "2026-01-01T00:00:00Z"), False),
    ("nominatedNodeName", lambda p: p.setdefault("status", {}).__setitem__(
        "nominatedNodeName", "b"), False),
    ("a status field no plugin is known not to read", lambda p: p.setdefault(
        "status", {}).__setitem__("someNewField", "x"), False),
    ("a toleration (spec)", lambda p: p["spec"].__setitem__(
        "tolerations", [{"key": "k", "operator": "Exists"}]), False),
    ("requests", lambda p: p["spec"]["containers"][0]["resources"]["requests"].__setitem__(
        "cpu", "2"), False),
]


@pytest.mark.parametrize("confirm", [True, False], ids=["confirm", "update"])
@pytest.mark.parametrize(("label", "change", "alike"), READS, ids=[c[0] for c in READS])
def test_a_swap_that_reads_alike_keeps_the_plugin_generation_and_logs_no_change(
    label: str, change: Callable[[dict[str, Any]], None], alike: bool, confirm: bool
) -> None:
    """The snapshot always takes the new pod object (its generation moves), but the
    node's ``plugin_generation`` and the change log (what results kept per node across
    cycles read) move only when some plugin can read the node differently."""
    cache = Cache()
    cache.add_node(NodeBuilder("a").capacity(cpu="8", memory="32Gi", pods=110).obj())
    cache.add_node(NodeBuilder("b").capacity(cpu="8", memory="32Gi", pods=110).obj())
    first = _subject().obj()
    if confirm:
        cache.assume_pod(PodInfo.from_pod(first))
    else:
        cache.add_pod(PodInfo.from_pod(first))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    held = snapshot.get("a")
    assert held is not None
    generation, plugin_generation = held.generation, held.plugin_generation
    serial, generations = snapshot.change_serial, list(snapshot.generations())

    newer = _subject().resource_version(2).obj()
    change(newer)
    if confirm:
        cache.add_pod(PodInfo.from_pod(newer))
    else:
        cache.update_pod(first, PodInfo.from_pod(newer))
    cache.update_snapshot(snapshot)

    assert snapshot.get("a") is held and newer in [p.pod for p in held.pods]
    # the copy is the cache's node, whether copied whole or only its pods taken
    assert exact_view(held) == exact_view(cache.get_node_info("a"))
    assert [p.pod for p in held.pods] == [p.pod for p in cache.get_node_info("a").pods]
    assert held.generation > generation
    assert (held.plugin_generation == plugin_generation) is alike
    assert (snapshot.changed_positions_since(serial) == []) is alike
    assert (snapshot.generations() == generations) is alike
    if not alike:
        assert snapshot.changed_positions_since(serial) == [snapshot.positions["a"]]
