"""SchedulingGates: gated pods stay out of activeQ until the gates are removed."""

from __future__ import annotations

from scheduler.framework.events import ActionType, EventResource, QueueingHint
from scheduler.framework.status import Code, Status
from scheduler.objects.pod import PodInfo
from scheduler.plugins.schedulinggates import NAME, SchedulingGates
from tests.builders import PodBuilder


def test_ungated_pod_passes() -> None:
    pod = PodInfo.from_pod(PodBuilder("p").container().obj())
    assert SchedulingGates({}, None).pre_enqueue(pod) is None


def test_gated_pod_lists_gates_like_go() -> None:
    pod = PodInfo.from_pod(PodBuilder("p").container().scheduling_gates("foo", "bar").obj())
    status = SchedulingGates({}, None).pre_enqueue(pod)
    assert status == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates: [foo bar]"
    )


def test_events_and_hint() -> None:
    plugin = SchedulingGates({}, None)
    assert plugin.name == NAME
    (registered,) = plugin.events_to_register()
    assert registered.event.resource is EventResource.UNSCHEDULED_POD
    assert registered.event.action_type == ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
    hint = registered.hint
    assert hint is not None
    gated = PodBuilder("p").uid("u1").container().scheduling_gates("g").obj()
    ungated = PodBuilder("p").uid("u1").container().obj()
    other = PodBuilder("q").uid("u2").container().obj()
    assert hint(gated, gated, ungated) is QueueingHint.QUEUE
    assert hint(gated, other, other) is QueueingHint.SKIP
