"""A counting semaphore for the per-pod paths: the binds in flight (``Scheduler``) and the
write pool's connections in use (``http1.Http1Pool``).

``asyncio.Semaphore``'s ``async with`` costs about eight Python calls per use; an
uncontended take and give here are a comparison each.  Waiters are served first come,
first served; a freed slot is handed to the oldest waiter directly, and a waiter that gets
its slot leaves the line without a search of it (only a cancelled waiter is looked for).
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Slots"]


class Slots:
    __slots__ = ("_free", "_waiters")

    def __init__(self, slots: int, *, what: str = "slots") -> None:
        if slots < 1:
            raise ValueError(f"{what} must be at least 1, got {slots}")
        self._free = slots
        self._waiters: deque[asyncio.Future[None]] = deque()

    def try_take(self) -> bool:
        """Take a slot if one is free and nobody waits for one."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def take(self) -> None:
        """Take a slot, waiting for one if needed."""
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot, then cancelled before using it
            else:
                # Still in line (``give`` pops a waiter when it hands it a slot): leave it,
                # or a free slot would wait behind a waiter that is gone.
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
            raise

    def give(self) -> None:
        """Give a slot back: to the oldest waiter still waiting, or to the pool."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    @property
    def free(self) -> int:
        return self._free

    @property
    def waiting(self) -> int:
        """Waiters in line (a cancelled one not yet skipped included)."""
        return len(self._waiters)
