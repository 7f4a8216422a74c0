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

from scheduler.explain.memory import MEMORY_ROUTE, MemoryIntrospection, malloc_info


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


def test_registers_its_route() -> None:
    routes: dict[str, Any] = {}

    class Server:
        def add_debug_route(self, path: str, handler: Any) -> None:
            routes[path] = handler

    MemoryIntrospection().register(Server())
    assert list(routes) == [MEMORY_ROUTE]
