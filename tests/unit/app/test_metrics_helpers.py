"""``BulkHistogram`` exposes what prometheus_client's ``Histogram`` would for the same
observations (names, labels, buckets, counts, sums), and ``observe_many`` equals that many
``observe`` calls."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from scheduler.metrics import BulkCounter, BulkHistogram, SchedulerMetrics

BUCKETS = (0.001, 0.01, 0.1)


def _exposition(registry: CollectorRegistry) -> list[str]:
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if "_created" not in line]


@pytest.mark.parametrize(
    "observations",
    [
        [(0.0005, 3)],
        [(0.05, 1), (0.5, 7)],
        [(0.01, 2), (0.001, 1), (0.1, 4)],  # values equal to a bound (le is inclusive)
        [(0.2, 0)],
        [],
    ],
)
def test_bulk_histogram_exposition_matches_prometheus_histogram(
    observations: list[tuple[float, int]],
) -> None:
    bulk_registry, plain_registry = CollectorRegistry(), CollectorRegistry()
    bulk = BulkHistogram("h_seconds", "test", ["a", "b"], buckets=BUCKETS, registry=bulk_registry)
    plain = Histogram("h_seconds", "test", ["a", "b"], buckets=BUCKETS, registry=plain_registry)
    for value, count in observations:
        bulk.labels("x", "y").observe_many(value, count)
        child = plain.labels("x", "y")
        for _ in range(count):
            child.observe(value)
    if observations:
        bulk.labels("x", "z").observe(0.003)
        plain.labels("x", "z").observe(0.003)
    assert _exposition(bulk_registry) == _exposition(plain_registry)


def test_bulk_histogram_checks_label_count() -> None:
    bulk = BulkHistogram("h", "test", ["a"], buckets=BUCKETS, registry=CollectorRegistry())
    with pytest.raises(ValueError, match="expected labels"):
        bulk.labels("x", "y")


def test_plugin_execution_duration_keeps_kube_scheduler_buckets() -> None:
    metrics = SchedulerMetrics()
    metrics.plugin_execution_duration.labels("NodeName", "Filter", "Success").observe_many(2e-5, 5)
    text = generate_latest(metrics.registry).decode()
    assert ('scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",'
            'le="2.25e-05",plugin="NodeName",status="Success"} 5.0') in text
    assert ('scheduler_plugin_execution_duration_seconds_count{extension_point="Filter",'
            'plugin="NodeName",status="Success"} 5.0') in text
    assert text.count("scheduler_plugin_execution_duration_seconds_bucket{") == 21


def test_no_created_series_as_kube_scheduler() -> None:
    metrics = SchedulerMetrics()
    metrics.schedule_attempts.labels("scheduled", "p").inc()
    metrics.scheduling_attempt_duration.labels("scheduled", "p").observe(0.1)
    text = generate_latest(metrics.registry).decode()
    assert "scheduler_schedule_attempts_total" in text
    assert "_created" not in text


@pytest.mark.parametrize("attr", [
    "framework_extension_point_duration", "scheduling_attempt_duration",
    "pod_scheduling_sli_duration", "permit_wait_duration",
])
def test_per_pod_histograms_expose_what_prometheus_histograms_would(attr: str) -> None:
    metrics = SchedulerMetrics()
    bulk = getattr(metrics, attr)
    assert isinstance(bulk, BulkHistogram)
    plain_registry = CollectorRegistry()
    plain = Histogram(bulk._name, bulk._documentation, bulk._labelnames,
                      buckets=bulk._upper[:-1], registry=plain_registry)
    values = tuple(f"v{i}" for i in range(len(bulk._labelnames)))
    for seconds in (0.0003, 0.004, 0.004, 2.5, 1e6):
        bulk.labels(*values).observe(seconds)
        plain.labels(*values).observe(seconds)
    mine = [line for line in _exposition(metrics.registry) if line.startswith(bulk._name)
            or f" {bulk._name} " in line]
    assert mine and mine == _exposition(plain_registry)


@pytest.mark.parametrize(
    "increments",
    [
        [("x", 1)],
        [("x", 3), ("y", 1), ("x", 2)],
        [("x", 0)],
        [("x", 1.5), ("y", 0)],
        [],
    ],
)
def test_bulk_counter_exposition_matches_prometheus_counter(
    increments: list[tuple[str, float]],
) -> None:
    bulk_registry, plain_registry = CollectorRegistry(), CollectorRegistry()
    bulk = BulkCounter("c", "test", ["a", "b"], registry=bulk_registry)
    plain = Counter("c", "test", ["a", "b"], registry=plain_registry)
    for label, amount in increments:
        bulk.labels(label, "p").inc(amount)
        plain.labels(label, "p").inc(amount)
    assert _exposition(bulk_registry) == _exposition(plain_registry)


def test_bulk_counter_checks_labels_and_amount() -> None:
    bulk = BulkCounter("c", "test", ["a"], registry=CollectorRegistry())
    with pytest.raises(ValueError, match="expected labels"):
        bulk.labels("x", "y")
    with pytest.raises(ValueError, match="non-negative"):
        bulk.labels("x").inc(-1)


def test_plugin_evaluations_are_a_bulk_counter_named_as_kube_scheduler() -> None:
    metrics = SchedulerMetrics()
    assert isinstance(metrics.plugin_evaluation_total, BulkCounter)
    metrics.plugin_evaluation_total.labels("NodeName", "Filter", "p").inc(4)
    text = generate_latest(metrics.registry).decode()
    assert "# TYPE scheduler_plugin_evaluation_total counter" in text
    assert ('scheduler_plugin_evaluation_total{extension_point="Filter",plugin="NodeName",'
            'profile="p"} 4.0') in text


def _metric(metrics: SchedulerMetrics, path: str) -> object:
    obj: object = metrics
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("path", [
    "schedule_attempts", "queue_incoming_pods", "bind_requests",
    "ops.rest_client_requests", "ops.async_api_call_execution",
])
def test_per_pod_counters_expose_what_prometheus_counters_would(path: str) -> None:
    metrics = SchedulerMetrics()
    bulk = _metric(metrics, path)
    assert isinstance(bulk, BulkCounter)
    plain_registry = CollectorRegistry()
    plain = Counter(bulk._name, bulk._documentation, bulk._labelnames, registry=plain_registry)
    for i, amount in enumerate((1, 1, 3, 0, 1)):
        values = tuple(f"v{i % 2}{j}" for j in range(len(bulk._labelnames)))
        bulk.labels(*values).inc(amount)
        plain.labels(*values).inc(amount)
    name = bulk._name + "_total"
    mine = [line for line in _exposition(metrics.registry)
            if line.startswith((name + "{", name + " ")) or f" {name} " in line]
    assert mine and mine == _exposition(plain_registry)


@pytest.mark.parametrize("path", [
    "ops.async_api_call_execution_duration", "pod_scheduling_attempts",
])
@pytest.mark.parametrize("observations", [(), (1, 1, 3, 40), (0.0004, 2.5, 1e6)])
def test_per_pod_histograms_of_the_binding_expose_what_prometheus_would(
    path: str, observations: tuple[float, ...],
) -> None:
    metrics = SchedulerMetrics()
    bulk = _metric(metrics, path)
    assert isinstance(bulk, BulkHistogram)
    plain_registry = CollectorRegistry()
    plain = Histogram(bulk._name, bulk._documentation, bulk._labelnames,
                      buckets=bulk._upper[:-1], registry=plain_registry)
    values = tuple(f"v{i}" for i in range(len(bulk._labelnames)))
    for value in observations:
        if values:
            bulk.labels(*values).observe(value)
            plain.labels(*values).observe(value)
        else:  # unlabelled: exported at 0 before the first observation, as Histogram's
            bulk.observe(value)
            plain.observe(value)
    mine = [line for line in _exposition(metrics.registry) if line.startswith(bulk._name)
            or f" {bulk._name} " in line]
    assert mine == _exposition(plain_registry)
    assert mine or (values and not observations)


@pytest.mark.parametrize("values", [[], ["a"], ["a", "b", "a"], ["b", "b"]])
def test_children_by_value_expose_what_labels_would(values: list[str]) -> None:
    """``ChildrenByValue[value]`` and ``Children(value)`` (each from ``labels``, made on
    first use) give the same exposition for the same observations; no series before."""
    from scheduler.metrics import Children, ChildrenByValue

    expositions = []
    for by_value in (False, True):
        registry = CollectorRegistry()
        metric = BulkHistogram("h_seconds", "h", ["event"], buckets=BUCKETS, registry=registry)
        by_call, by_item = Children(metric), ChildrenByValue(metric)
        for i, value in enumerate(values):
            child = by_item[value] if by_value else by_call(value)
            child.observe(i / 100)
        assert sorted(by_item) == (sorted(set(values)) if by_value else [])
        expositions.append(_exposition(registry))
    assert expositions[0] == expositions[1]
    assert any('event="a"' in line for line in expositions[1]) is ("a" in values)
