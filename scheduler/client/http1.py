"""A lean HTTP/1.1 keep-alive client for the API server writes on the per-pod path.

Every scheduled pod costs two writes, the pods/binding POST and the ``Scheduled`` Event POST
(a failed one a condition PATCH and a FailedScheduling Event). aiohttp's general-purpose
request machinery (URL objects, the payload registry, header multidicts, tracing hooks,
per-request timer contexts) cost ~160 us of CPU per request in this process, so two of them
were about 40 % of the daemon's per-pod work outside the plugins. Writes need none of it:
a small JSON body to one origin, answered with a Content-Length or chunked body. This module
sends them over its own bounded pool of keep-alive connections (plain or TLS) built on
asyncio protocols. Reads (GET pages that can be large and gzip-encoded) and watches
(streams) stay on aiohttp, as does everything behind a proxy.

Each request is one ``send`` (and its answer one read), and on loopback a ``send`` runs
the receiver's TCP path too: a fifth of the scheduler's samples in a floor run. With
``pipeline`` > 1 the requests of one loop turn (the binding tasks a run of cycles started,
the Event senders their answers woke) are written together on one connection, in one
``send``, and their answers read in order (HTTP/1.1 pipelining).

Failures raise :class:`HttpConnectionError` (the caller maps it to its own connection error,
as it does aiohttp's): a connection that breaks or times out mid-request is dropped, never
reused, and a write is not retried here (the server may have applied it).
"""

from __future__ import annotations

import asyncio
import math
import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

from scheduler.client.slots import Slots

# A response head larger than this is not an API server talking.
MAX_HEAD_BYTES = 64 * 1024
# An idle keep-alive connection older than this is closed instead of reused: the server
# may have timed it out, and a write sent into a closing connection fails.
DEFAULT_IDLE_SECONDS = 60.0
# A request whose deadline is this close when the timer runs has timed out.
_DUE_SLACK = 1e-3


class HttpConnectionError(Exception):
    """The server could not be reached, broke the connection, answered something that is
    not HTTP/1.x, or did not answer in time."""


@dataclass(frozen=True, slots=True)
class RawResponse:
    status: int
    headers: dict[str, str]  # as the server spelled the names; a repeated name: the last
    body: bytes


@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go: scheme, host and port of a base URL, and its path prefix."""

    tls: bool
    host: str
    port: int
    host_header: str
    prefix: str

    @classmethod
    def parse(cls, base_url: str) -> Origin:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        netloc = parts.netloc.rpartition("@")[2]  # never send userinfo in Host
        return cls(tls, parts.hostname, port, netloc, parts.path.rstrip("/"))


class _Response:
    """Incremental parser of one response on a connection."""

    __slots__ = ("_chunks", "_head_only", "_length", "_mode", "headers", "keep_alive",
                 "status")

    def __init__(self, *, head_only: bool) -> None:
        self._head_only = head_only
        self.status = 0
        self.headers: dict[str, str] = {}
        self.keep_alive = False
        self._mode = ""  # "" before the head, then "length", "chunked" or "close"
        self._length = 0
        self._chunks: list[bytes] = []

    def feed(self, buf: bytearray, *, eof: bool) -> bytes | None:
        """Consume what ``buf`` holds of this response; the body once it is complete."""
        while not self._mode:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise HttpConnectionError("response head too large")
                return None
            head = bytes(buf[:end]).decode("latin-1")
            del buf[: end + 4]
            self._parse_head(head)
        if self._mode == "length":
            if len(buf) < self._length:
                return None
            body = bytes(buf[: self._length])
            del buf[: self._length]
            return body
        if self._mode == "chunked":
            return self._feed_chunked(buf)
        if not eof:  # "close": the body runs to the end of the connection
            return None
        body = bytes(buf)
        buf.clear()
        return body

    def _parse_head(self, head: str) -> None:
        lines = head.split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise HttpConnectionError(f"not an HTTP/1.x response: {lines[0][:100]!r}")
        status = int(code)
        if 100 <= status < 200:
            return  # an interim response (100 Continue): the real one follows
        headers: dict[str, str] = {}
        lowered: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise HttpConnectionError(f"malformed response header: {line[:100]!r}")
            name, value = name.strip(), value.strip()
            headers[name] = value
            lowered[name.lower()] = value
        self.status, self.headers = status, headers
        self.keep_alive = (version == "HTTP/1.1"
                           and lowered.get("connection", "").lower() != "close")
        if self._head_only or status in (204, 304):
            self._mode, self._length = "length", 0
        elif "chunked" in lowered.get("transfer-encoding", "").lower():
            self._mode = "chunked"
        elif "content-length" in lowered:
            try:
                self._length = int(lowered["content-length"])
            except ValueError:
                raise HttpConnectionError("malformed Content-Length") from None
            if self._length < 0:
                raise HttpConnectionError("malformed Content-Length")
            self._mode = "length"
        else:
            self._mode, self.keep_alive = "close", False

    def _feed_chunked(self, buf: bytearray) -> bytes | None:
        while True:
            line_end = buf.find(b"\r\n")
            if line_end < 0:
                return None
            try:
                size = int(bytes(buf[:line_end]).split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise HttpConnectionError("malformed chunk size") from None
            if size == 0:
                # Then trailers (ignored), ended by an empty line.
                if buf[line_end + 2: line_end + 4] == b"\r\n":
                    del buf[: line_end + 4]
                else:
                    trailers_end = buf.find(b"\r\n\r\n", line_end + 2)
                    if trailers_end < 0:
                        return None
                    del buf[: trailers_end + 4]
                body = b"".join(self._chunks)
                self._chunks = []
                return body
            start = line_end + 2
            if len(buf) < start + size + 2:
                return None
            self._chunks.append(bytes(buf[start: start + size]))
            del buf[: start + size + 2]


class _Connection(asyncio.Protocol):
    """One keep-alive connection: its requests answered in the order they were written
    (one at a time, or several pipelined), their answers parsed in that order."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.users = 0  # requests on it not yet answered (or failed)
        self._buf = bytearray()
        # Written (or to be written), not yet answered: first to answer first.
        self._exchanges: deque[tuple[_Response, asyncio.Future[RawResponse]]] = deque()
        self._out: list[bytes] = []  # requests of this loop turn not yet written
        self.unflushed = 0  # how many (read per request: an attribute, not a property)

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # No isinstance check: uvloop's TCP/SSL transports implement asyncio.Transport's
        # methods without subclassing it, and an assertion here (raised inside the loop's
        # callback, so only logged) left the connection without a transport: its first
        # send() then failed. A stream transport is all create_connection ever hands us.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._exchanges:
            self._advance(eof=False)

    def eof_received(self) -> bool:
        if self._exchanges:
            self._advance(eof=True)
        # The transport closes now, connection_lost comes a loop turn later: an idle
        # connection the server (or a load balancer) closed is not to be reused meanwhile.
        self.closed = True
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._exchanges:
            self._advance(eof=True)
        self._fail(HttpConnectionError(
            f"connection closed by the server{f': {exc}' if exc else ''}"))

    # -- exchanges

    def send(self, data: bytes, *, head_only: bool, defer: bool = False
             ) -> asyncio.Future[RawResponse]:
        """Write one request (``defer``: with the others of this loop turn, in one write
        once the turn is over); its answer's future."""
        if self.transport is None or self.transport.is_closing():
            raise HttpConnectionError("connection is not open")
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[RawResponse] = loop.create_future()
        if not self._exchanges:
            self._buf.clear()  # nothing may arrive unasked; a stray byte would corrupt the parse
        self._exchanges.append((_Response(head_only=head_only), waiter))
        self.users += 1
        if not defer:
            self.transport.write(data)
        else:
            if not self._out:
                loop.call_soon(self.flush)
            self._out.append(data)
            self.unflushed += 1
        return waiter

    def flush(self) -> None:
        """Write the deferred requests at once: one ``send`` for all of them."""
        out, self._out = self._out, []
        self.unflushed = 0
        if not out:
            return
        if self.transport is None or self.transport.is_closing():
            self._fail(HttpConnectionError("connection closed before its requests were sent"))
            return
        self.transport.write(out[0] if len(out) == 1 else b"".join(out))

    def _advance(self, *, eof: bool) -> None:
        exchanges = self._exchanges
        while exchanges:
            response, waiter = exchanges[0]
            try:
                body = response.feed(self._buf, eof=eof)
            except HttpConnectionError as exc:
                self._fail(exc)
                self.abort()
                return
            if body is None:
                if eof:
                    self._fail(HttpConnectionError("connection closed mid-response"))
                return
            exchanges.popleft()
            if not waiter.done():
                waiter.set_result(RawResponse(response.status, response.headers, body))
            if not response.keep_alive:
                self.close()
                # The server closes after this answer: what was pipelined behind it was
                # not answered (and may not have been read): it fails, never retried here.
                self._fail(HttpConnectionError("connection closed by the server before "
                                               "answering a pipelined request"))
                return
        if self._buf:
            self.close()  # extra bytes after the answers: not a connection to reuse

    def _fail(self, exc: Exception) -> None:
        exchanges, self._exchanges = self._exchanges, deque()
        self._out = []
        self.unflushed = 0
        for _, waiter in exchanges:
            if not waiter.done():
                waiter.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Http1Pool:
    """Keep-alive HTTP/1.1 connections to one origin, at most ``size`` in use at once.

    ``pipeline`` > 1: the requests made in one turn of the event loop (the binding tasks
    and Event senders a burst of cycles woke) are written together, up to ``pipeline`` of
    them on one connection in one ``send``, answered in order (HTTP/1.1 pipelining); a
    connection is reused once all its answers are in. Fewer system calls on both sides;
    but a server that answers a connection's requests one after the other (Go's net/http,
    so kube-apiserver over HTTP/1.1) then serves them one after the other too, and one
    request that fails its connection (a timeout, a cancel, a close) fails the others
    written with it (an error as any broken connection's, never retried here)."""

    def __init__(
        self,
        base_url: str,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        size: int = 100,
        connect_timeout: float = 10.0,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        pipeline: int = 1,
    ) -> None:
        if pipeline < 1:
            raise ValueError(f"pipeline must be at least 1, got {pipeline}")
        self.origin = Origin.parse(base_url)
        if self.origin.tls and ssl_context is None:
            raise ValueError("an https origin needs an SSL context")
        self._ssl = ssl_context if self.origin.tls else None
        self._server_hostname = (server_hostname or self.origin.host) if self.origin.tls else None
        self._size = max(1, size)
        self._slots = Slots(self._size, what="pool size")
        self._connect_timeout = connect_timeout
        self._idle_seconds = idle_seconds
        self._clock = clock
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._closed = False
        # The requests in flight by their answer's future: (deadline, timeout) on the loop's
        # clock.  One timer, armed for the earliest deadline, expires the late ones (a
        # TimerHandle per request, made and cancelled, was ~2 % of a pod's CPU).
        self._deadlines: dict[asyncio.Future[RawResponse], tuple[float, float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        # Up to this many requests made in one loop turn go out pipelined on one connection,
        # in one write (1: one request per connection at a time, each written at once).
        self._pipeline = pipeline
        self._turn: _Connection | None = None  # the connection this turn's requests join
        self.connections_made = 0  # observability (tests)

    async def request(self, method: str, target: str, *, head: str, body: bytes | None,
                      timeout: float) -> RawResponse:
        """Send ``method target`` with the header lines ``head`` (each ending in CRLF, no
        Host or Content-Length) and ``body``; the whole exchange within ``timeout``."""
        data = (f"{method} {self.origin.prefix}{target} HTTP/1.1\r\n"
                f"Host: {self.origin.host_header}\r\n{head}"
                f"Content-Length: {len(body) if body else 0}\r\n\r\n").encode("latin-1")
        if body:
            data += body
        loop = asyncio.get_running_loop()
        slots = self._slots
        pipeline = self._pipeline
        conn = self._turn
        if conn is None or conn.closed or not 0 < conn.unflushed < pipeline:
            # A connection of its own (pipelining: the first of this turn's requests): a
            # slot of the pool's, held while the connection has requests on it.
            if not slots.try_take():
                await slots.take()
            try:
                conn = self._reuse() or await self._connect()
            except BaseException:
                slots.give()
                raise
            if pipeline > 1:
                self._turn = conn
        # else: behind this turn's other requests on its connection, in the same write
        try:
            waiter = conn.send(data, head_only=method == "HEAD", defer=pipeline > 1)
        except HttpConnectionError:
            conn.abort()
            self._all.discard(conn)
            if not conn.users:
                slots.give()
            raise
        deadline = loop.time() + timeout
        deadlines = self._deadlines
        deadlines[waiter] = (deadline, timeout)
        if deadline < self._timer_at:
            self._arm(loop, deadline)
        try:
            response = await waiter
        except BaseException:
            # Cancelled, timed out or broken: the connection's state is unknown (the
            # requests pipelined with this one on it fail with it).
            conn.abort()
            self._all.discard(conn)
            raise
        finally:
            del deadlines[waiter]
            conn.users -= 1
            if not conn.users:
                slots.give()
        if not conn.users:
            self._release(conn)
        return response

    def _reuse(self) -> _Connection | None:
        """An idle connection still fit for a request, if any (no await: most requests)."""
        if self._closed:
            raise HttpConnectionError("client is closed")
        now = self._clock()
        while self._idle:
            conn = self._idle.pop()
            if (not conn.closed and now - conn.idle_since < self._idle_seconds
                    and conn.transport is not None and not conn.transport.is_closing()):
                return conn
            conn.close()
            self._all.discard(conn)
        return None

    async def warm(self, count: int) -> int:
        """Open up to ``count`` connections (no more than the pool's size) and leave them
        idle, ready for the first requests; how many were opened.

        For the daemon's start: opened while the informers sync, the first binding finds a
        connection (and its TLS session) ready instead of paying the connect. A connection
        that cannot be opened is not an error here: the first request connects (or fails)
        as it would have. A warmed connection the server closes before its first request
        is dropped by ``_reuse`` like any idle one. ``close`` closes them all."""
        count = min(count, self._size)
        if self._closed or count < 1:
            return 0
        made = await asyncio.gather(*(self._connect() for _ in range(count)),
                                    return_exceptions=True)
        opened = 0
        for conn in made:
            if isinstance(conn, _Connection):
                self._release(conn)  # into the idle list (closed if the pool closed meanwhile)
                opened += not conn.closed
            elif not isinstance(conn, HttpConnectionError):
                raise conn  # not a connection failure: a bug, not to be hidden
        return opened

    async def _connect(self) -> _Connection:
        if self._closed:
            raise HttpConnectionError("client is closed")
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(
                _Connection, self.origin.host, self.origin.port, ssl=self._ssl,
                server_hostname=self._server_hostname), self._connect_timeout)
        except (OSError, ssl.SSLError, asyncio.TimeoutError) as exc:
            raise HttpConnectionError(
                f"cannot connect to {self.origin.host_header}: {type(exc).__name__}: {exc}"
            ) from exc
        self.connections_made += 1
        self._all.add(conn)
        return conn

    def _release(self, conn: _Connection) -> None:
        if conn.closed or self._closed:
            conn.close()
            self._all.discard(conn)
            return
        conn.idle_since = self._clock()
        self._idle.append(conn)

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(at, self._expire_late, loop)

    def _expire_late(self, loop: asyncio.AbstractEventLoop) -> None:
        """Fail the requests past their deadline; arm the timer for the next deadline."""
        self._timer, self._timer_at = None, math.inf
        # The loop runs a timer up to its clock's resolution early: within that, it is due.
        now = loop.time() + _DUE_SLACK
        following = math.inf
        for waiter, (deadline, timeout) in list(self._deadlines.items()):
            if deadline <= now:
                _expire(waiter, timeout)
            elif deadline < following:
                following = deadline
        if following < math.inf and not self._closed:
            self._arm(loop, following)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_at = None, math.inf
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()


def _expire(waiter: asyncio.Future[RawResponse], timeout: float) -> None:
    if not waiter.done():
        waiter.set_exception(HttpConnectionError(f"no response within {timeout:g} s"))
