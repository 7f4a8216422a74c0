"""client.slots.Slots: the counting semaphore of the binds in flight and the write pool."""

from __future__ import annotations

import asyncio

import pytest

from scheduler.client.slots import Slots


@pytest.mark.parametrize("waiters", [1, 3, 50])
async def test_waiters_get_slots_in_order_and_leave_the_line(waiters: int) -> None:
    slots = Slots(1)
    assert slots.try_take()
    order: list[int] = []

    async def wait(i: int) -> None:
        await slots.take()
        order.append(i)

    tasks = [asyncio.create_task(wait(i), name=f"w{i}") for i in range(waiters)]
    await asyncio.sleep(0)
    assert slots.waiting == waiters and slots.free == 0
    for i in range(waiters):
        slots.give()
        await tasks[i]
        # Handed its slot: out of the line, nothing left to search for it.
        assert slots.waiting == waiters - i - 1
    assert order == list(range(waiters))
    slots.give()
    assert slots.free == 1 and slots.waiting == 0


@pytest.mark.parametrize("position", ["first", "middle", "last"])
async def test_a_cancelled_waiter_leaves_the_line_at_once(position: str) -> None:
    slots = Slots(1)
    assert slots.try_take()
    tasks = [asyncio.create_task(slots.take(), name=f"w{i}") for i in range(3)]
    await asyncio.sleep(0)
    victim = tasks[{"first": 0, "middle": 1, "last": 2}[position]]
    victim.cancel()
    with pytest.raises(asyncio.CancelledError):
        await victim
    assert slots.waiting == 2
    for task in tasks:
        if task is not victim:
            slots.give()
            await task
    slots.give()
    assert slots.free == 1 and slots.waiting == 0 and slots.try_take()


def test_at_least_one_slot_named_in_the_error() -> None:
    with pytest.raises(ValueError, match="bind slots must be at least 1, got 0"):
        Slots(0, what="bind slots")
