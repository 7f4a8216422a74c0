"""The queue's share of kube-scheduler's operational series: each queueing hint run timed
under its outcome, the pods moved by the leftover flush marked (for
scheduler_pod_scheduled_after_flush_total), and scheduler_inflight_events read at scrape."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.events import ClusterEvent
from tests.builders import make_node, make_pod
from tests.unit.queue.helpers import (
    AFFINITY,
    FIT,
    NODE_ADD,
    NODE_LABEL,
    NODE_TAINT,
    Clock,
    fail,
    make_queue,
    new_metrics,
    pop,
    sample,
)

HINT_COUNT = "scheduler_queueing_hint_execution_duration_seconds_count"


@pytest.mark.parametrize(
    ("rejector", "event", "new", "expected"),
    [
        pytest.param(AFFINITY, NODE_LABEL, make_node("n", labels={"ready": "true"}),
                     {(AFFINITY, "NodeUpdate", "Queue"): 1.0}, id="queue"),
        pytest.param(AFFINITY, NODE_LABEL, make_node("n", labels={"ready": "no"}),
                     {(AFFINITY, "NodeUpdate", "QueueSkip"): 1.0}, id="skip"),
        pytest.param("Raising", NODE_TAINT, None,
                     {("Raising", "NodeUpdate", "Error"): 1.0}, id="error"),
        # A registration without a hint function runs nothing: nothing is timed.
        pytest.param(FIT, NODE_ADD, None, {}, id="no-hint-function"),
    ],
)
def test_each_hint_run_is_timed_under_its_outcome(
    rejector: str, event: ClusterEvent, new: Any, expected: dict[tuple[str, str, str], float]
) -> None:
    metrics = new_metrics()
    queue = make_queue(metrics=metrics)
    queue.add(make_pod("p"))
    fail(queue, pop(queue), rejector)
    queue.move_all_to_active_or_backoff_queue(event, None, new)
    got = {
        (s.labels["plugin"], s.labels["event"], s.labels["hint"]): s.value
        for family in metrics.registry.collect() if family.name == HINT_COUNT[:-len("_count")]
        for s in family.samples if s.name == HINT_COUNT
    }
    assert got == expected


@pytest.mark.parametrize(
    ("how", "flushed"),
    [
        pytest.param("flush", True, id="moved-by-the-leftover-flush"),
        pytest.param("event", False, id="moved-by-an-event"),
    ],
)
def test_pods_moved_by_the_leftover_flush_are_marked(how: str, flushed: bool) -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    queue.add(make_pod("p"))
    qpi = pop(queue)
    fail(queue, qpi, FIT)
    clock.advance(301)
    if how == "flush":
        queue.flush_unschedulable_left_over()
    else:
        queue.move_all_to_active_or_backoff_queue(NODE_ADD, None, make_node("n"))
    assert queue.queue_of(make_pod("p")) in ("active", "backoff")
    assert qpi.flushed is flushed
    # Failing again clears the mark: the next move is someone else's.
    again = pop(queue)
    fail(queue, again, FIT)
    assert again.flushed is False


def test_a_gated_pod_flushed_is_not_marked() -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    queue.add(make_pod("p"))
    qpi = pop(queue)
    fail(queue, qpi, FIT)
    # Gated meanwhile (an update adds a scheduling gate, kept while in the pool).
    qpi.pod_info.pod["spec"]["schedulingGates"] = [{"name": "wait"}]
    clock.advance(301)
    queue.flush_unschedulable_left_over()
    assert queue.queue_of(make_pod("p")) == "gated"
    assert qpi.flushed is False


def test_inflight_events_count_pods_being_scheduled_and_their_updates() -> None:
    metrics = new_metrics()
    queue = make_queue(metrics=metrics)

    def inflight(event: str) -> float:
        return sample(metrics, "scheduler_inflight_events", event=event)

    assert inflight("PodPopped") == 0.0
    old_a, old_b = make_pod("a", cpu="1"), make_pod("b")
    queue.add(old_a)
    queue.add(old_b)
    a, _b = pop(queue), pop(queue)
    assert inflight("PodPopped") == 2.0
    queue.update(old_a, make_pod("a", cpu="10m"))  # recorded while in flight
    assert inflight("UnschedulablePodUpdate") == 1.0
    queue.done(a.pod_info.uid)
    assert inflight("PodPopped") == 1.0
    assert inflight("UnschedulablePodUpdate") == 0.0

