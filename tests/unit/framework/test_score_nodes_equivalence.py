"""Every Score plugin's batch ``score_nodes`` returns exactly what ``score`` returns per node.

The runtime only calls ``score_nodes``; plugins override it for speed, so this guards the
fast paths against drifting from the per-node semantics, on the default profile and a mixed
cluster (taints, images, zones, existing pods with spread and affinity).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.interfaces import ScorePlugin
from scheduler.framework.types import NodeScore
from scheduler.objects.pod import PodInfo
from tests.builders import NodeBuilder, PodBuilder
from tests.offline import default_framework

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def cluster(seed: int) -> tuple[Cache, Snapshot]:
    rng = random.Random(seed)
    cache = Cache()
    for i in range(30):
        b = NodeBuilder(f"n{i}").capacity(cpu=rng.choice(["4", "8", "16"]),
                                          memory=rng.choice(["8Gi", "32Gi"]), pods=110)
        b.labels({ZONE: rng.choice("abc"), HOST: f"n{i}", "disk": rng.choice(["ssd", "hdd"])})
        if rng.random() < 0.2:
            b.taint("soft", "x", "PreferNoSchedule")
        if rng.random() < 0.3:
            b.images((["registry.k8s.io/app:1"], 300 * 1024 * 1024))
        cache.add_node(b.obj())
    for j in range(60):
        p = (PodBuilder(f"e{j}").uid(f"e{j}").labels(app=rng.choice(["web", "db"]))
             .req(cpu=rng.choice(["100m", "500m", "1"]), memory="256Mi").node(f"n{rng.randrange(30)}"))
        if rng.random() < 0.3:
            p.pod_affinity_preferred(50, {"app": "web"}, HOST)
        cache.add_pod(PodInfo.from_pod(p.obj()))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    return cache, snapshot


def incoming(kind: str) -> dict[str, Any]:
    p = PodBuilder("in").uid("in").labels(app="web").req(cpu="200m", memory="128Mi")
    p.container("img", image="registry.k8s.io/app:1")
    if kind in ("spread", "all"):
        p.topology_spread(1, ZONE, "ScheduleAnyway", {"app": "web"})
        p.topology_spread(2, HOST, "ScheduleAnyway", {"app": "web"})
    if kind in ("affinity", "all"):
        p.pod_affinity_preferred(30, {"app": "db"}, ZONE)
        p.pod_anti_affinity_preferred(20, {"app": "web"}, HOST)
        p.preferred_node_affinity(10, {"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd"]}]})
    return p.obj()


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("kind", ["plain", "spread", "affinity", "all"])
def test_score_nodes_matches_score(seed: int, kind: str) -> None:
    _, snapshot = cluster(seed)
    fwk = default_framework(snapshot)
    info = PodInfo.from_pod(incoming(kind))
    state = fwk.new_cycle_state()
    nodes = snapshot.list()
    _, status, _ = fwk.run_pre_filter_plugins(state, info, nodes)
    assert status is None or status.is_success(), status
    feasible = [n for n in nodes if fwk.run_filter_plugins(state, info, n) is None]
    assert len(feasible) > 5
    assert fwk.run_pre_score_plugins(state, info, feasible) is None
    checked = 0
    for name, plugin in fwk.plugins.items():
        if not isinstance(plugin, ScorePlugin) or name in state.skip_score_plugins:
            continue
        batch, batch_status = plugin.score_nodes(state, info, feasible)
        single = [plugin.score(state, info, n) for n in feasible]
        assert batch_status is None, (name, batch_status)
        assert all(s is None for _, s in single), name
        assert batch == [v for v, _ in single], name
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("kind", ["plain", "affinity", "all"])
def test_normalize_score_values_matches_normalize_score(seed: int, kind: str) -> None:
    _, snapshot = cluster(seed)
    fwk = default_framework(snapshot)
    info = PodInfo.from_pod(incoming(kind))
    state = fwk.new_cycle_state()
    nodes = snapshot.list()
    fwk.run_pre_filter_plugins(state, info, nodes)
    feasible = [n for n in nodes if fwk.run_filter_plugins(state, info, n) is None]
    assert fwk.run_pre_score_plugins(state, info, feasible) is None
    checked = 0
    for name, plugin in fwk.plugins.items():
        if not isinstance(plugin, ScorePlugin) or name in state.skip_score_plugins:
            continue
        ext = plugin.score_extensions()
        fast = getattr(ext, "normalize_score_values", None)
        if ext is None or fast is None:
            continue
        values, _ = plugin.score_nodes(state, info, feasible)
        node_scores = [NodeScore(n.name, v) for n, v in zip(feasible, values)]
        assert ext.normalize_score(state, info, node_scores) is None
        got, status = fast(state, info, [n.name for n in feasible], list(values))
        assert status is None
        assert got == [ns.score for ns in node_scores], name
        checked += 1
    assert checked >= 1
