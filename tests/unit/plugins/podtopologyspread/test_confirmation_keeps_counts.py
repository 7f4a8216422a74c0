"""A binding's confirmation (the bound version of an assumed pod, which reads alike) keeps
the per-node matching-pod counts PodTopologySpread memoizes (keyed on the NodeInfo's
``plugin_generation``): no node is counted again; a change the counts read recounts it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread import common, scoring
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from tests.builders import NodeBuilder, PodBuilder, node_term
from tests.fakes import SnapshotHandle

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _pod(name: str, node: str, *, app: str = "web", bound: bool = False) -> dict[str, Any]:
    b = PodBuilder(name).uid(f"uid-{name}").labels(app=app).node(node)
    if bound:  # what the binding adds: fields no plugin reads
        b.condition("PodScheduled")
    pod = b.obj()
    if bound:
        pod["status"]["startTime"] = "2024-01-01T00:00:00Z"
        pod["metadata"]["resourceVersion"] = "7"
    return pod


Op = Callable[[Cache], None]

# (step, whether a node's pods are counted again)
STEPS: list[tuple[str, Op, bool]] = [
    ("nothing", lambda c: None, False),
    ("assume", lambda c: c.assume_pod(PodInfo.from_pod(_pod("p1", "n1"))), True),
    ("confirm", lambda c: c.add_pod(PodInfo.from_pod(_pod("p1", "n1", bound=True))), False),
    ("relabel", lambda c: c.update_pod(_pod("p1", "n1", bound=True), PodInfo.from_pod(
        _pod("p1", "n1", app="db", bound=True))), True),
    ("delete", lambda c: c.remove_pod(_pod("p1", "n1", app="db", bound=True)), True),
]

_INCOMING = {
    # ScheduleAnyway by hostname: Score counts each node through the memo.
    "score by hostname": PodBuilder("in-s").uid("uid-in-s").labels(app="web")
    .topology_spread(1, HOST, "ScheduleAnyway", selector={"app": "web"}).obj(),
    # Required node affinity under the Honor policy: PreFilter counts each eligible node
    # through the memo (eligibility depends on the pod, so no kept domain sums).
    "prefilter honoring affinity": PodBuilder("in-f").uid("uid-in-f").labels(app="web")
    .topology_spread(1, ZONE, selector={"app": "web"})
    .required_node_affinity([node_term(**{ZONE: ["a", "b"]})]).obj(),
}


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every call of count_pods_match_selector (a node's pods counted), as one list."""
    calls: list[int] = []
    real = common.count_pods_match_selector

    def counting(pods: Any, selector: Any, namespace: str) -> int:
        calls.append(len(pods))
        return real(pods, selector, namespace)

    monkeypatch.setattr(common, "count_pods_match_selector", counting)
    monkeypatch.setattr(scoring, "count_pods_match_selector", counting)
    yield calls


def _cycle(plugin: PodTopologySpread, snapshot: Snapshot, pod: PodInfo,
           incoming: str) -> list[int]:
    """Score's scores, or which nodes Filter rejects (1), for every node."""
    state = CycleState()
    nodes = snapshot.list()
    if incoming.startswith("score"):
        assert plugin.pre_score(state, pod, nodes) is None
        scores, status = plugin.score_nodes(state, pod, nodes)
        assert status is None
        return scores
    _, status = plugin.pre_filter(state, pod, nodes)
    assert status is None, status
    return [0 if s is None else 1 for s in plugin.filter_nodes(state, pod, nodes)]


@pytest.mark.parametrize("incoming", list(_INCOMING))
def test_confirmation_counts_no_node_again(incoming: str, counted: list[int]) -> None:
    cache, snapshot = Cache(), Snapshot()
    for name, zone in (("n1", "a"), ("n2", "b"), ("n3", "a")):
        cache.add_node(NodeBuilder(name).labels({HOST: name, ZONE: zone}).obj())
    cache.add_pod(PodInfo.from_pod(_pod("seed", "n3", bound=True)))
    kept = PodTopologySpread({}, SnapshotHandle(snapshot))
    pod = PodInfo.from_pod(_INCOMING[incoming])
    cache.update_snapshot(snapshot)
    _cycle(kept, snapshot, pod, incoming)
    for step, op, recounts in STEPS:
        op(cache)
        cache.update_snapshot(snapshot)
        counted.clear()
        got = _cycle(kept, snapshot, pod, incoming)
        assert bool(counted) == recounts, (incoming, step, counted)
        fresh = _cycle(PodTopologySpread({}, SnapshotHandle(snapshot)), snapshot, pod, incoming)
        assert got == fresh, (incoming, step)
