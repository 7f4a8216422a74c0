"""PreFilter sums kept across cycles equal a fresh count after any sequence of changes.

``PairSums`` is exercised directly on NodeInfos that change under it, and through the
plugin: a long-lived InterPodAffinity (its sums carried from cycle to cycle) must write the
same PreFilter counts as a plugin built afresh for every cycle.
"""

from __future__ import annotations

import random

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.interpodaffinity.common import TopologyCounts
from scheduler.plugins.interpodaffinity.filtering import (
    PRE_FILTER_STATE_KEY,
    PairSums,
    PreFilterState,
    _pairs,
)
from scheduler.plugins.interpodaffinity.scoring import PRE_SCORE_STATE_KEY
from tests.builders import NodeBuilder, PodBuilder
from tests.offline import default_framework

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def web_pairs(ni: NodeInfo) -> tuple[tuple[tuple[str, str, int], ...]]:
    counts = TopologyCounts()
    labels = (ni.node or {}).get("metadata", {}).get("labels") or {}
    for p in ni.pods:
        if p.labels.get("app") == "web":
            for key in (ZONE, HOST):
                if key in labels:
                    counts.add(key, labels[key], 1)
    return (_pairs(counts),)


def fresh(nodes: list[NodeInfo]) -> dict[str, dict[str, int]]:
    total = TopologyCounts()
    for ni in nodes:
        for key, value, count in web_pairs(ni)[0]:
            total.add(key, value, count)
    return total.data


@pytest.mark.parametrize("seed", range(10))
def test_pair_sums_match_a_fresh_sum(seed: int) -> None:
    rng = random.Random(seed)
    nodes: list[NodeInfo] = []
    serial = 0

    def new_node() -> NodeInfo:
        nonlocal serial
        serial += 1
        return NodeInfo(NodeBuilder(f"n{serial}").labels(
            {HOST: f"n{serial}", ZONE: rng.choice("abc")}).obj())

    nodes.extend(new_node() for _ in range(6))
    sums = PairSums(1)
    for step in range(150):
        action = rng.random()
        if action < 0.5 and nodes:
            rng.choice(nodes).add_pod(PodInfo.from_pod(
                PodBuilder(f"p{step}").uid(f"u{seed}-{step}")
                .labels(app=rng.choice(["web", "db"])).obj()))
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
            ni.set_node(NodeBuilder(ni.name).labels(
                {HOST: ni.name, ZONE: rng.choice("abcd")}).obj())
        subset = [n for n in nodes if rng.random() < 0.8]  # the set itself changes too
        (got,) = sums.refresh(subset, web_pairs)
        assert got.data == fresh(subset), (seed, step)


def _framework(snapshot: Snapshot) -> Framework:
    return default_framework(snapshot)


def _counts(fwk: Framework, snapshot: Snapshot, pod: dict[str, object]) -> tuple[object, ...]:
    plugin = fwk.plugins["InterPodAffinity"]
    state = fwk.new_cycle_state()
    info = PodInfo.from_pod(pod)  # type: ignore[arg-type]
    plugin.pre_filter(state, info, snapshot.list())  # type: ignore[attr-defined]
    s = state.get(PRE_FILTER_STATE_KEY)
    assert isinstance(s, PreFilterState)
    return (s.affinity_counts.data, s.anti_affinity_counts.data,
            s.existing_anti_affinity_counts.data)


@pytest.mark.parametrize("seed", range(6))
def test_long_lived_plugin_writes_the_counts_a_fresh_plugin_writes(seed: int) -> None:
    rng = random.Random(seed)
    cache, snapshot = Cache(), Snapshot()
    for i in range(12):
        cache.add_node(NodeBuilder(f"n{i}").labels({HOST: f"n{i}", ZONE: rng.choice("abc")})
                       .capacity(cpu="64", memory="64Gi", pods=500).obj())
    long_lived = _framework(snapshot)
    placed: list[dict[str, object]] = []
    for step in range(60):
        app = rng.choice(["web", "db"])
        b = PodBuilder(f"p{step}").uid(f"u{step}").labels(app=app).node(f"n{rng.randrange(12)}")
        if rng.random() < 0.4:
            b.pod_anti_affinity_required({"app": rng.choice(["web", "db"])},
                                         rng.choice([HOST, ZONE]))
        if rng.random() < 0.2 and placed:
            cache.remove_pod(placed.pop(rng.randrange(len(placed))))
        else:
            pod = b.obj()
            cache.add_pod(PodInfo.from_pod(pod))
            placed.append(pod)
        cache.update_snapshot(snapshot)
        incoming = (PodBuilder("in").uid("in").labels(app=rng.choice(["web", "db"]))
                    .pod_anti_affinity_required({"app": "web"}, HOST)
                    .pod_affinity_required({"app": "db"}, ZONE).obj())
        assert _counts(long_lived, snapshot, incoming) == _counts(
            _framework(snapshot), snapshot, incoming), (seed, step)


def _pre_score(fwk: Framework, snapshot: Snapshot, pod: dict[str, object]) -> object:
    plugin = fwk.plugins["InterPodAffinity"]
    state = fwk.new_cycle_state()
    status = plugin.pre_score(  # type: ignore[attr-defined]
        state, PodInfo.from_pod(pod), snapshot.list())  # type: ignore[arg-type]
    s = state.get(PRE_SCORE_STATE_KEY)
    return status.code if status is not None else None, getattr(s, "topology_score", None)


def _walked_pre_score(fwk: Framework, snapshot: Snapshot, pod: dict[str, object]) -> object:
    """What PreScore writes by definition, for an incoming pod without preferred terms: a
    walk over every pod of every node, summing the weights of existing pods' terms that
    select it (pairs summing to 0 dropped; nothing at all: Skip)."""
    plugin = fwk.plugins["InterPodAffinity"]
    incoming = PodInfo.from_pod(pod)  # type: ignore[arg-type]
    total = TopologyCounts()
    for node_info in snapshot.list():
        labels = (node_info.node or {}).get("metadata", {}).get("labels") or {}
        for existing in node_info.pods:
            terms = plugin.terms_of(existing.pod)  # type: ignore[attr-defined]
            weighted = [(t, 1) for t in terms.required_affinity] + [
                (w.term, w.weight) for w in terms.preferred_affinity] + [
                (w.term, -w.weight) for w in terms.preferred_anti_affinity]
            for term, weight in weighted:
                if term.matches(incoming.namespace, incoming.labels, None) and (
                        term.topology_key in labels):
                    total.add(term.topology_key, labels[term.topology_key], weight)
    if not total:
        return Code.SKIP, None
    return None, total.data


@pytest.mark.parametrize("seed", range(6))
def test_long_lived_plugin_pre_scores_as_a_fresh_plugin(seed: int) -> None:
    """PreScore keeps, per node, the pods whose terms score others; changes must show."""
    rng = random.Random(seed)
    cache, snapshot = Cache(), Snapshot()
    for i in range(10):
        cache.add_node(NodeBuilder(f"n{i}").labels({HOST: f"n{i}", ZONE: rng.choice("abc")})
                       .capacity(cpu="64", memory="64Gi", pods=500).obj())
    long_lived = _framework(snapshot)
    placed: list[dict[str, object]] = []
    for step in range(60):
        b = (PodBuilder(f"p{step}").uid(f"u{step}").labels(app=rng.choice(["web", "db"]))
             .node(f"n{rng.randrange(10)}"))
        roll = rng.random()
        if roll < 0.3:
            b.pod_affinity_preferred(rng.randint(1, 50), {"app": "web"}, rng.choice([HOST, ZONE]))
        elif roll < 0.5:
            b.pod_anti_affinity_preferred(rng.randint(1, 50), {"app": "db"}, ZONE)
        elif roll < 0.7:
            b.pod_anti_affinity_required({"app": "web"}, HOST)
        elif roll < 0.8:
            b.pod_affinity_required({"app": "web"}, ZONE)
        if rng.random() < 0.25 and placed:
            cache.remove_pod(placed.pop(rng.randrange(len(placed))))
        else:
            pod = b.obj()
            cache.add_pod(PodInfo.from_pod(pod))
            placed.append(pod)
        cache.update_snapshot(snapshot)
        incoming = (PodBuilder("in").uid("in").labels(app=rng.choice(["web", "db"]))
                    .pod_anti_affinity_required({"app": "web"}, HOST).obj())
        got = _pre_score(long_lived, snapshot, incoming)
        assert got == _pre_score(_framework(snapshot), snapshot, incoming), (seed, step)
        assert got == _walked_pre_score(long_lived, snapshot, incoming), (seed, step)
