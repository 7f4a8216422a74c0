"""The cyclic collector is paused while an informer decodes and hands out a LIST, and only
then (see ``scheduler.client.informer._CollectorPause``)."""

from __future__ import annotations

import asyncio
import gc
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from scheduler.client.api import ApiClient
from scheduler.client.informer import Informer, _CollectorPause
from tests.unit.client.conftest import FakeClock
from tests.unit.client.fake_apiserver import FakeApiServer

PODS = "/api/v1/pods"


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}}


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.parametrize(
    ("enabled_before", "steps", "expected_enabled"),
    [
        # one informer: paused inside, resumed after
        (True, ["enter"], [False]),
        (True, ["enter", "exit"], [False, True]),
        # two informers listing at once: resumed only when the last one is done
        (True, ["enter", "enter", "exit"], [False, False, False]),
        (True, ["enter", "enter", "exit", "exit"], [False, False, False, True]),
        # a process that runs with the collector off keeps it off
        (False, ["enter", "exit"], [False, False]),
    ],
)
def test_pause_is_counted_and_restores_the_previous_state(
    enabled_before: bool, steps: list[str], expected_enabled: list[bool],
) -> None:
    was = gc.isenabled()
    pause = _CollectorPause()
    seen: list[bool] = []
    try:
        if enabled_before:
            gc.enable()
        else:
            gc.disable()
        for step in steps:
            if step == "enter":
                pause.__enter__()
            else:
                pause.__exit__(None, None, None)
            seen.append(gc.isenabled())
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()
    assert seen == expected_enabled


async def test_list_handlers_run_paused_and_watch_handlers_do_not(
    server: FakeApiServer, make_client: Callable[..., ApiClient], collector_enabled: None,
) -> None:
    server.collection(PODS)
    for name in ("a", "b", "c"):
        server.add(PODS, pod(name))
    seen: list[tuple[str, bool]] = []

    async def no_sleep(_: float) -> None:
        await asyncio.sleep(0)

    inf = Informer(make_client(), path=PODS, resource_name="pods", page_size=2,
                   clock=FakeClock(), sleep=no_sleep, rng=random.Random(1))
    inf.add_handler(lambda obj: seen.append((obj["metadata"]["name"], gc.isenabled())))
    task = asyncio.create_task(inf.run(), name="test-informer")
    try:
        await asyncio.wait_for(inf.wait_synced(), 3)
        assert gc.isenabled()  # resumed once the list is handed out
        while not server.watchers:
            await asyncio.sleep(0.002)
        server.add(PODS, pod("d"))
        while len(seen) < 4:
            await asyncio.sleep(0.002)
    finally:
        inf.stop()
        await task
    assert seen == [("a", False), ("b", False), ("c", False), ("d", True)]


async def test_a_failed_list_resumes_the_collector_before_backing_off(
    server: FakeApiServer, make_client: Callable[..., ApiClient], collector_enabled: None,
) -> None:
    server.collection(PODS)
    server.add(PODS, pod("a"))
    server.fail("GET", PODS, status=500, times=4)  # the client retries 3 times, then the informer backs off
    during_backoff: list[bool] = []

    async def sleep(_: float) -> None:
        during_backoff.append(gc.isenabled())
        await asyncio.sleep(0)

    inf = Informer(make_client(), path=PODS, resource_name="pods", clock=FakeClock(),
                   sleep=sleep, rng=random.Random(1))
    task = asyncio.create_task(inf.run(), name="test-informer")
    try:
        await asyncio.wait_for(inf.wait_synced(), 3)
    finally:
        inf.stop()
        await task
    assert during_backoff and during_backoff[0] is True
    assert gc.isenabled()
