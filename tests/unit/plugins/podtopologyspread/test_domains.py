"""Incremental per-domain counts equal a fresh recount after any sequence of cluster changes."""

from __future__ import annotations

import random

import pytest

from scheduler.framework.node_info import NodeInfo
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread.domains import DomainCounts
from tests.builders import NodeBuilder, PodBuilder

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def fresh(nodes: list[NodeInfo], key: str, keys: tuple[str, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ni in nodes:
        labels = (ni.node or {}).get("metadata", {}).get("labels") or {}
        if ni.node is None or not all(k in labels for k in keys):
            continue
        value = labels[key]
        counts[value] = counts.get(value, 0) + sum(
            1 for p in ni.pods if p.labels.get("app") == "web")
    return counts


def count_web(ni: NodeInfo) -> int:
    return sum(1 for p in ni.pods if p.labels.get("app") == "web")


@pytest.mark.parametrize("seed", range(12))
def test_incremental_counts_match_a_fresh_count(seed: int) -> None:
    rng = random.Random(seed)
    nodes: list[NodeInfo] = []
    serial = 0

    def new_node() -> NodeInfo:
        nonlocal serial
        serial += 1
        labels = {HOST: f"n{serial}"}
        if rng.random() < 0.85:  # some nodes lack the zone key: not eligible
            labels[ZONE] = rng.choice(["a", "b", "c"])
        return NodeInfo(NodeBuilder(f"n{serial}").labels(labels).obj())

    for _ in range(8):
        nodes.append(new_node())
    domains = {key: DomainCounts() for key in (ZONE, HOST)}
    keys = (ZONE, HOST)
    for step in range(150):
        action = rng.random()
        if action < 0.5 and nodes:
            ni = rng.choice(nodes)
            app = rng.choice(["web", "db"])
            ni.add_pod(PodInfo.from_pod(
                PodBuilder(f"p{seed}-{step}").uid(f"u{seed}-{step}").labels(app=app).obj()))
        elif action < 0.65 and nodes:
            ni = rng.choice(nodes)
            if ni.pods:
                ni.remove_pod(rng.choice(ni.pods).pod)
        elif action < 0.75:
            nodes.append(new_node())
        elif action < 0.85 and len(nodes) > 1:
            nodes.remove(rng.choice(nodes))
        elif nodes:
            ni = rng.choice(nodes)
            labels = dict(ni.node["metadata"]["labels"]) if ni.node else {}
            labels[ZONE] = rng.choice(["a", "b", "c", "d"])
            ni.set_node(NodeBuilder(ni.name).labels(labels).obj())
        for key, dc in domains.items():
            got = dc.refresh(nodes, topology_key=key, required_keys=keys, count=count_web)
            assert got == fresh(nodes, key, keys), (seed, step, key)


def test_empty_domains_are_reported_with_zero() -> None:
    a = NodeInfo(NodeBuilder("a").labels({ZONE: "x", HOST: "a"}).obj())
    b = NodeInfo(NodeBuilder("b").labels({ZONE: "y", HOST: "b"}).obj())
    a.add_pod(PodInfo.from_pod(PodBuilder("p").uid("u").labels(app="web").obj()))
    counts = DomainCounts().refresh([a, b], topology_key=ZONE, required_keys=(ZONE,),
                                    count=count_web)
    assert counts == {"x": 1, "y": 0}
