"""LeastAllocated: favour nodes with more free capacity (the default scoring strategy)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework.types import MAX_NODE_SCORE
from scheduler.plugins.noderesources.resource_allocation import ResourceSpec, ScorerFn

NAME = "LeastAllocated"


def least_requested_score(requested: int, capacity: int) -> int:
    """Free fraction of capacity on a 0..MAX_NODE_SCORE scale; 0 when over-committed."""
    if capacity == 0 or requested > capacity:
        return 0
    return ((capacity - requested) * MAX_NODE_SCORE) // capacity


def least_resource_scorer(resources: Sequence[ResourceSpec]) -> ScorerFn:
    weights = [spec.weight for spec in resources]

    def scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for i, alloc in enumerate(allocatable):
            if alloc == 0:
                continue
            node_score += least_requested_score(requested[i], alloc) * weights[i]
            weight_sum += weights[i]
        if weight_sum == 0:
            return 0
        return node_score // weight_sum

    return scorer
