"""The scheduling loop runs cycles back to back (at most CYCLES_PER_YIELD of them, no longer
than CYCLE_RUN_SECONDS by the scheduler's clock) before the event loop runs the informers and
binding tasks: each yield's I/O evicts a cycle's working set from the CPU caches."""

from __future__ import annotations

import asyncio
from itertools import groupby
from typing import Any

import pytest

from scheduler import scheduler as scheduler_module
from scheduler.app import build_components
from scheduler.client.connection import ConnectionConfig
from scheduler.config.defaults import default_config
from scheduler.metrics import SchedulerMetrics
from scheduler.scheduler import CYCLE_RUN_SECONDS, CYCLES_PER_YIELD
from tests.builders import PodBuilder


def _runs(ticks: list[int]) -> list[int]:
    """The lengths of the stretches of cycles that saw the same count of other tasks' turns."""
    return [len(list(group)) for _, group in groupby(ticks)]


# (name, pods ready, the clock's advance per cycle, the run lengths between yields)
CASES: list[tuple[str, int, float, list[int]]] = [
    ("a clock that stands still: CYCLES_PER_YIELD cycles a run", 2 * CYCLES_PER_YIELD + 5, 0.0,
     [CYCLES_PER_YIELD, CYCLES_PER_YIELD, 5]),
    ("cycles of 0.375 of the budget: a yield once it is spent (3 cycles)", 9,
     CYCLE_RUN_SECONDS * 0.375, [3, 3, 3]),
    ("a cycle longer than the budget: a yield after every cycle", 4, CYCLE_RUN_SECONDS * 2,
     [1, 1, 1, 1]),
]


@pytest.mark.parametrize(("pods", "step", "runs"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
async def test_cycles_run_back_to_back_until_the_count_or_the_time_is_spent(
        pods: int, step: float, runs: list[int]) -> None:
    assert CYCLES_PER_YIELD == scheduler_module.CYCLES_PER_YIELD
    config = default_config()
    parts = build_components(config, ConnectionConfig(host="http://127.0.0.1:9"),
                             metrics=SchedulerMetrics())
    sched = parts.scheduler
    now = [100.0]
    sched.clock = lambda: now[0]
    ticks = [0]
    seen: list[int] = []

    def cycle(qpi: Any) -> None:
        seen.append(ticks[0])  # how often the other task ran before this cycle
        now[0] += step
        sched.queue.done(qpi.pod_info.uid)

    sched.cycle.schedule_one = cycle  # type: ignore[method-assign]  # records, schedules nothing
    profile = config.profiles[0].scheduler_name
    for i in range(pods):
        sched.queue.add(PodBuilder(f"p{i}").uid(f"u{i}").scheduler_name(profile).obj())

    async def other_task() -> None:  # an informer or a binding task: one step a turn
        while True:
            ticks[0] += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other_task(), name="test-other-task")
    try:
        await sched.run(iterations=pods)
    finally:
        ticker.cancel()
    assert len(seen) == pods
    assert _runs(seen) == runs
