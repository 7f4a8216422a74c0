"""With nominated pods around, only the nodes holding them take the two-pass Filter; the
chunked walk (batch for every other node) answers what the node-by-node two-pass walk does."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.cache.snapshot import Snapshot
from scheduler.config.defaults import default_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.runtime import Framework
from scheduler.framework.types import Diagnosis
from scheduler.objects.pod import PodInfo
from scheduler.offline import offline_handle_kwargs
from scheduler.plugins.registry import in_tree_registry
from scheduler.queue.nominator import Nominator
from scheduler.schedule_one import filter_nodes_from
from tests.builders import PodBuilder
from tests.unit.framework.test_filter_nodes_equivalence import cluster, incoming, summary


def _framework(snapshot: Snapshot, nominator: Nominator) -> Framework:
    kwargs = offline_handle_kwargs()
    kwargs["snapshot_provider"] = lambda: snapshot
    kwargs["nominator"] = nominator
    return Framework(profile=default_config().profiles[0], registry=in_tree_registry(), **kwargs)


def _reference(fwk: Framework, state: CycleState, info: PodInfo, nodes: list[NodeInfo],
               start: int, to_find: int) -> tuple[list[str], int, dict[str, Any]]:
    feasible: list[str] = []
    statuses: dict[str, Any] = {}
    processed = 0
    for i in range(len(nodes)):
        node_info = nodes[(start + i) % len(nodes)]
        processed += 1
        status = fwk.run_filter_plugins_with_nominated_pods(state, info, node_info)
        if status is None or status.is_success():
            feasible.append(node_info.name)
            if len(feasible) >= to_find:
                break
        else:
            statuses[node_info.name] = summary(status)
    return feasible, processed, statuses


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
        want_feasible, want_processed, want_statuses = _reference(
            fwk, state, info, nodes, start, to_find)
        assert [n.name for n in feasible] == want_feasible
        assert processed == want_processed
        assert {k: summary(v) for k, v in diagnosis.node_to_status.items()} == want_statuses
