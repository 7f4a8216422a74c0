from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.client.api import (
    AlreadyExists,
    ApiClient,
    ApiConnectionError,
    ApiError,
    ApiResponse,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TokenBucket,
    TooManyRequests,
    Unauthorized,
    WatchStreamParser,
    error_for,
    raise_for_status,
    resource_path,
)
from scheduler.metrics import SchedulerMetrics
from tests.unit.client.conftest import FakeClock, FakeSleep, until
from tests.unit.client.fake_apiserver import FakeApiServer

MakeClient = Callable[..., ApiClient]


# --- pure helpers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("v1", "pods"), "/api/v1/pods"),
        (("v1", "pods", "ns"), "/api/v1/namespaces/ns/pods"),
        (("v1", "pods", "ns", "p", "binding"), "/api/v1/namespaces/ns/pods/p/binding"),
        (("v1", "nodes", None, "n1"), "/api/v1/nodes/n1"),
        (("policy/v1", "poddisruptionbudgets", "ns"), "/apis/policy/v1/namespaces/ns/poddisruptionbudgets"),
        (("scheduling.x-k8s.io/v1alpha1", "podgroups"), "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"),
    ],
)
def test_resource_path(args: tuple[Any, ...], expected: str) -> None:
    assert resource_path(*args) == expected


def test_resource_path_subresource_needs_name() -> None:
    with pytest.raises(ValueError):
        resource_path("v1", "pods", "ns", None, "status")


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        (400, "BadRequest", BadRequest),
        (401, "Unauthorized", Unauthorized),
        (403, "Forbidden", Forbidden),
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (410, "Expired", Gone),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", TooManyRequests),
        (500, "InternalError", ServerError),
        (503, "ServiceUnavailable", ServerError),
        (418, "Teapot", ApiError),
    ],
)
def test_error_mapping(status: int, reason: str, cls: type[ApiError]) -> None:
    body = {"kind": "Status", "code": status, "reason": reason, "message": "m"}
    err = error_for(status, body)
    assert type(err) is cls
    assert (err.status, err.reason, err.message, err.body) == (status, reason, "m", body)


def test_raise_for_status_passes_2xx_and_reads_retry_after() -> None:
    ok = ApiResponse(201, {"a": 1})
    assert raise_for_status(ok) is ok
    with pytest.raises(TooManyRequests) as ei:
        raise_for_status(ApiResponse(429, None, {"Retry-After": "7"}))
    assert ei.value.retry_after == 7.0
    assert ei.value.reason == "TooManyRequests"


async def test_token_bucket_burst_then_qps() -> None:
    clock, sleep = FakeClock(), FakeSleep()
    tb = TokenBucket(10.0, 3, clock=clock, sleep=sleep)
    for _ in range(3):
        assert await tb.acquire() == 0.0
    # Out of tokens: each next caller waits its share (FIFO reservation).
    assert await tb.acquire() == pytest.approx(0.1)
    assert await tb.acquire() == pytest.approx(0.2)
    assert sleep.calls == [pytest.approx(0.1), pytest.approx(0.2)]
    clock.advance(10.0)  # refills to burst, not beyond
    for _ in range(3):
        assert await tb.acquire() == 0.0
    assert await tb.acquire() > 0


def test_token_bucket_try_acquire_and_unlimited() -> None:
    clock = FakeClock()
    tb = TokenBucket(1.0, 2, clock=clock)
    assert tb.try_acquire() and tb.try_acquire()
    assert not tb.try_acquire()
    clock.advance(1.0)
    assert tb.try_acquire()
    unlimited = TokenBucket(-1, 1, clock=clock)
    assert all(unlimited.try_acquire() for _ in range(100))


def test_watch_parser_handles_partial_chunks() -> None:
    p = WatchStreamParser()
    stream = b'{"type":"ADDED","object":{"a":1}}\n{"type":"MODIFIED","object":{"a":2}}\n\n{"type":"DELETED","object":{"a":3}}'
    out: list[dict[str, Any]] = []
    for i in range(0, len(stream), 5):
        out.extend(p.feed(stream[i : i + 5]))
    assert [e["type"] for e in out] == ["ADDED", "MODIFIED"]
    out.extend(p.finish())
    assert [e["object"]["a"] for e in out] == [1, 2, 3]


def test_watch_parser_rejects_garbage() -> None:
    with pytest.raises(ApiConnectionError):
        WatchStreamParser().feed(b"not json\n")


@pytest.mark.parametrize(("stream", "objects", "error"), [
    # blank and whitespace-only lines (keep-alives) are skipped; CRLF endings are whitespace
    (b'\n  \r\n{"a":1}\r\n\t\n{"a":2}\n', [{"a": 1}, {"a": 2}], None),
    (b' {"a":1} \n', [{"a": 1}], None),
    # a line that is JSON but no object, or no JSON, is named in the error
    (b'{"a":1}\n[1,2]\n', None, "[1,2]"),
    (b'{"a":1}\n"text"\n', None, '"text"'),
    (b'{"a":1}\n{"a":\n', None, '{"a":'),
])
def test_watch_parser_lines(stream: bytes, objects: list[dict[str, Any]] | None,
                            error: str | None) -> None:
    """Lines are decoded in place from the stream's buffer: every chunking gives the same
    objects, and a bad line raises naming it (the buffer stays usable for the error)."""
    for size in (1, 3, len(stream)):
        p = WatchStreamParser()
        out: list[dict[str, Any]] = []
        if error is None:
            for i in range(0, len(stream), size):
                out.extend(p.feed(stream[i:i + size]))
            out.extend(p.finish())
            assert out == objects
            continue
        with pytest.raises(ApiConnectionError, match="malformed watch event") as caught:
            for i in range(0, len(stream), size):
                out.extend(p.feed(stream[i:i + size]))
        assert error in str(caught.value)


# --- against the fake server -----------------------------------------------------------------


async def test_request_sends_auth_and_decodes_json(server: FakeApiServer, make_client: MakeClient) -> None:
    server.objects["/api/v1/nodes/n1"] = {"metadata": {"name": "n1"}}
    c = make_client()
    assert await c.get("/api/v1/nodes/n1") == {"metadata": {"name": "n1"}}
    req = server.requests[-1]
    assert req.headers["Authorization"] == "Bearer t0k"
    assert req.headers["Accept"] == "application/json"
    resp = await c.request("GET", "/api/v1/nodes/missing")
    assert resp.status == 404 and resp.body["reason"] == "NotFound"
    with pytest.raises(NotFound):
        await c.get("/api/v1/nodes/missing")


async def test_client_rate_limits_requests(server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    clock = FakeClock()
    server.objects["/x"] = {"metadata": {"name": "x"}}
    c = make_client(qps=5.0, burst=2, clock=clock)
    for _ in range(4):
        await c.get("/x")
    assert fake_sleep.calls == [pytest.approx(0.2), pytest.approx(0.4)]


async def test_get_retries_5xx_then_succeeds(server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    server.objects["/x"] = {"metadata": {"name": "x"}}
    server.fail("GET", "/x", status=503, times=2)
    c = make_client()
    assert (await c.get("/x"))["metadata"]["name"] == "x"
    assert len(server.requests_for("GET", "/x")) == 3
    assert len(fake_sleep.calls) == 2


async def test_get_retries_are_bounded(server: FakeApiServer, make_client: MakeClient) -> None:
    server.fail("GET", "/x", status=500, times=100)
    c = make_client()
    with pytest.raises(ServerError):
        await c.get("/x")
    assert len(server.requests_for("GET", "/x")) == 4  # 1 + max_retries(3)


async def test_429_honours_retry_after_for_writes(server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    server.fail("POST", "/api/v1/namespaces/ns/configmaps", status=429, headers={"Retry-After": "3"})
    c = make_client()
    await c.create("/api/v1/namespaces/ns/configmaps", {"metadata": {"name": "cm"}})
    assert fake_sleep.calls == [3.0]
    assert len(server.requests_for("POST")) == 2


async def test_post_5xx_is_not_retried(server: FakeApiServer, make_client: MakeClient) -> None:
    server.fail("POST", "/things", status=500)
    c = make_client()
    with pytest.raises(ServerError):
        await c.create("/things", {"metadata": {"name": "a"}})
    assert len(server.requests_for("POST")) == 1


async def test_connection_errors_retried_for_get_only(server: FakeApiServer, make_client: MakeClient) -> None:
    server.objects["/x"] = {"metadata": {"name": "x"}}
    server.fail("GET", "/x", disconnect=True, times=1)
    c = make_client()
    assert await c.get("/x")
    server.fail("POST", "/things", disconnect=True, times=1)
    with pytest.raises(ApiConnectionError):
        await c.create("/things", {"metadata": {"name": "a"}})


async def test_unreachable_server_raises_connection_error(make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    from scheduler.client.api import ApiClient as Client
    from scheduler.client.connection import ConnectionConfig

    c = Client(ConnectionConfig(host="http://127.0.0.1:9"), sleep=fake_sleep, qps=-1)
    try:
        with pytest.raises(ApiConnectionError):
            await c.get("/api/v1/nodes")
        assert len(fake_sleep.calls) == c.retry.max_retries
    finally:
        await c.close()


@pytest.mark.parametrize(
    ("patch_type", "ct"),
    [
        ("strategic", "application/strategic-merge-patch+json"),
        ("merge", "application/merge-patch+json"),
        ("json", "application/json-patch+json"),
    ],
)
async def test_patch_content_types(server: FakeApiServer, make_client: MakeClient, patch_type: Any, ct: str) -> None:
    server.objects["/o"] = {"metadata": {"name": "o"}}
    c = make_client()
    await c.patch("/o", {"x": 1}, patch_type=patch_type)
    assert server.requests[-1].headers["Content-Type"] == ct
    assert server.requests[-1].body == {"x": 1}


async def test_bind_posts_binding_with_uid_and_maps_409(server: FakeApiServer, make_client: MakeClient) -> None:
    metrics = SchedulerMetrics()
    server.objects["/api/v1/namespaces/ns/pods/p"] = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": {}}
    c = make_client(metrics=metrics)
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}
    resp = await c.bind(pod, "node-1")
    assert resp.status == 201
    assert server.requests[-1].path == "/api/v1/namespaces/ns/pods/p/binding"
    assert server.requests[-1].body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    with pytest.raises(Conflict):
        await c.bind(pod, "node-2")
    with pytest.raises(NotFound):
        await c.bind({"metadata": {"name": "gone", "namespace": "ns"}}, "node-1")
    assert metrics.registry.get_sample_value("scheduler_py_bind_requests_total", {"result": "2xx"}) == 1
    assert metrics.registry.get_sample_value("scheduler_py_bind_requests_total", {"result": "4xx"}) == 2


async def test_patch_pod_status_path(server: FakeApiServer, make_client: MakeClient) -> None:
    server.objects["/api/v1/namespaces/ns/pods/p/status"] = {"metadata": {"name": "p"}}
    c = make_client()
    await c.patch_pod_status("ns", "p", {"status": {"nominatedNodeName": "n"}})
    r = server.requests[-1]
    assert (r.method, r.path, r.headers["Content-Type"]) == (
        "PATCH",
        "/api/v1/namespaces/ns/pods/p/status",
        "application/strategic-merge-patch+json",
    )


async def test_watch_streams_events_across_split_writes(server: FakeApiServer, make_client: MakeClient) -> None:
    server.collection("/api/v1/pods")
    server.split_writes = 3
    for i in range(3):
        server.add("/api/v1/pods", {"metadata": {"name": f"p{i}", "namespace": "ns"}})
    c = make_client()
    got: list[str] = []
    stream = c.watch("/api/v1/pods", {"resourceVersion": "100"})
    async for ev in stream:
        got.append(ev["object"]["metadata"]["name"])
        if len(got) == 3:
            server.end_watches()
    assert got == ["p0", "p1", "p2"]
    q = server.requests_for("GET", "/api/v1/pods")[-1].query
    assert q["watch"] == "true" and q["resourceVersion"] == "100"


async def test_watch_410_raises_gone(server: FakeApiServer, make_client: MakeClient) -> None:
    server.collection("/api/v1/pods")
    server.add("/api/v1/pods", {"metadata": {"name": "a", "namespace": "ns"}})
    server.compact()
    c = make_client()
    with pytest.raises(Gone):
        async for _ in c.watch("/api/v1/pods", {"resourceVersion": "100"}):
            pass


async def test_watch_dropped_connection_raises_connection_error(server: FakeApiServer, make_client: MakeClient) -> None:
    server.collection("/api/v1/pods")
    server.add("/api/v1/pods", {"metadata": {"name": "a", "namespace": "ns"}})
    c = make_client()
    with pytest.raises(ApiConnectionError):
        async for _ in c.watch("/api/v1/pods", {"resourceVersion": "100"}):
            server.drop_watches()


async def test_watch_is_not_rate_limited(server: FakeApiServer, make_client: MakeClient, fake_sleep: FakeSleep) -> None:
    server.collection("/api/v1/pods")
    c = make_client(qps=1.0, burst=1, clock=FakeClock())

    async def drain() -> int:
        n = 0
        async for _ in c.watch("/api/v1/pods", {"resourceVersion": str(server.rv)}):
            n += 1
        return n

    for _ in range(3):
        task = asyncio.create_task(drain())
        await until(lambda: bool(server.watchers))
        server.end_watches()
        assert await task == 0
    assert fake_sleep.calls == []


@pytest.mark.parametrize(("existing", "fault", "error", "decoded"), [
    (False, None, None, 0),             # created: the answer (the object) is not decoded
    (True, None, AlreadyExists, 1),     # refused: the Status is decoded for the typed error
    (False, 500, ServerError, 1),       # and a 5xx is neither retried nor left unread
    (False, 403, Forbidden, 1),
])
async def test_create_unread_decodes_only_a_refusal(
    server: FakeApiServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch,
    existing: bool, fault: int | None, error: type[ApiError] | None, decoded: int,
) -> None:
    import scheduler.client.api as api_module

    decodes: list[bytes] = []
    real = api_module._decode

    def counting(raw: bytes, content_type: str) -> Any:
        decodes.append(raw)
        return real(raw, content_type)

    monkeypatch.setattr(api_module, "_decode", counting)
    path = "/apis/events.k8s.io/v1/namespaces/ns/events"
    if existing:
        server.objects[f"{path}/e1"] = {"metadata": {"name": "e1"}}
    if fault is not None:
        server.fail("POST", path, status=fault)
    c = make_client()
    body = {"metadata": {"name": "e1", "namespace": "ns"}, "note": "n"}
    if error is None:
        assert await c.create_unread(path, body) is None
        assert server.objects[f"{path}/e1"]["note"] == "n"
    else:
        with pytest.raises(error):
            await c.create_unread(path, body)
    # The same request create makes: one POST of the body, never retried here.
    assert [(r.body["metadata"]["name"], r.body["note"])
            for r in server.requests_for("POST", path)] == [("e1", "n")]
    assert len(decodes) == decoded


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
       | st.text(alphabet="abz09-._~/:@!$&'()*+,;=% ?#[]\\é\x00", max_size=40))
def test_a_path_goes_out_as_quote_would_write_it(path: str) -> None:
    """The lean writer skips quote() for a path it would leave unchanged: the same target
    for every path (the names the scheduler writes, and any other)."""
    from urllib.parse import quote

    from scheduler.client.api import _NEEDS_QUOTING, _PATH_SAFE

    fast = quote(path, safe=_PATH_SAFE) if _NEEDS_QUOTING(path) else path
    assert fast == quote(path, safe=_PATH_SAFE)
    assert (_NEEDS_QUOTING(path) is None) == (quote(path, safe=_PATH_SAFE) == path)


@pytest.mark.parametrize("write_pipeline", [0, -3])
def test_write_pipeline_below_one_is_refused_at_construction(write_pipeline: int) -> None:
    # Not when the write pool is first made: there every write of a running scheduler
    # would fail with it instead of its start.
    from scheduler.client.connection import ConnectionConfig

    with pytest.raises(ValueError, match=f"write_pipeline must be at least 1, got {write_pipeline}"):
        ApiClient(ConnectionConfig(host="http://127.0.0.1:9"), write_pipeline=write_pipeline)
