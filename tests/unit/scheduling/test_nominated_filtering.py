"""With nominated pods around, only the nodes holding them take the two-pass Filter; the
chunked walk (batch for every other node) answers what the node-by-node two-pass walk does."""

from __future__ import annotations

import random

import pytest

from scheduler.cache.snapshot import Snapshot
from scheduler.framework.runtime import Framework
from scheduler.framework.types import Diagnosis
from scheduler.objects.pod import PodInfo
from scheduler.queue.nominator import Nominator
from scheduler.schedule_one import filter_nodes_from
from tests.builders import PodBuilder, make_node
from tests.offline import default_framework
from tests.unit.framework.test_filter_nodes_equivalence import (
    cluster,
    incoming,
    reference_walk,
    summary,
)


def _framework(snapshot: Snapshot, nominator: Nominator) -> Framework:
    return default_framework(snapshot, nominator=nominator)


@pytest.mark.parametrize("seed", range(8))
def test_chunked_walk_with_nominated_pods_matches_the_two_pass_walk(seed: int) -> None:
    rng = random.Random(seed)
    snapshot = cluster(seed, size=rng.choice([17, 40, 90]))
    nodes = snapshot.list()
    nominator = Nominator()
    for j in range(rng.randrange(1, 8)):
        big = (PodBuilder(f"nom{j}").uid(f"nom{j}").priority(rng.choice([0, 100]))
               .req(cpu=rng.choice(["500m", "2", "6"]), memory="1Gi").obj())
        nominator.add_nominated_pod(PodInfo.from_pod(big), rng.choice(nodes).name)
    fwk = _framework(snapshot, nominator)
    info = PodInfo.from_pod(incoming(rng.choice(["plain", "tolerating", "selector"])))
    state = fwk.new_cycle_state()
    state.record_plugin_metrics = False
    fwk.run_pre_filter_plugins(state, info, nodes)
    for _ in range(10):
        start = rng.randrange(len(nodes))
        to_find = rng.choice([1, 2, 5, 16, 17, 30, len(nodes)])
        diagnosis = Diagnosis()
        feasible, processed = filter_nodes_from(
            fwk, state, info, nodes, start=start, to_find=to_find, diagnosis=diagnosis,
            with_nominated_pods=True)
        want_feasible, want_processed, want_statuses = reference_walk(
            fwk, state, info, nodes, start, to_find, with_nominated_pods=True)
        assert [n.name for n in feasible] == want_feasible
        assert processed == want_processed
        assert {k: summary(v) for k, v in diagnosis.node_to_status.items()} == want_statuses


@pytest.mark.parametrize("seed", range(8))
def test_kept_windows_with_nominations_coming_and_going_match_the_two_pass_walk(
    seed: int,
) -> None:
    """Opportunistic batching keeps whole windows only while no node in them holds a
    nominated pod; nominations placed into and taken out of kept windows between walks
    never change an answer."""
    from scheduler.framework.batching import BatchCache

    rng = random.Random(seed)
    # Alike nodes with room for the incoming pod, so whole windows are feasible.
    snapshot = Snapshot.from_objects(
        make_node(f"n{i:02d}", cpu="4", memory="8Gi")
        for i in range(rng.choice([17, 40])))
    nodes = snapshot.list()
    nominator = Nominator()
    fwk = _framework(snapshot, nominator)
    info = PodInfo.from_pod(PodBuilder("incoming").req(cpu="1500m", memory="1Gi").obj())
    batches = BatchCache()
    for step in range(40):
        if step % 3 == 0:
            big = (PodBuilder(f"nom{step}").uid(f"nom{step}").priority(100)
                   .req(cpu=rng.choice(["2", "6"]), memory="1Gi").obj())
            nominator.add_nominated_pod(PodInfo.from_pod(big), rng.choice(nodes).name)
        elif step % 3 == 1:
            nominator.delete_nominated_pod_if_exists(
                PodBuilder(f"nom{step - 1}").uid(f"nom{step - 1}").obj())
        state = fwk.new_cycle_state()
        state.record_plugin_metrics = False
        fwk.run_pre_filter_plugins(state, info, nodes)
        batch = batches.begin(fwk, state, info, num_nodes=len(nodes), image_generation=0,
                              snapshot=snapshot)
        assert batch is not None
        start = rng.choice([0, len(nodes) // 2])
        to_find = rng.choice([5, len(nodes) // 3])
        diagnosis = Diagnosis()
        feasible, processed = filter_nodes_from(
            fwk, state, info, nodes, start=start, to_find=to_find, diagnosis=diagnosis,
            with_nominated_pods=True, batch=batch)
        want_feasible, want_processed, want_statuses = reference_walk(
            fwk, state, info, nodes, start, to_find, with_nominated_pods=True)
        assert [n.name for n in feasible] == want_feasible
        assert processed == want_processed
        assert {k: summary(v) for k, v in diagnosis.node_to_status.items()} == want_statuses
    assert batches.windows_reused > 0


# (nominee, its priority, its CPU request, the node it is nominated to); "in" is the
# incoming pod itself (priority 50).  Nodes: 20 of 4 CPU; the incoming pod asks 1500m.
_NOMINEES: dict[str, list[tuple[str, int, str, str]]] = {
    "higher priority fills n05": [("a", 100, "3", "n05")],
    "equal priority fills n05": [("a", 50, "3", "n05")],
    "lower priority on n05 is not counted": [("a", 10, "3", "n05")],
    "the pod itself nominated to n05": [("in", 50, "1500m", "n05")],
    "the pod itself and a higher one on n05": [("in", 50, "1500m", "n05"),
                                               ("a", 100, "3", "n05")],
    "two higher ones fill n05 together": [("a", 100, "1500m", "n05"),
                                          ("b", 60, "1500m", "n05")],
    "a higher and a lower one on n05": [("a", 100, "1", "n05"), ("b", 10, "3", "n05")],
    "nominees across the wrap": [("a", 100, "3", "n19"), ("b", 100, "3", "n00"),
                                 ("c", 10, "3", "n01"), ("d", 100, "1", "n02")],
    "adjacent nominated nodes": [("a", 100, "3", "n07"), ("b", 100, "3", "n08"),
                                 ("c", 100, "3", "n09")],
    "a node the snapshot does not hold": [("a", 100, "3", "gone"), ("b", 100, "3", "n03")],
}
# The nodes each case's two-pass Filter rejects (Insufficient cpu).
_REJECTED: dict[str, set[str]] = {
    "higher priority fills n05": {"n05"},
    "equal priority fills n05": {"n05"},
    "lower priority on n05 is not counted": set(),
    "the pod itself nominated to n05": set(),
    "the pod itself and a higher one on n05": {"n05"},
    "two higher ones fill n05 together": {"n05"},
    "a higher and a lower one on n05": set(),
    "nominees across the wrap": {"n19", "n00"},
    "adjacent nominated nodes": {"n07", "n08", "n09"},
    "a node the snapshot does not hold": {"n03"},
}


@pytest.mark.parametrize("batched", [False, True], ids=["unbatched", "batched"])
@pytest.mark.parametrize("case", list(_NOMINEES))
def test_chunks_with_nominated_nodes_match_the_two_pass_walk(case: str, batched: bool) -> None:
    """A chunk holding nominated nodes: those take the two-pass Filter, the runs between
    them the plain (batched: kept-by-position) one; the walk answers as the node-by-node
    two-pass walk, wherever the nominated nodes sit in the chunk (first, last, adjacent,
    across the node list's end), over cycles reading the kept results."""
    from scheduler.framework.batching import BatchCache

    snapshot = Snapshot.from_objects(
        make_node(f"n{i:02d}", cpu="4", memory="8Gi") for i in range(20))
    nodes = snapshot.list()
    nominator = Nominator()
    for name, priority, cpu, node_name in _NOMINEES[case]:
        pod = PodBuilder(name).uid(name).priority(priority).req(cpu=cpu, memory="1Gi").obj()
        nominator.add_nominated_pod(PodInfo.from_pod(pod), node_name)
    fwk = _framework(snapshot, nominator)
    info = PodInfo.from_pod(
        PodBuilder("in").uid("in").priority(50).req(cpu="1500m", memory="1Gi").obj())
    batches = BatchCache()
    rejected: set[str] = set()
    # all nodes from several starts (chunks wrap), then short walks (a chunk of 16)
    for start, to_find in [(0, 20), (15, 20), (5, 20), (18, 3), (3, 1), (5, 2), (7, 3),
                           (0, 20)]:
        state = fwk.new_cycle_state()
        state.record_plugin_metrics = False
        fwk.run_pre_filter_plugins(state, info, nodes)
        batch = (batches.begin(fwk, state, info, num_nodes=len(nodes), image_generation=0,
                               snapshot=snapshot) if batched else None)
        assert (batch is not None) == batched
        diagnosis = Diagnosis()
        feasible, processed = filter_nodes_from(
            fwk, state, info, nodes, start=start, to_find=to_find, diagnosis=diagnosis,
            with_nominated_pods=True, batch=batch)
        want_feasible, want_processed, want_statuses = reference_walk(
            fwk, state, info, nodes, start, to_find, with_nominated_pods=True)
        assert [n.name for n in feasible] == want_feasible
        assert processed == want_processed
        assert {k: summary(v) for k, v in diagnosis.node_to_status.items()} == want_statuses
        rejected |= set(diagnosis.node_to_status)
        for status in diagnosis.node_to_status.values():
            assert status.reasons == ["Insufficient cpu"]
    assert rejected == _REJECTED[case]
    if batched:
        assert batches.reused > 0  # later cycles read the plain nodes' kept statuses


@pytest.mark.parametrize("seed", range(8))
def test_batched_chunks_with_nominated_pods_match_the_two_pass_walk(seed: int) -> None:
    """Mixed nodes (every default Filter's rejection), nominees of either priority coming
    and going, batching's kept results read by position between the nominated nodes."""
    from scheduler.framework.batching import BatchCache

    rng = random.Random(seed)
    snapshot = cluster(seed, size=rng.choice([17, 40, 90]))
    nodes = snapshot.list()
    nominator = Nominator()
    fwk = _framework(snapshot, nominator)
    info = PodInfo.from_pod(incoming(rng.choice(["plain", "tolerating", "selector"])))
    batches = BatchCache()
    for step in range(30):
        if step % 2 == 0:
            big = (PodBuilder(f"nom{step}").uid(f"nom{step}").priority(rng.choice([0, 100]))
                   .req(cpu=rng.choice(["500m", "2", "6"]), memory="1Gi").obj())
            nominator.add_nominated_pod(PodInfo.from_pod(big), rng.choice(nodes).name)
        elif step % 5 == 0:
            gone = rng.randrange(step)
            nominator.delete_nominated_pod_if_exists(
                PodBuilder(f"nom{gone}").uid(f"nom{gone}").obj())
        state = fwk.new_cycle_state()
        state.record_plugin_metrics = False
        fwk.run_pre_filter_plugins(state, info, nodes)
        batch = batches.begin(fwk, state, info, num_nodes=len(nodes), image_generation=0,
                              snapshot=snapshot)
        assert batch is not None
        start = rng.randrange(len(nodes))
        to_find = rng.choice([1, 2, 5, 16, 17, 30, len(nodes)])
        diagnosis = Diagnosis()
        feasible, processed = filter_nodes_from(
            fwk, state, info, nodes, start=start, to_find=to_find, diagnosis=diagnosis,
            with_nominated_pods=True, batch=batch)
        want_feasible, want_processed, want_statuses = reference_walk(
            fwk, state, info, nodes, start, to_find, with_nominated_pods=True)
        assert [n.name for n in feasible] == want_feasible
        assert processed == want_processed
        assert {k: summary(v) for k, v in diagnosis.node_to_status.items()} == want_statuses
