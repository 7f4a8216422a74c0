"""PreFilter's counts kept across cycles equal a recount after every cache change.

One plugin lives through a sequence of cache operations (assume, forget, the informer's
confirmation, updates, deletions, node changes) and runs PreFilter after each, against the
cache's real snapshot and its change log; a fresh plugin (nothing kept) counts the same
snapshot from scratch.  Counts, domains, the global minimum, the critical paths built on
demand and every node's Filter status must be equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread.filtering import PRE_FILTER_STATE_KEY, PreFilterState
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import SnapshotHandle

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _node(name: str, zone: str | None) -> dict[str, Any]:
    labels = {HOST: name}
    if zone is not None:
        labels[ZONE] = zone
    return NodeBuilder(name).labels(labels).obj()


def _pod(name: str, node: str = "", *, app: str = "web", ns: str = "default") -> dict[str, Any]:
    b = PodBuilder(name, ns).uid(f"uid-{ns}-{name}").labels(app=app)
    if node:
        b.node(node)
    return b.obj()


def _incoming(key: str) -> PodInfo:
    return PodInfo.from_pod(
        PodBuilder("incoming").uid("uid-incoming").labels(app="web")
        .topology_spread(1, key, selector={"app": "web"}).obj())


Op = Callable[[Cache], None]


def assume(name: str, node: str, **kw: Any) -> Op:
    return lambda cache: cache.assume_pod(PodInfo.from_pod(_pod(name, node, **kw)))


def confirm(name: str, node: str, **kw: Any) -> Op:
    """The informer's ADDED for a bound pod (confirms an assumed one)."""
    return lambda cache: cache.add_pod(PodInfo.from_pod(_pod(name, node, **kw)))


def forget(name: str, node: str) -> Op:
    return lambda cache: cache.forget_pod(_pod(name, node))


def delete(name: str, node: str, **kw: Any) -> Op:
    return lambda cache: cache.remove_pod(_pod(name, node, **kw))


def relabel(name: str, node: str, app: str) -> Op:
    return lambda cache: cache.update_pod(_pod(name, node), PodInfo.from_pod(
        _pod(name, node, app=app)))


def terminate(name: str, node: str) -> Op:
    def op(cache: Cache) -> None:
        new = _pod(name, node)
        new["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        cache.update_pod(_pod(name, node), PodInfo.from_pod(new))
    return op


def move_node(name: str, old_zone: str | None, zone: str | None) -> Op:
    return lambda cache: cache.update_node(_node(name, old_zone), _node(name, zone))


def add_node(name: str, zone: str | None) -> Op:
    return lambda cache: cache.add_node(_node(name, zone))


def remove_node(name: str, zone: str | None) -> Op:
    return lambda cache: cache.remove_node(_node(name, zone))


CASES: dict[str, list[Op]] = {
    "assume then confirm": [assume("p1", "n1"), confirm("p1", "n1"), assume("p2", "n2")],
    "assume then forget": [assume("p1", "n1"), assume("p2", "n1"), forget("p1", "n1"),
                           forget("p2", "n1")],
    "confirmed elsewhere": [assume("p1", "n1"), confirm("p1", "n3")],
    "delete bound and assumed": [confirm("p1", "n1"), assume("p2", "n2"), delete("p1", "n1"),
                                 delete("p2", "n2")],
    "labels stop and start matching": [confirm("p1", "n1"), relabel("p1", "n1", "db"),
                                       relabel("p1", "n1", "web")],
    "terminating pods do not count": [confirm("p1", "n4"), terminate("p1", "n4")],
    "other namespace and other app": [confirm("q1", "n1", ns="other"),
                                      confirm("q2", "n2", app="db"), assume("p1", "n2")],
    "node changes zone, loses and regains the key": [
        confirm("p1", "n1"), move_node("n1", "a", "b"), move_node("n1", "b", None),
        move_node("n1", None, "c")],
    "nodes come and go": [confirm("p1", "n2"), add_node("n9", "d"), assume("p2", "n9"),
                          remove_node("n2", "b"), delete("p1", "n2"), remove_node("n9", "d")],
    "an emptied domain disappears": [confirm("p1", "n5"), remove_node("n5", "e")],
}


@pytest.mark.parametrize("key", [ZONE, HOST])
@pytest.mark.parametrize("case", list(CASES))
def test_counts_kept_across_cycles_equal_a_recount(case: str, key: str) -> None:
    cache, snapshot = Cache(), Snapshot()
    for name, zone in (("n1", "a"), ("n2", "b"), ("n3", "a"), ("n4", "c"), ("n5", "e")):
        cache.add_node(_node(name, zone))
    cache.add_pod(PodInfo.from_pod(_pod("seed", "n3")))
    kept = PodTopologySpread({}, SnapshotHandle(snapshot))
    incoming = _incoming(key)

    def prefilter(plugin: PodTopologySpread) -> tuple[PreFilterState, dict[str, Status | None]]:
        state = CycleState()
        _, status = plugin.pre_filter(state, incoming, snapshot.list())
        assert status is None, status
        s = state.read(PRE_FILTER_STATE_KEY)
        assert isinstance(s, PreFilterState)
        statuses = plugin.filter_nodes(state, incoming, snapshot.list())
        return s, {ni.name: st for ni, st in zip(snapshot.list(), statuses)}

    for step, op in enumerate([lambda cache: None, *CASES[case]]):
        op(cache)
        cache.update_snapshot(snapshot)
        got, got_statuses = prefilter(kept)
        want, want_statuses = prefilter(PodTopologySpread({}, SnapshotHandle(snapshot)))
        where = (case, key, step)
        assert got.counts == want.counts, where
        assert got.domains == want.domains, where
        assert got.min_match_num(0) == want.min_match_num(0), where
        assert got_statuses == want_statuses, where
        paths = got.critical_paths[0]
        assert paths.nums[0] == (min(want.counts[0].values()) if want.counts[0] else 2**31 - 1)


@pytest.mark.parametrize(("counts", "added", "want_min"), [
    ({"a": 2, "b": 1, "c": 1}, "b", 1),  # c still holds the minimum
    ({"a": 2, "b": 1}, "b", 2),
    ({"a": 0}, "a", 1),
])
def test_critical_paths_built_on_demand_follow_updates(
        counts: dict[str, int], added: str, want_min: int) -> None:
    """Paths built from the counts at the first update equal an eager build at PreFilter,
    and the minimum Filter reads follows the update."""
    from scheduler.plugins.podtopologyspread.common import Constraint
    from scheduler.objects.labels import LabelSelector
    c = Constraint(max_skew=1, topology_key=ZONE, selector=LabelSelector.everything())
    s = PreFilterState([c], [dict(counts)], None, [len(counts)], None, "default")
    before = s.min_match_num(0)
    assert before == min(counts.values())
    clone = s.clone()
    s.update(0, added, 1)
    assert s.min_match_num(0) == want_min
    assert clone.min_match_num(0) == before  # a clone made before is not touched
    assert clone.counts == [counts]
