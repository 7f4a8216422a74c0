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
