"""MostAllocated: favour the fullest nodes (bin packing)."""

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

NAME = "MostAllocated"


def most_requested_score(requested: int, capacity: int) -> int:
    """Used fraction of capacity on a 0..MAX_NODE_SCORE scale, capped at full."""
    if capacity == 0:
        return 0
    if requested > capacity:
        # Over-committed nodes (possible with non-zero defaults) count as full.
        requested = capacity
    return (requested * MAX_NODE_SCORE) // capacity


def _column(w0: int, w1: int, pair: PairScorerFn) -> ColumnScorerFn:
    both = w0 + w1
    m = MAX_NODE_SCORE

    def column(r0s: list[int], a0s: list[int], r1s: list[int], a1s: list[int]) -> list[int]:
        # ``most_requested_score`` inlined for nodes that have both resources.
        return [
            ((min(r0, a0) * m // a0) * w0 + (min(r1, a1) * m // a1) * w1) // both
            if a0 and a1 else pair(r0, a0, r1, a1)
            for r0, a0, r1, a1 in zip(r0s, a0s, r1s, a1s)
        ]

    return column


def most_resource_scorer(resources: Sequence[ResourceSpec]) -> ScorerFn:
    return weighted_resource_scorer(resources, most_requested_score, column=_column)
