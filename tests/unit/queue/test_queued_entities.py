"""scheduler_queued_entities{queue,type} (upstream 1.35): pods are the only entities this
queue holds (a gang's pods queue one by one), so each queue's type="pod" count is its
scheduler_pending_pods count."""

from __future__ import annotations

from tests.builders import PodBuilder, make_pod
from tests.unit.queue.helpers import FIT, fail, make_queue, new_metrics, pop, sample


def test_queued_entities_follow_the_queues() -> None:
    metrics = new_metrics()
    queue = make_queue(metrics=metrics)
    queue.add(make_pod("a"))
    queue.add(make_pod("b"))
    queue.add(PodBuilder("g").scheduling_gates("example.com/wait").obj())
    fail(queue, pop(queue), FIT)
    for q in ("active", "backoff", "unschedulable", "gated"):
        pending = sample(metrics, "scheduler_pending_pods", queue=q)
        assert sample(metrics, "scheduler_queued_entities", queue=q, type="pod") == pending, q
    assert sample(metrics, "scheduler_queued_entities", queue="active", type="pod") == 1.0
    assert sample(metrics, "scheduler_queued_entities", queue="gated", type="pod") == 1.0
    assert sample(metrics, "scheduler_queued_entities", queue="unschedulable", type="pod") == 1.0


def test_pending_pods_has_every_queue_value_of_1_37() -> None:
    """Upstream exports six queue values; the two of its Workload API pod groups stay 0 here
    (a gang's members queue as pods), the four others count the queues."""
    metrics = new_metrics()
    queue = make_queue(metrics=metrics)
    queue.add(make_pod("a"))
    queue.add(PodBuilder("g").scheduling_gates("example.com/wait").obj())
    got = {q: metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": q})
           for q in ("active", "backoff", "unschedulable", "gated", "incomplete", "pending")}
    assert got == {"active": 1.0, "backoff": 0.0, "unschedulable": 0.0, "gated": 1.0,
                   "incomplete": 0.0, "pending": 0.0}
