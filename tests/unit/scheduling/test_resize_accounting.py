"""A bound pod resized in place (KEP-1287, GA in 1.35) is never under-counted: its node counts
the larger of the desired and the kubelet-reported sizes until the kubelet reports the new
size, the cache follows the pod's update events, and the report that the shrink is done is the
UpdatePodScaleDown event that requeues pods NodeResourcesFit rejected."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.config.defaults import merge_plugin_args
from scheduler.eventhandlers import EventHandlers
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.events import ActionType, QueueingHint, pod_update_action
from scheduler.objects.pod import (
    POD_REASON_DEFERRED,
    POD_REASON_INFEASIBLE,
    POD_RESIZE_IN_PROGRESS,
    POD_RESIZE_PENDING,
    PodInfo,
)
from scheduler.plugins.noderesources.fit import NAME, REASON_INSUFFICIENT_CPU, Fit
from tests.builders import PodBuilder, make_node
from tests.unit.scheduling.test_eventhandlers_malformed import FakeScheduler

PENDING = PodBuilder("pending").uid("u-pending").req(cpu="2").obj()


def _running(cpu_spec: str, *, allocated: str, actual: str, rv: int,
             condition: tuple[str, str] | None = None) -> dict[str, Any]:
    b = (PodBuilder("web").uid("u-web").resource_version(rv).node("n1")
         .container("app", requests={"cpu": cpu_spec})
         .container_status("app", allocated={"cpu": allocated}, actual={"cpu": actual}))
    if condition is not None:
        b.condition(condition[0], reason=condition[1])
    return b.obj()


# The shrink 3 -> 1 CPU of the issue, as the kubelet reports it step by step.
BEFORE = _running("3", allocated="3", actual="3", rv=1)
REQUESTED = _running("1", allocated="3", actual="3", rv=2)  # spec patched via pods/resize
PENDING_RESIZE = _running("1", allocated="3", actual="3", rv=3,
                          condition=(POD_RESIZE_PENDING, POD_REASON_DEFERRED))
IN_PROGRESS = _running("1", allocated="1", actual="3", rv=4,
                       condition=(POD_RESIZE_IN_PROGRESS, ""))
DONE = _running("1", allocated="1", actual="1", rv=5)


def _handlers() -> tuple[FakeScheduler, EventHandlers]:
    sched = FakeScheduler()
    sched.cache.add_node(make_node("n1", cpu="4"))
    return sched, EventHandlers(sched)  # type: ignore[arg-type]


def _fits(sched: FakeScheduler) -> bool:
    info = sched.cache.get_node_info("n1")
    assert info is not None
    fit = Fit(merge_plugin_args(NAME, {}), None)
    state, pod_info = CycleState(), PodInfo.from_pod(PENDING)
    fit.pre_filter(state, pod_info, [info])
    status = fit.filter(state, pod_info, info)
    if status is not None:
        assert REASON_INSUFFICIENT_CPU in status.reasons
    return status is None


def test_shrinking_pod_counts_its_old_size_until_the_kubelet_reports_the_new_one() -> None:
    sched, h = _handlers()
    h.on_pod_add(BEFORE)
    steps = [(BEFORE, REQUESTED, 3000), (REQUESTED, PENDING_RESIZE, 3000),
             (PENDING_RESIZE, IN_PROGRESS, 3000), (IN_PROGRESS, DONE, 1000)]
    for old, new, counted in steps:
        h.on_pod_update(old, new)
        info = sched.cache.get_node_info("n1")
        assert info is not None and info.requested.milli_cpu == counted
        # 2 CPU fit on the 4-CPU node only once 1 CPU is reported
        assert _fits(sched) is (counted == 1000)


def _status_write(pod: dict[str, Any], rv: int) -> dict[str, Any]:
    """The kubelet's status write that changes nothing the requests are read from."""
    new = copy.deepcopy(pod)
    new["metadata"]["resourceVersion"] = str(rv)
    new["status"]["phase"] = "Running"
    return new


def test_the_queue_hears_the_update_action_computed_in_full() -> None:
    """The handlers tell the queue when they found the spec and resize report unchanged
    (``same_sizing``, no second comparison): the action it computes is the one computed
    from both versions in full, at every step of the shrink and on status writes."""
    sched, h = _handlers()
    h.on_pod_add(BEFORE)
    steps = [(BEFORE, _status_write(BEFORE, 11)), (_status_write(BEFORE, 11), REQUESTED),
             (REQUESTED, PENDING_RESIZE), (PENDING_RESIZE, IN_PROGRESS),
             (IN_PROGRESS, _status_write(IN_PROGRESS, 12)), (_status_write(IN_PROGRESS, 12), DONE)]
    for old, new in steps:
        h.on_pod_update(old, new)
    assert sched.queue.update_actions == [pod_update_action(o, n) for o, n in steps]
    scale_downs = [bool(a & ActionType.UPDATE_POD_SCALE_DOWN) for a in sched.queue.update_actions]
    assert scale_downs == [False, False, False, False, False, True]


def test_growing_pod_counts_the_desired_size_at_once() -> None:
    sched, h = _handlers()
    small = _running("1", allocated="1", actual="1", rv=1)
    grow = _running("3", allocated="1", actual="1", rv=2,
                    condition=(POD_RESIZE_PENDING, POD_REASON_DEFERRED))
    h.on_pod_add(small)
    h.on_pod_update(small, grow)
    info = sched.cache.get_node_info("n1")
    assert info is not None and info.requested.milli_cpu == 3000


def test_infeasible_resize_counts_what_runs() -> None:
    sched, h = _handlers()
    small = _running("1", allocated="1", actual="1", rv=1)
    infeasible = _running("8", allocated="1", actual="1", rv=2,
                          condition=(POD_RESIZE_PENDING, POD_REASON_INFEASIBLE))
    h.on_pod_add(small)
    h.on_pod_update(small, infeasible)
    info = sched.cache.get_node_info("n1")
    assert info is not None and info.requested.milli_cpu == 1000


@pytest.mark.parametrize(
    ("old", "new", "scale_down", "hint"),
    [
        # the spec shrinks, but the pod still holds 3 CPU: nothing was freed yet
        (BEFORE, REQUESTED, False, QueueingHint.SKIP),
        (REQUESTED, PENDING_RESIZE, False, QueueingHint.SKIP),
        (PENDING_RESIZE, IN_PROGRESS, False, QueueingHint.SKIP),
        # the kubelet reports 1 CPU: room was freed
        (IN_PROGRESS, DONE, True, QueueingHint.QUEUE),
        # growing never frees room
        (DONE, _running("3", allocated="1", actual="1", rv=6), False, QueueingHint.SKIP),
    ],
    ids=["spec-patched", "deferred", "in-progress", "done", "grow"],
)
def test_scale_down_event_comes_with_the_report(
    old: dict[str, Any], new: dict[str, Any], scale_down: bool, hint: QueueingHint
) -> None:
    action = pod_update_action(old, new)
    assert bool(action & ActionType.UPDATE_POD_SCALE_DOWN) is scale_down
    fit = Fit(merge_plugin_args(NAME, {}), None)
    assert fit.is_schedulable_after_pod_event(PENDING, old, new) is hint


def test_unrelated_status_change_is_no_scale_down() -> None:
    new = copy.deepcopy(DONE)
    new["status"]["phase"] = "Running"
    assert not pod_update_action(DONE, new) & ActionType.UPDATE_POD_SCALE_DOWN
