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


@pytest.mark.parametrize(
    ("removed", "with_pods", "left"),
    [
        pytest.param(["n1"], [], ["n3", "n2", "n4"], id="one-removed"),
        pytest.param(["n2"], ["n2"], ["n1", "n4", "n3"], id="one-kept-for-its-pods"),
        pytest.param(["n1", "n3"], ["n3"], ["n2", "n4"], id="removed-and-kept-in-one-update"),
        pytest.param(["n1", "n2", "n3", "n4"], ["n2", "n4"], [], id="all"),
    ],
)
def test_removed_nodes_leave_the_snapshot_whether_or_not_pods_keep_them_cached(
        removed: list[str], with_pods: list[str], left: list[str]) -> None:
    """Zone a holds n1 and n3, zone b n2 and n4 (listed n1 n2 n3 n4); a removed node whose
    pods keep it cached (a ghost) leaves the snapshot like one the cache forgot."""
    cache = Cache()
    for name, zone in (("n1", "a"), ("n2", "b"), ("n3", "a"), ("n4", "b")):
        cache.add_node(zoned(name, zone))
    for name in with_pods:
        cache.add_pod(PodInfo.from_pod(make_pod(f"on-{name}", node=name)))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    for name in removed:
        cache.remove_node(zoned(name, "a" if name in ("n1", "n3") else "b"))
    cache.update_snapshot(snapshot)
    assert [i.name for i in snapshot.list()] == left
    assert sorted(snapshot.node_info_map) == sorted(left)
    assert snapshot.positions == {name: i for i, name in enumerate(left)}
    assert cache.node_count() == len(left) + len(set(with_pods) & set(removed))


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


# --- change log --------------------------------------------------------------------------------


def _cluster(count: int) -> tuple[Cache, Snapshot]:
    cache, snapshot = Cache(), Snapshot()
    for i in range(count):
        cache.add_node(make_node(f"n{i}"))
    cache.update_snapshot(snapshot)
    return cache, snapshot


def test_change_log_names_the_positions_updated_since_a_serial() -> None:
    cache, snapshot = _cluster(5)
    serial = snapshot.change_serial
    assert snapshot.changed_positions_since(serial) == []
    cache.add_pod(PodInfo.from_pod(make_pod("p1", node="n3")))
    cache.update_snapshot(snapshot)
    middle = snapshot.change_serial
    cache.add_pod(PodInfo.from_pod(make_pod("p2", node="n1")))
    cache.add_pod(PodInfo.from_pod(make_pod("p3", node="n4")))
    cache.update_snapshot(snapshot)
    position = snapshot.positions
    assert sorted(snapshot.changed_positions_since(serial) or []) == sorted(
        [position["n3"], position["n1"], position["n4"]])
    assert sorted(snapshot.changed_positions_since(middle) or []) == sorted(
        [position["n1"], position["n4"]])
    assert snapshot.changed_positions_since(snapshot.change_serial) == []


def test_an_update_that_changes_nothing_adds_nothing_to_the_log() -> None:
    cache, snapshot = _cluster(3)
    serial = snapshot.change_serial
    cache.update_snapshot(snapshot)
    assert snapshot.change_serial == serial


@pytest.mark.parametrize("change", ["add-node", "remove-node"])
def test_a_rebuilt_node_list_answers_unknown_for_earlier_serials(change: str) -> None:
    cache, snapshot = _cluster(4)
    serial, version = snapshot.change_serial, snapshot.list_version
    if change == "add-node":
        cache.add_node(make_node("n9"))
    else:
        cache.remove_node(make_node("n2"))
    cache.update_snapshot(snapshot)
    assert snapshot.list_version == version + 1
    assert snapshot.changed_positions_since(serial) is None
    assert snapshot.changed_positions_since(snapshot.change_serial) == []


def test_a_serial_older_than_the_log_answers_unknown() -> None:
    from scheduler.cache.snapshot import CHANGE_LOG_LENGTH

    cache, snapshot = _cluster(2)
    serial = snapshot.change_serial
    for i in range(CHANGE_LOG_LENGTH + 1):
        cache.add_pod(PodInfo.from_pod(make_pod(f"p{i}", node="n0")))
        cache.update_snapshot(snapshot)
    assert snapshot.changed_positions_since(serial) is None
    recent = snapshot.change_serial - 3
    assert snapshot.changed_positions_since(recent) == [snapshot.positions["n0"]] * 3


@pytest.mark.parametrize("change", ["add-node", "remove-node", "add-pod", "none"])
def test_generations_follow_the_listed_node_infos(change: str) -> None:
    """What a reader the change log cannot serve compares: one generation per listed
    NodeInfo, in list order; a node unchanged keeps its generation wherever it moves."""
    cache, snapshot = _cluster(4)
    before = dict(zip((n.name for n in snapshot.list()), snapshot.generations()))
    if change == "add-node":
        cache.add_node(make_node("n9"))
    elif change == "remove-node":
        cache.remove_node(make_node("n2"))
    elif change == "add-pod":
        cache.add_pod(PodInfo.from_pod(make_pod("p", node="n1")))
    cache.update_snapshot(snapshot)
    after = snapshot.generations()
    assert after == [n.generation for n in snapshot.list()]
    kept = {n.name for n in snapshot.list() if before.get(n.name) == n.generation}
    assert kept == {"n0", "n1", "n2", "n3"} - {"n2" if change == "remove-node" else "",
                                               "n1" if change == "add-pod" else ""}


# --- parsed taints across snapshot updates --------------------------------------------------


@pytest.mark.parametrize(("change", "parsed_again"), [
    ("a pod assumed on the node", False),
    ("the node updated with another taint", True),
    ("the node updated with the same taints (a new object)", True),
])
def test_a_snapshot_copy_keeps_the_taints_parsed_for_its_node_object(
    change: str, parsed_again: bool
) -> None:
    """Plugins parse a node's taints on the snapshot's copy; copying the node again after
    its pods changed keeps that parse (the node object is the same), a new node object is
    parsed afresh, and the taints read are always the node's."""
    from tests.builders import NodeBuilder

    cache = Cache()
    node = NodeBuilder("a").taint("k", "v").obj()
    cache.add_node(node)
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    held = snapshot.get("a")
    assert held is not None
    first = held.taints()
    assert [t.key for t in first] == ["k"]
    expected = ["k"]
    if change == "a pod assumed on the node":
        cache.assume_pod(PodInfo.from_pod(PodBuilder("p").uid("u1").node("a").obj()))
    elif change == "the node updated with another taint":
        cache.update_node(node, NodeBuilder("a").taint("k", "v").taint("k2").obj())
        expected = ["k", "k2"]
    else:
        cache.update_node(node, NodeBuilder("a").taint("k", "v").obj())
    cache.update_snapshot(snapshot)
    assert snapshot.get("a") is held
    assert [t.key for t in held.taints()] == expected
    assert (held.taints() is not first) is parsed_again
    # and once more: the parse kept by the cache serves the next copy too
    cache.update_snapshot(snapshot)
    assert [t.key for t in held.taints()] == expected
