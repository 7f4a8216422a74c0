"""The extender client against a real local HTTP server: wire format, interest, errors (one
log line and one metric sample per failed call)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import structlog
from aiohttp import web

from scheduler.config.types import Extender, ExtenderManagedResource
from scheduler.extenders import ExtenderError, Extenders, HTTPExtender, http
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import Diagnosis
from scheduler.metrics import SchedulerMetrics
from scheduler.objects.pod import PodInfo
from tests.builders import NodeBuilder, PodBuilder

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_post("/{verb}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        host, port = runner.addresses[0][:2]
        return f"http://{host}:{port}"

    yield start
    for r in runners:
        await r.cleanup()


def nodes(*names: str) -> list[NodeInfo]:
    return [NodeInfo(NodeBuilder(n).capacity(cpu="1", memory="1Gi", pods=10).obj())
            for n in names]


POD = PodBuilder("p").uid("uid-p").req(cpu="1", **{"example.com/widget": "1"}).obj()


def answering(body: Any, status: int = 200, seen: list[Any] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        if seen is not None:
            seen.append((request.match_info["verb"], await request.json()))
        if isinstance(body, str):
            return web.Response(status=status, text=body, content_type="application/json")
        return web.json_response(body, status=status)
    return handler


@pytest.mark.parametrize(
    ("managed", "pod", "interested"),
    [
        ([], PodBuilder("a").obj(), True),
        (["example.com/widget"], POD, True),
        (["example.com/widget"], PodBuilder("a").req(cpu="1").obj(), False),
        (["example.com/widget"], PodBuilder("a").limits(**{"example.com/widget": "1"}).obj(),
         True),
        (["example.com/widget"],
         PodBuilder("a").init_container("i").req(**{"example.com/widget": "1"}).obj(), True),
    ],
    ids=["no-managed-resources", "requests", "other-resources", "limits", "init-container"],
)
def test_is_interested(managed: list[str], pod: dict[str, Any], interested: bool) -> None:
    ext = HTTPExtender(Extender(url_prefix="http://x",
                                managed_resources=[ExtenderManagedResource(m) for m in managed]))
    assert ext.is_interested(pod) is interested


async def test_filter_wire_format_names_and_nodes(serve: Any) -> None:
    seen: list[Any] = []
    url = await serve(answering({"nodenames": ["b"], "failedNodes": {"a": "full"}}, seen=seen))
    cached = HTTPExtender(Extender(url_prefix=url + "/", filter_verb="filter",
                                   node_cache_capable=True))
    result = await cached.filter(POD, nodes("a", "b"))
    assert [n.name for n in result.nodes] == ["b"] and result.failed == {"a": "full"}
    verb, body = seen[0]
    assert verb == "filter"
    assert body["NodeNames"] == ["a", "b"] and body["Nodes"] is None
    assert body["Pod"]["metadata"]["uid"] == "uid-p"
    await cached.close()


async def test_filter_with_full_nodes(serve: Any) -> None:
    seen: list[Any] = []
    b = nodes("b")[0].node
    url = await serve(answering({"Nodes": {"items": [b]}}, seen=seen))
    full = HTTPExtender(Extender(url_prefix=url, filter_verb="filter"))
    result = await full.filter(POD, nodes("a", "b"))
    assert [n.name for n in result.nodes] == ["b"]
    assert [n["metadata"]["name"] for n in seen[0][1]["Nodes"]["items"]] == ["a", "b"]
    assert seen[0][1]["NodeNames"] is None
    await full.close()


@pytest.mark.parametrize(
    ("body", "status", "cause"),
    [
        ({}, 500, "returned HTTP 500"),
        ('{"NodeNames": [', 200, "malformed JSON"),
        ({"NodeNames": ["zz"]}, 200, "names node 'zz', which was not in the list sent"),
        ({"Error": "cache not synced"}, 200, "cache not synced"),
        ([1, 2], 200, "expected an ExtenderFilterResult object"),
        ({"NodeNames": "a"}, 200, "malformed result: NodeNames must be a list"),
    ],
    ids=["500", "malformed-json", "unknown-node", "error-field", "wrong-shape", "names-type"],
)
async def test_filter_errors_are_logged_once_and_counted(
    serve: Any, body: Any, status: int, cause: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = await serve(answering(body, status))
    metrics = SchedulerMetrics()
    ext = HTTPExtender(Extender(url_prefix=url, filter_verb="filter", node_cache_capable=True),
                       metrics=metrics)
    try:
        with structlog.testing.capture_logs() as logs, pytest.raises(ExtenderError) as ei:
            # a fresh logger: the module's may be cached by an earlier configure_logging
            monkeypatch.setattr(http, "log", structlog.get_logger(http.__name__))
            await ext.filter(POD, nodes("a", "b"))
    finally:
        await ext.close()
    assert str(ei.value).startswith(f"extender {url!r} filter failed: ")
    assert cause in str(ei.value)
    (line,) = [e for e in logs if e["event"] == "extender call failed"]
    assert (line["verb"], line["url"], line["extender"]) == ("filter", f"{url}/filter", url)
    assert cause in line["cause"]
    assert metrics.registry.get_sample_value(
        "scheduler_py_extender_requests_total", {"verb": "filter", "result": "error"}) == 1
    assert metrics.registry.get_sample_value(
        "scheduler_py_extender_request_duration_seconds_count",
        {"verb": "filter", "result": "error"}) == 1


async def test_unreachable_and_timeout(serve: Any) -> None:
    import asyncio

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(2)
        return web.json_response({})

    url = await serve(slow)
    ext = HTTPExtender(Extender(url_prefix=url, filter_verb="filter",
                                http_timeout_seconds=0.1))
    with pytest.raises(ExtenderError, match=r"timed out after 0.1s"):
        await ext.filter(POD, nodes("a"))
    await ext.close()
    down = HTTPExtender(Extender(url_prefix="http://127.0.0.1:1", filter_verb="filter"))
    with pytest.raises(ExtenderError, match=r"POST http://127.0.0.1:1/filter: "):
        await down.filter(POD, nodes("a"))
    await down.close()


async def test_prioritize_is_weighted_and_errors_ignored(serve: Any) -> None:
    good = await serve(answering([{"Host": "a", "Score": 3}, {"host": "b", "score": 10}]))
    bad = await serve(answering({}, 500))
    exts = Extenders([
        Extender(url_prefix=good, prioritize_verb="prioritize", weight=2),
        Extender(url_prefix=bad, prioritize_verb="prioritize", weight=5),
    ])
    totals = await exts.prioritize(PodInfo.from_pod(POD), nodes("a", "b", "c"))
    assert totals == [3 * 2 * 10, 10 * 2 * 10, 0]
    await exts.close()


async def test_filters_run_in_order_each_narrowing(serve: Any) -> None:
    seen: list[Any] = []
    first = await serve(answering({"NodeNames": ["b", "c"],
                                   "FailedAndUnresolvableNodes": {"a": "gone"}}, seen=seen))
    second = await serve(answering({"NodeNames": ["c"], "FailedNodes": {"b": "busy"}},
                                   seen=seen))
    broken = await serve(answering({}, 500))
    exts = Extenders([
        Extender(url_prefix=first, filter_verb="f", node_cache_capable=True),
        Extender(url_prefix=broken, filter_verb="f", ignorable=True),
        Extender(url_prefix=second, filter_verb="f", node_cache_capable=True),
    ])
    diagnosis = Diagnosis()
    kept = await exts.filter(PodInfo.from_pod(POD), nodes("a", "b", "c"), diagnosis)
    assert [n.name for n in kept] == ["c"]
    assert [body["NodeNames"] for _, body in seen] == [["a", "b", "c"], ["b", "c"]]
    assert {n: (s.code.name, s.message()) for n, s in diagnosis.node_to_status.items()} == {
        "a": ("UNSCHEDULABLE_AND_UNRESOLVABLE", "gone"), "b": ("UNSCHEDULABLE", "busy")}
    assert diagnosis.unschedulable_plugins == {"Extender"}
    await exts.close()


async def test_bind_args_and_first_interested_binder(serve: Any) -> None:
    seen: list[Any] = []
    url = await serve(answering({"Error": ""}, seen=seen))
    exts = Extenders([Extender(url_prefix=url, bind_verb="bind",
                               managed_resources=[ExtenderManagedResource("example.com/widget")])])
    status = await exts.bind(PodInfo.from_pod(POD), "node-1")
    assert status is not None and status.is_success()
    assert seen == [("bind", {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p",
                              "Node": "node-1"})]
    # not interested: the Bind plugins bind
    assert await exts.bind(PodInfo.from_pod(PodBuilder("q").obj()), "node-1") is None
    await exts.close()
