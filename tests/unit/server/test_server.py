"""The endpoint server: which requests reach which handler, through the one request guard.

The guard here is a table (the delegated TokenReview/SubjectAccessReview guard is tested
against the sandbox in tests/integration/test_secure_serving.py).  Servers bind 127.0.0.1:0;
the non-loopback cases pass a loopback socket with the address the decision is made for.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram

from scheduler.server import (
    HealthServer,
    HealthState,
    ServingError,
    bearer_token,
    bind_listener,
    is_loopback,
)

Guard = Callable[[str | None, str, str], Awaitable[tuple[int, str] | None]]


def table_guard(allowed: dict[str, set[str]], calls: list[tuple[str | None, str, str]]) -> Guard:
    """token -> paths it may get; no token 401, unknown token 401, other paths 403."""
    async def guard(token: str | None, verb: str, path: str) -> tuple[int, str] | None:
        calls.append((token, verb, path))
        if token is None or token not in allowed:
            return 401, "Unauthorized"
        if verb == "get" and any(path == p or (p.endswith("*") and path.startswith(p[:-1]))
                                 for p in allowed[token]):
            return None
        return 403, f"Forbidden: {verb} {path}"
    return guard


async def debug_pod(request: web.Request) -> web.Response:
    return web.json_response({"namespace": request.match_info["namespace"],
                              "name": request.match_info["name"]})


async def debug_queue(request: web.Request) -> web.Response:
    return web.json_response({"active": []})


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[tuple[HealthServer, str]]]]:
    servers: list[HealthServer] = []

    async def make(*, host: str = "127.0.0.1", guard: Guard | None = None,
                   authorization: bool = False, registry: CollectorRegistry | None = None,
                   debug: bool = True, synced: bool = True) -> tuple[HealthServer, str]:
        sock = bind_listener("127.0.0.1", 0)
        server = HealthServer(registry=registry or CollectorRegistry(),
                              health=HealthState(synced=synced), host=host, port=0, sock=sock,
                              guard=guard, authorization=authorization)
        if debug:
            server.add_debug_route("/debug/pods/{namespace}/{name}", debug_pod)
            server.add_debug_route("/debug/queue", debug_queue)
        await server.start()
        servers.append(server)
        return server, f"http://127.0.0.1:{server.bound_port}"

    yield make
    for server in servers:
        await server.stop()


async def get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as resp:
        return resp.status, await resp.text()


# --- /debug/* served only with authorization or on loopback ---------------------------------

DEBUG_CASES = [
    # host, authorization, token, status of /debug/queue
    pytest.param("127.0.0.1", False, None, 200, id="loopback-open"),
    pytest.param("::1", False, None, 200, id="loopback-v6-open"),
    pytest.param("0.0.0.0", False, None, 404, id="wildcard-no-authz"),
    pytest.param("0.0.0.0", False, "ops", 404, id="wildcard-authn-only-still-404"),
    pytest.param("10.1.2.3", True, "ops", 200, id="authz-allowed"),
    pytest.param("10.1.2.3", True, "scraper", 403, id="authz-lacks-debug"),
    pytest.param("10.1.2.3", True, None, 401, id="authz-no-token"),
    pytest.param("127.0.0.1", True, "scraper", 403, id="loopback-still-authorized"),
]


@pytest.mark.parametrize(("host", "authorization", "token", "status"), DEBUG_CASES)
async def test_debug_routes_are_served_only_with_authorization_or_on_loopback(
    serve: Any, host: str, authorization: bool, token: str | None, status: int
) -> None:
    calls: list[tuple[str | None, str, str]] = []
    # "Authentication only" is a guard that lets every known token through.
    allowed = {"ops": {"/metrics", "/debug/*"}, "scraper": {"/metrics"}} if authorization \
        else {"ops": {"*"}, "scraper": {"*"}}
    guard = table_guard(allowed, calls) if (authorization or token) else None
    server, url = await serve(host=host, guard=guard, authorization=authorization)
    assert server.debug_enabled == (authorization or is_loopback(host))
    code, _ = await get(url + "/debug/queue", token)
    assert code == status
    if status == 200:
        code, body = await get(url + "/debug/pods/default/web-1", token)
        assert (code, body) == (200, '{"namespace": "default", "name": "web-1"}')


async def test_withheld_debug_routes_are_logged_at_start(
    serve: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Read from the captured output: structlog caches loggers once logging is configured (by
    # another test, in a full run), so capture_logs() would not see them.
    capsys.readouterr()
    await serve(host="0.0.0.0")
    await serve(host="127.0.0.1")
    await serve(host="0.0.0.0", debug=False)
    lines = [line for line in "".join(capsys.readouterr()).splitlines()
             if "debug endpoints are not served" in line]
    assert len(lines) == 1, lines
    assert "authorization is off" in lines[0]
    assert "warning" in lines[0]
    assert "/debug/pods/{namespace}/{name}" in lines[0] and "/debug/queue" in lines[0]


async def test_debug_requests_are_authorized_on_their_own_path(serve: Any) -> None:
    calls: list[tuple[str | None, str, str]] = []
    guard = table_guard({"ops": {"/debug/*"}}, calls)
    _, url = await serve(host="10.0.0.1", guard=guard, authorization=True)
    assert (await get(url + "/debug/pods/kube-system/etcd-0", "ops"))[0] == 200
    assert calls == [("ops", "get", "/debug/pods/kube-system/etcd-0")]


@pytest.mark.parametrize(("path", "error"), [
    ("/metrics", "must start with /debug/"),
    ("debug/x", "must start with /debug/"),
    ("/debug/queue", "already registered"),
])
def test_add_debug_route_rejects_bad_paths(path: str, error: str) -> None:
    server = HealthServer(registry=CollectorRegistry(), health=HealthState(), host="127.0.0.1",
                          port=0)
    server.add_debug_route("/debug/queue", debug_queue)
    with pytest.raises(ValueError, match=error):
        server.add_debug_route(path, debug_queue)


async def test_debug_routes_must_be_registered_before_start(serve: Any) -> None:
    server, _ = await serve(debug=False)
    with pytest.raises(RuntimeError, match="before start"):
        server.add_debug_route("/debug/late", debug_queue)


# --- the guard sees every request but the always-allowed paths ------------------------------


async def test_guard_decides_every_path_except_the_probes(serve: Any) -> None:
    calls: list[tuple[str | None, str, str]] = []
    guard = table_guard({"prom": {"/metrics"}}, calls)
    _, url = await serve(host="10.0.0.1", guard=guard, authorization=True, debug=False)
    for path in ("/healthz", "/livez", "/readyz"):
        assert (await get(url + path))[0] == 200, path
    assert calls == []
    assert (await get(url + "/metrics"))[0] == 401
    assert (await get(url + "/metrics", "nobody"))[0] == 401
    assert (await get(url + "/metrics", "prom"))[0] == 200
    # Unknown paths are refused before routing: a stranger learns nothing about them.
    assert (await get(url + "/nope"))[0] == 401
    assert (await get(url + "/nope", "prom"))[0] == 403
    assert [c[2] for c in calls] == ["/metrics"] * 3 + ["/nope"] * 2


async def test_always_allow_paths_match_exactly_or_by_a_trailing_star() -> None:
    calls: list[tuple[str | None, str, str]] = []
    server = HealthServer(registry=CollectorRegistry(), health=HealthState(synced=True),
                          host="127.0.0.1", port=0, sock=bind_listener("127.0.0.1", 0),
                          guard=table_guard({}, calls), authorization=True,
                          always_allow_paths=("/healthz", "/debug/public/*"))
    server.add_debug_route("/debug/public/queue", debug_queue)
    server.add_debug_route("/debug/queue", debug_queue)
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.bound_port}"
        assert (await get(url + "/healthz"))[0] == 200
        assert (await get(url + "/debug/public/queue"))[0] == 200
        assert (await get(url + "/readyz"))[0] == 401  # no longer in the list
        assert (await get(url + "/debug/queue"))[0] == 401
        assert [c[2] for c in calls] == ["/readyz", "/debug/queue"]
    finally:
        await server.stop()


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("Bearer ", None), ("Basic abc", None),
    ("", None), ("abc", None),
])
def test_bearer_token(header: str, token: str | None) -> None:
    assert bearer_token(header) == token


# --- /metrics --------------------------------------------------------------------------------


async def test_metrics_have_no_created_series(serve: Any) -> None:
    registry = CollectorRegistry()
    Counter("scheduler_schedule_attempts", "attempts", ["result"], registry=registry) \
        .labels("scheduled").inc()
    Histogram("scheduler_e2e_seconds", "latency", registry=registry).observe(0.1)
    _, url = await serve(registry=registry, debug=False)
    status, body = await get(url + "/metrics")
    assert status == 200
    assert 'scheduler_schedule_attempts_total{result="scheduled"} 1.0' in body
    assert "scheduler_e2e_seconds_count 1.0" in body
    assert "_created" not in body


# --- binding ---------------------------------------------------------------------------------


def test_port_in_use_is_one_line_naming_the_address() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ServingError) as info:
            bind_listener("127.0.0.1", port)
    finally:
        taken.close()
    assert str(info.value) == f"--metrics-bind-address 127.0.0.1:{port}: address already in use"


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.1", False), ("scheduler.example", False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
