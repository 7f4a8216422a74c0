"""Components.start opens the write pool's connections while the informers sync: a warm-up
that fails never fails the start, and one still connecting at the stop is ended before the
client closes (the one stop path)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from scheduler.app import WARM_WRITE_CONNECTIONS, Components


class _Client:
    def __init__(self, warm: str) -> None:
        self.warm = warm  # "opens", "fails" or "hangs"
        self.calls: list[str] = []

    async def warm_writes(self, count: int) -> int:
        self.calls.append(f"warm {count}")
        if self.warm == "fails":
            raise RuntimeError("no TLS material")
        if self.warm == "hangs":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.calls.append("warm cancelled")
                raise
        return count

    async def close(self) -> None:
        self.calls.append("close")


class _Informers:
    def __init__(self, client: _Client) -> None:
        self._client = client

    def start(self) -> None:
        self._client.calls.append("informers")

    async def stop(self) -> None:
        pass


class _Scheduler:
    def __init__(self, client: _Client) -> None:
        self._client = client

    async def wait_for_sync(self, timeout: float | None) -> None:
        await asyncio.sleep(0)  # the warm-up task runs while the informers list
        self._client.calls.append("synced")

    async def stop(self, *, grace_seconds: float) -> None:
        pass


def _components(client: _Client) -> Components:
    return Components(client=cast(Any, client), informers=cast(Any, _Informers(client)),
                      recorders=[], scheduler=cast(Any, _Scheduler(client)))


@pytest.mark.parametrize("warm", ["opens", "fails"])
async def test_the_write_pool_is_warmed_during_the_sync_and_a_failure_is_not_fatal(
    warm: str,
) -> None:
    client = _Client(warm)
    parts = _components(client)
    await parts.start()
    assert client.calls[:3] == ["informers", f"warm {WARM_WRITE_CONNECTIONS}", "synced"]
    await parts.aclose()
    assert client.calls[-1] == "close"


async def test_a_warm_up_still_connecting_is_ended_before_the_client_closes() -> None:
    client = _Client("hangs")
    parts = _components(client)
    await parts.start()
    await parts.aclose()
    assert client.calls[-2:] == ["warm cancelled", "close"]
