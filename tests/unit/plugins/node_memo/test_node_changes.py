"""NodeChanges: which nodes changed since the last look, from a generation scan or from the
snapshot's change log; and Coscheduling's MembersOnNodes, which is kept with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.node_info import NodeInfo
from scheduler.objects.pod import PodInfo
from scheduler.plugins.coscheduling.core import POD_GROUP_LABEL, MembersOnNodes
from scheduler.plugins.node_memo import NodeChanges
from tests.builders import PodBuilder, make_node


def _pod(name: str, node: str, group: str | None = None, namespace: str = "default"
         ) -> dict[str, Any]:
    b = PodBuilder(name, namespace).container().node(node)
    if group:
        b.labels({POD_GROUP_LABEL: group})
    return b.obj()


class _Cluster:
    """A real cache and the snapshot it updates, driven by name."""

    def __init__(self, nodes: int) -> None:
        self.cache = Cache()
        self.snapshot = Snapshot()
        self.pods: dict[str, dict[str, Any]] = {}
        for i in range(nodes):
            self.cache.add_node(make_node(f"n{i}"))
        self.sync()

    def sync(self) -> list[NodeInfo]:
        self.cache.update_snapshot(self.snapshot)
        return self.snapshot.list()

    def add(self, name: str, node: str, group: str | None = None,
            namespace: str = "default") -> None:
        pod = self.pods[name] = _pod(name, node, group, namespace)
        self.cache.add_pod(PodInfo.from_pod(pod))

    def remove(self, name: str) -> None:
        self.cache.remove_pod(self.pods.pop(name))


def _names(node_infos: list[NodeInfo], indexes: list[int]) -> list[str]:
    return sorted(node_infos[i].name for i in indexes)


Step = Callable[[_Cluster], None]

# (step, nodes reported changed, nodes reported removed)
CASES: list[tuple[str, Step, list[str], list[str]]] = [
    ("nothing", lambda c: None, [], []),
    ("a pod added", lambda c: c.add("p1", "n3"), ["n3"], []),
    ("pods on two nodes", lambda c: (c.add("p2", "n1"), c.add("p3", "n4")), ["n1", "n4"], []),
    ("a pod removed", lambda c: c.remove("p1"), ["n3"], []),
    ("a node added", lambda c: c.cache.add_node(make_node("n9")), ["n9"], []),
    ("a node removed", lambda c: c.cache.remove_node(make_node("n2")), [], ["n2"]),
]


@pytest.mark.parametrize("with_snapshot", [True, False], ids=["snapshot", "list-only"])
def test_node_changes_reports_each_update_once(with_snapshot: bool) -> None:
    cluster = _Cluster(6)
    changes = NodeChanges()
    node_infos = cluster.snapshot.list()
    changed, removed = changes.since_last(
        node_infos, snapshot=cluster.snapshot if with_snapshot else None)
    assert _names(node_infos, changed) == [f"n{i}" for i in range(6)] and removed == []
    for title, step, want_changed, want_removed in CASES:
        step(cluster)
        node_infos = cluster.sync()
        changed, removed = changes.since_last(
            node_infos, snapshot=cluster.snapshot if with_snapshot else None)
        assert (_names(node_infos, changed), sorted(removed)) == (want_changed, want_removed), title


class _LoggedSnapshot:
    """A lister with a change log (the attributes NodeChanges reads) over fixed NodeInfos."""

    def __init__(self, node_infos: list[NodeInfo]) -> None:
        self.node_infos = node_infos
        self.list_version = 1
        self.change_serial = 0
        self.log: list[tuple[int, list[int]]] = []
        self.asked: list[int] = []
        self.reaches_back = True

    def list(self) -> list[NodeInfo]:
        return self.node_infos

    def change(self, *positions: int) -> None:
        for position in positions:
            info = self.node_infos[position]
            info.add_pod(PodInfo.from_pod(_pod(f"p{self.change_serial}-{position}", info.name)))
        self.change_serial += 1
        self.log.append((self.change_serial, list(positions)))

    def changed_positions_since(self, serial: int) -> list[int] | None:
        self.asked.append(serial)
        if not self.reaches_back:
            return None
        return [p for s, positions in self.log if s > serial for p in positions]


def test_node_changes_reads_the_change_log_and_falls_back_when_it_cannot() -> None:
    node_infos = [NodeInfo(make_node(f"n{i}")) for i in range(5)]
    snapshot = _LoggedSnapshot(node_infos)
    changes = NodeChanges()
    assert changes.since_last(node_infos, snapshot=snapshot) == ([0, 1, 2, 3, 4], [])
    assert snapshot.asked == []  # nothing seen before: a full scan

    snapshot.change(3, 1, 3)
    snapshot.change(1)
    assert changes.since_last(node_infos, snapshot=snapshot) == ([1, 3], [])
    assert snapshot.asked == [0]
    # A change the log does not hold is not looked for: the log is what is read.
    node_infos[0].add_pod(PodInfo.from_pod(_pod("unlogged", "n0")))
    assert changes.since_last(node_infos, snapshot=snapshot) == ([], [])
    # The log no longer reaches back: every generation is compared again.
    snapshot.reaches_back = False
    snapshot.change(2)
    assert changes.since_last(node_infos, snapshot=snapshot) == ([0, 2], [])
    snapshot.reaches_back = True
    # The list was rebuilt (new version): a scan, which also finds removed nodes.
    snapshot.node_infos = node_infos[1:]
    snapshot.list_version += 1
    assert changes.since_last(snapshot.node_infos, snapshot=snapshot) == ([], ["n0"])
    snapshot.change(0)
    assert changes.since_last(snapshot.node_infos, snapshot=snapshot) == ([0], [])


def _walk(snapshot: Snapshot, full: str) -> list[str]:
    namespace, _, group = full.partition("/")
    return sorted(p.name for info in snapshot.list() for p in info.pods
                  if p.namespace == namespace and p.labels.get(POD_GROUP_LABEL) == group)


MEMBER_STEPS: list[tuple[str, Step]] = [
    ("members on two nodes", lambda c: (c.add("a1", "n0", "a"), c.add("a2", "n1", "a"))),
    ("another group and a plain pod", lambda c: (c.add("b1", "n1", "b"), c.add("x", "n2"))),
    ("same group name, other namespace", lambda c: c.add("o1", "n2", "a", namespace="other")),
    ("a member leaves", lambda c: c.remove("a2")),
    ("two on one node", lambda c: (c.add("a3", "n3", "a"), c.add("a4", "n3", "a"))),
    ("their node goes", lambda c: c.cache.remove_node(make_node("n3"))),
    ("a new node", lambda c: (c.cache.add_node(make_node("n7")), c.add("b2", "n7", "b"))),
]


def test_members_on_nodes_answers_what_a_walk_over_the_snapshot_does() -> None:
    cluster = _Cluster(5)
    members = MembersOnNodes()
    groups = ["default/a", "default/b", "other/a", "default/none"]
    for title, step in MEMBER_STEPS:
        step(cluster)
        cluster.sync()
        for full in groups:
            got = sorted(p.name for p in members.members(cluster.snapshot, full))
            assert got == _walk(cluster.snapshot, full), (title, full)
    assert _walk(cluster.snapshot, "default/a") == ["a1"]  # the steps did move members
