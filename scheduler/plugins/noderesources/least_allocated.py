"""LeastAllocated: favour nodes with more free capacity (the default scoring strategy)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework.types import MAX_NODE_SCORE
from scheduler.plugins.noderesources.resource_allocation import (
    ColumnScorerFn,
    PairScorerFn,
    ResourceSpec,
    ScorerFn,
    weighted_resource_scorer,
)

NAME = "LeastAllocated"


def least_requested_score(requested: int, capacity: int) -> int:
    """Free fraction of capacity on a 0..MAX_NODE_SCORE scale; 0 when over-committed."""
    if capacity == 0 or requested > capacity:
        return 0
    return ((capacity - requested) * MAX_NODE_SCORE) // capacity


def _column(w0: int, w1: int, pair: PairScorerFn) -> ColumnScorerFn:
    both = w0 + w1
    m = MAX_NODE_SCORE

    def column(r0s: list[int], a0s: list[int], r1s: list[int], a1s: list[int]) -> list[int]:
        # ``least_requested_score`` inlined for nodes that have both resources (all real
        # nodes): one comprehension, no call per node.
        return [
            ((0 if r0 > a0 else (a0 - r0) * m // a0) * w0
             + (0 if r1 > a1 else (a1 - r1) * m // a1) * w1) // both
            if a0 and a1 else pair(r0, a0, r1, a1)
            for r0, a0, r1, a1 in zip(r0s, a0s, r1s, a1s)
        ]

    return column


def least_resource_scorer(resources: Sequence[ResourceSpec]) -> ScorerFn:
    return weighted_resource_scorer(resources, least_requested_score, column=_column)
