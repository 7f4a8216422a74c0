"""The binding's last steps in the Scheduler: a bind slot, the leader check right before the
binders run (again when the dispatcher queued the binding behind another call of the pod),
and the binding run in the binding cycle's own task when the dispatcher is idle."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.app import build_components
from scheduler.client.api_dispatcher import POD_BINDING, PodBindingCall
from scheduler.client.connection import ConnectionConfig
from scheduler.config.defaults import default_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Status
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo
from scheduler.scheduler import BindSlots, LostLeadershipError, Scheduler
from tests.builders import PodBuilder

EXECUTIONS = "scheduler_async_api_call_execution_total"


def _lose_lease(sched: Scheduler) -> None:
    sched.lease_check = lambda: False


def _lose_leadership(sched: Scheduler) -> None:
    sched.lose_leadership()


# (name, how leadership goes, when: before bind or while the binding waits in the queue,
#  whether the binders run)
CASES: list[tuple[str, Callable[[Scheduler], None] | None, str, bool]] = [
    ("leading: the binders run in the binding cycle's task", None, "before", True),
    ("the lease lapsed by the local clock: no bind", _lose_lease, "before", False),
    ("leadership lost: no bind", _lose_leadership, "before", False),
    ("leading, queued behind the pod's executing call: bound after it", None, "queued", True),
    ("the lease lapsed while queued: no bind when its turn comes", _lose_lease, "queued",
     False),
]


@pytest.mark.parametrize(("lose", "when", "binds"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
async def test_never_bind_without_leadership(
        lose: Callable[[Scheduler], None] | None, when: str, binds: bool) -> None:
    metrics = SchedulerMetrics()
    parts = build_components(default_config(), ConnectionConfig(host="http://127.0.0.1:9"),
                             metrics=metrics)
    sched = parts.scheduler
    dispatcher = sched.api_dispatcher
    assert dispatcher is not None
    fwk = next(iter(sched.profiles.values()))
    pod_info = PodInfo.from_pod(PodBuilder("p").uid("uid-p").obj())
    ran_in: list[asyncio.Task[Any] | None] = []

    async def binders(*_args: Any) -> Status | None:
        ran_in.append(asyncio.current_task())
        return None

    fwk.run_bind_plugins = binders  # type: ignore[method-assign]
    release = asyncio.Event()
    earlier: asyncio.Future[Any] | None = None
    if when == "queued":
        started = asyncio.Event()

        async def executing() -> None:
            started.set()
            await release.wait()

        earlier = dispatcher.add(PodBindingCall("uid-p", executing))
        await started.wait()
    if lose is not None and when == "before":
        lose(sched)
    binding = asyncio.create_task(sched.bind(fwk, CycleState(), pod_info, "n1"),
                                  name="test-bind")
    await asyncio.sleep(0)
    if lose is not None and when == "queued":
        lose(sched)
    release.set()
    if binds:
        assert await binding is None
        assert len(ran_in) == 1
        assert (ran_in[0] is binding) is (when == "before")
    else:
        with pytest.raises(LostLeadershipError):
            await binding
        assert ran_in == []
    if earlier is not None:
        await earlier
    # The dispatcher counts the bindings it ran; a refusal before it is not one of them.
    executed = (1 if earlier is not None else 0) + (1 if binds or when == "queued" else 0)
    assert sum(metrics.registry.get_sample_value(EXECUTIONS, {"call_type": POD_BINDING,
                                                              "result": r}) or 0
               for r in ("success", "error")) == executed
    assert sched._bind_slots.free == 64
    await dispatcher.close()
    await parts.client.close()


async def test_bind_slots_serve_waiters_in_order_and_survive_a_cancelled_waiter() -> None:
    slots = BindSlots(1)
    assert slots.try_take() and not slots.try_take()
    order: list[str] = []

    async def waiter(name: str) -> None:
        await slots.take()
        order.append(name)

    first = asyncio.create_task(waiter("first"), name="first")
    cancelled = asyncio.create_task(waiter("cancelled"), name="cancelled")
    last = asyncio.create_task(waiter("last"), name="last")
    await asyncio.sleep(0)
    assert not slots.try_take()  # waiters come first
    cancelled.cancel()
    slots.give()
    await first
    slots.give()  # the cancelled waiter is skipped: the slot goes to the next one
    await last
    assert order == ["first", "last"]
    slots.give()
    assert slots.free == 1
    # A waiter cancelled after a slot was handed to it gives the slot back.
    assert slots.try_take()
    handed = asyncio.create_task(waiter("handed"), name="handed")
    await asyncio.sleep(0)
    slots.give()
    handed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handed
    assert slots.free == 1 and order == ["first", "last"]
    with pytest.raises(ValueError):
        BindSlots(0)
