"""Incremental snapshots and the zone-interleaved node order."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cache import Cache, NodeTree, Snapshot, zone_key
from scheduler.objects.pod import PodInfo
from tests.builders import PodBuilder, make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def zoned(name: str, zone: str = "", region: str = "") -> dict[str, Any]:
    labels = {}
    if zone:
        labels[ZONE] = zone
    if region:
        labels[REGION] = region
    return make_node(name, labels=labels)


# --- NodeTree ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        pytest.param([], [], id="empty"),
        pytest.param([("a", "")], ["a"], id="no-zone"),
        pytest.param(
            [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c")],
            ["a1", "b1", "c1", "a2", "c2", "a3"],
            id="round-robin",
        ),
        pytest.param([("x", "z"), ("y", ""), ("w", "z")], ["x", "y", "w"], id="unlabelled-zone"),
    ],
)
def test_node_tree_lists_round_robin(nodes: list[tuple[str, str]], expected: list[str]) -> None:
    tree = NodeTree(zoned(n, z) for n, z in nodes)
    assert tree.list() == expected
    assert tree.num_nodes == len(expected)


def test_node_tree_update_moves_zone_and_remove_drops_empty_zone() -> None:
    tree = NodeTree([zoned("a1", "a"), zoned("b1", "b")])
    tree.update_node(zoned("a1", "a"), zoned("a1", "b"))
    assert tree.zones() == [zone_key(zoned("b1", "b"))]
    assert tree.list() == ["b1", "a1"]
    assert tree.remove_node(zoned("b1", "b"))
    assert not tree.remove_node(zoned("b1", "b"))
    assert not tree.add_node(zoned("a1", "b"))  # already there
    assert tree.list() == ["a1"]
    assert tree.num_nodes == 1


def test_zone_key_uses_region_and_beta_labels() -> None:
    beta = make_node("n", labels={"failure-domain.beta.kubernetes.io/zone": "z1"})
    assert zone_key(beta) == zone_key(zoned("m", "z1"))
    assert zone_key(zoned("n", "z1", "r1")) != zone_key(zoned("n", "z1", "r2"))
    assert zone_key(make_node("n")) == ""


# --- Snapshot ----------------------------------------------------------------------------------


def test_snapshot_list_follows_zone_order() -> None:
    cache = Cache()
    for name, zone in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")]:
        cache.add_node(zoned(name, zone))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert [i.name for i in snapshot.list()] == ["a1", "b1", "a2", "b2"]
    assert snapshot.num_nodes() == 4 and len(snapshot) == 4


def test_only_changed_nodes_are_copied() -> None:
    cache = Cache()
    for i in range(5):
        cache.add_node(make_node(f"n{i}"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    before = {i.name: (i, i.pods, i.requested) for i in snapshot.list()}
    node_list = snapshot.list()
    cache.add_pod(PodInfo.from_pod(make_pod("p", cpu="1", node="n3")))
    cache.update_snapshot(snapshot)
    assert snapshot.list() is node_list  # no node added/removed: list kept
    for info in snapshot.list():
        obj, pods, requested = before[info.name]
        assert info is obj  # same object, refreshed in place
        if info.name == "n3":
            assert pods is not info.pods and info.requested.milli_cpu == 1000
        else:
            assert pods is info.pods and requested is info.requested
    generation = snapshot.generation
    cache.update_snapshot(snapshot)  # nothing changed
    assert snapshot.generation == generation


def test_lists_rebuilt_when_nodes_come_and_go() -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    first = snapshot.list()
    cache.add_node(make_node("n2"))
    cache.update_snapshot(snapshot)
    assert snapshot.list() is not first
    assert sorted(i.name for i in snapshot.list()) == ["n1", "n2"]
    cache.remove_node(make_node("n1"))
    cache.update_snapshot(snapshot)
    assert [i.name for i in snapshot.list()] == ["n2"]
    assert snapshot.get("n1") is None


def test_affinity_lists_track_membership() -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    cache.add_node(make_node("n2"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    assert snapshot.have_pods_with_affinity() == []
    anti = (
        PodBuilder("anti")
        .node("n2")
        .pod_anti_affinity_required({"app": "x"}, "kubernetes.io/hostname")
        .obj()
    )
    cache.add_pod(PodInfo.from_pod(anti))
    cache.update_snapshot(snapshot)
    assert [i.name for i in snapshot.have_pods_with_affinity()] == ["n2"]
    assert [i.name for i in snapshot.have_pods_with_required_anti_affinity()] == ["n2"]
    cache.remove_pod(anti)
    cache.update_snapshot(snapshot)
    assert snapshot.have_pods_with_affinity() == []
    assert snapshot.have_pods_with_required_anti_affinity() == []


def test_used_pvc_counts_follow_pods_and_nodes() -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    cache.add_node(make_node("n2"))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    a = PodBuilder("a").node("n1").pvc("data").obj()
    b = PodBuilder("b").node("n2").pvc("data").obj()
    cache.add_pod(PodInfo.from_pod(a))
    cache.add_pod(PodInfo.from_pod(b))
    cache.update_snapshot(snapshot)
    assert snapshot.used_pvc_ref_counts == {"default/data": 2}
    cache.remove_pod(a)
    cache.update_snapshot(snapshot)
    assert snapshot.is_pvc_used_by_pods("default/data")
    cache.remove_node(make_node("n2"))  # b's node is gone: b no longer counts
    cache.update_snapshot(snapshot)
    assert not snapshot.is_pvc_used_by_pods("default/data")


def test_from_objects_builds_a_snapshot() -> None:
    snapshot = Snapshot.from_objects(
        [make_node("n1"), make_node("n2")],
        [make_pod("p", cpu="250m", node="n1"), make_pod("pending", cpu="1")],
    )
    n1 = snapshot.get("n1")
    assert n1 is not None and n1.requested.milli_cpu == 250
    assert sum(len(i.pods) for i in snapshot.list()) == 1
