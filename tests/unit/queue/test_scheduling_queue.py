"""SchedulingQueue: ordering, backoff, requeueing by events and hints, gates, flushing."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from scheduler.framework.events import (
    ASSIGNED_POD_ADD,
    UNSCHEDULABLE_TIMEOUT,
    ActionType,
    ClusterEvent,
    EventResource,
)
from scheduler.objects.errors import ObjectError
from scheduler.queue import QueueError
from tests.builders import PodBuilder, make_node, make_pod
from tests.unit.queue.helpers import (
    AFFINITY,
    FIT,
    GANG,
    GATES,
    GROUP_ADD,
    INTERPOD,
    NODE_ADD,
    NODE_LABEL,
    NODE_TAINT,
    POD_DELETE,
    PVC_ADD,
    Clock,
    PreEnqueue,
    fail,
    make_queue,
    names,
    new_metrics,
    pop,
    sample,
)

# --- ordering ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([("a", 0), ("b", 10), ("c", 5)], ["b", "c", "a"], id="priority"),
        pytest.param([("a", 1), ("b", 1), ("c", 1)], ["a", "b", "c"], id="same-priority-fifo"),
        pytest.param([("a", -5), ("b", 0), ("c", -5), ("d", 0)], ["b", "d", "a", "c"], id="mixed"),
    ],
)
def test_pop_order_is_priority_then_timestamp(
    pods: list[tuple[str, int]], expected: list[str]
) -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    for name, priority in pods:
        queue.add(make_pod(name, priority=priority))
        clock.advance(0.001)
    assert names([pop(queue).pod_info.pod for _ in pods]) == expected
    assert queue.pop_nowait() is None


def test_equal_timestamps_keep_insertion_order() -> None:
    queue = make_queue()  # the clock never moves
    for name in "edcba":
        queue.add(make_pod(name))
    assert [pop(queue).pod_info.name for _ in range(5)] == list("edcba")


def test_priority_update_in_active_queue_reorders() -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    low = make_pod("low", priority=1)
    queue.add(low)
    clock.advance(1)
    queue.add(make_pod("high", priority=5))
    queue.update(low, make_pod("low", priority=9))
    first = pop(queue)
    assert first.pod_info.name == "low" and first.pod_info.priority == 9
    assert pop(queue).pod_info.name == "high"
    assert len(queue) == 0


def test_pop_counts_attempts_and_cycles_and_clears_rejectors() -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    queue.add(make_pod("p"))
    qpi = pop(queue)
    assert (qpi.attempts, queue.scheduling_cycle()) == (1, 1)
    assert qpi.initial_attempt_timestamp == 1000.0
    fail(queue, qpi)  # an error: backoff
    clock.advance(2)
    queue.flush_backoff_completed()
    qpi = pop(queue)
    assert (qpi.attempts, queue.scheduling_cycle()) == (2, 2)
    assert qpi.initial_attempt_timestamp == 1000.0
    fail(queue, qpi, FIT)
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    clock.advance(10)
    queue.flush_backoff_completed()
    assert pop(queue).unschedulable_plugins == set()


def test_malformed_pod_raises_and_queues_nothing() -> None:
    queue = make_queue()
    with pytest.raises(ObjectError, match="Pod default/bad"):
        queue.add(PodBuilder("bad").req(cpu="lots").obj())
    assert len(queue) == 0


# --- backoff -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("initial", "maximum", "expected"),
    [
        pytest.param(1.0, 10.0, [1, 1, 2, 4, 8, 10, 10], id="defaults"),
        pytest.param(0.5, 3.0, [0.5, 0.5, 1, 2, 3, 3, 3], id="custom"),
        pytest.param(2.0, 2.0, [2, 2, 2, 2, 2, 2, 2], id="flat"),
    ],
)
def test_backoff_duration_per_attempt(
    initial: float, maximum: float, expected: list[float]
) -> None:
    queue = make_queue(pod_initial_backoff=initial, pod_max_backoff=maximum)
    queue.add(make_pod("p"))
    qpi = pop(queue)
    durations = []
    for attempts in range(7):
        qpi.attempts = attempts
        durations.append(queue.backoff_duration(qpi))
    assert durations == expected


def test_invalid_backoff_configuration_is_rejected() -> None:
    with pytest.raises(ValueError, match="initial=5"):
        make_queue(pod_initial_backoff=5.0, pod_max_backoff=1.0)


@pytest.mark.parametrize("attempts", [1, 2, 3, 4, 5])
def test_failed_pod_waits_out_its_backoff(attempts: int) -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    queue.add(make_pod("p"))
    qpi = pop(queue)
    qpi.attempts = attempts
    fail(queue, qpi)  # no rejecting plugin: an error, straight to backoffQ
    # upstream isPodBackingoff: the expiry is truncated to its 1-second window, and the pod
    # backs off until the next window begins (the clock starts on a window boundary).
    expected = min(2 ** (attempts - 1), 10) + 1
    assert names(queue.pending_pods()["backoff"]) == ["p"]
    clock.advance(expected - 0.01)
    queue.flush_backoff_completed()
    assert queue.pop_nowait() is None
    clock.advance(0.02)
    queue.flush_backoff_completed()
    assert pop(queue).pod_info.name == "p"


def test_backoff_queue_flushes_in_expiry_order() -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    for name in ("slow", "fast"):
        queue.add(make_pod(name))
    slow, fast = pop(queue), pop(queue)
    slow.attempts, fast.attempts = 4, 1
    fail(queue, slow)
    fail(queue, fast)
    assert names(queue.pending_pods()["backoff"]) == ["fast", "slow"]
    clock.advance(2)
    queue.flush_backoff_completed()
    assert names(queue.pending_pods()["active"]) == ["fast"]
    assert queue.pending_pods()["backoff"] != []


# --- requeueing: moveRequestCycle --------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_during_flight", "expected_queue"),
    [
        pytest.param(None, "unschedulable", id="no-event"),
        pytest.param(NODE_ADD, "backoff", id="event-during-cycle"),
        pytest.param(PVC_ADD, "unschedulable", id="event-nobody-registered"),
    ],
)
def test_move_request_cycle(event_during_flight: ClusterEvent | None, expected_queue: str) -> None:
    queue = make_queue()
    queue.add(make_pod("p"))
    qpi = pop(queue)
    cycle = queue.scheduling_cycle()
    if event_during_flight is not None:
        queue.move_all_to_active_or_backoff_queue(event_during_flight)
    fail(queue, qpi, AFFINITY, cycle=cycle)
    assert queue.queue_of(qpi.pod_info.pod) == expected_queue


def test_move_request_before_the_cycle_does_not_count() -> None:
    queue = make_queue()
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)  # moveRequestCycle = 0
    queue.add(make_pod("p"))
    qpi = pop(queue)  # cycle 1
    fail(queue, qpi, FIT)
    assert queue.queue_of(qpi.pod_info.pod) == "unschedulable"


def test_requeue_of_queued_pod_is_an_error() -> None:
    queue = make_queue()
    queue.add(make_pod("p"))
    qpi = pop(queue)
    queue.add(make_pod("p"))  # the pod shows up again while in flight: recorded, not queued
    fail(queue, qpi, FIT)
    with pytest.raises(QueueError, match="default/p is already in the unschedulable queue"):
        fail(queue, qpi, FIT)


# --- requeueing: events and hints ------------------------------------------------------------


def unschedulable_queue(
    rejectors: tuple[str, ...], *, pending: tuple[str, ...] = (), clock: Clock | None = None
) -> Any:
    clock = clock or Clock()
    queue = make_queue(clock=clock)
    queue.add(make_pod("p"))
    qpi = pop(queue)
    fail(queue, qpi, *rejectors, pending=pending)
    assert queue.queue_of(qpi.pod_info.pod) == "unschedulable"
    return queue, qpi, clock


READY = make_node("n", labels={"ready": "true"})
NOT_READY = make_node("n", labels={"ready": "false"})


@pytest.mark.parametrize(
    ("rejectors", "event", "new", "moved"),
    [
        pytest.param((FIT,), NODE_ADD, None, True, id="registered-event"),
        pytest.param((FIT,), NODE_LABEL, READY, False, id="plugin-did-not-register"),
        pytest.param((FIT,), POD_DELETE, None, True, id="pod-delete"),
        pytest.param((AFFINITY,), NODE_LABEL, READY, True, id="hint-queue"),
        pytest.param((AFFINITY,), NODE_LABEL, NOT_READY, False, id="hint-skip"),
        pytest.param(("Raising",), NODE_TAINT, None, True, id="hint-raises-means-queue"),
        pytest.param((FIT, AFFINITY), NODE_LABEL, NOT_READY, False, id="all-hints-skip"),
        pytest.param((FIT, AFFINITY), NODE_LABEL, READY, True, id="one-hint-queues"),
        pytest.param((FIT,), PVC_ADD, None, False, id="event-of-no-interest"),
        pytest.param(("Other",), NODE_ADD, None, False, id="rejector-registered-nothing"),
        pytest.param((FIT,), UNSCHEDULABLE_TIMEOUT, None, True, id="wildcard"),
    ],
)
def test_event_moves_pod_only_if_a_rejector_wants_it(
    rejectors: tuple[str, ...], event: ClusterEvent, new: Any, moved: bool
) -> None:
    queue, qpi, _clock = unschedulable_queue(rejectors)
    queue.move_all_to_active_or_backoff_queue(event, None, new)
    # Backoff not over yet: a moved pod waits in backoffQ.
    assert queue.queue_of(qpi.pod_info.pod) == ("backoff" if moved else "unschedulable")


def test_moved_pod_skips_backoff_when_it_is_over() -> None:
    queue, qpi, clock = unschedulable_queue((FIT,))
    clock.advance(5)
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    assert queue.queue_of(qpi.pod_info.pod) == "active"


def test_pending_plugin_queue_hint_skips_backoff() -> None:
    queue, qpi, _clock = unschedulable_queue((), pending=(FIT,))
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    assert queue.queue_of(qpi.pod_info.pod) == "active"


def test_precheck_filters_candidates() -> None:
    queue, qpi, _ = unschedulable_queue((FIT,))
    queue.move_all_to_active_or_backoff_queue(NODE_ADD, precheck=lambda q: q.pod_info.name != "p")
    assert queue.queue_of(qpi.pod_info.pod) == "unschedulable"
    queue.move_all_to_active_or_backoff_queue(NODE_ADD, precheck=lambda q: True)
    assert queue.queue_of(qpi.pod_info.pod) == "backoff"


@pytest.mark.parametrize(("app", "moved"), [("peer", True), ("other", False)])
def test_assigned_pod_added_uses_hints(app: str, moved: bool) -> None:
    queue, qpi, _ = unschedulable_queue((INTERPOD,))
    from scheduler.objects.pod import PodInfo

    queue.assigned_pod_added(PodInfo.from_pod(make_pod("bound", node="n", labels={"app": app})))
    assert queue.queue_of(qpi.pod_info.pod) == ("backoff" if moved else "unschedulable")


def test_assigned_pod_updated_event_kind() -> None:
    queue, qpi, _ = unschedulable_queue((FIT,))
    old = make_pod("bound", node="n", labels={"a": "1"})
    queue.assigned_pod_updated(old, make_pod("bound", node="n", labels={"a": "2"}))
    assert queue.queue_of(qpi.pod_info.pod) == "unschedulable"  # FIT wants deletes, not labels
    queue.move_all_to_active_or_backoff_queue(ASSIGNED_POD_ADD)  # nobody with FIT cares either
    assert queue.queue_of(qpi.pod_info.pod) == "unschedulable"


# --- unschedulable pod updates -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "moved"),
    [
        pytest.param({"cpu": "50m"}, True, id="scale-down-registered-by-fit"),
        pytest.param({"labels": {"x": "y"}}, False, id="label-change-nobody-registered"),
    ],
)
def test_unschedulable_pod_update_moves_by_hints(change: dict[str, Any], moved: bool) -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    old = make_pod("p", cpu="1")
    queue.add(old)
    fail(queue, pop(queue), FIT)
    new = make_pod("p", cpu=change.get("cpu", "1"), labels=change.get("labels"))
    queue.update(old, new)
    assert queue.queue_of(new) == ("backoff" if moved else "unschedulable")
    got = queue.get(new)
    assert got is not None and got.pod_info.pod is new


# --- gated pods --------------------------------------------------------------------------------


def test_gated_pod_waits_until_gates_removed() -> None:
    pre = PreEnqueue()
    queue = make_queue(pre_enqueue=pre)
    gated = PodBuilder("g").scheduling_gates("example.com/wait").obj()
    queue.add(gated)
    assert names(queue.pending_pods()["gated"]) == ["g"]
    assert queue.pop_nowait() is None
    still = PodBuilder("g").scheduling_gates("example.com/wait").labels(v="2").obj()
    queue.update(gated, still)
    assert queue.queue_of(still) == "gated"
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)  # not the gating plugin's event
    calls = pre.calls
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    assert pre.calls == calls  # PreEnqueue not re-run for an unrelated event
    open_pod = PodBuilder("g").labels(v="3").obj()
    queue.update(still, open_pod)
    qpi = pop(queue)
    assert qpi.pod_info.pod is open_pod and not qpi.gated


def test_gated_pod_rechecked_on_its_plugins_event() -> None:
    pre = PreEnqueue()
    queue = make_queue(pre_enqueue=pre)
    queue.add(make_pod("member", labels={"gang": "g1"}))
    assert queue.queue_of(make_pod("member")) == "gated"
    queue.move_all_to_active_or_backoff_queue(GROUP_ADD)
    assert queue.queue_of(make_pod("member")) == "gated"  # re-ran PreEnqueue: still no group
    pre.groups_ready = True
    queue.move_all_to_active_or_backoff_queue(GROUP_ADD)
    assert queue.queue_of(make_pod("member")) == "active"  # never tried: no backoff


def test_gated_pods_are_not_flushed_by_timeout() -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    queue.add(PodBuilder("g").scheduling_gates("x").obj())
    clock.advance(3600)
    queue.flush_unschedulable_left_over()
    assert names(queue.pending_pods()["gated"]) == ["g"]


def test_pre_enqueue_that_raises_gates_the_pod() -> None:
    def broken(info: Any) -> None:
        raise RuntimeError("boom")

    queue = make_queue(pre_enqueue=broken)  # type: ignore[arg-type]
    queue.add(make_pod("p"))
    assert queue.queue_of(make_pod("p")) == "gated"


# --- unschedulable timeout ---------------------------------------------------------------------


@pytest.mark.parametrize(("waited", "moved"), [(299.0, False), (300.5, True)])
def test_unschedulable_pods_flushed_after_five_minutes(waited: float, moved: bool) -> None:
    metrics = new_metrics()
    clock = Clock()
    queue = make_queue(clock=clock, metrics=metrics)
    queue.add(make_pod("p"))
    fail(queue, pop(queue), FIT)
    clock.advance(waited)
    queue.flush_unschedulable_left_over()
    assert queue.queue_of(make_pod("p")) == ("active" if moved else "unschedulable")
    assert sample(
        metrics, "scheduler_queue_incoming_pods_total", queue="active", event="UnschedulableTimeout"
    ) == (1.0 if moved else 0.0)


async def test_run_flushes_backoff_and_unschedulable() -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    queue.add(make_pod("err"))
    queue.add(make_pod("stuck"))
    err, stuck = pop(queue), pop(queue)
    fail(queue, err)
    fail(queue, stuck, FIT)

    async def tick(seconds: float) -> None:
        clock.advance(seconds * 11)  # each iteration = 11 s of clock

    await queue.run(iterations=1, sleep=tick)
    assert queue.queue_of(err.pod_info.pod) == "backoff"  # first flush at t=0
    await queue.run(iterations=1, sleep=tick)
    assert queue.queue_of(err.pod_info.pod) == "active"
    assert queue.queue_of(stuck.pod_info.pod) == "unschedulable"
    await queue.run(iterations=30, sleep=tick, unschedulable_interval=30.0)
    assert queue.queue_of(stuck.pod_info.pod) == "active"


async def test_run_stops_when_closed() -> None:
    queue = make_queue()
    sleeps = 0

    async def tick(seconds: float) -> None:
        nonlocal sleeps
        sleeps += 1
        if sleeps == 3:
            queue.close()

    await queue.run(sleep=tick)
    assert sleeps == 3


# --- update / delete in every sub-queue --------------------------------------------------------


def put_in(queue: Any, where: str, clock: Clock) -> dict[str, Any]:
    if where == "gated":
        pod = PodBuilder("p").scheduling_gates("x").obj()
        queue.add(pod)
        return pod
    pod = make_pod("p")
    queue.add(pod)
    if where != "active":
        qpi = pop(queue)
        fail(queue, qpi, *(() if where == "backoff" else (FIT,)))
    assert queue.queue_of(pod) == where
    return pod


@pytest.mark.parametrize("where", ["active", "backoff", "unschedulable", "gated"])
def test_delete_from_each_queue(where: str) -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    pod = put_in(queue, where, clock)
    queue.delete(pod)
    assert len(queue) == 0
    assert all(not pods for pods in queue.pending_pods().values())
    clock.advance(60)
    queue.flush_backoff_completed()
    assert queue.pop_nowait() is None


@pytest.mark.parametrize("where", ["active", "backoff", "unschedulable", "gated"])
def test_label_update_in_each_queue_stays_put(where: str) -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    pod = put_in(queue, where, clock)
    new = copy.deepcopy(pod)
    new["metadata"]["labels"] = {"x": "1"}
    queue.update(pod, new)
    assert queue.queue_of(new) == where
    got = queue.get(new)
    assert got is not None and got.pod_info.pod is new
    assert len(queue) == 1


def test_update_of_unknown_pod_adds_it() -> None:
    queue = make_queue()
    pod = make_pod("p")
    queue.update(pod, pod)
    assert queue.queue_of(pod) == "active"


# --- in-flight pods ----------------------------------------------------------------------------


def test_update_during_flight_is_applied_on_requeue() -> None:
    queue = make_queue()
    old = make_pod("p", cpu="1")
    queue.add(old)
    qpi = pop(queue)
    new = make_pod("p", cpu="10m")  # a scale-down FIT registered
    queue.update(old, new)
    assert queue.queue_of(new) == "in-flight"
    fail(queue, qpi, FIT)
    assert qpi.pod_info.pod is new
    assert queue.queue_of(new) == "backoff"


def test_delete_during_flight_drops_the_pod() -> None:
    queue = make_queue()
    pod = make_pod("p")
    queue.add(pod)
    qpi = pop(queue)
    queue.delete(pod)
    fail(queue, qpi, FIT)
    assert len(queue) == 0 and queue.queue_of(pod) is None


def test_done_ends_flight() -> None:
    queue = make_queue()
    pod = make_pod("p")
    queue.add(pod)
    qpi = pop(queue)
    assert queue.in_flight_pods() == [pod]
    queue.done(qpi.pod_info.uid)
    assert queue.in_flight_pods() == []


# --- activate ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "waited", "expected"),
    [
        # Activation never shortens a backoff: a pod tried a moment ago waits it out.
        ("unschedulable", 0.0, "backoff"), ("backoff", 0.0, "backoff"),
        ("unschedulable", 1.0, "active"), ("backoff", 1.0, "active"),
        ("active", 0.0, "active"), ("gated", 0.0, "gated"),
    ],
)
def test_activate(where: str, waited: float, expected: str) -> None:
    metrics = new_metrics()
    clock = Clock()
    queue = make_queue(clock=clock, metrics=metrics)
    pod = put_in(queue, where, clock)
    clock.advance(waited)
    queue.activate([pod])
    assert queue.queue_of(pod) == expected
    if where in ("unschedulable", "backoff"):
        queue_label = "active" if expected == "active" else "backoff"
        assert sample(
            metrics, "scheduler_queue_incoming_pods_total", queue=queue_label,
            event="ForceActivate",
        ) == 1.0


def test_activate_in_flight_pod_retries_it() -> None:
    queue = make_queue()
    pod = make_pod("p")
    queue.add(pod)
    qpi = pop(queue)
    queue.activate([pod])
    fail(queue, qpi, FIT)
    assert queue.queue_of(pod) == "backoff"


# --- pop ---------------------------------------------------------------------------------------


async def test_pop_waits_for_add() -> None:
    queue = make_queue()
    task = asyncio.create_task(queue.pop(), name="test-pop")
    await asyncio.sleep(0)
    assert not task.done()
    queue.add(make_pod("p"))
    qpi = await asyncio.wait_for(task, timeout=5)
    assert qpi is not None and qpi.pod_info.name == "p"


async def test_pop_returns_none_after_close() -> None:
    queue = make_queue()
    task = asyncio.create_task(queue.pop(), name="test-pop")
    await asyncio.sleep(0)
    queue.close()
    assert await asyncio.wait_for(task, timeout=5) is None
    queue.add(make_pod("p"))
    assert await queue.pop() is None
    assert queue.pop_nowait() is None


async def test_pop_wakes_on_backoff_flush() -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    queue.add(make_pod("p"))
    fail(queue, pop(queue))
    task = asyncio.create_task(queue.pop(), name="test-pop")
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(2)
    queue.flush_backoff_completed()
    assert await asyncio.wait_for(task, timeout=5) is not None


# --- metrics -----------------------------------------------------------------------------------


def test_metrics_follow_the_pods() -> None:
    metrics = new_metrics()
    clock = Clock()
    queue = make_queue(clock=clock, metrics=metrics)
    queue.add(make_pod("a"))
    queue.add(make_pod("b"))
    queue.add(make_pod("c"))
    queue.add(PodBuilder("g").scheduling_gates("x").obj())
    fail(queue, pop(queue), FIT, AFFINITY)  # -> unschedulable
    fail(queue, pop(queue))  # error -> backoff

    def pending(q: str) -> float:
        return sample(metrics, "scheduler_pending_pods", queue=q)

    assert [pending(q) for q in ("active", "backoff", "unschedulable", "gated")] == [1, 1, 1, 1]

    def incoming(q: str, event: str) -> float:
        return sample(metrics, "scheduler_queue_incoming_pods_total", queue=q, event=event)

    assert incoming("active", "PodAdd") == 3
    assert incoming("unschedulable", "PodAdd") == 1  # the gated pod
    assert incoming("unschedulable", "ScheduleAttemptFailure") == 1
    assert incoming("backoff", "ScheduleAttemptFailure") == 1
    unsched = "scheduler_unschedulable_pods"
    assert sample(metrics, unsched, plugin=FIT, profile="default-scheduler") == 1
    assert sample(metrics, unsched, plugin=GATES, profile="default-scheduler") == 1
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    assert incoming("backoff", "NodeAdd") == 1
    assert pending("unschedulable") == 0 and pending("backoff") == 2
    assert sample(metrics, unsched, plugin=FIT, profile="default-scheduler") == 0
    clock.advance(2)
    queue.flush_backoff_completed()
    assert incoming("active", "BackoffComplete") == 2
    assert pending("active") == 3 and pending("backoff") == 0


def test_plugin_event_table_with_gang_plugin() -> None:
    # A pod rejected by the gang plugin at PreFilter waits for PodGroup events only.
    queue, qpi, _ = unschedulable_queue((GANG,))
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    assert queue.queue_of(qpi.pod_info.pod) == "unschedulable"
    queue.move_all_to_active_or_backoff_queue(
        ClusterEvent(EventResource.POD_GROUP, ActionType.UPDATE_OTHER, "PodGroupUpdate")
    )
    assert queue.queue_of(qpi.pod_info.pod) == "unschedulable"
    queue.move_all_to_active_or_backoff_queue(GROUP_ADD)
    assert queue.queue_of(qpi.pod_info.pod) == "backoff"


def test_gated_pod_moves_only_on_its_gating_plugins_events() -> None:
    # Rejected by FIT, then gated by the gang plugin on its way back: NodeAdd (FIT's event)
    # must not re-run PreEnqueue; only the gang plugin's events may.
    pre = PreEnqueue()
    clock = Clock()
    queue = make_queue(clock=clock, pre_enqueue=pre)
    pod = make_pod("member", labels={"gang": "g1"})
    pre.groups_ready = True
    queue.add(pod)
    fail(queue, pop(queue), FIT)
    pre.groups_ready = False
    clock.advance(60)
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    assert queue.queue_of(pod) == "gated"
    calls = pre.calls
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    assert pre.calls == calls and queue.queue_of(pod) == "gated"
    pre.groups_ready = True
    queue.move_all_to_active_or_backoff_queue(GROUP_ADD)
    assert queue.queue_of(pod) == "active"


def test_gated_pods_are_grouped_by_gating_plugin_and_leave_their_group_when_they_move() -> None:
    """An event is matched once per (profile, gating plugin) group, not once per gated pod:
    the groups must hold exactly the gated pods, whatever moves them."""
    pre = PreEnqueue()
    queue = make_queue(pre_enqueue=pre)
    for i in range(50):
        queue.add(PodBuilder(f"g{i}").scheduling_gates("x").obj())
    queue.add(make_pod("member", labels={"gang": "g1"}))
    pool = queue._pool
    sizes = sorted(len(members) for members in pool.gated_groups.values())
    assert sizes == [1, 50] and len(pool.gated) == 51
    calls = pre.calls
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)  # neither gating plugin's event
    assert pre.calls == calls
    pre.groups_ready = True
    queue.move_all_to_active_or_backoff_queue(GROUP_ADD)  # opens the gang member only
    assert queue.queue_of(make_pod("member")) == "active"
    assert [len(m) for m in pool.gated_groups.values()] == [50]
    for i in range(50):
        queue.delete(PodBuilder(f"g{i}").scheduling_gates("x").obj())
    assert pool.gated_groups == {} and pool.gated == {}


# --- backoffQ popping (upstream SchedulerPopFromBackoffQ, on by default since 1.33) ----------


def _rejected_into_backoff(queue: Any, name: str, *, priority: int = 0) -> dict[str, Any]:
    """A pod rejected by FIT while a NodeAdd arrived during its cycle: backoffQ."""
    pod = PodBuilder(name).priority(priority).req(cpu="1").obj()
    queue.add(pod)
    qpi = pop(queue)
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    fail(queue, qpi, FIT)
    assert queue.queue_of(pod) == "backoff"
    return pod


@pytest.mark.parametrize(
    ("waited", "popped"),
    [(0.0, False), (0.5, False), (0.99, False), (1.0, True), (1.5, True)],
)
def test_pop_takes_backoffQ_head_when_activeQ_is_empty_once_its_backoff_is_over(
    waited: float, popped: bool
) -> None:
    """upstream activeQueue.unlockedPop / backoffQueue.popBackoff: with activeQ empty the
    head of backoffQ is popped before the window-aligned flush; unlike upstream, only once
    its own backoff (1 s here) is over: popping a pod still backing off let events retry
    it as fast as the loop turns (issue 22).  An activeQ pod still comes first."""
    clock = Clock()
    metrics = new_metrics()
    queue = make_queue(clock=clock, metrics=metrics)
    _rejected_into_backoff(queue, "backing-off")
    queue.add(make_pod("ready"))
    assert pop(queue).pod_info.name == "ready"
    clock.advance(waited)
    qpi = queue.pop_nowait()
    if not popped:
        assert qpi is None
        assert queue.queue_of(make_pod("backing-off")) == "backoff"
        return
    assert qpi is not None
    assert qpi.attempts == 2 and queue.queue_of(qpi.pod_info.pod) == "in-flight"
    assert qpi.pod_info.name == "backing-off"
    assert sample(metrics, "scheduler_queue_incoming_pods_total", queue="active",
                  event="PopFromBackoffQ") == 1


def test_pod_that_failed_with_an_error_is_not_popped_early() -> None:
    """upstream backoffQueue.popBackoff pops podBackoffQ only, never podErrorBackoffQ."""
    clock = Clock()
    queue = make_queue(clock=clock)
    queue.add(make_pod("p"))
    fail(queue, pop(queue))  # no rejecting plugin: an error
    assert queue.pop_nowait() is None


async def test_popper_waits_out_the_backoff_of_a_pod_entering_backoffQ() -> None:
    """upstream moveToBackoffQ wakes a Pop waiting on an empty activeQ; here the popper
    then waits for the pod's backoff to end rather than taking it at once."""
    clock = Clock()
    queue = make_queue(clock=clock)
    pod = make_pod("p")
    queue.add(pod)
    qpi = pop(queue)
    task = asyncio.create_task(queue.pop(), name="test-pop")
    await asyncio.sleep(0)
    assert not task.done()
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    fail(queue, qpi, FIT)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done() and queue.queue_of(pod) == "backoff"
    clock.advance(1.0)
    queue.flush_backoff_completed()
    popped = await asyncio.wait_for(task, timeout=5)
    assert popped is not None and popped.pod_info.name == "p"


def test_backoffQ_orders_by_one_second_window_then_priority() -> None:
    """upstream lessBackoffCompletedWithPriority / alignToWindow: expiries in the same
    1-second window are ordered by priority (as activeQ); an earlier window comes first."""
    clock = Clock()
    queue = make_queue(clock=clock)
    clock.advance(0.1)
    _rejected_into_backoff(queue, "low-early", priority=1)
    clock.advance(0.5)
    _rejected_into_backoff(queue, "high-late", priority=10)
    clock.advance(1.0)  # the next window
    _rejected_into_backoff(queue, "highest-next-window", priority=100)
    assert names(queue.pending_pods()["backoff"]) == [
        "high-late", "low-early", "highest-next-window"
    ]
    clock.advance(1.0)  # every backoff over, none flushed
    assert [pop(queue).pod_info.name for _ in range(3)] == [
        "high-late", "low-early", "highest-next-window"
    ]


# --- a nominated pod releasing its node (upstream updatePodInSchedulingQueue /
# deletePodFromSchedulingQueue with getLEPriorityPreCheck) ------------------------------------


def _blocked(queue: Any, name: str, priority: int) -> dict[str, Any]:
    pod = PodBuilder(name).priority(priority).req(cpu="1").obj()
    queue.add(pod)
    fail(queue, pop(queue), FIT)
    assert queue.queue_of(pod) == "unschedulable"
    return pod


def _nominated(name: str, priority: int, node: str = "n1") -> dict[str, Any]:
    return PodBuilder(name).priority(priority).req(cpu="1").nominated_node(node).obj()


@pytest.mark.parametrize("how", ["deleted", "nomination-cleared", "nominated-elsewhere"])
def test_nominated_pod_releasing_its_node_requeues_equal_or_lower_priority_pods(
    how: str,
) -> None:
    queue = make_queue()
    low, equal, high = _blocked(queue, "low", 1), _blocked(queue, "equal", 10), _blocked(
        queue, "high", 20)
    nominated = _nominated("preemptor", 10)
    queue.add(nominated)
    if how == "deleted":
        queue.delete(nominated)
    else:
        new = copy.deepcopy(nominated)
        new["metadata"]["resourceVersion"] = "2"
        new["status"]["nominatedNodeName"] = "" if how == "nomination-cleared" else "n2"
        queue.update(nominated, new)
    assert queue.queue_of(low) in ("active", "backoff")
    assert queue.queue_of(equal) in ("active", "backoff")
    assert queue.queue_of(high) == "unschedulable"  # it never counted the nominated pod


def test_nominated_pod_that_got_bound_moves_nobody_from_the_queue() -> None:
    queue = make_queue()
    low = _blocked(queue, "low", 1)
    nominated = _nominated("preemptor", 10)
    queue.add(nominated)
    queue.delete(nominated, bound=True)  # the binding, not the deletion, frees nothing
    assert queue.queue_of(low) == "unschedulable"
