"""The lean HTTP/1.1 pool for API writes: framing (Content-Length, chunked, to-close),
keep-alive reuse, and every way a connection can fail, against a scripted raw server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from scheduler.client.http1 import Http1Pool, HttpConnectionError, Origin, _Connection

# A reply: the raw bytes to write, in pieces (each written separately), then maybe a close.
Reply = tuple[list[bytes], bool]


class ScriptedServer:
    """Reads one request head (+ Content-Length body) at a time and answers from a script."""

    def __init__(self) -> None:
        self.script: list[Reply | None] = []  # None: read the request, never answer
        self.requests: list[bytes] = []
        self.connections = 0
        # This many connections are accepted, then closed once ``hang_up_now`` is set.
        self.hang_up = 0
        self.hang_up_now = asyncio.Event()
        self.ended = 0  # connections over (closed by either side)
        self.port = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.hang_up:
            self.hang_up -= 1
            await self.hang_up_now.wait()
            writer.close()
            self.ended += 1
            return
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                reply = self.script.pop(0)
                if reply is None:
                    await asyncio.sleep(3600)
                    return
                pieces, close = reply
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)
                if close:
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()
            self.ended += 1


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    s = ScriptedServer()
    await s.start()
    yield s
    await s.close()


@pytest.fixture
def pool(server: ScriptedServer) -> Callable[..., Http1Pool]:
    def make(**kw: Any) -> Http1Pool:
        return Http1Pool(f"http://127.0.0.1:{server.port}/prefix", ssl_context=None, **kw)
    return make


def ok(body: bytes, *extra: bytes) -> list[bytes]:
    head = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
    return [head + b"Content-Length: %d\r\n" % len(body) + b"".join(extra) + b"\r\n" + body]


HEAD = "User-Agent: t\r\nAccept: application/json\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(("pieces", "status", "body", "headers"), [
    pytest.param(ok(b'{"a":1}'), 201, b'{"a":1}', {"Content-Type": "application/json"},
                 id="content-length"),
    pytest.param([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                  b"4;ext=1\r\n{\"a\"\r\n", b"3\r\n:1}\r\n0\r\nX-Trailer: t\r\n\r\n"],
                 200, b'{"a":1}', {"Transfer-Encoding": "chunked"}, id="chunked-trailers"),
    pytest.param([b"HTTP/1.1 200 OK\r\nTransfer-", b"Encoding: chunked\r\n\r\n7\r\n{\"a\":1}",
                  b"\r\n0\r\n", b"\r\n"], 200, b'{"a":1}', {"Transfer-Encoding": "chunked"},
                 id="split-everywhere"),
    pytest.param([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nA: b\r\n\r\n"],
                 204, b"", {"A": "b"}, id="interim-then-no-content"),
    pytest.param([b"HTTP/1.1 409 Conflict\r\nRetry-After: 2\r\nContent-Length: 2\r\n\r\n{}"],
                 409, b"{}", {"Retry-After": "2", "Content-Length": "2"}, id="error-status"),
])
async def test_responses_are_framed_as_the_server_sent_them(
    server: ScriptedServer, pool: Callable[..., Http1Pool], pieces: list[bytes], status: int,
    body: bytes, headers: dict[str, str],
) -> None:
    server.script = [(pieces, False), (ok(b"next"), False)]
    p = pool()
    resp = await p.request("POST", "/api/v1/x", head=HEAD, body=b'{"k":"v"}', timeout=5)
    assert (resp.status, resp.body) == (status, body)
    assert {k: resp.headers[k] for k in headers} == headers
    # The connection is reused for the next request (nothing left over on it).
    assert (await p.request("PATCH", "/y", head=HEAD, body=b"{}", timeout=5)).body == b"next"
    assert server.connections == 1 and p.connections_made == 1
    first = server.requests[0]
    assert first.startswith(b"POST /prefix/api/v1/x HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                            % server.port)
    assert b"Content-Length: 9\r\n" in first and first.endswith(b'\r\n\r\n{"k":"v"}')
    p.close()


async def test_a_body_to_the_close_and_connection_close_are_not_reused(
    server: ScriptedServer, pool: Callable[..., Http1Pool]
) -> None:
    server.script = [([b"HTTP/1.1 200 OK\r\n\r\nall of ", b"it"], True),
                     (ok(b"x", b"Connection: close\r\n"), True),
                     (ok(b"y"), False)]
    p = pool()
    assert (await p.request("DELETE", "/a", head=HEAD, body=None, timeout=5)).body == b"all of it"
    assert (await p.request("POST", "/b", head=HEAD, body=b"{}", timeout=5)).body == b"x"
    assert (await p.request("POST", "/c", head=HEAD, body=b"{}", timeout=5)).body == b"y"
    assert server.connections == 3


@pytest.mark.parametrize(("reply", "message"), [
    pytest.param(([b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\nshort"], True),
                 "closed mid-response", id="truncated-body"),
    pytest.param(([], True), "closed", id="closed-before-answering"),
    pytest.param(([b"SSH-2.0-OpenSSH\r\n\r\n"], False), "not an HTTP/1.x response",
                 id="not-http"),
    pytest.param(([b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"], False),
                 "malformed Content-Length", id="bad-length"),
    pytest.param(([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"], False),
                 "malformed chunk size", id="bad-chunk"),
    pytest.param(None, "no response within", id="timeout"),
])
async def test_a_broken_exchange_raises_and_the_connection_is_dropped(
    server: ScriptedServer, pool: Callable[..., Http1Pool], reply: Reply | None, message: str,
) -> None:
    server.script = [reply, (ok(b"fine"), False)]
    p = pool()
    with pytest.raises(HttpConnectionError, match=message):
        await p.request("POST", "/a", head=HEAD, body=b"{}", timeout=0.5)
    # The next request gets a fresh connection and succeeds.
    assert (await p.request("POST", "/b", head=HEAD, body=b"{}", timeout=5)).body == b"fine"
    assert p.connections_made == 2


async def test_idle_connections_past_their_age_are_not_reused(
    server: ScriptedServer, pool: Callable[..., Http1Pool]
) -> None:
    now = [0.0]
    server.script = [(ok(b"1"), False), (ok(b"2"), False), (ok(b"3"), False)]
    p = pool(idle_seconds=30, clock=lambda: now[0])
    await p.request("POST", "/a", head=HEAD, body=b"{}", timeout=5)
    now[0] = 29
    await p.request("POST", "/a", head=HEAD, body=b"{}", timeout=5)
    assert p.connections_made == 1
    now[0] = 60
    assert (await p.request("POST", "/a", head=HEAD, body=b"{}", timeout=5)).body == b"3"
    assert p.connections_made == 2


async def test_concurrent_requests_use_at_most_size_connections(
    server: ScriptedServer, pool: Callable[..., Http1Pool]
) -> None:
    server.script = [(ok(b"%d" % i), False) for i in range(20)]
    p = pool(size=3)
    bodies = await asyncio.gather(*(p.request("POST", "/a", head=HEAD, body=b"{}", timeout=5)
                                    for _ in range(20)))
    assert sorted(int(b.body) for b in bodies) == list(range(20))
    assert p.connections_made <= 3


async def test_cannot_connect_and_closed_pool_raise() -> None:
    unused = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = unused.sockets[0].getsockname()[1]
    unused.close()
    await unused.wait_closed()
    p = Http1Pool(f"http://127.0.0.1:{port}", ssl_context=None)
    with pytest.raises(HttpConnectionError, match="cannot connect"):
        await p.request("POST", "/a", head=HEAD, body=b"{}", timeout=5)
    p.close()
    with pytest.raises(HttpConnectionError, match="closed"):
        await p.request("POST", "/a", head=HEAD, body=b"{}", timeout=5)


async def test_warmed_connections_serve_the_first_requests_without_connecting(
    server: ScriptedServer, pool: Callable[..., Http1Pool]
) -> None:
    server.script = [(ok(b"1"), False), (ok(b"2"), False)]
    p = pool(size=3)
    assert await p.warm(5) == 3  # no more than the pool's size
    assert p.connections_made == 3 and len(p._idle) == 3
    bodies = await asyncio.gather(*(p.request("POST", "/a", head=HEAD, body=b"{}", timeout=5)
                                    for _ in range(2)))
    assert sorted(b.body for b in bodies) == [b"1", b"2"]
    assert p.connections_made == 3  # both requests went out on warmed connections
    p.close()  # the one stop path closes the warmed ones too (the unused one included)
    await _until(lambda: server.ended == 3)
    assert not p._all and not p._idle


async def _until(condition: Callable[[], bool]) -> None:
    """Let the loop run until ``condition`` holds (a bounded number of short sleeps)."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_a_warmed_connection_the_server_closed_is_not_used_for_the_first_write(
    server: ScriptedServer, pool: Callable[..., Http1Pool]
) -> None:
    server.hang_up = 1  # a load balancer or API server closing an idle connection
    server.script = [(ok(b"written"), False)]
    p = pool()
    assert await p.warm(1) == 1
    warmed = p._idle[0]
    server.hang_up_now.set()
    await _until(lambda: warmed.closed)  # the server's FIN is in
    resp = await p.request("POST", "/a", head=HEAD, body=b"{}", timeout=5)
    assert resp.body == b"written"
    assert p.connections_made == 2 and server.connections == 2
    assert warmed not in p._all
    p.close()


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True


async def test_an_idle_connection_is_not_reused_between_the_servers_fin_and_its_loss() -> None:
    # The transport closes on the FIN; connection_lost comes a loop turn later. A write in
    # between must take another connection, not fail on this one.
    p = Http1Pool("http://127.0.0.1:1", ssl_context=None)
    fin, closing, fine = _Connection(), _Connection(), _Connection()
    for conn in (fin, closing, fine):
        conn.connection_made(_Transport())
        p._release(conn)
    assert fin.eof_received() is False and fin.closed
    assert isinstance(closing.transport, _Transport)
    closing.transport.closing = True  # closing, not yet marked closed
    assert p._reuse() is fine
    assert p._reuse() is None and not p._idle


async def test_a_failed_warm_up_raises_nothing_and_the_first_write_connects() -> None:
    unused = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = unused.sockets[0].getsockname()[1]
    unused.close()
    await unused.wait_closed()
    p = Http1Pool(f"http://127.0.0.1:{port}", ssl_context=None)
    assert await p.warm(4) == 0
    assert not p._idle and not p._all
    with pytest.raises(HttpConnectionError, match="cannot connect"):
        await p.request("POST", "/a", head=HEAD, body=b"{}", timeout=5)
    p.close()
    assert await p.warm(4) == 0  # a closed pool opens nothing


async def test_a_pool_closed_during_its_warm_up_keeps_no_connection(
    server: ScriptedServer, pool: Callable[..., Http1Pool]
) -> None:
    p = pool()
    warming = asyncio.create_task(p.warm(2))
    await asyncio.sleep(0)  # the connects are under way
    p.close()
    assert await warming == 0
    assert not p._idle and not p._all
    await _until(lambda: server.ended == server.connections)


@pytest.mark.parametrize(("url", "expected"), [
    ("http://h", Origin(False, "h", 80, "h", "")),
    ("https://h:6443/", Origin(True, "h", 6443, "h:6443", "")),
    ("https://u:p@[::1]:6443/k8s/clusters/c1", Origin(True, "::1", 6443, "[::1]:6443",
                                                      "/k8s/clusters/c1")),
])
def test_origin(url: str, expected: Origin) -> None:
    assert Origin.parse(url) == expected


def test_origin_rejects_what_is_not_http() -> None:
    with pytest.raises(ValueError):
        Origin.parse("unix:///run/k8s.sock")
    with pytest.raises(ValueError):
        Http1Pool("https://h", ssl_context=None)


@pytest.mark.parametrize("pieces", [
    pytest.param(ok(b'{"a":1}'), id="content-length"),
    pytest.param([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                  b"7\r\n{\"a\":1}\r\n0\r\n\r\n"], id="chunked"),
])
def test_the_pool_works_on_uvloop(pieces: list[bytes]) -> None:
    """uvloop's transports implement asyncio.Transport without subclassing it: a type
    assertion in connection_made once left every connection without a transport there."""
    import uvloop

    async def exchange() -> tuple[bytes, bytes, int]:
        server = ScriptedServer()
        await server.start()
        server.script = [(pieces, False), (ok(b"next"), False)]
        p = Http1Pool(f"http://127.0.0.1:{server.port}", ssl_context=None)
        try:
            first = await p.request("POST", "/x", head=HEAD, body=b"{}", timeout=5)
            second = await p.request("POST", "/y", head=HEAD, body=b"{}", timeout=5)
            return first.body, second.body, p.connections_made
        finally:
            p.close()
            await server.close()

    assert uvloop.run(exchange()) == (b'{"a":1}', b"next", 1)


@pytest.mark.parametrize("first", ["long", "short"])
async def test_each_request_times_out_at_its_own_deadline(
    server: ScriptedServer, pool: Callable[..., Http1Pool], first: str,
) -> None:
    """One timer serves every request in flight: a shorter deadline arriving after a longer
    one still expires first, and the longer one keeps waiting."""
    server.script = [None, None, (ok(b"after"), False)]
    p = pool(size=2)
    timeouts = {"long": 60.0, "short": 0.2}

    def send(which: str) -> asyncio.Task[Any]:
        return asyncio.create_task(p.request("POST", f"/{which}", head=HEAD, body=b"{}",
                                             timeout=timeouts[which]), name=which)

    tasks = {first: send(first)}
    await asyncio.sleep(0.01)
    second = "short" if first == "long" else "long"
    tasks[second] = send(second)
    with pytest.raises(HttpConnectionError, match="no response within 0.2 s"):
        await asyncio.wait_for(tasks["short"], 30)  # guard: a timer never armed hangs
    assert not tasks["long"].done()
    tasks["long"].cancel()
    with pytest.raises(asyncio.CancelledError):
        await tasks["long"]
    assert (await p.request("POST", "/c", head=HEAD, body=b"{}", timeout=5)).body == b"after"
    assert not p._deadlines
    p.close()


# -- pipelining: the requests of one loop turn, one write on one connection


async def _warm(p: Http1Pool) -> Any:
    """One request, so the pool holds one idle connection; that connection."""
    await p.request("POST", "/warm", head=HEAD, body=b"{}", timeout=5)
    assert p.connections_made == 1
    return p._idle[-1]


def _count_writes(conn: Any) -> list[bytes]:
    writes: list[bytes] = []
    write = conn.transport.write

    def counted(data: bytes) -> None:
        writes.append(data)
        write(data)

    conn.transport.write = counted
    return writes


@pytest.mark.parametrize("pipeline", [1, 4])
async def test_one_turns_requests_go_out_in_one_write_and_are_answered_in_order(
    server: ScriptedServer, pool: Callable[..., Http1Pool], pipeline: int,
) -> None:
    """One connection allowed (size=1): unpipelined, the four requests take it one after
    the other, a write each; pipelined, they share it (the pool's slot is the connection's,
    not each request's) and go out in one write."""
    server.script = [(ok(b"w"), False)] + [(ok(b"%d" % i), False) for i in range(4)]
    p = pool(pipeline=pipeline, size=1)
    writes = _count_writes(await _warm(p))
    answers = await asyncio.gather(*(
        p.request("POST", f"/{i}", head=HEAD, body=b"{}", timeout=5) for i in range(4)))
    assert [a.body for a in answers] == [b"0", b"1", b"2", b"3"]
    assert [r.split(b" ")[1] for r in server.requests[1:]] == [
        b"/prefix/0", b"/prefix/1", b"/prefix/2", b"/prefix/3"]
    assert len(writes) == (4 if pipeline == 1 else 1)
    assert p.connections_made == 1
    # Every answer in: the connection is idle again, and reused.
    server.script = [(ok(b"again"), False)]
    assert (await p.request("POST", "/again", head=HEAD, body=b"{}", timeout=5)).body \
        == b"again"
    assert p.connections_made == 1
    p.close()


async def test_a_turn_beyond_the_pipeline_depth_takes_another_connection(
    server: ScriptedServer, pool: Callable[..., Http1Pool],
) -> None:
    server.script = [(ok(b"w"), False)] + [(ok(b"x"), False) for _ in range(5)]
    p = pool(pipeline=3)
    writes = _count_writes(await _warm(p))
    answers = await asyncio.gather(*(
        p.request("POST", f"/{i}", head=HEAD, body=b"{}", timeout=5) for i in range(5)))
    assert [a.status for a in answers] == [201] * 5
    assert len(writes) == 1 and b"".join(writes).count(b"POST ") == 3
    # The fourth and the fifth found no idle connection: each connected (a request waiting
    # for its connection is no turn's connection yet).
    assert p.connections_made == 3
    assert len(p._idle) == 3
    p.close()


@pytest.mark.parametrize(("second", "message"), [
    pytest.param(([b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n2"],
                  True), "before answering a pipelined request", id="server-closes-after"),
    pytest.param(None, "no response within", id="timeout"),
    pytest.param(([b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"], False),
                 "malformed Content-Length", id="broken-answer"),
])
async def test_a_broken_pipelined_exchange_fails_the_requests_behind_it(
    server: ScriptedServer, pool: Callable[..., Http1Pool], second: Reply | None,
    message: str,
) -> None:
    """The answers before the break stand; the request that broke and those written after
    it on the connection fail as any broken connection's request (not retried); the next
    request takes a fresh connection."""
    server.script = [(ok(b"w"), False), (ok(b"1"), False), second,
                     (ok(b"3"), False), (ok(b"fresh"), False)]
    p = pool(pipeline=4)
    await _warm(p)
    results = await asyncio.gather(*(
        p.request("POST", f"/{i}", head=HEAD, body=b"{}", timeout=0.5) for i in (1, 2, 3)),
        return_exceptions=True)
    assert not isinstance(results[0], BaseException) and results[0].body == b"1"
    if second is not None and second[1]:  # a proper answer, then the close
        assert not isinstance(results[1], BaseException) and results[1].body == b"2"
        assert isinstance(results[2], HttpConnectionError)
        assert message in str(results[2])
    else:
        assert all(isinstance(r, HttpConnectionError) for r in results[1:])
        assert message in str(results[1])
    server.script = [(ok(b"fresh"), False)]
    assert (await p.request("POST", "/n", head=HEAD, body=b"{}", timeout=5)).body == b"fresh"
    assert p.connections_made == 2
    assert not p._deadlines
    p.close()


async def test_a_cancelled_pipelined_request_fails_the_others_on_its_connection(
    server: ScriptedServer, pool: Callable[..., Http1Pool],
) -> None:
    server.script = [(ok(b"w"), False), None, None]
    p = pool(pipeline=4)
    await _warm(p)
    tasks = [asyncio.create_task(p.request("POST", f"/{i}", head=HEAD, body=b"{}",
                                           timeout=30)) for i in range(2)]
    await asyncio.sleep(0.05)
    tasks[0].cancel()
    with pytest.raises(asyncio.CancelledError):
        await tasks[0]
    with pytest.raises(HttpConnectionError):
        await asyncio.wait_for(tasks[1], 5)
    assert not p._all and not p._idle
    p.close()


def test_pipeline_must_be_positive() -> None:
    with pytest.raises(ValueError, match="pipeline"):
        Http1Pool("http://h", ssl_context=None, pipeline=0)
