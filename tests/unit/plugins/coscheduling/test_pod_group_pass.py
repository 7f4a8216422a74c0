"""Coscheduling's side of the PodGroup pass (issue 22): which members the scheduler tries
back to back, and what a pass that left the gang short does with the waiting members."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.interfaces import PodGroupPlugin
from scheduler.objects.pod import PodInfo

from .helpers import Cluster, member, pod_group


def _names(pods: list[dict[str, Any]] | None) -> list[str] | None:
    return None if pods is None else [p["metadata"]["name"] for p in pods]


def test_coscheduling_is_a_pod_group_plugin() -> None:
    assert isinstance(Cluster().plugin, PodGroupPlugin)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        # The other pending members, by name; bound, waiting and other groups' pods left out.
        (member("m1"), ["m0", "m3"]),
        (member("m0"), ["m1", "m3"]),
        # Not a gang member, or a gang whose PodGroup does not exist: no pass.
        (member("plain", None), None),
        (member("lost", "nogroup"), None),
    ],
)
def test_pod_group_members(pod: dict[str, Any], expected: list[str] | None) -> None:
    pods = [member("m0"), member("m1"), member("m2", node="n1"), member("m3"),
            member("m4"), member("x", "other")]
    c = Cluster(groups=[pod_group("g", 5), pod_group("other", 1)], pods=pods,
                waiting=[pods[4]])
    assert _names(c.plugin.pod_group_members(PodInfo.from_pod(pod))) == expected


@pytest.mark.parametrize(
    ("min_member", "placed", "percentage", "released"),
    [
        (5, 4, 10, True),     # 20% missing after every member was tried: let them go
        (5, 5, 10, False),    # complete (Permit allowed them)
        (20, 18, 10, False),  # within podGroupRejectPercentage: keep waiting (opt-in)
        (4, 2, 100, False),   # 100: the user asked to wait for scheduleTimeoutSeconds
        (4, 2, 0, True),
    ],
)
def test_pass_done_releases_a_short_gangs_waiting_members(
    min_member: int, placed: int, percentage: int, released: bool
) -> None:
    waiting = [member(f"w{i}") for i in range(placed)]
    c = Cluster(groups=[pod_group("g", min_member)], pods=waiting, waiting=waiting,
                args={"podGroupRejectPercentage": percentage, "podGroupBackoffSeconds": 5})
    c.plugin.manager.pre_filter(PodInfo.from_pod(waiting[0]))
    complete = c.plugin.pod_group_pass_done(PodInfo.from_pod(waiting[0]))
    assert complete == (placed >= min_member)
    rejected = [wp.rejected for wp in c.handle.waiting.values()]
    events = [(e["type"], e["reason"], e["message"]) for e in c.handle.event_recorder.events]
    if not released:
        assert rejected == [None] * placed
        # One event on the PodGroup when it is placed whole; none while it may still be.
        assert events == ([("Normal", "Scheduled",
                            f"PodGroup default/g: {placed} member(s) placed, minMember "
                            f"{min_member}")] if complete else [])
        return
    message = (f"PodGroup default/g is incomplete after trying its members: "
               f"{placed}/{min_member} placed")
    assert events == [("Warning", "FailedScheduling", message)]
    for r in rejected:
        assert r is not None and r[0] == "Coscheduling"
        assert r[1] == message
    # The gang backs off and forgets its admission: it is retried as a whole, later.
    assert c.plugin.manager.backoff_remaining("default/g") > 0
    assert not c.plugin.manager.is_admitted("default/g")


def test_pass_done_leaves_other_groups_alone() -> None:
    mine, theirs = member("w0"), member("t0", "other")
    c = Cluster(groups=[pod_group("g", 3), pod_group("other", 3)], pods=[mine, theirs],
                waiting=[mine, theirs])
    c.plugin.pod_group_pass_done(PodInfo.from_pod(mine))
    parked = c.handle.waiting
    assert parked[mine["metadata"]["uid"]].rejected is not None
    assert parked[theirs["metadata"]["uid"]].rejected is None


def test_a_gang_rejected_in_post_filter_gets_one_event_at_the_end_of_the_pass() -> None:
    from scheduler.framework.cycle_state import CycleState

    pods = [member("p0"), member("p1"), member("p2")]
    c = Cluster(groups=[pod_group("g", 3)], pods=pods, waiting=pods[:2])
    c.plugin.post_filter(CycleState(), PodInfo.from_pod(pods[2]), {})
    assert c.handle.event_recorder.events == []
    assert c.plugin.pod_group_pass_done(PodInfo.from_pod(pods[0])) is False
    assert [(e["reason"], e["message"], e["regarding"]["kind"])
            for e in c.handle.event_recorder.events] == [(
        "FailedScheduling",
        "PodGroup default/g gets rejected due to Pod p2 is unschedulable even after PostFilter",
        "PodGroup")]
    # Reported once: the rejected members left Permit; the next pass has nothing new to say.
    c.handle.waiting.clear()
    c.plugin.pod_group_pass_done(PodInfo.from_pod(pods[0]))
    assert len(c.handle.event_recorder.events) == 1


def test_members_are_tried_largest_first() -> None:
    # Small members first would spread over both nodes and leave no node for the big one.
    pods = [member("a-small-0", cpu="1"), member("a-small-1", cpu="1"),
            member("z-big", cpu="4"), member("m-mid", cpu="2")]
    c = Cluster(groups=[pod_group("g", 4)], pods=pods)
    assert _names(c.plugin.pod_group_members(PodInfo.from_pod(pods[0]))) == [
        "z-big", "m-mid", "a-small-1"]
    from .helpers import qpi
    ordered = sorted(pods, key=lambda p: p["metadata"]["name"])
    import functools
    queue = sorted((qpi(p) for p in ordered), key=functools.cmp_to_key(
        lambda x, y: -1 if c.plugin.less(x, y) else (1 if c.plugin.less(y, x) else 0)))
    assert [q.pod_info.name for q in queue] == ["z-big", "m-mid", "a-small-0", "a-small-1"]
