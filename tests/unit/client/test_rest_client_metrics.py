"""client-go's rest_client_requests_total{code,method,host} and
rest_client_request_duration_seconds{verb,host}: one count and one observation per request
sent (each retry is a request), ``<error>`` when no answer came, watches counted when their
answer's head arrives; a client built without metrics counts nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

from scheduler.client.api import ApiClient, ApiConnectionError, Gone, NotFound, ServerError
from scheduler.metrics import SchedulerMetrics
from tests.unit.client.fake_apiserver import FakeApiServer

MakeClient = Callable[..., ApiClient]


def _counts(metrics: SchedulerMetrics) -> dict[tuple[str, str], float]:
    return {(s.labels["code"], s.labels["method"]): s.value
            for f in metrics.registry.collect() for s in f.samples
            if s.name == "rest_client_requests_total"}


def _observations(metrics: SchedulerMetrics, host: str) -> dict[str, float]:
    return {s.labels["verb"]: s.value
            for f in metrics.registry.collect() for s in f.samples
            if s.name == "rest_client_request_duration_seconds_count"
            and s.labels["host"] == host}


async def _get_missing(c: ApiClient, server: FakeApiServer) -> None:
    with pytest.raises(NotFound):
        await c.get("/api/v1/namespaces/ns/pods/none")


async def _get_retried(c: ApiClient, server: FakeApiServer) -> None:
    server.objects["/o"] = {"metadata": {"name": "o"}}
    server.fail("GET", "/o", status=503, times=2)
    await c.get("/o")


async def _patch_then_post(c: ApiClient, server: FakeApiServer) -> None:
    server.objects["/o"] = {"metadata": {"name": "o"}}
    await c.patch("/o", {"x": 1})
    with pytest.raises(ServerError):
        server.fail("POST", "/c", status=500, times=1)
        await c.create("/c", {"metadata": {"name": "x"}})


async def _watch_gone(c: ApiClient, server: FakeApiServer) -> None:
    server.collection("/api/v1/pods")
    server.add("/api/v1/pods", {"metadata": {"name": "a", "namespace": "ns"}})
    server.compact()
    with pytest.raises(Gone):
        async for _ in c.watch("/api/v1/pods", {"resourceVersion": "100"}):
            pass


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        pytest.param(_get_missing, {("404", "GET"): 1.0}, id="one-get"),
        pytest.param(_get_retried, {("503", "GET"): 2.0, ("200", "GET"): 1.0},
                     id="each-retry-is-a-request"),
        pytest.param(_patch_then_post, {("200", "PATCH"): 1.0, ("500", "POST"): 1.0},
                     id="writes-through-the-lean-pool"),
        pytest.param(_watch_gone, {("410", "GET"): 1.0}, id="watch-answer"),
    ],
)
async def test_each_request_sent_is_counted_by_code_method_and_host(
    server: FakeApiServer, make_client: MakeClient,
    scenario: Callable[[ApiClient, FakeApiServer], Awaitable[None]],
    expected: dict[tuple[str, str], float],
) -> None:
    metrics = SchedulerMetrics()
    c = make_client(metrics=metrics)
    await scenario(c, server)
    assert _counts(metrics) == expected
    host = urlsplit(server.url).netloc
    by_verb: dict[str, float] = {}
    for (_code, method), n in expected.items():
        by_verb[method] = by_verb.get(method, 0.0) + n
    assert _observations(metrics, host) == by_verb


async def test_no_answer_counts_as_error(make_client: MakeClient) -> None:
    metrics = SchedulerMetrics()
    from scheduler.client.api import RetryPolicy
    from scheduler.client.connection import ConnectionConfig, StaticCredentials

    c = ApiClient(ConnectionConfig(host="http://127.0.0.1:9", credentials=StaticCredentials("")),
                  qps=-1, retry=RetryPolicy(max_retries=0), metrics=metrics,
                  connect_timeout=1.0)
    try:
        with pytest.raises(ApiConnectionError):
            await c.get("/api/v1/pods")
    finally:
        await c.close()
    assert _counts(metrics) == {("<error>", "GET"): 1.0}


async def test_a_client_without_metrics_counts_nothing(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    c: Any = make_client()
    await _get_missing(c, server)
    assert c._rest_results is None
