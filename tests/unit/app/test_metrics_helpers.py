"""``observe_many`` leaves a histogram exactly as that many ``observe`` calls would."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram

from scheduler.metrics import observe_many


def _histogram() -> tuple[CollectorRegistry, Histogram]:
    registry = CollectorRegistry()
    return registry, Histogram("h", "test", ["l"], buckets=(0.001, 0.01, 0.1), registry=registry)


@pytest.mark.parametrize(("value", "count"), [(0.0005, 3), (0.05, 1), (0.5, 7), (0.01, 2),
                                              (0.2, 0)])
def test_observe_many_matches_repeated_observe(value: float, count: int) -> None:
    bulk_registry, bulk = _histogram()
    loop_registry, loop = _histogram()
    observe_many(bulk.labels("x"), value, count)
    child = loop.labels("x")
    for _ in range(count):
        child.observe(value)
    assert _samples(bulk_registry) == _samples(loop_registry)


def _samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for metric in registry.collect()
            for s in metric.samples if not s.name.endswith("_created")]


def test_observe_many_falls_back_to_observe_without_the_internals() -> None:
    seen: list[float] = []

    class Plain:
        def observe(self, value: float) -> None:
            seen.append(value)

    observe_many(Plain(), 0.25, 3)
    assert seen == [0.25, 0.25, 0.25]
