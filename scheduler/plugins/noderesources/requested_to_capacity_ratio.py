"""RequestedToCapacityRatio: score utilization through a user-given piecewise-linear shape
(points of utilization 0..100 -> score 0..10, scaled to 0..MAX_NODE_SCORE)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.framework.types import MAX_NODE_SCORE
from scheduler.plugins.helper import FunctionShapePoint, args_error, build_broken_linear_function
from scheduler.plugins.noderesources.resource_allocation import ResourceSpec, ScorerFn

NAME = "RequestedToCapacityRatio"

MAX_UTILIZATION = 100
# Upstream config.MaxCustomPriorityScore: shape scores are 0..10.
MAX_CUSTOM_PRIORITY_SCORE = 10


@dataclass(frozen=True, slots=True)
class ShapePoint:
    utilization: int
    score: int


def parse_shape(raw: Any, field: str, *, plugin: str) -> list[ShapePoint]:
    """Parse and validate a shape like upstream ``validateFunctionShape``."""
    if raw is None or raw == []:
        raise args_error(plugin, field, "required: at least one point must be specified")
    if not isinstance(raw, list):
        raise args_error(plugin, field, f"must be a list, got {type(raw).__name__}")
    points: list[ShapePoint] = []
    for i, item in enumerate(raw):
        path = f"{field}[{i}]"
        if not isinstance(item, Mapping):
            raise args_error(plugin, path, "must be an object with utilization and score")
        values: list[int] = []
        for key in ("utilization", "score"):
            value = item.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int):
                raise args_error(plugin, f"{path}.{key}", f"must be an integer, got {value!r}")
            values.append(value)
        points.append(ShapePoint(values[0], values[1]))
    for i in range(1, len(points)):
        if points[i - 1].utilization >= points[i].utilization:
            raise args_error(
                plugin,
                f"{field}[{i}].utilization",
                f"invalid value {points[i].utilization}: values must be sorted in increasing order",
            )
    for i, point in enumerate(points):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            raise args_error(
                plugin,
                f"{field}[{i}].utilization",
                f"invalid value {point.utilization}: not in valid range [0, {MAX_UTILIZATION}]",
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise args_error(
                plugin,
                f"{field}[{i}].score",
                f"invalid value {point.score}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
            )
    return points


def requested_to_capacity_ratio_scorer(
    resources: Sequence[ResourceSpec], shape: Sequence[ShapePoint]
) -> ScorerFn:
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    raw = build_broken_linear_function(
        [FunctionShapePoint(p.utilization, p.score * scale) for p in shape]
    )
    weights = [spec.weight for spec in resources]

    def resource_score(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(MAX_UTILIZATION)
        return raw(requested * MAX_UTILIZATION // capacity)

    def scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = 0
        weight_sum = 0
        for i, alloc in enumerate(allocatable):
            if alloc == 0:
                continue
            score = resource_score(requested[i], alloc)
            if score > 0:
                node_score += score * weights[i]
                weight_sum += weights[i]
        if weight_sum == 0:
            return 0
        # Go's math.Round: half away from zero (scores are never negative).
        return math.floor(node_score / weight_sum + 0.5)

    return scorer
