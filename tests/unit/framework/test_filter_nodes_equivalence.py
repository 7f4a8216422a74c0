"""Batch filtering answers exactly what node-by-node filtering answers.

The scheduling cycle filters through ``Framework.run_filter_plugins_on_nodes`` (one
``filter_nodes`` call per plugin) and ``filter_nodes_from`` (chunks sized to the nodes still
wanted).  These tests hold both to the per-node semantics on a mixed cluster: the same status
(code, reasons, first rejecting plugin) for every node, and the same feasible nodes, examined
count and diagnosis as a plain walk that stops at the ``to_find``-th feasible node.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.batching import BatchCache
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterPlugin
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.framework.types import Diagnosis
from scheduler.objects.pod import PodInfo
from scheduler.schedule_one import filter_nodes_from
from tests.builders import NodeBuilder, PodBuilder
from tests.offline import default_framework

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def cluster(seed: int, size: int = 40) -> Snapshot:
    """Nodes that fail in every way the default Filter plugins check, mixed at random."""
    rng = random.Random(seed)
    cache = Cache()
    for i in range(size):
        b = NodeBuilder(f"n{i}").capacity(cpu=rng.choice(["1", "2", "8"]),
                                          memory=rng.choice(["1Gi", "8Gi"]),
                                          pods=rng.choice([2, 110]),
                                          ephemeral_storage=rng.choice([None, "10Gi"]))
        b.labels({ZONE: rng.choice("abc"), HOST: f"n{i}", "disk": rng.choice(["ssd", "hdd"])})
        roll = rng.random()
        if roll < 0.15:
            b.unschedulable()
        elif roll < 0.3:
            b.taint("dedicated", rng.choice(["x", "y"]), rng.choice(["NoSchedule", "NoExecute"]))
        elif roll < 0.4:
            b.taint("soft", "x", "PreferNoSchedule")
        cache.add_node(b.obj())
    for j in range(3 * size):
        p = (PodBuilder(f"e{j}").uid(f"e{j}").labels(app=rng.choice(["web", "db"]))
             .req(cpu=rng.choice(["100m", "500m", "1"]), memory=rng.choice(["128Mi", "1Gi"]))
             .node(f"n{rng.randrange(size)}"))
        if rng.random() < 0.1:
            p.host_port(8080)
        cache.add_pod(PodInfo.from_pod(p.obj()))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    return snapshot


def incoming(kind: str) -> dict[str, Any]:
    p = PodBuilder("in").uid("in").labels(app="web").req(cpu="700m", memory="512Mi")
    if kind == "tolerating":
        p.toleration("dedicated", value="x", effect="NoSchedule")
        p.toleration("node.kubernetes.io/unschedulable", operator="Exists")
    elif kind == "selector":
        p.node_selector(disk="ssd")
    elif kind == "ports":
        p.host_port(8080)
    elif kind == "storage":
        p.req(cpu="100m", memory="64Mi", ephemeral_storage="1Gi")
    elif kind == "node-name":
        p.node("n3")
    elif kind == "anti-affinity":
        p.pod_anti_affinity_required({"app": "web"}, HOST)
    elif kind == "affinity":
        p.pod_affinity_required({"app": "db"}, ZONE)
    elif kind == "spread":
        p.topology_spread(1, ZONE, "DoNotSchedule", {"app": "web"})
        p.topology_spread(3, HOST, "DoNotSchedule", {"app": "web"})
    return p.obj()


KINDS = ["plain", "tolerating", "selector", "ports", "storage", "node-name", "anti-affinity",
         "affinity", "spread"]


def framework(snapshot: Snapshot) -> Framework:
    return default_framework(snapshot)


def prepared(fwk: Framework, snapshot: Snapshot, kind: str) -> tuple[CycleState, PodInfo]:
    info = PodInfo.from_pod(incoming(kind))
    state = fwk.new_cycle_state()
    state.record_plugin_metrics = False
    _, status, _ = fwk.run_pre_filter_plugins(state, info, snapshot.list())
    assert status is None or status.is_success(), status
    return state, info


def summary(status: Status | None) -> tuple[Any, ...] | None:
    if status is None or status.code == Code.SUCCESS:
        return None
    return status.code, tuple(status.reasons), status.plugin


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_each_plugin_filter_nodes_matches_filter(seed: int, kind: str) -> None:
    snapshot = cluster(seed)
    fwk = framework(snapshot)
    state, info = prepared(fwk, snapshot, kind)
    nodes = snapshot.list()
    checked = 0
    for name, plugin in fwk.plugins.items():
        if not isinstance(plugin, FilterPlugin) or name in state.skip_filter_plugins:
            continue
        batch = plugin.filter_nodes(state, info, nodes)
        single = [plugin.filter(state, info, n) for n in nodes]
        assert [summary(s) for s in batch] == [summary(s) for s in single], name
        distinct = [id(s) for s in batch if s is not None]
        assert len(distinct) == len(set(distinct)), f"{name} shares a Status between nodes"
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_runtime_batch_names_the_first_rejecting_plugin(seed: int, kind: str) -> None:
    snapshot = cluster(seed)
    fwk = framework(snapshot)
    state, info = prepared(fwk, snapshot, kind)
    nodes = snapshot.list()
    batch = fwk.run_filter_plugins_on_nodes(state, info, nodes)
    single = [fwk.run_filter_plugins(state, info, n) for n in nodes]
    assert [summary(s) for s in batch] == [summary(s) for s in single]
    assert any(s is not None for s in single)
    # The one named node may itself be full; seed 1 leaves no room within the spread.
    if not (kind == "node-name" or (kind == "spread" and seed == 1)):
        assert any(s is None for s in single)


def reference_walk(fwk: Framework, state: CycleState, info: PodInfo, nodes: list[NodeInfo],
                   start: int, to_find: int, *, with_nominated_pods: bool = False,
                   ) -> tuple[list[str], int, dict[str, Any]]:
    """Node by node from ``start``, round robin, until ``to_find`` fit: the feasible names,
    how many nodes were examined and the summary of each rejection; with
    ``with_nominated_pods``, each node through the two-pass Filter."""
    run = (fwk.run_filter_plugins_with_nominated_pods if with_nominated_pods
           else fwk.run_filter_plugins)
    feasible: list[str] = []
    statuses: dict[str, Any] = {}
    processed = 0
    for i in range(len(nodes)):
        node_info = nodes[(start + i) % len(nodes)]
        processed += 1
        status = run(state, info, node_info)
        if status is None or status.is_success():
            feasible.append(node_info.name)
            if len(feasible) >= to_find:
                break
        else:
            statuses[node_info.name] = summary(status)
    return feasible, processed, statuses


@pytest.mark.parametrize("seed", range(8))
def test_chunked_walk_matches_the_node_by_node_walk(seed: int) -> None:
    rng = random.Random(seed)
    snapshot = cluster(seed, size=rng.choice([17, 40, 90]))
    fwk = framework(snapshot)
    state, info = prepared(fwk, snapshot, rng.choice(["plain", "tolerating", "selector",
                                                      "anti-affinity", "spread"]))
    nodes = snapshot.list()
    for _ in range(10):
        start = rng.randrange(len(nodes))
        to_find = rng.choice([1, 2, 5, 16, 17, 30, len(nodes)])
        diagnosis = Diagnosis()
        feasible, processed = filter_nodes_from(
            fwk, state, info, nodes, start=start, to_find=to_find, diagnosis=diagnosis)
        want_feasible, want_processed, want_statuses = reference_walk(
            fwk, state, info, nodes, start, to_find)
        assert [n.name for n in feasible] == want_feasible
        assert processed == want_processed
        assert {k: summary(v) for k, v in diagnosis.node_to_status.items()} == want_statuses
        assert diagnosis.unschedulable_plugins == {s[2] for s in want_statuses.values()}


@pytest.mark.parametrize("seed", range(8))
def test_the_batched_walk_matches_the_node_by_node_walk(seed: int) -> None:
    """The walk over the snapshot's own node list with a batch (kept statuses read by
    position; after a chunk that met rejections, the next is sized by the share that
    passed) examines the same nodes and records the same rejections."""
    rng = random.Random(seed)
    snapshot = cluster(seed, size=rng.choice([40, 90, 200]))
    fwk = framework(snapshot)
    nodes = snapshot.list()
    batches = BatchCache()
    for _ in range(10):
        state, info = prepared(fwk, snapshot, rng.choice(["plain", "tolerating", "selector",
                                                          "storage", "spread"]))
        batch = batches.begin(fwk, state, info, num_nodes=len(nodes), image_generation=0,
                              snapshot=snapshot)
        start = rng.randrange(len(nodes))
        to_find = rng.choice([1, 5, 17, 30, len(nodes) // 3, len(nodes) // 2, len(nodes)])
        diagnosis = Diagnosis()
        feasible, processed = filter_nodes_from(
            fwk, state, info, nodes, start=start, to_find=to_find, diagnosis=diagnosis,
            batch=batch)
        want_feasible, want_processed, want_statuses = reference_walk(
            fwk, state, info, nodes, start, to_find)
        assert [n.name for n in feasible] == want_feasible
        assert processed == want_processed
        assert {k: summary(v) for k, v in diagnosis.node_to_status.items()} == want_statuses


class _Raises(FilterPlugin):
    """Rejects odd-numbered nodes and raises on one node (batch and single alike)."""

    NAME = "Raises"

    def __init__(self, bad: str) -> None:
        self.bad = bad

    def name(self) -> str:
        return self.NAME

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        if node_info.name == self.bad:
            raise RuntimeError("boom")
        if int(node_info.name[1:]) % 2:
            return Status(Code.UNSCHEDULABLE, "odd node")
        return None


def test_a_raising_batch_is_retried_node_by_node_so_only_that_node_errs() -> None:
    snapshot = cluster(5, size=10)
    fwk = framework(snapshot)
    state, info = prepared(fwk, snapshot, "plain")
    raises = _Raises("n4")
    fwk._filter.insert(0, ("Raises", raises))  # first, so every node reaches it
    fwk._filter_evals.insert(0, 0)
    fwk._plan_state = None
    nodes = snapshot.list()
    statuses = fwk.run_filter_plugins_on_nodes(state, info, nodes)
    by_name = {n.name: s for n, s in zip(nodes, statuses)}
    assert by_name["n4"] is not None and by_name["n4"].code == Code.ERROR
    assert "boom" in by_name["n4"].message()
    for name, status in by_name.items():
        if name == "n4" or status is None:
            continue
        assert status.code != Code.ERROR, (name, status)
    odd = [s for n, s in by_name.items()
           if n != "n4" and s is not None and s.plugin == "Raises"]
    assert odd and all(s.reasons == ["odd node"] for s in odd)
