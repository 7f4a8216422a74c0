"""Shared fixtures that start a sandbox API server (see scheduler/sandbox/__init__.py).

* ``sandbox``: an in-process ``Sandbox`` on the test's event loop, 3 nodes by default;
  ``@pytest.mark.sandbox(nodes=10, token="t", ...)`` passes keyword arguments.
* ``sandbox_factory``: ``await sandbox_factory(**kwargs)`` for more or differently
  configured sandboxes; all are stopped at teardown.
* ``sandbox_process``: ``sandbox_process(**flags)`` starts ``python -m scheduler.sandbox``
  and returns a started ``SandboxProcess`` (terminated at teardown).
* ``kubeconfig``: path of a kubeconfig file for ``sandbox``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.logging import CACHE_ENV
from scheduler.sandbox import Sandbox
from scheduler.sandbox.testing import SandboxProcess


# Tests that run a CLI command in-process configure logging; uncached loggers keep that from
# leaking into later tests' log capture (see scheduler/logging.py).
os.environ[CACHE_ENV] = "0"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sandbox(**kwargs): keyword arguments for the `sandbox` fixture's Sandbox(...)"
    )


@pytest.fixture
async def sandbox_factory() -> AsyncIterator[Callable[..., Awaitable[Sandbox]]]:
    started: list[Sandbox] = []

    async def make(**kwargs: Any) -> Sandbox:
        sb = Sandbox(**kwargs)
        await sb.start()
        started.append(sb)
        return sb

    yield make
    for sb in reversed(started):
        await sb.stop()


@pytest.fixture
async def sandbox(
    request: pytest.FixtureRequest, sandbox_factory: Callable[..., Awaitable[Sandbox]]
) -> Sandbox:
    kwargs: dict[str, Any] = {"nodes": 3}
    marker = request.node.get_closest_marker("sandbox")
    if marker is not None:
        kwargs.update(marker.kwargs)
    return await sandbox_factory(**kwargs)


@pytest.fixture
def kubeconfig(sandbox: Sandbox, tmp_path: Path) -> Path:
    return sandbox.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def sandbox_process() -> Iterator[Callable[..., SandboxProcess]]:
    procs: list[SandboxProcess] = []

    def make(**flags: Any) -> SandboxProcess:
        sp = SandboxProcess(**flags).start()
        procs.append(sp)
        return sp

    yield make
    for sp in procs:
        sp.stop()
