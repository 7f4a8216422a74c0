"""WaitingPod and WaitingPodsMap: allow/reject/timeout semantics and the Go duration format."""

from __future__ import annotations

import asyncio

import pytest

from scheduler.framework.status import Code, Status
from scheduler.framework.waiting_pods import (
    MAX_PERMIT_TIMEOUT_SECONDS,
    WaitingPod,
    WaitingPodsMap,
    format_go_duration,
)
from scheduler.objects.pod import PodInfo
from tests.builders import make_pod

U = Code.UNSCHEDULABLE


def _pod(name: str = "p") -> PodInfo:
    return PodInfo.from_pod(make_pod(name))


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (10, "10s"),
        (1.5, "1.5s"),
        (0.5, "500ms"),
        (0.01, "10ms"),
        (90, "1m30s"),
        (900, "15m0s"),
        (3600, "1h0m0s"),
        (3725.25, "1h2m5.25s"),
        (0.0000015, "1.5µs"),
        (-2, "-2s"),
    ],
)
def test_format_go_duration(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text


async def test_allow_by_every_pending_plugin_succeeds() -> None:
    wp = WaitingPod(_pod(), {"A": 30, "B": 30})
    assert sorted(wp.pending_plugins()) == ["A", "B"]
    wp.allow("A")
    assert not wp.done() and wp.pending_plugins() == ["B"]
    wp.allow("B")
    assert wp.done()
    assert await wp.wait() is None


async def test_reject_wins_and_later_answers_are_ignored() -> None:
    wp = WaitingPod(_pod(), {"A": 30, "B": 30})
    wp.allow("A")
    wp.reject("B", "gang incomplete")
    wp.allow("B")
    wp.reject("A", "second")
    assert await wp.wait() == Status(U, "gang incomplete", plugin="B")


async def test_first_timer_rejects_with_upstream_message() -> None:
    wp = WaitingPod(_pod(), {"Slow": 30, "Fast": 0.02})
    status = await asyncio.wait_for(wp.wait(), 5)
    assert status == Status(
        U, "rejected due to timeout after waiting 20ms at plugin Fast", plugin="Fast"
    )


async def test_allow_cancels_that_plugins_timer() -> None:
    wp = WaitingPod(_pod(), {"A": 0.01, "B": 60})
    wp.allow("A")
    await asyncio.sleep(0.03)  # A's timer would have fired by now
    assert not wp.done()
    wp.allow("B")
    assert await wp.wait() is None


async def test_timeouts_are_capped() -> None:
    loop = asyncio.get_running_loop()
    wp = WaitingPod(_pod(), {"A": 10 * MAX_PERMIT_TIMEOUT_SECONDS}, loop=loop)
    assert wp._pending["A"].when() - loop.time() <= MAX_PERMIT_TIMEOUT_SECONDS
    wp.cancel_timers()


async def test_map_add_get_remove_iterate() -> None:
    m = WaitingPodsMap()
    a, b = WaitingPod(_pod("a"), {"X": 30}), WaitingPod(_pod("b"), {"X": 30})
    m.add(a)
    m.add(b)
    assert len(m) == 2 and a.uid in m
    assert m.get(a.uid) is a
    for wp in m:  # iterating over a snapshot: removal while iterating is fine
        m.remove(wp.uid)
    assert len(m) == 0 and m.get(a.uid) is None
    assert m.remove("missing") is None
    a.cancel_timers()
    b.cancel_timers()


async def test_replacing_an_entry_stops_the_old_timers() -> None:
    m = WaitingPodsMap()
    old = WaitingPod(_pod(), {"X": 0.01})
    m.add(old)
    new = WaitingPod(_pod(), {"X": 60})
    m.add(new)
    await asyncio.sleep(0.03)
    assert not old.done()
    assert m.get(new.uid) is new
    new.cancel_timers()
