"""PodTopologySpread add_pod/remove_pod (preemption, nominated pods)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread.filtering import PRE_FILTER_STATE_KEY, PreFilterState
from tests.builders import PodBuilder
from tests.unit.plugins.podtopologyspread.helpers import HOST, ZONE, four_nodes, make_plugin, node

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}


def incoming() -> dict[str, Any]:
    return (
        PodBuilder("p").labels(foo="")
        .topology_spread(1, ZONE, selector=FOO)
        .topology_spread(1, HOST, selector=FOO)
        .obj()
    )


def existing() -> list[dict[str, Any]]:
    return [
        PodBuilder("a1").labels(foo="").node("node-a").obj(),
        PodBuilder("a2").labels(foo="").node("node-a").obj(),
        PodBuilder("b1").labels(foo="").node("node-b").obj(),
        PodBuilder("y1").labels(foo="").node("node-y").obj(),
    ]


def prefilter(pods: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None
              ) -> tuple[Any, CycleState, PreFilterState, Any]:
    plugin, infos = make_plugin(nodes or four_nodes(), pods)
    state = CycleState()
    plugin.pre_filter(state, PodInfo.from_pod(incoming()), infos)
    s = state.read(PRE_FILTER_STATE_KEY)
    assert isinstance(s, PreFilterState)
    return plugin, state, s, infos


@pytest.mark.parametrize("index", range(4))
def test_remove_pod_matches_recomputation(index: int) -> None:
    pods = existing()
    plugin, state, s, infos = prefilter(pods)
    victim = pods[index]
    ni = next(n for n in infos if n.name == victim["spec"]["nodeName"])
    assert plugin.remove_pod(state, PodInfo.from_pod(incoming()), PodInfo.from_pod(victim), ni) is None
    _, _, expected, _ = prefilter([p for i, p in enumerate(pods) if i != index])
    assert s.counts == expected.counts
    assert [s.min_match_num(i) for i in range(2)] == [
        expected.min_match_num(i) for i in range(2)
    ]


def test_add_pod_on_empty_node_raises_minimum() -> None:
    pods = existing()
    plugin, state, s, infos = prefilter(pods)
    assert s.min_match_num(1) == 0  # node-x is empty
    x = next(n for n in infos if n.name == "node-x")
    added = PodBuilder("x1").labels(foo="").node("node-x").obj()
    plugin.add_pod(state, PodInfo.from_pod(incoming()), PodInfo.from_pod(added), x)
    assert s.counts[1]["node-x"] == 1
    assert s.min_match_num(1) == 1
    _, _, expected, _ = prefilter([*pods, added])
    assert s.counts == expected.counts


@pytest.mark.parametrize(
    "pod",
    [
        PodBuilder("other-ns", "kube-system").labels(foo="").node("node-x").obj(),
        PodBuilder("no-match").labels(bar="").node("node-x").obj(),
    ],
    ids=["other namespace", "selector does not match"],
)
def test_add_pod_ignored(pod: dict[str, Any]) -> None:
    plugin, state, s, infos = prefilter(existing())
    before = [dict(c) for c in s.counts]
    x = next(n for n in infos if n.name == "node-x")
    plugin.add_pod(state, PodInfo.from_pod(incoming()), PodInfo.from_pod(pod), x)
    assert s.counts == before


def test_add_pod_on_node_without_keys_is_ignored() -> None:
    nodes = [*four_nodes(), node("node-bare")]
    plugin, state, s, infos = prefilter(existing(), nodes)
    before = [dict(c) for c in s.counts]
    bare = next(n for n in infos if n.name == "node-bare")
    added = PodBuilder("z").labels(foo="").node("node-bare").obj()
    plugin.add_pod(state, PodInfo.from_pod(incoming()), PodInfo.from_pod(added), bare)
    assert s.counts == before


def test_preemption_on_cloned_state() -> None:
    """Removing a victim from a clone makes the node feasible, the original is untouched."""
    plugin, state, s, infos = prefilter(existing())
    a = next(n for n in infos if n.name == "node-a")
    pod_info = PodInfo.from_pod(incoming())
    assert plugin.filter(state, pod_info, a) is not None
    trial = state.clone()
    for victim in existing()[:2]:
        plugin.remove_pod(trial, pod_info, PodInfo.from_pod(victim), a)
    trial_node = a.clone()
    assert plugin.filter(trial, pod_info, trial_node) is None
    assert plugin.filter(state, pod_info, a) is not None
    assert s.counts[1]["node-a"] == 2


def test_extensions_without_state_report_error() -> None:
    plugin, infos = make_plugin(four_nodes())
    p = PodInfo.from_pod(incoming())
    status = plugin.add_pod(CycleState(), p, p, infos[0])
    assert status is not None and not status.is_success()


def test_counts_memo_sees_node_changes_across_cycles() -> None:
    plugin, infos = make_plugin(four_nodes(), existing())
    pod_info = PodInfo.from_pod(incoming())
    state = CycleState()
    plugin.pre_filter(state, pod_info, infos)
    assert state.read(PRE_FILTER_STATE_KEY).counts[1]["node-x"] == 0
    x = next(n for n in infos if n.name == "node-x")
    x.add_pod(PodInfo.from_pod(PodBuilder("x1").labels(foo="").node("node-x").obj()))
    state = CycleState()
    plugin.pre_filter(state, pod_info, infos)
    assert state.read(PRE_FILTER_STATE_KEY).counts[1]["node-x"] == 1
