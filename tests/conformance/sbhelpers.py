"""Helpers shared by the conformance tests (imported as ``sbhelpers``)."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from scheduler.sandbox.server import PODGROUP_CRD

KUBECTL = shutil.which("kubectl")


def kubectl(env: dict[str, str], *args: str, check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run kubectl with ``env`` (its KUBECONFIG), ``input`` on its stdin; with ``check``, a
    failure is an AssertionError carrying kubectl's exit code and stderr."""
    assert KUBECTL is not None
    r = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=timeout, input=input)
    if check and r.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


class Http:
    """Tiny JSON client: every call returns (status, parsed body)."""

    def __init__(self, session: aiohttp.ClientSession, url: str, token: str | None = None) -> None:
        self.s = session
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def req(
        self, method: str, path: str, body: Any = None, *, ct: str = "application/json",
        params: dict[str, str] | None = None, headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        data = body if isinstance(body, (bytes, str)) or body is None else orjson.dumps(body)
        h = {**self.headers, **(headers or {})}
        if data is not None:
            h["Content-Type"] = ct
        async with self.s.request(method, self.url + path, data=data, params=params, headers=h) as r:
            raw = await r.read()
            try:
                return r.status, orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                return r.status, raw.decode()

    async def get(self, path: str, **kw: Any) -> tuple[int, Any]:
        return await self.req("GET", path, **kw)

    async def post(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        return await self.req("POST", path, body, **kw)

    async def put(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        return await self.req("PUT", path, body, **kw)

    async def patch(self, path: str, body: Any, ct: str = "application/merge-patch+json", **kw: Any) -> tuple[int, Any]:
        return await self.req("PATCH", path, body, ct=ct, **kw)

    async def delete(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        return await self.req("DELETE", path, body, **kw)

    async def watch(self, path: str, params: dict[str, str], *, until: int | None = None,
                    timeout: float = 5.0) -> list[dict[str, Any]]:
        """Collect watch events until the stream ends or ``until`` events arrived."""
        events: list[dict[str, Any]] = []
        async with self.s.get(self.url + path, params={"watch": "true", **params}, headers=self.headers,
                              timeout=aiohttp.ClientTimeout(total=timeout)) as r:
            assert r.status == 200, await r.text()
            async for line in r.content:
                if line.strip():
                    events.append(orjson.loads(line))
                    if until is not None and len(events) >= until:
                        break
        return events


def pod(name: str, **extra: Any) -> dict[str, Any]:
    labels = extra.pop("labels", None)
    ann = extra.pop("annotations", None)
    md: dict[str, Any] = {"name": name}
    if labels:
        md["labels"] = labels
    if ann:
        md["annotations"] = ann
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}], **extra}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def binding(name: str, node: str, uid: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if uid:
        md["uid"] = uid
    return {"apiVersion": "v1", "kind": "Binding", "metadata": md,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


async def wait_for(pred: Any, timeout: float = 5.0) -> Any:
    """Poll an async predicate until it returns a truthy value (simulated kubelet is async)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        v = await pred()
        if v:
            return v
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)



def crd_path() -> Path:
    real = Path(__file__).parents[2] / "manifests" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
    return real if real.exists() else PODGROUP_CRD
