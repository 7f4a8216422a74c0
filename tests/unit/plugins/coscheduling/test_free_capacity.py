"""minResources against the cluster's free capacity, kept per node across cycles, answers
what a walk over every pod of every node answers, after any sequence of changes."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.objects.pod import PodInfo
from scheduler.objects.resources import PODS
from scheduler.plugins.coscheduling.core import (
    PodGroupInfo,
    PodGroupManager,
    format_amount,
    parse_pod_group,
    pod_group_full_name,
)
from tests.builders import make_node
from tests.fakes import SnapshotHandle
from tests.unit.plugins.coscheduling.helpers import member, pod_group


def walked_gaps(snapshot: Snapshot, info: PodGroupInfo) -> str:
    """The definition: free capacity summed node by node, the group's own pods as free."""
    need = dict(info.min_resources or {})
    if info.min_member > 0:
        need[PODS] = info.min_member
    if not need:
        return ""
    free = dict.fromkeys(need, 0)
    for node_info in snapshot.list():
        own = [p for p in node_info.pods if pod_group_full_name(p.pod) == info.full_name]
        for resource in need:
            if resource == PODS:
                left = node_info.allocatable.allowed_pod_number - (len(node_info.pods) - len(own))
            else:
                used = node_info.requested.get(resource) - sum(p.requests.get(resource)
                                                               for p in own)
                left = node_info.allocatable.get(resource) - used
            free[resource] += max(left, 0)
    return ", ".join(
        f"{r} (needs {format_amount(r, need[r])}, free {format_amount(r, free[r])})"
        for r in need if free[r] < need[r])


GROUPS = [
    parse_pod_group(pod_group("g1", 3, min_resources={"cpu": "7", "memory": "20Gi"})),
    parse_pod_group(pod_group("g2", 12)),
    parse_pod_group(pod_group("g1", 2, namespace="other", min_resources={"cpu": "1500m"})),
]


@pytest.mark.parametrize("seed", range(8))
def test_free_capacity_kept_across_cycles_equals_the_walk(seed: int) -> None:
    rng = random.Random(seed)
    cache, snapshot = Cache(), Snapshot()
    nodes: dict[str, dict[str, Any]] = {}
    for i in range(5):
        nodes[f"n{i}"] = make_node(f"n{i}", cpu=str(rng.choice([2, 4])), memory="8Gi", pods=4)
        cache.add_node(nodes[f"n{i}"])
    manager = PodGroupManager(SnapshotHandle(snapshot), permit_waiting_time_seconds=60,
                              pod_group_backoff_seconds=0)
    placed: list[dict[str, Any]] = []
    serial = 0
    answers: set[str] = set()
    for step in range(80):
        roll = rng.random()
        if roll < 0.55 and nodes:
            serial += 1
            pod = member(f"p{serial}", rng.choice(["g1", "g2", None]),
                         namespace=rng.choice(["default", "other"]),
                         node=rng.choice(sorted(nodes)), cpu=rng.choice(["500m", "1", "3"]))
            cache.add_pod(PodInfo.from_pod(pod))
            placed.append(pod)
        elif roll < 0.8 and placed:
            cache.remove_pod(placed.pop(rng.randrange(len(placed))))
        elif roll < 0.9 and len(nodes) > 1:
            name = rng.choice(sorted(nodes))
            cache.remove_node(nodes.pop(name))
            for pod in [p for p in placed if p["spec"]["nodeName"] == name]:
                cache.remove_pod(pod)
                placed.remove(pod)
        else:
            serial += 1
            nodes[f"m{serial}"] = make_node(f"m{serial}", cpu="4", memory="16Gi", pods=3)
            cache.add_node(nodes[f"m{serial}"])
        cache.update_snapshot(snapshot)
        for info in GROUPS:
            got = manager.resource_gaps(info)
            assert got == walked_gaps(snapshot, info), (seed, step, info.full_name)
            answers.add(got)
    assert "" in answers and len(answers) > 1  # the sequence both fits and does not fit
