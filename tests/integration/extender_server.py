"""A scriptable extender over real HTTP (127.0.0.1, a free port) for the integration tests.

It records every request body, answers by ``behaviour`` (a healthy filter/prioritize/bind,
or a fault: HTTP 500, malformed JSON, a slow answer, a result naming a node it was not
asked about), and binds through the API server the way HAMi's bind verb does.  ``down()``
gives a URL where nothing listens.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from scheduler.client.api import ApiClient

OK = "ok"
HTTP_500 = "500"
MALFORMED = "malformed"
SLOW = "slow"
UNKNOWN_NODE = "unknown-node"


def key(obj: Mapping[str, Any], name: str) -> Any:
    for k, v in obj.items():
        if k.lower() == name.lower():
            return v
    return None


@dataclass
class FakeExtender:
    behaviour: str = OK
    # filter: node names to reject with this reason (others kept)
    reject: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    # prioritize: node name -> score 0..10
    scores: dict[str, int] = field(default_factory=dict)
    # bind through this client (None: bind verb answers with an error)
    binder: ApiClient | None = None
    slow_seconds: float = 3.0
    # answer with lowercase keys, as Go extenders with json tags do
    lowercase: bool = False
    requests: list[tuple[str, Any]] = field(default_factory=list)
    preempt: Callable[[dict[str, Any]], Any] | None = None
    url: str = ""
    _runner: web.AppRunner | None = None

    def calls(self, verb: str) -> list[Any]:
        return [body for path, body in self.requests if path.rstrip("/").endswith(verb)]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        path = request.path
        self.requests.append((path, body))
        if self.behaviour == HTTP_500:
            return web.Response(status=500, text="boom")
        if self.behaviour == MALFORMED:
            return web.Response(text='{"NodeNames": [', content_type="application/json")
        if self.behaviour == SLOW:
            await asyncio.sleep(self.slow_seconds)
        if path.endswith("filter"):
            return web.json_response(self._filter(body))
        if path.endswith("prioritize"):
            return web.json_response(self._prioritize(body))
        if path.endswith("bind"):
            return web.json_response(await self._bind(body))
        if path.endswith("preempt") and self.preempt is not None:
            return web.json_response(self.preempt(body))
        return web.Response(status=404)

    def _names(self, body: Mapping[str, Any]) -> list[str]:
        names = key(body, "NodeNames")
        if names is not None:
            return list(names)
        return [n["metadata"]["name"] for n in (key(body, "Nodes") or {}).get("items") or []]

    def _filter(self, body: Mapping[str, Any]) -> dict[str, Any]:
        names = self._names(body)
        kept = [n for n in names if n not in self.reject and n not in self.unresolvable]
        if self.behaviour == UNKNOWN_NODE:
            kept = kept + ["node-nobody-asked-about"]
        out: dict[str, Any] = {"FailedNodes": {n: r for n, r in self.reject.items() if n in names},
                               "FailedAndUnresolvableNodes": {
                                   n: r for n, r in self.unresolvable.items() if n in names},
                               "Error": ""}
        if key(body, "NodeNames") is not None:
            out["NodeNames"] = kept
        else:
            items = (key(body, "Nodes") or {}).get("items") or []
            by_name = {n["metadata"]["name"]: n for n in items}
            out["Nodes"] = {"items": [by_name.get(n, {"metadata": {"name": n}}) for n in kept]}
        if self.lowercase:
            out = {k.lower(): v for k, v in out.items()}
        return out

    def _prioritize(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [{"Host": n, "Score": self.scores.get(n, 0)} for n in self._names(body)]

    async def _bind(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.binder is None:
            return {"Error": "this extender cannot bind"}
        ns, name = body["PodNamespace"], body["PodName"]
        await self.binder.create(
            f"/api/v1/namespaces/{ns}/pods/{name}/binding",
            {"apiVersion": "v1", "kind": "Binding",
             "metadata": {"name": name, "namespace": ns, "uid": body["PodUID"]},
             "target": {"apiVersion": "v1", "kind": "Node", "name": body["Node"]}},
        )
        return {"Error": ""}

    async def start(self, *, ssl_context: ssl.SSLContext | None = None) -> str:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        scheme = "https" if ssl_context is not None else "http"
        self.url = f"{scheme}://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def down_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (a port just freed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
