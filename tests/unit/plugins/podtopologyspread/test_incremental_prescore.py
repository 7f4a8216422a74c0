"""PreScore's per-domain sums kept across cycles equal a walk over every node.

As in test_incremental_prefilter: one plugin lives through a sequence of cache operations
(assume, confirm, forget, relabel, terminate, delete; a node changing zone, losing its zone,
coming and going) and runs PreScore after each against the cache's snapshot and its change
log, while a fresh plugin walks every node of the same snapshot (its kept sums disabled).  The PreScore state and
every candidate's normalized score must be equal.  Incoming pods: a ScheduleAnyway zone
constraint of its own (nodes without the key ignored), the system defaults of a
ReplicaSet's pod (a node without a zone is the domain ""), and a constraint with
nodeTaintsPolicy Honor (eligibility read from the pod: counted afresh every cycle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.types import NodeScore
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from scheduler.plugins.podtopologyspread.scoring import PRE_SCORE_STATE_KEY, PreScoreState
from tests.builders import PodBuilder
from tests.fakes import SnapshotHandle
from tests.unit.plugins.podtopologyspread.test_incremental_prefilter import (
    CASES,
    HOST,
    ZONE,
    _node,
    _pod,
)

_REPLICASET = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": "rs", "namespace": "default"},
               "spec": {"selector": {"matchLabels": {"app": "web"}}}}


def _own_zone() -> dict[str, Any]:
    return (PodBuilder("incoming").uid("uid-incoming").labels(app="web")
            .topology_spread(2, ZONE, "ScheduleAnyway", {"app": "web"})
            .topology_spread(1, HOST, "ScheduleAnyway", {"app": "web"}).obj())


def _system_defaults() -> dict[str, Any]:
    return (PodBuilder("incoming").uid("uid-incoming").labels(app="web")
            .owner("ReplicaSet", "rs").obj())


def _honor_taints() -> dict[str, Any]:
    return (PodBuilder("incoming").uid("uid-incoming").labels(app="web")
            .topology_spread(2, ZONE, "ScheduleAnyway", {"app": "web"},
                             node_taints_policy="Honor").obj())


INCOMING: dict[str, Callable[[], dict[str, Any]]] = {
    "own ScheduleAnyway zone": _own_zone,
    "system defaults of a ReplicaSet's pod": _system_defaults,
    "nodeTaintsPolicy Honor": _honor_taints,
}


class _Handle(SnapshotHandle):
    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__(snapshot)
        self._listers.objects["replicasets"] = [_REPLICASET]


def _pre_score(plugin: PodTopologySpread, pod: PodInfo, snapshot: Snapshot
               ) -> tuple[PreScoreState, dict[str, int]]:
    state = CycleState()
    candidates = [ni for ni in snapshot.list() if ni.name != "n2"]  # not every node
    status = plugin.pre_score(state, pod, candidates)
    assert status is None, status
    s = state.read(PRE_SCORE_STATE_KEY)
    assert isinstance(s, PreScoreState)
    scores, status = plugin.score_nodes(state, pod, candidates)
    assert status is None, status
    assert scores == [plugin.score(state, pod, ni)[0] for ni in candidates]  # one by one
    node_scores = [NodeScore(ni.name, v) for ni, v in zip(candidates, scores)]
    ext = plugin.score_extensions()
    assert ext is not None and ext.normalize_score(state, pod, node_scores) is None
    return s, {ns.name: ns.score for ns in node_scores}


def _walking(snapshot: Snapshot) -> PodTopologySpread:
    """A fresh plugin that walks every node whatever the pod (the reference)."""
    plugin = PodTopologySpread({}, _Handle(snapshot))
    setattr(plugin, "_eligibility_is_pod_independent", lambda *args: False)
    return plugin


@pytest.mark.parametrize("incoming", list(INCOMING))
@pytest.mark.parametrize("case", list(CASES))
def test_prescore_sums_kept_across_cycles_equal_a_walk(case: str, incoming: str) -> None:
    cache, snapshot = Cache(), Snapshot()
    for name, zone in (("n1", "a"), ("n2", "b"), ("n3", "a"), ("n4", "c"), ("n5", "e"),
                       ("n6", None)):
        cache.add_node(_node(name, zone))
    cache.add_pod(PodInfo.from_pod(_pod("seed", "n3")))
    cache.add_pod(PodInfo.from_pod(_pod("seed-2", "n6")))
    kept = PodTopologySpread({}, _Handle(snapshot))
    pod = PodInfo.from_pod(INCOMING[incoming]())
    for step, op in enumerate([lambda cache: None, *CASES[case]]):
        op(cache)
        cache.update_snapshot(snapshot)
        got, got_scores = _pre_score(kept, pod, snapshot)
        want, want_scores = _pre_score(_walking(snapshot), pod, snapshot)
        where = (case, incoming, step)
        assert got.counts == want.counts, where
        assert got.ignored_nodes == want.ignored_nodes, where
        assert got.weights == want.weights, where
        assert [(c.topology_key, c.selector) for c in got.constraints] == [
            (c.topology_key, c.selector) for c in want.constraints], where
        assert got_scores == want_scores, where
