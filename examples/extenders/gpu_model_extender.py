"""A small scheduler extender: GPU model matching and a preference for bigger GPU nodes.

* ``POST /filter``: a pod annotated ``example.com/gpu-model: <model>`` is admitted only on
  nodes labelled ``example.com/gpu-model: <model>``; other pods pass everywhere.  Rejected
  nodes are reported in ``FailedNodes`` with the reason
  ``node(s) didn't have the requested GPU model``, which the scheduler counts in its
  FailedScheduling message like a plugin's reason.
* ``POST /prioritize``: nodes score 0..10 by their allocatable ``nvidia.com/gpu``, scaled to
  the largest node asked about (the scheduler multiplies by the configured weight and 10).

It speaks the kube-scheduler extender protocol (``k8s.io/kube-scheduler/extender/v1``) and
works both ways the scheduler can call it: with full Node objects, or, with
``nodeCacheCapable: true``, with node names only, which it resolves from its own node cache
(listed from ``--api-server`` and refreshed when it meets a name it does not know).

    python examples/extenders/gpu_model_extender.py --port 8888 [--api-server URL --token T]

It only needs aiohttp.  ``GET /healthz`` answers ``ok``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any

from aiohttp import ClientSession, web

ANNOTATION = "example.com/gpu-model"
LABEL = "example.com/gpu-model"
GPU = "nvidia.com/gpu"
REASON = "node(s) didn't have the requested GPU model"
MAX_PRIORITY = 10


def field(obj: Mapping[str, Any], name: str) -> Any:
    """A key as Go's encoding/json matches it: exact, else case-insensitive."""
    if name in obj:
        return obj[name]
    for key, value in obj.items():
        if key.lower() == name.lower():
            return value
    return None


def gpus(node: Mapping[str, Any]) -> int:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(GPU, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


class NodeCache:
    """Nodes by name, listed from the API server (only needed for nodeCacheCapable)."""

    def __init__(self, api_server: str, token: str) -> None:
        self.api_server = api_server.rstrip("/")
        self.token = token
        self.nodes: dict[str, dict[str, Any]] = {}
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        if not self.api_server:
            return
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with ClientSession() as session, session.get(
            f"{self.api_server}/api/v1/nodes", headers=headers
        ) as resp:
            resp.raise_for_status()
            items = (await resp.json())["items"]
        self.nodes = {n["metadata"]["name"]: n for n in items}

    async def get(self, names: list[str]) -> list[dict[str, Any]]:
        if any(n not in self.nodes for n in names):
            async with self._lock:
                if any(n not in self.nodes for n in names):
                    await self.refresh()
        return [self.nodes[n] for n in names if n in self.nodes]


class Extender:
    def __init__(self, cache: NodeCache) -> None:
        self.cache = cache

    async def _nodes(self, args: Mapping[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """(the nodes asked about, whether they came as names only)."""
        names = field(args, "NodeNames")
        if names is not None:
            return await self.cache.get(list(names)), True
        node_list = field(args, "Nodes") or {}
        return list(node_list.get("items") or []), False

    async def filter(self, request: web.Request) -> web.Response:
        args = await request.json()
        pod = field(args, "Pod") or {}
        wanted = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
        nodes, by_name = await self._nodes(args)
        kept, failed = [], {}
        for node in nodes:
            labels = (node.get("metadata") or {}).get("labels") or {}
            if wanted is None or labels.get(LABEL) == wanted:
                kept.append(node)
            else:
                failed[node["metadata"]["name"]] = REASON
        result: dict[str, Any] = {"FailedNodes": failed, "Error": ""}
        if by_name:
            result["NodeNames"] = [n["metadata"]["name"] for n in kept]
        else:
            result["Nodes"] = {"metadata": {}, "items": kept}
        return web.json_response(result)

    async def prioritize(self, request: web.Request) -> web.Response:
        args = await request.json()
        nodes, _ = await self._nodes(args)
        most = max((gpus(n) for n in nodes), default=0)
        scores = [
            {"Host": n["metadata"]["name"],
             "Score": gpus(n) * MAX_PRIORITY // most if most else 0}
            for n in nodes
        ]
        return web.json_response(scores)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")


def make_app(*, api_server: str = "", token: str = "") -> web.Application:
    ext = Extender(NodeCache(api_server, token))
    app = web.Application()
    app.router.add_post("/filter", ext.filter)
    app.router.add_post("/prioritize", ext.prioritize)
    app.router.add_get("/healthz", ext.healthz)
    return app


async def serve(host: str, port: int, api_server: str, token: str) -> None:
    runner = web.AppRunner(make_app(api_server=api_server, token=token), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0]
    print(json.dumps({"ready": f"http://{bound[0]}:{bound[1]}"}), flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8888, help="0 = any free port")
    parser.add_argument("--api-server", default="",
                        help="API server URL to list nodes from (nodeCacheCapable mode)")
    parser.add_argument("--token", default="", help="bearer token for --api-server")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.host, args.port, args.api_server, args.token))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
