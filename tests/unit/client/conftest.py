"""Fixtures for the client's unit tests: a fake API server and time that tests control."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from scheduler.client.api import ApiClient, RetryPolicy
from scheduler.client.connection import ConnectionConfig, StaticCredentials
from tests.unit.client.fake_apiserver import FakeApiServer


class FakeSleep:
    """Records requested delays and yields to the loop instead of sleeping."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.calls.append(delay)
        await asyncio.sleep(0)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def until(pred: Callable[[], bool], timeout: float = 3.0) -> None:
    """Poll ``pred`` every few ms (I/O with a real local server is involved)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.002)


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    s = FakeApiServer()
    await s.start()
    yield s
    await s.close()


@pytest.fixture
def fake_sleep() -> FakeSleep:
    return FakeSleep()


@pytest.fixture
async def make_client(server: FakeApiServer, fake_sleep: FakeSleep) -> AsyncIterator[Callable[..., ApiClient]]:
    clients: list[ApiClient] = []

    def make(**kw: Any) -> ApiClient:
        kw.setdefault("qps", -1)
        kw.setdefault("sleep", fake_sleep)
        kw.setdefault("retry", RetryPolicy(max_retries=3))
        kw.setdefault("request_timeout", 5.0)
        c = ApiClient(ConnectionConfig(host=server.url, credentials=StaticCredentials("Bearer t0k")), **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        await c.close()
