"""The one loop of the sandbox's simulations (kubelet, controllers, resourceclaim and PV
controllers, DRA driver): woken by the writes they watch, they let a burst of writes settle
for a moment and then work through all of it in one pass, as a controller's workqueue
coalesces the keys added while it was busy."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger("scheduler.sandbox")


async def wake_loop(
    wake: asyncio.Event,
    work: Callable[[], None],
    *,
    delay: float,
    what: str,
    before: Callable[[], None] | None = None,
    timeout: Callable[[], float | None] | None = None,
    iterations: int | None = None,
) -> None:
    """Until cancelled (or for ``iterations`` passes): ``before()`` (e.g. reopen closed
    watches), wait until ``wake`` is set (at most ``timeout()`` seconds when given: None waits
    for ever, 0 not at all), sleep ``delay`` so that the writes of a burst coalesce, clear
    ``wake`` (what comes later wakes the next pass) and run ``work()``. An exception in
    ``work`` is logged as "``what`` failed" and the loop goes on: a bug must not stop the
    simulation."""
    done = 0
    while iterations is None or done < iterations:
        if before is not None:
            before()
        limit = timeout() if timeout is not None else None
        if limit is None:
            await wake.wait()
        elif limit > 0:
            try:
                await asyncio.wait_for(wake.wait(), limit)
            except TimeoutError:
                pass
        await asyncio.sleep(delay)
        wake.clear()
        try:
            work()
        except Exception:  # a bug must not stop the simulation
            log.exception("%s failed", what)
        done += 1
