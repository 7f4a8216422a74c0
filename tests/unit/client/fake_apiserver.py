"""A tiny API server on 127.0.0.1:0 for the client's unit tests.

Just enough kube-apiserver: paged LIST, WATCH from a resourceVersion with history replay,
bookmarks, 410 after compaction (HTTP or ERROR event), dropped watch connections, injected
failures by verb/path, create / patch / binding.  Faults are injected here, on the wire, never
by patching the client.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

Obj = dict[str, Any]


def key_of(obj: Obj) -> str:
    m = obj["metadata"]
    return f"{m['namespace']}/{m['name']}" if m.get("namespace") else m["name"]


@dataclass
class Fault:
    method: str
    path_contains: str
    times: int
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    body: Obj | None = None
    disconnect: bool = False


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


def status_body(code: int, reason: str, message: str = "") -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message}


class _Watcher:
    def __init__(self, coll: str, pos: int) -> None:
        self.coll = coll
        self.pos = pos
        self.queue: asyncio.Queue[Any] = asyncio.Queue()


class FakeApiServer:
    def __init__(self) -> None:
        self.collections: dict[str, dict[str, Obj]] = {}
        self.list_kinds: dict[str, tuple[str, str]] = {}
        self.objects: dict[str, Obj] = {}  # path of object → object (creates / binding targets)
        self.rv = 100
        self.history: list[tuple[int, str, str, Obj]] = []
        self.compacted = 0
        self.gone_as_event = False
        self.split_writes = 0  # write each watch event in pieces of this many bytes
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self.watchers: list[_Watcher] = []
        self.create_status: int = 201
        self._gate = asyncio.Event()
        self._gate.set()
        self.held = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    # -- lifecycle

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def close(self) -> None:
        self._gate.set()
        for w in list(self.watchers):
            w.queue.put_nowait("CLOSE")
        if self._runner is not None:
            await self._runner.cleanup()

    # -- state changes (test side)

    def collection(self, path: str, *, kind: str = "PodList", api_version: str = "v1") -> None:
        self.collections.setdefault(path, {})
        self.list_kinds[path] = (kind, api_version)

    def _publish(self, coll: str, etype: str, obj: Obj) -> None:
        self.history.append((self.rv, coll, etype, copy.deepcopy(obj)))
        for w in self.watchers:
            if w.coll == coll:
                w.queue.put_nowait((self.rv, {"type": etype, "object": copy.deepcopy(obj)}))

    def add(self, coll: str, obj: Obj) -> Obj:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.collections[coll][key_of(obj)] = obj
        self._publish(coll, "ADDED", obj)
        return obj

    def modify(self, coll: str, obj: Obj) -> Obj:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.collections[coll][key_of(obj)] = obj
        self._publish(coll, "MODIFIED", obj)
        return obj

    def delete(self, coll: str, key: str) -> Obj:
        self.rv += 1
        obj = copy.deepcopy(self.collections[coll].pop(key))
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._publish(coll, "DELETED", obj)
        return obj

    def bookmark(self, coll: str) -> None:
        self.rv += 1  # bookmarks carry a newer RV than anything the watcher saw
        for w in self.watchers:
            if w.coll == coll:
                w.queue.put_nowait((self.rv, {"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.rv)}}}))

    def compact(self) -> None:
        """Watches from any RV older than the current one get 410."""
        self.compacted = self.rv

    def drop_watches(self) -> None:
        for w in list(self.watchers):
            w.queue.put_nowait("DROP")

    def end_watches(self) -> None:
        """Close watch streams cleanly (server-side timeout)."""
        for w in list(self.watchers):
            w.queue.put_nowait("CLOSE")

    def send_watch_error(self, coll: str, code: int = 410, reason: str = "Expired") -> None:
        for w in self.watchers:
            if w.coll == coll:
                w.queue.put_nowait((self.rv, {"type": "ERROR", "object": status_body(code, reason, "too old resource version")}))

    def hold(self) -> None:
        """New requests wait (server paused) until ``release``."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def fail(self, method: str, path_contains: str, *, status: int = 500, times: int = 1,
             headers: dict[str, str] | None = None, body: Obj | None = None, disconnect: bool = False) -> None:
        self.faults.append(Fault(method, path_contains, times, status, headers or {}, body, disconnect))

    def requests_for(self, method: str, path_contains: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == method and path_contains in r.path]

    # -- HTTP

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = orjson.loads(raw) if raw else None
        q = dict(request.query)
        if not self._gate.is_set():
            self.held += 1
            await self._gate.wait()
        self.requests.append(Recorded(request.method, request.path, q, dict(request.headers), body))
        for f in self.faults:
            if f.times > 0 and f.method == request.method and f.path_contains in request.path:
                f.times -= 1
                if f.disconnect:
                    assert request.transport is not None
                    request.transport.close()
                    return web.Response(status=500)
                return web.json_response(
                    f.body or status_body(f.status, "InternalError" if f.status >= 500 else "Fault"),
                    status=f.status,
                    headers=f.headers,
                )
        path = request.path
        if request.method == "GET" and path in self.collections:
            if q.get("watch") in ("true", "1"):
                return await self._watch(request, path, q)
            return self._list(path, q)
        if request.method == "POST" and path.endswith("/binding"):
            return self._bind(path, body)
        if request.method == "POST":
            name = body["metadata"]["name"]
            opath = f"{path}/{name}"
            if opath in self.objects:
                return web.json_response(status_body(409, "AlreadyExists", f"{name} already exists"), status=409)
            self.rv += 1
            body["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[opath] = body
            return web.json_response(body, status=self.create_status)
        if request.method == "PATCH":
            obj = self.objects.get(path)
            if obj is None:
                return web.json_response(status_body(404, "NotFound", path), status=404)
            for k, v in (body or {}).items():
                obj[k] = v
            return web.json_response(obj)
        if request.method == "GET":
            obj = self.objects.get(path)
            if obj is None:
                return web.json_response(status_body(404, "NotFound", path), status=404)
            return web.json_response(obj)
        return web.json_response(status_body(404, "NotFound", path), status=404)

    def _bind(self, path: str, body: Obj) -> web.Response:
        pod_path = path[: -len("/binding")]
        pod = self.objects.get(pod_path)
        if pod is None:
            return web.json_response(status_body(404, "NotFound", "pod not found"), status=404)
        uid = body["metadata"].get("uid")
        if uid and uid != pod["metadata"].get("uid"):
            return web.json_response(status_body(409, "Conflict", "uid precondition"), status=409)
        if pod.get("spec", {}).get("nodeName"):
            return web.json_response(status_body(409, "Conflict", "pod is already assigned"), status=409)
        pod.setdefault("spec", {})["nodeName"] = body["target"]["name"]
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}, status=201)

    def _list(self, coll: str, q: dict[str, str]) -> web.Response:
        items = sorted(self.collections[coll].values(), key=key_of)
        limit = int(q.get("limit") or 0)
        start = 0
        list_rv = self.rv
        if q.get("continue"):
            crv, _, off = q["continue"].partition(":")
            if int(crv) < self.compacted:
                return web.json_response(status_body(410, "Expired", "continue token expired"), status=410)
            start, list_rv = int(off), int(crv)
        page = items[start : start + limit] if limit else items[start:]
        meta: Obj = {"resourceVersion": str(list_rv)}
        if limit and start + limit < len(items):
            meta["continue"] = f"{list_rv}:{start + limit}"
        kind, api_version = self.list_kinds[coll]
        return web.json_response({"kind": kind, "apiVersion": api_version, "metadata": meta, "items": copy.deepcopy(page)})

    async def _watch(self, request: web.Request, coll: str, q: dict[str, str]) -> web.StreamResponse:
        rv = int(q.get("resourceVersion") or self.rv)
        if rv < self.compacted and not self.gone_as_event:
            return web.json_response(status_body(410, "Expired", "too old resource version"), status=410)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if rv < self.compacted:
            await self._write(resp, {"type": "ERROR", "object": status_body(410, "Expired", "too old resource version")})
            return resp
        w = _Watcher(coll, rv)
        self.watchers.append(w)
        try:
            for erv, ecoll, etype, obj in list(self.history):
                if ecoll == coll and erv > w.pos:
                    await self._write(resp, {"type": etype, "object": obj})
                    w.pos = erv
            while True:
                item = await w.queue.get()
                if item == "DROP":
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                if item == "CLOSE":
                    break
                erv, ev = item
                if ev["type"] not in ("BOOKMARK", "ERROR") and erv <= w.pos:
                    continue
                await self._write(resp, ev)
                w.pos = max(w.pos, erv)
        finally:
            self.watchers.remove(w)
        try:
            await resp.write_eof()
        except ConnectionError:
            pass
        return resp

    async def _write(self, resp: web.StreamResponse, ev: Obj) -> None:
        data = orjson.dumps(ev) + b"\n"
        if self.split_writes:
            for i in range(0, len(data), self.split_writes):
                await resp.write(data[i : i + self.split_writes])
        else:
            await resp.write(data)
