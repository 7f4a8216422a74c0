"""A PreFilter result's nodes (a gang's topology domain) are taken in the snapshot's order,
whether looked up by position (a few nodes of many) or walked (many): the same nodes, in
the same order, so the placements do not change."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from scheduler.cache import Snapshot
from scheduler.metrics import SchedulerMetrics
from scheduler.schedule_one import SchedulingCycle
from tests.builders import make_node


@dataclass
class _Sched:
    snapshot: Snapshot
    metrics: SchedulerMetrics = field(default_factory=SchedulerMetrics)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("size", [0, 1, 3, 20, 150], ids=lambda n: f"{n}-allowed")
def test_restrict_keeps_the_snapshot_order(seed: int, size: int) -> None:
    rng = random.Random(seed)
    snapshot = Snapshot.from_objects(
        [make_node(f"n{i}", labels={"topology.kubernetes.io/zone": f"z{i % 3}"})
         for i in range(200)])
    cycle = SchedulingCycle(_Sched(snapshot))  # type: ignore[arg-type]
    all_nodes = snapshot.list()
    allowed = {n.name for n in rng.sample(all_nodes, size)} | {"gone"}  # one unknown name
    expected = [n for n in all_nodes if n.name in allowed]
    assert cycle._restrict(all_nodes, allowed) == expected
    # A copy of the list (not the snapshot's own) is walked, with the same answer.
    assert cycle._restrict(list(all_nodes), allowed) == expected
