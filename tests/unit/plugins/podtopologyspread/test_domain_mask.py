"""PodTopologySpread's Filter as a domain mask over batching's kept statuses.

Pods whose spread rejects different domains (the domains over the skew) share one set of
kept Filter statuses and raw scores, computed with no domain rejected; the mask adds the
over-skew domains' rejections on top (``filtering.DomainMask``, framework/batching.py
``FilterMask``).  These tests check that the mask answers what Filter answers, that the
column of domains follows node changes, and that a spreading stream places every pod as the
unbatched cycle does while sharing one kept set.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code, Status
from scheduler.framework.types import FitError
from scheduler.objects.pod import PodInfo
from scheduler.plugins.podtopologyspread.filtering import DomainColumn, DomainMask
from tests.builders import NodeBuilder, PodBuilder
from tests.offline import cache_with, default_framework, scheduling_cycle
from tests.unit.plugins.podtopologyspread.helpers import ZONE, make_plugin, node

NAME = "PodTopologySpread"


def _spread_pod(name: str, *, max_skew: int = 1, keys: tuple[str, ...] = (ZONE,),
                when: str = "DoNotSchedule", cpu: str = "100m") -> dict[str, Any]:
    pod = PodBuilder(name).labels({"color": "blue"}).req(cpu=cpu, memory="128Mi").obj()
    pod["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
         "labelSelector": {"matchLabels": {"color": "blue"}}} for key in keys]
    return pod


def _on(node_name: str, i: int) -> dict[str, Any]:
    return PodBuilder(f"e-{node_name}-{i}").labels({"color": "blue"}).node(node_name).obj()


def _snapshot_of(nodes: list[dict[str, Any]]) -> tuple[Cache, Snapshot]:
    cache, snapshot = cache_with(nodes)
    cache.update_snapshot(snapshot)
    return cache, snapshot


NODES = [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("b2", "b"),
         node("c1", "c"), node("zoneless")]


# (case, matching pods per node, the pod's constraints' keys, whether a mask is expected)
MASK_CASES = [
    ("one zone over", {"a1": 2, "a2": 1}, (ZONE,), True),
    ("two zones over", {"a1": 2, "b1": 2}, (ZONE,), True),
    ("balanced: nothing over, no mask", {"a1": 1, "b1": 1, "c1": 1}, (ZONE,), False),
    ("two constraints: no mask", {"a1": 2}, (ZONE, "kubernetes.io/hostname"), False),
]


@pytest.mark.parametrize(("case", "placed", "keys", "masked"), MASK_CASES,
                         ids=[c[0] for c in MASK_CASES])
def test_the_mask_over_the_unmasked_statuses_is_what_filter_answers(
    case: str, placed: dict[str, int], keys: tuple[str, ...], masked: bool,
) -> None:
    pods = [_on(name, i) for name, count in placed.items() for i in range(count)]
    nodes = NODES + [node(f"h{i}", "c", **{"kubernetes.io/hostname": f"h{i}"})
                     for i in range(2)] if len(keys) > 1 else NODES
    plugin, infos = make_plugin(nodes, pods)
    state, pod_info = CycleState(), PodInfo.from_pod(_spread_pod("p", keys=keys))
    _, status = plugin.pre_filter(state, pod_info, infos)
    assert status is None
    real = plugin.filter_nodes(state, pod_info, infos)
    mask = plugin.filter_mask(state, pod_info)
    assert (mask is not None) == masked, case
    if mask is None:
        return
    assert isinstance(mask, DomainMask)
    assert mask.base == ((ZONE, frozenset(), False),)
    assert mask.key == plugin.sign_filter(state, pod_info)
    mask.unmask(state, True)
    base = plugin.filter_nodes(state, pod_info, infos)
    mask.unmask(state, False)
    # with the skew off only the node missing the key is rejected
    assert [s is not None for s in base] == [ni.name == "zoneless" for ni in infos]
    cache, snapshot = _snapshot_of(nodes)
    order = [ni.name for ni in snapshot.node_info_list]
    by_name = dict(zip([ni.name for ni in infos], zip(real, base)))
    rejected = set(mask.reject(snapshot, first=0, index=None, size=len(order)))
    # exactly the nodes of the domains over the skew: never a node missing the key (its
    # own status, the missing label, stays)
    zones = [(ni.node or {})["metadata"]["labels"].get(ZONE) for ni in snapshot.node_info_list]
    assert rejected == {o for o, zone in enumerate(zones) if zone in mask.over}, case
    for offset, name in enumerate(order):
        want, kept = by_name[name]
        got = (mask.status() if offset in rejected and (kept is None or kept.plugin == NAME)
               else kept)
        assert (got is None) == (want is None), (case, name)
        if got is not None and want is not None:
            assert (got.code, got.reasons) == (want.code, want.reasons), (case, name)
    # positions (a scattered window's rejected nodes) answer as the run does
    index = list(range(len(order)))[::-1]
    assert sorted(mask.reject(snapshot, first=0, index=index, size=len(index))) == sorted(
        len(order) - 1 - o for o in rejected)
    # a run that wraps past the end of the list
    wrapped = mask.reject(snapshot, first=len(order) - 2, index=None, size=4)
    assert wrapped == [o for o in range(4) if (len(order) - 2 + o) % len(order) in rejected]


def test_the_domain_column_follows_relabels_joins_and_leaves() -> None:
    nodes = [node(f"n{i}", "abc"[i % 3]) for i in range(6)]
    cache, snapshot = _snapshot_of(nodes)
    column = DomainColumn(ZONE)

    def fresh() -> list[str | None]:
        return [(ni.node or {}).get("metadata", {}).get("labels", {}).get(ZONE)
                for ni in snapshot.node_info_list]

    assert column.sync(snapshot) == fresh()
    # a relabel in place (the change log), a label removed, a node added and one removed
    for change in ("relabel", "unlabel", "add", "remove"):
        if change == "relabel":
            new = copy.deepcopy(nodes[1])
            new["metadata"]["labels"][ZONE] = "z"
            cache.update_node(nodes[1], new)
            nodes[1] = new
        elif change == "unlabel":
            new = copy.deepcopy(nodes[2])
            del new["metadata"]["labels"][ZONE]
            cache.update_node(nodes[2], new)
            nodes[2] = new
        elif change == "add":
            nodes.append(node("n9", "q"))
            cache.add_node(nodes[-1])
        else:
            cache.remove_node(nodes.pop(0))
        cache.update_snapshot(snapshot)
        assert column.sync(snapshot) == fresh(), change


def test_the_domain_column_rereads_another_snapshot_at_the_same_versions() -> None:
    column = DomainColumn(ZONE)
    _, first = _snapshot_of([node("n0", "a"), node("n1", "b")])
    _, second = _snapshot_of([node("n0", "c"), node("n1", "a")])
    assert (first.list_version, first.change_serial) == (
        second.list_version, second.change_serial)
    assert column.sync(first) == ["a", "b"]
    assert column.sync(second) == ["c", "a"]
    assert column.sync(first) == ["a", "b"]


def _cluster() -> list[dict[str, Any]]:
    nodes = []
    for i in range(30):
        b = NodeBuilder(f"n{i:02d}").capacity(cpu="1" if i % 7 == 3 else "4", memory="16Gi",
                                              pods=110)
        b.labels({"kubernetes.io/hostname": f"n{i:02d}"})
        if i != 11:  # one node without a zone
            b.labels({ZONE: "abc"[i % 3]})
        nodes.append(b.obj())
    return nodes


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_a_spreading_stream_places_like_unbatched_and_shares_one_kept_set(seed: int) -> None:
    """Upstream's TopologySpreading pod (maxSkew 1 here, so domains go over at once) on a
    cluster with full nodes, a node with no zone and nodes changing zone: the batched
    cycle places and rejects every pod as the unbatched one, and the pods whose spread
    rejects different zones share one kept set (one signature per pod shape)."""
    def run(batched: bool) -> tuple[list[str], Any]:
        nodes = _cluster()
        cache, snapshot = cache_with(nodes)
        fwk = default_framework(snapshot)
        cycle = scheduling_cycle(cache, snapshot, seed=seed, percentage=30)
        if not batched:
            cycle.batches = None
        masked = 0
        outcomes = []
        for i in range(120):
            if i % 25 == 24:  # a node changes zone
                j = (i // 25 * 4) % len(nodes)
                new = copy.deepcopy(nodes[j])
                new["metadata"]["labels"][ZONE] = "abc"[(i // 25) % 3]
                cache.update_node(nodes[j], new)
                nodes[j] = new
            pod = _spread_pod(f"p{i}", cpu="1" if i % 5 == 0 else "100m")
            pod["metadata"]["uid"] = f"u{i}"
            info = PodInfo.from_pod(pod)
            cache.update_snapshot(snapshot)
            state = fwk.new_cycle_state()
            try:
                result = cycle.schedule_pod(fwk, state, info)
            except FitError as exc:
                outcomes.append(f"rejected: {exc}")
                continue
            plugin = dict(fwk.filter_plugins)[NAME]
            masked += plugin.filter_mask(state, info) is not None  # type: ignore[attr-defined]
            outcomes.append(f"{result.suggested_host} {result.evaluated_nodes} "
                            f"{result.feasible_nodes}")
            bound = {**pod, "spec": {**pod["spec"], "nodeName": result.suggested_host}}
            cache.assume_pod(PodInfo.from_pod(bound))
        return outcomes, (cycle.batches, masked)

    plain, _ = run(False)
    batched, (batches, masked) = run(True)
    assert batched == plain
    assert masked > 20  # most cycles had a zone over the skew
    # ... and they shared one kept set per pod shape (two requests: 1 CPU and 100m), not
    # one per set of zones over the skew
    assert len(batches) == 2
    assert batches.reused > 0


def test_a_mask_never_overrides_an_earlier_plugins_rejection() -> None:
    """A full node in an over-skew zone keeps NodeResourcesFit's status (Fit comes first in
    the Filter order), as the unbatched cycle reports it."""
    nodes = [NodeBuilder(f"n{i}").capacity(cpu="1" if i == 0 else "4", memory="16Gi",
                                           pods=110)
             .labels({ZONE: "ab"[i % 2], "kubernetes.io/hostname": f"n{i}"}).obj()
             for i in range(4)]
    outcomes = {}
    for batched in (False, True):
        cache, snapshot = cache_with(nodes)
        fwk = default_framework(snapshot)
        cycle = scheduling_cycle(cache, snapshot, seed=3, percentage=0)
        if not batched:
            cycle.batches = None
        seen = []
        for i in range(6):
            pod = _spread_pod(f"p{i}", cpu="2")
            pod["metadata"]["uid"] = f"u{i}"
            cache.update_snapshot(snapshot)
            try:
                host = cycle.schedule_pod(fwk, fwk.new_cycle_state(),
                                          PodInfo.from_pod(pod)).suggested_host
            except FitError as exc:
                seen.append(f"rejected: {exc}")
                continue
            seen.append(host)
            cache.assume_pod(PodInfo.from_pod(
                {**pod, "spec": {**pod["spec"], "nodeName": host}}))
        outcomes[batched] = seen
    assert outcomes[True] == outcomes[False]
    assert any("Insufficient cpu" in o and "topology spread" in o for o in outcomes[True])
