"""Helpers for the conformance suite: a raw HTTP client and a threaded sandbox.

Raw HTTP (aiohttp) checks exact status codes and bodies; the official client and kubectl
are exercised in their own modules.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator

import aiohttp
import orjson
import pytest
from sbhelpers import Http

from scheduler.sandbox import Sandbox, SandboxThread

_ns = itertools.count()

@pytest.fixture
async def http(sandbox: Sandbox) -> AsyncIterator[Http]:
    ctx = sandbox.client_ssl_context()  # HTTPS (own CA) when the sandbox has a token
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx if ctx is not None else True)) as s:
        yield Http(s, sandbox.url, sandbox.token)


@pytest.fixture(scope="module")
def threaded() -> Iterator[SandboxThread]:
    """One sandbox on its own thread per module, for blocking clients (sync client, kubectl)."""
    h = Sandbox.start_in_thread(nodes=3, bookmark_interval=0.2)
    yield h
    h.stop()


@pytest.fixture
def namespace(threaded: SandboxThread) -> str:
    """A fresh namespace in the threaded sandbox."""
    import urllib.request

    name = f"t{os.getpid()}-{next(_ns)}"
    req = urllib.request.Request(f"{threaded.url}/api/v1/namespaces", method="POST",
                                 data=orjson.dumps({"metadata": {"name": name}}),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
    return name


@pytest.fixture(scope="module")
def kube_env(threaded: SandboxThread, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("kubectl")
    kc = threaded.write_kubeconfig(d / "kubeconfig")
    return {**os.environ, "KUBECONFIG": str(kc), "KUBECACHEDIR": str(d / "cache"), "HOME": str(d)}


