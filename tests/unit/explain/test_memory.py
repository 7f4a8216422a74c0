"""/debug/memory: objects per type and their growth since the baseline, and tracemalloc's
allocation sites that grew (when tracing), so a leak names its type and its line."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from scheduler.explain.memory import (MEMORY_ROUTE, TRIM_TASK_NAME, MemoryIntrospection,
                                     malloc_info, malloc_trimmer, pymalloc_stats, trim_loop)


class Leaked:
    """A type only this test allocates, so its growth is exactly what the test made."""


_kept: list[Any] = []


@pytest.fixture(autouse=True)
def _release() -> Iterator[None]:
    yield
    _kept.clear()


def _leak(n: int) -> None:
    _kept.extend(Leaked() for _ in range(n))


@pytest.mark.parametrize("n", [0, 1, 250])
def test_object_growth_counts_what_was_kept_since_the_baseline(n: int) -> None:
    mem = MemoryIntrospection()
    assert mem.report()["objectGrowthByType"] == {}  # the first report is the baseline
    _leak(n)
    report = mem.report(top=500)
    name = f"{__name__}.Leaked"
    assert report["objectGrowthByType"].get(name, 0) == n
    assert report["objects"] > 0 and report["rssBytes"] > 0


def test_reset_makes_now_the_baseline() -> None:
    mem = MemoryIntrospection()
    mem.report()
    _leak(10)
    assert mem.report(top=500, reset=True)["objectGrowthByType"][f"{__name__}.Leaked"] == 10
    assert f"{__name__}.Leaked" not in mem.report(top=500)["objectGrowthByType"]


def test_without_tracing_there_are_no_allocation_sites() -> None:
    was = tracemalloc.is_tracing()
    tracemalloc.stop()
    try:
        assert MemoryIntrospection().report()["tracemalloc"] is None
    finally:
        if was:
            tracemalloc.start()


def test_tracing_names_the_line_that_grew() -> None:
    was = tracemalloc.is_tracing()
    tracemalloc.start(5)
    try:
        mem = MemoryIntrospection()
        mem.report()
        _kept.append([bytearray(1000) for _ in range(500)])  # ~0.5 MB on this line
        report = mem.report(top=5)["tracemalloc"]
    finally:
        if not was:
            tracemalloc.stop()
    assert report is not None and report["frames"] == 5
    first = report["top"][0]
    assert first["sizeDiffBytes"] >= 500_000
    assert first["traceback"][0].startswith(__file__)


async def _get(mem: MemoryIntrospection, query: str) -> web.Response:
    response = await mem.handler(make_mocked_request("GET", f"{MEMORY_ROUTE}?{query}"))
    assert isinstance(response, web.Response)
    return response


def test_tracing_started_on_a_warm_process_counts_from_then() -> None:
    was = tracemalloc.is_tracing()
    tracemalloc.stop()
    try:
        mem = MemoryIntrospection()
        mem.report()
        _kept.append([bytearray(1000) for _ in range(500)])  # before tracing: not counted
        mem.trace(5)
        assert tracemalloc.is_tracing()
        report = mem.report(top=5)["tracemalloc"]
        assert report is not None
        assert sum(e["sizeDiffBytes"] for e in report["top"]) < 500_000
        mem.trace(0)
        assert not tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()
        if was:
            tracemalloc.start()


@pytest.mark.parametrize(("query", "status"), [
    ("top=3", 200), ("", 200), ("top=0", 400), ("top=x", 400), ("top=100000", 400),
    ("tracemalloc=x", 400), ("tracemalloc=-1", 400), ("tracemalloc=101", 400),
])
async def test_the_route_validates_top(query: str, status: int) -> None:
    response = await _get(MemoryIntrospection(), query)
    assert response.status == status


async def test_trim_reports_rss_after_giving_free_memory_back() -> None:
    response = await _get(MemoryIntrospection(), "top=1&trim=true")
    body = json.loads(response.text or "")
    if malloc_info() is None:  # not glibc
        assert "afterTrim" not in body
        return
    assert body["malloc"]["inUseBytes"] > 0
    assert 0 < body["afterTrim"]["rssBytes"]
    assert set(body["afterTrim"]["malloc"]) == {"heapBytes", "inUseBytes", "freeBytes",
                                                "mmappedBytes"}


def test_pymalloc_counts_the_small_objects_kept() -> None:
    before = pymalloc_stats()
    if before is None:  # not CPython's allocator
        return
    _kept.extend(Leaked() for _ in range(50_000))  # ~50 bytes each, all in pymalloc
    after = pymalloc_stats()
    assert after is not None
    assert after["allocatedBytes"] - before["allocatedBytes"] >= 50_000 * 40
    assert after["arenas"] >= before["arenas"] and after["arenasHighWater"] >= after["arenas"]


def test_registers_its_route() -> None:
    routes: dict[str, Any] = {}

    class Server:
        def add_debug_route(self, path: str, handler: Any) -> None:
            routes[path] = handler

    MemoryIntrospection().register(Server())
    assert list(routes) == [MEMORY_ROUTE]


@pytest.mark.parametrize(("iterations", "available", "trims"), [
    (3, True, 3),  # once per interval
    (3, False, 1),  # no glibc: the first attempt ends the loop
])
async def test_trim_loop_trims_every_interval(iterations: int, available: bool,
                                              trims: int) -> None:
    slept: list[float] = []
    calls: list[int] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    def trim() -> bool:
        calls.append(1)
        return available

    await trim_loop(interval=7.0, trim=trim, sleep=sleep, iterations=iterations)
    assert len(calls) == trims and slept == [7.0] * trims


async def test_malloc_trimmer_runs_a_named_task_until_left() -> None:
    import asyncio

    calls: list[int] = []

    def trim() -> bool:
        calls.append(1)
        return True

    async with malloc_trimmer(interval=0.0, trim=trim):
        names = {t.get_name() for t in asyncio.all_tasks()}
        assert TRIM_TASK_NAME in names
        while not calls:
            await asyncio.sleep(0)
    assert TRIM_TASK_NAME not in {t.get_name() for t in asyncio.all_tasks()}
