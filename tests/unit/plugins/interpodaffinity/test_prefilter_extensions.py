"""add_pod/remove_pod (used by preemption and nominated pods) keep PreFilter counts exact."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.objects.pod import PodInfo
from scheduler.plugins.interpodaffinity.filtering import PRE_FILTER_STATE_KEY, PreFilterState
from tests.builders import NodeBuilder, PodBuilder
from tests.fakes import FakeHandle
from tests.unit.plugins.interpodaffinity.helpers import REGION, ZONE, make_plugin

NODES = [
    NodeBuilder("n1").labels(region="r1", zone="z11").obj(),
    NodeBuilder("n2").labels(region="r1", zone="z12").obj(),
    NodeBuilder("n3").labels(region="r2", zone="z21").obj(),
]


def incoming() -> dict[str, Any]:
    return (
        PodBuilder("p")
        .labels(app="web")
        .pod_affinity_required({"app": "db"}, REGION)
        .pod_anti_affinity_required({"app": "web"}, ZONE)
        .obj()
    )


def candidates() -> list[dict[str, Any]]:
    return [
        PodBuilder("db").labels(app="db").node("n1").obj(),
        PodBuilder("web").labels(app="web").node("n2").obj(),
        PodBuilder("guard").labels(app="guard")
        .pod_anti_affinity_required({"app": "web"}, REGION).node("n3").obj(),
        PodBuilder("both").labels(app="db")
        .pod_anti_affinity_required({"app": "web"}, ZONE).node("n1").obj(),
    ]


def _state_of(pods: list[dict[str, Any]]) -> tuple[PreFilterState, CycleState, Any, Any]:
    plugin, infos = make_plugin(NODES, pods)
    state = CycleState()
    plugin.pre_filter(state, PodInfo.from_pod(incoming()), infos)
    s = state.read(PRE_FILTER_STATE_KEY)
    assert isinstance(s, PreFilterState)
    return s, state, plugin, infos


def _snapshot(s: PreFilterState) -> tuple[dict[Any, int], dict[Any, int], dict[Any, int]]:
    return (
        s.affinity_counts.as_pairs(),
        s.anti_affinity_counts.as_pairs(),
        s.existing_anti_affinity_counts.as_pairs(),
    )


@pytest.mark.parametrize("index", range(4))
def test_add_pod_equals_prefilter_with_pod(index: int) -> None:
    pods = candidates()
    added = pods[index]
    without = [p for i, p in enumerate(pods) if i != index]
    s, state, plugin, infos = _state_of(without)
    node_info = next(ni for ni in infos if ni.name == added["spec"]["nodeName"])
    status = plugin.add_pod(state, s.pod_info, PodInfo.from_pod(added), node_info)
    assert status is None
    expected, *_ = _state_of(pods)
    assert _snapshot(s) == _snapshot(expected)


@pytest.mark.parametrize("index", range(4))
def test_remove_pod_equals_prefilter_without_pod(index: int) -> None:
    pods = candidates()
    removed = pods[index]
    s, state, plugin, infos = _state_of(pods)
    node_info = next(ni for ni in infos if ni.name == removed["spec"]["nodeName"])
    status = plugin.remove_pod(state, s.pod_info, PodInfo.from_pod(removed), node_info)
    assert status is None
    expected, *_ = _state_of([p for i, p in enumerate(pods) if i != index])
    assert _snapshot(s) == _snapshot(expected)


def test_preemption_removing_victim_makes_node_feasible() -> None:
    """Removing the only pod violating anti-affinity on a cloned state frees the node."""
    web = PodBuilder("web").labels(app="web").node("n2").obj()
    s, state, plugin, infos = _state_of([PodBuilder("db").labels(app="db").node("n1").obj(), web])
    n2 = next(ni for ni in infos if ni.name == "n2")
    pod_info = s.pod_info
    assert plugin.filter(state, pod_info, n2) is not None
    trial = state.clone()
    victim_node = n2.clone()
    victim_node.remove_pod(web)
    plugin.remove_pod(trial, pod_info, PodInfo.from_pod(web), victim_node)
    assert plugin.filter(trial, pod_info, victim_node) is None
    # The original state is untouched by the clone's update.
    assert plugin.filter(state, pod_info, n2) is not None


def test_adding_nominated_pod_with_anti_affinity_blocks_node() -> None:
    plugin, infos = make_plugin(NODES, [PodBuilder("db").labels(app="db").node("n1").obj()])
    state = CycleState()
    pod_info = PodInfo.from_pod(incoming())
    plugin.pre_filter(state, pod_info, infos)
    n1 = infos[0]
    assert plugin.filter(state, pod_info, n1) is None
    nominated = (
        PodBuilder("nominated").labels(app="x")
        .pod_anti_affinity_required({"app": "web"}, ZONE).node("n1").obj()
    )
    plugin.add_pod(state, pod_info, PodInfo.from_pod(nominated), n1)
    status = plugin.filter(state, pod_info, n1)
    assert status is not None and status.reasons == [
        "node(s) didn't satisfy existing pods anti-affinity rules"
    ]


def test_extensions_without_state_report_error() -> None:
    plugin = make_plugin(NODES)[0]
    ext = plugin.pre_filter_extensions()
    assert ext is not None
    p = PodInfo.from_pod(incoming())
    from scheduler.framework.node_info import NodeInfo

    status = ext.add_pod(CycleState(), p, p, NodeInfo(NODES[0]))
    assert status is not None and not status.is_success()


def test_fake_handle_runs_extensions() -> None:
    """The framework-facing helper on the handle drives our extension."""
    plugin, infos = make_plugin(NODES, [PodBuilder("db").labels(app="db").node("n1").obj()])
    handle = FakeHandle(infos, pre_filter_plugins=[plugin])
    state = CycleState()
    pod_info = PodInfo.from_pod(incoming())
    plugin.pre_filter(state, pod_info, infos)
    other = PodInfo.from_pod(PodBuilder("w").labels(app="web").node("n1").obj())
    assert handle.run_pre_filter_extension_add_pod(state, pod_info, other, infos[0]) is None
    s = state.read(PRE_FILTER_STATE_KEY)
    assert s.anti_affinity_counts.as_pairs() == {(ZONE, "z11"): 1}


def test_prefilter_memo_sees_node_changes_across_cycles() -> None:
    """Per-node answers are reused across cycles only while the NodeInfo is unchanged."""
    plugin, infos = make_plugin(NODES)
    replica = (
        PodBuilder("r").labels(app="web")
        .pod_anti_affinity_required({"app": "web"}, ZONE).obj()
    )
    pod_info = PodInfo.from_pod(replica)
    state = CycleState()
    plugin.pre_filter(state, pod_info, infos)
    assert all(plugin.filter(state, pod_info, ni) is None for ni in infos)
    placed = PodBuilder("r0").labels(app="web").pod_anti_affinity_required(
        {"app": "web"}, ZONE).node("n2").obj()
    infos[1].add_pod(PodInfo.from_pod(placed))
    state = CycleState()
    plugin.pre_filter(state, pod_info, infos)
    s = state.read(PRE_FILTER_STATE_KEY)
    assert s.anti_affinity_counts.as_pairs() == {(ZONE, "z12"): 1}
    assert s.existing_anti_affinity_counts.as_pairs() == {(ZONE, "z12"): 1}
    assert [plugin.filter(state, pod_info, ni) is None for ni in infos] == [True, False, True]
    infos[1].remove_pod(placed)
    state = CycleState()
    plugin.pre_filter(state, pod_info, infos)
    assert all(plugin.filter(state, pod_info, ni) is None for ni in infos)


def test_changes_to_one_cycles_counts_stay_in_that_cycle() -> None:
    """PreFilter hands out the sums kept across cycles without copying them; add_pod and
    remove_pod (on the state or on a clone) must copy first, so neither the next cycle nor
    the other state sees the change."""
    pods = [PodBuilder("db").labels(app="db").node("n1").obj()]
    s, state, plugin, infos = _state_of(pods)
    before = _snapshot(s)
    pod_info = s.pod_info
    nominated = PodInfo.from_pod(
        PodBuilder("nominated").labels(app="web", extra="x")
        .pod_anti_affinity_required({"app": "web"}, ZONE).node("n2").obj())
    trial = state.clone()
    assert plugin.add_pod(trial, pod_info, nominated, infos[1]) is None
    changed = _snapshot(trial.read(PRE_FILTER_STATE_KEY))
    assert changed != before and _snapshot(s) == before
    assert plugin.add_pod(state, pod_info, nominated, infos[1]) is None
    assert _snapshot(s) == changed
    again = CycleState()
    plugin.pre_filter(again, pod_info, infos)
    assert _snapshot(again.read(PRE_FILTER_STATE_KEY)) == before
