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
