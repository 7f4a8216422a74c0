"""LeastAllocated: favour nodes with more free capacity (the default scoring strategy)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework.types import MAX_NODE_SCORE
from scheduler.plugins.noderesources.resource_allocation import (
    PairedScorer,
    ResourceSpec,
    ScorerFn,
)

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

    if len(weights) != 2:
        return scorer
    w0, w1 = weights

    def pair(r0: int, a0: int, r1: int, a1: int) -> int:
        score = weight_sum = 0
        if a0:
            score += (0 if r0 > a0 else (a0 - r0) * MAX_NODE_SCORE // a0) * w0
            weight_sum += w0
        if a1:
            score += (0 if r1 > a1 else (a1 - r1) * MAX_NODE_SCORE // a1) * w1
            weight_sum += w1
        return score // weight_sum if weight_sum else 0

    both = w0 + w1
    m = MAX_NODE_SCORE

    def column(r0s: list[int], a0s: list[int], r1s: list[int], a1s: list[int]) -> list[int]:
        # ``pair`` inlined for nodes that have both resources (all real nodes).
        return [
            ((0 if r0 > a0 else (a0 - r0) * m // a0) * w0
             + (0 if r1 > a1 else (a1 - r1) * m // a1) * w1) // both
            if a0 and a1 else pair(r0, a0, r1, a1)
            for r0, a0, r1, a1 in zip(r0s, a0s, r1s, a1s)
        ]

    return PairedScorer(scorer, pair, column)
