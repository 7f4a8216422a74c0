"""The sandbox simulations' one loop (scheduler/sandbox/wakeloop.py): a burst of wakes is one
pass, ``before`` runs ahead of every wait, a timeout of 0 does not wait, a failing pass is
logged and the loop goes on."""

from __future__ import annotations

import asyncio
import logging

import pytest

from scheduler.sandbox.wakeloop import wake_loop


async def test_a_burst_of_wakes_during_the_delay_is_one_pass() -> None:
    wake = asyncio.Event()
    passes: list[int] = []

    async def burst() -> None:
        for _ in range(5):
            wake.set()
            await asyncio.sleep(0)

    loop = asyncio.create_task(wake_loop(wake, lambda: passes.append(1), delay=0.05,
                                         what="test", iterations=2))
    await burst()
    await asyncio.sleep(0.2)
    assert passes == [1] and not wake.is_set()
    assert not loop.done()  # the second pass waits for a wake that never comes
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop


@pytest.mark.parametrize(("timeout", "passes"), [
    (0.0, 3),   # no wait: a pass per iteration without any wake
    (0.01, 3),  # waits at most 10 ms
])
async def test_a_timeout_bounds_the_wait(timeout: float, passes: int) -> None:
    done: list[int] = []
    await asyncio.wait_for(wake_loop(asyncio.Event(), lambda: done.append(1), delay=0,
                                     what="test", timeout=lambda: timeout, iterations=3), 5)
    assert len(done) == passes


async def test_before_runs_ahead_of_every_wait() -> None:
    wake = asyncio.Event()
    wake.set()
    order: list[str] = []

    def work() -> None:
        order.append("work")
        wake.set()  # what a pass writes wakes the next one

    await wake_loop(wake, work, delay=0, what="test", before=lambda: order.append("before"),
                    iterations=2)
    assert order == ["before", "work", "before", "work"]


async def test_a_failing_pass_is_logged_and_the_loop_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    wake = asyncio.Event()
    calls: list[int] = []

    def work() -> None:
        calls.append(1)
        wake.set()
        if len(calls) == 1:
            raise RuntimeError("boom")

    wake.set()
    with caplog.at_level(logging.ERROR, logger="scheduler.sandbox"):
        await wake_loop(wake, work, delay=0, what="kubelet simulation", iterations=2)
    assert len(calls) == 2
    [record] = caplog.records
    assert record.getMessage() == "kubelet simulation failed" and record.exc_info
