"""Shared drivers for the InterPodAffinity tests: run PreFilter+Filter or the scoring points."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.status import Code, Status
from scheduler.framework.types import NodeScore
from scheduler.objects.pod import PodInfo
from scheduler.plugins.interpodaffinity.plugin import InterPodAffinity
from tests.fakes import FakeHandle, node_infos

ZONE = "zone"
REGION = "region"
HOST = "kubernetes.io/hostname"


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": dict(labels)}}


def make_plugin(
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]] = (),
    *,
    namespaces: Sequence[dict[str, Any]] = (),
    args: Mapping[str, Any] | None = None,
) -> tuple[InterPodAffinity, list[NodeInfo]]:
    infos = node_infos(nodes, pods)
    handle = FakeHandle(infos, objects={"namespaces": list(namespaces)})
    return InterPodAffinity(dict(args or {}), handle), infos


def run_filter(
    pod: dict[str, Any],
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]] = (),
    *,
    namespaces: Sequence[dict[str, Any]] = (),
) -> dict[str, Status | None]:
    """Status per node after PreFilter + Filter (None = fits; a PreFilter Skip fits all)."""
    plugin, infos = make_plugin(nodes, pods, namespaces=namespaces)
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
    namespaces: Sequence[dict[str, Any]] = (),
    args: Mapping[str, Any] | None = None,
) -> dict[str, int] | None:
    """Normalized scores per node, or None when PreScore skipped the plugin."""
    plugin, infos = make_plugin(nodes, pods, namespaces=namespaces, args=args)
    state = CycleState()
    pod_info = PodInfo.from_pod(pod)
    status = plugin.pre_score(state, pod_info, infos)
    if status is not None and status.code == Code.SKIP:
        return None
    assert status is None, status
    scores = []
    for ni in infos:
        score, st = plugin.score(state, pod_info, ni)
        assert st is None, st
        scores.append(NodeScore(ni.name, score))
    ext = plugin.score_extensions()
    assert ext is not None
    assert ext.normalize_score(state, pod_info, scores) is None
    return {s.name: s.score for s in scores}
