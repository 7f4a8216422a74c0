"""The queue's invariant (issue 22): no pod starts an attempt before the backoff of its last
failure is over, whatever the events; and a pod is never popped while its previous attempt
is in flight.  Without gangs: the mechanisms are general."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.events import ASSIGNED_POD_DELETE, ClusterEvent
from tests.builders import make_pod
from tests.unit.queue.helpers import (
    FIT,
    GANG,
    GROUP_ADD,
    NODE_ADD,
    POD_DELETE,
    Clock,
    fail,
    make_queue,
    pop,
)


def _allowed_attempts(seconds: float, *, initial: float, maximum: float) -> int:
    """Attempts a pod failing every time may make in ``seconds``: one now, then one per
    backoff period (initial x 2^(n-1), capped)."""
    t, attempts, backoff = 0.0, 1, initial
    while t + backoff <= seconds:
        t += backoff
        attempts += 1
        backoff = min(backoff * 2, maximum)
    return attempts


@pytest.mark.parametrize(
    ("event", "rejector"),
    [(NODE_ADD, FIT), (ASSIGNED_POD_DELETE, FIT), (POD_DELETE, FIT), (GROUP_ADD, GANG),
     (None, FIT)],  # None: activation, as a gang's Permit activates its siblings
)
@pytest.mark.parametrize("step", [0.01, 0.1, 0.7])
def test_an_event_storm_never_retries_a_pod_faster_than_its_backoff(
    event: ClusterEvent | None, rejector: str, step: float
) -> None:
    clock = Clock()
    queue = make_queue(clock=clock, pod_initial_backoff=1.0, pod_max_backoff=10.0)
    pod = make_pod("p")
    queue.add(pod)
    seconds = 60.0
    attempts = 0
    start = clock.now
    while clock.now - start < seconds:
        # The event that may help it, every step, and the flush every step too.
        if event is None:
            queue.activate([pod])
        else:
            queue.move_all_to_active_or_backoff_queue(event, None, make_pod("other"))
        queue.flush_backoff_completed()
        qpi = queue.pop_nowait()
        if qpi is not None:
            attempts += 1
            fail(queue, qpi, rejector)
        clock.advance(step)
    allowed = _allowed_attempts(seconds, initial=1.0, maximum=10.0)
    assert attempts <= allowed
    # And the brake is a brake, not a stop: the events still bring it back after each backoff
    # (up to the 1-second flush window and the step's granularity per attempt).
    assert attempts >= _allowed_attempts(seconds - (1.0 + step) * allowed, initial=1.0,
                                         maximum=10.0)


def test_a_pending_plugins_queue_answer_still_skips_backoff() -> None:
    """The one exception: a Pending rejection is not a failure (upstream
    queueImmediately)."""
    clock = Clock()
    queue = make_queue(clock=clock)
    queue.add(make_pod("p"))
    fail(queue, pop(queue), pending=(FIT,))
    queue.move_all_to_active_or_backoff_queue(NODE_ADD)
    assert queue.queue_of(make_pod("p")) == "active"


def _popped_copy(queue: Any, pod: dict[str, Any]) -> Any:
    """A second copy of an in-flight pod queued (a delete and a replayed add)."""
    queue.add(pod)
    qpi = pop(queue)
    queue.delete(pod)
    queue.add(pod)
    return qpi


def test_a_pod_is_never_popped_while_its_attempt_is_in_flight() -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    pod = make_pod("p")
    qpi = _popped_copy(queue, pod)
    assert queue.queue_of(pod) == "active"
    assert queue.pop_nowait() is None  # the copy is not popped
    assert queue.queue_of(pod) == "backoff"
    clock.advance(5)
    queue.flush_backoff_completed()
    assert queue.pop_nowait() is None  # still in flight: still not popped
    # The attempt ends (a failure): the pod is queued once, and popped once its backoff ends.
    qpi.unschedulable_plugins = {FIT}
    queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle())
    assert queue.queue_of(pod) in ("backoff", "unschedulable")
    assert len(queue) == 1


def test_the_copy_stays_queued_when_the_attempt_ends_without_a_requeue() -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    pod = make_pod("p")
    qpi = _popped_copy(queue, pod)
    assert queue.pop_nowait() is None
    queue.done(qpi.pod_info.uid)
    clock.advance(5)
    queue.flush_backoff_completed()
    again = queue.pop_nowait()
    assert again is not None and again.pod_info.name == "p"


# --- take: a gang's members tried in the same pass -------------------------------------------


@pytest.mark.parametrize(
    ("where", "waited", "taken"),
    [
        ("active", 0.0, True),
        ("unschedulable", 0.0, True),   # backoff (1 s) ends within the 1 s tolerance
        ("backoff", 0.5, True),
        ("gated", 0.0, False),
        ("in-flight", 0.0, False),
        ("absent", 0.0, False),
    ],
)
def test_take(where: str, waited: float, taken: bool) -> None:
    clock = Clock()
    queue = make_queue(clock=clock)
    pod = make_pod("p")
    if where == "gated":
        from tests.builders import PodBuilder
        pod = PodBuilder("p").scheduling_gates("x").obj()
    if where != "absent":
        queue.add(pod)
    if where in ("unschedulable", "backoff", "in-flight"):
        qpi = pop(queue)
        if where == "backoff":
            queue.move_all_to_active_or_backoff_queue(NODE_ADD)
        if where != "in-flight":
            fail(queue, qpi, FIT)
    clock.advance(waited)
    before = queue.scheduling_cycle()
    got = queue.take([pod])
    assert bool(got) == taken
    if taken:
        assert queue.queue_of(pod) == "in-flight"
        assert queue.scheduling_cycle() == before + 1
        assert got[0].attempts == (1 if where == "active" else 2)
        assert not got[0].unschedulable_plugins


def test_take_leaves_a_member_backing_off_for_longer() -> None:
    clock = Clock()
    queue = make_queue(clock=clock, pod_initial_backoff=1.0, pod_max_backoff=10.0)
    pod = make_pod("p")
    queue.add(pod)
    for _ in range(3):  # backoff 4 s after the third failure
        qpi = queue.take([pod])[0] if queue.queue_of(pod) != "active" else pop(queue)
        fail(queue, qpi, FIT)
        clock.advance(10)
    clock.advance(-10 + 0.5)
    assert queue.take([pod]) == []
    clock.advance(3)
    assert [q.pod_info.name for q in queue.take([pod])] == ["p"]


def test_restart_backoff_puts_gang_members_failed_apart_back_in_step() -> None:
    # Two members at the 10 s maximum backoff that failed 9 s apart: each pass finds the
    # other still backing off (beyond take's tolerance) and the gang never completes.
    # Restarting the other's backoff when a pass fails brings them back in step; it only
    # ever delays a pod.
    clock = Clock()
    queue = make_queue(clock=clock, pod_initial_backoff=1.0, pod_max_backoff=10.0)
    a, b = make_pod("a"), make_pod("b")
    queue.add(a)
    queue.add(b)
    for _ in range(6):  # both at the maximum backoff, in step
        clock.advance(11)
        for pod in (a, b):
            fail(queue, queue.take([pod])[0], FIT)
    clock.advance(11)
    fail(queue, queue.take([a])[0], FIT)  # T: a fails alone
    clock.advance(9)
    fail(queue, queue.take([b])[0], FIT)  # T+9: b fails alone
    clock.advance(1.5)  # T+10.5: a's pass; b has 8.5 s left, beyond the tolerance
    qpi_a = queue.take([a])[0]
    assert queue.take([b]) == []
    fail(queue, qpi_a, FIT)
    assert queue.restart_backoff([b]) == 1  # the failed pass restarts b's backoff from now
    clock.advance(7.5)  # T+18: b would be within the tolerance of its old end (T+19)
    assert queue.take([b]) == []
    clock.advance(2.6)  # T+20.6: both ends are over, together
    assert sorted(q.pod_info.name for q in queue.take([a, b])) == ["a", "b"]


def test_restart_backoff_never_shortens_nor_touches_pods_in_flight_or_active() -> None:
    clock = Clock()
    queue = make_queue(clock=clock, pod_initial_backoff=1.0, pod_max_backoff=10.0)
    active, flying = make_pod("active"), make_pod("flying")
    queue.add(active)
    queue.add(flying)
    pop(queue)  # one of them in flight
    in_flight = "active" if queue.queue_of(active) == "in-flight" else "flying"
    assert queue.restart_backoff([active, flying, make_pod("absent")]) == 0
    assert queue.queue_of(active if in_flight == "active" else flying) == "in-flight"
