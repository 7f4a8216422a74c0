"""Shared drivers for the PodTopologySpread tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import NodeScore
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from tests.builders import NodeBuilder
from tests.fakes import FakeHandle, node_infos

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(name: str, zone: str | None = None, **labels: str) -> dict[str, Any]:
    b = NodeBuilder(name).labels(labels)
    if zone is not None:
        b.labels({ZONE: zone})
    return b.obj()


def four_nodes() -> list[dict[str, Any]]:
    """node-a, node-b in zone1; node-x, node-y in zone2."""
    return [node("node-a", "zone1"), node("node-b", "zone1"),
            node("node-x", "zone2"), node("node-y", "zone2")]


def make_plugin(
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]] = (),
    *,
    args: Mapping[str, Any] | None = None,
    objects: Mapping[str, Sequence[dict[str, Any]]] | None = None,
) -> tuple[PodTopologySpread, list[NodeInfo]]:
    infos = node_infos(nodes, pods)
    handle = FakeHandle(infos, objects={k: list(v) for k, v in (objects or {}).items()})
    return PodTopologySpread(dict(args or {}), handle), infos


def run_filter(
    pod: dict[str, Any],
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]] = (),
    **kw: Any,
) -> dict[str, Status | None]:
    plugin, infos = make_plugin(nodes, pods, **kw)
    state = CycleState()
    pod_info = PodInfo.from_pod(pod)
    _, status = plugin.pre_filter(state, pod_info, infos)
    if status is not None and status.code == Code.SKIP:
        return {ni.name: None for ni in infos}
    assert status is None, status
    return {ni.name: plugin.filter(state, pod_info, ni) for ni in infos}


def run_score(
    pod: dict[str, Any],
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]] = (),
    *,
    candidates: Sequence[str] | None = None,
    **kw: Any,
) -> dict[str, int] | None:
    """Normalized scores of the candidate nodes (default all); None when PreScore skipped."""
    plugin, infos = make_plugin(nodes, pods, **kw)
    feasible = [ni for ni in infos if candidates is None or ni.name in candidates]
    state = CycleState()
    pod_info = PodInfo.from_pod(pod)
    status = plugin.pre_score(state, pod_info, feasible)
    if status is not None and status.code == Code.SKIP:
        return None
    assert status is None, status
    scores = []
    for ni in feasible:
        score, st = plugin.score(state, pod_info, ni)
        assert st is None, st
        scores.append(NodeScore(ni.name, score))
    ext = plugin.score_extensions()
    assert ext is not None
    assert ext.normalize_score(state, pod_info, scores) is None
    return {s.name: s.score for s in scores}
