"""The HTTP client every other part of the scheduler uses to talk to the API server.

One aiohttp session with a bounded keep-alive pool, a client-side token-bucket rate limiter with
kube-scheduler's ``clientConnection.qps``/``burst`` (watches are long-lived and exempt, as in
client-go), typed errors at the boundary, and bounded retries where a retry is safe: 429 for any
verb (the server did not process the request) and 5xx / connection failures for reads only.
Objects stay plain dicts decoded with orjson.
"""

from __future__ import annotations

import asyncio
import random
import re
import ssl
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import orjson
import structlog

from scheduler.client.connection import ConnectionConfig
from scheduler.client.http1 import Http1Pool, HttpConnectionError
from scheduler.metrics import Children, SchedulerMetrics

log = structlog.get_logger(__name__)

PatchType = Literal["strategic", "merge", "json"]
PATCH_CONTENT_TYPES: dict[str, str] = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}
Sleep = Callable[[float], Awaitable[None]]
# Writes go through the lean HTTP/1.1 pool (http1.py); reads and watches through aiohttp.
_LEAN_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))
# Characters left as they are in a request path (RFC 3986 pchar and "/"; "%" so that an
# already escaped path is not escaped twice).
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
# A path of those characters and letters and digits only (every path the scheduler writes:
# names are DNS labels) is what quote() would return, found with one C call (quote is ~3 us
# of Python, twice per pod).
_NEEDS_QUOTING = re.compile(r"[^A-Za-z0-9/:@!$&'()*+,;=\-._~%]").search


# --- errors ----------------------------------------------------------------------------------


class ApiConnectionError(Exception):
    """The API server could not be reached or the connection broke mid-response."""


class ApiError(Exception):
    """A non-2xx answer.  ``reason`` and ``message`` come from the metav1.Status body if any."""

    def __init__(self, status: int, reason: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    """409 other than AlreadyExists: an optimistic-concurrency conflict or an already-bound pod."""


class AlreadyExists(ApiError):
    pass


class Gone(ApiError):
    """410: the requested resourceVersion (or continue token) is too old; relist."""


class Invalid(ApiError):
    pass


class TooManyRequests(ApiError):
    def __init__(
        self, status: int, reason: str, message: str, body: Any = None, retry_after: float | None = None
    ) -> None:
        super().__init__(status, reason, message, body)
        self.retry_after = retry_after


class ServerError(ApiError):
    pass


_REASON_DEFAULTS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def error_for(status: int, body: Any, *, retry_after: float | None = None) -> ApiError:
    """The typed error for an HTTP status and a (possibly metav1.Status) body."""
    reason = _REASON_DEFAULTS.get(status, "Unknown")
    message = ""
    if isinstance(body, dict):
        reason = str(body.get("reason") or reason)
        message = str(body.get("message") or "")
    elif isinstance(body, str):
        message = body[:500]
    if status == 404:
        return NotFound(status, reason, message, body)
    if status == 409:
        if reason == "AlreadyExists":
            return AlreadyExists(status, reason, message, body)
        return Conflict(status, reason, message, body)
    if status == 410:
        return Gone(status, reason, message, body)
    if status == 429:
        return TooManyRequests(status, reason, message, body, retry_after=retry_after)
    if status == 401:
        return Unauthorized(status, reason, message, body)
    if status == 403:
        return Forbidden(status, reason, message, body)
    if status == 400:
        return BadRequest(status, reason, message, body)
    if status == 422:
        return Invalid(status, reason, message, body)
    if status >= 500:
        return ServerError(status, reason, message, body)
    return ApiError(status, reason, message, body)


@dataclass
class ApiResponse:
    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def raise_for_status(resp: ApiResponse) -> ApiResponse:
    """Return ``resp`` if 2xx, else raise the typed :class:`ApiError`."""
    if resp.ok:
        return resp
    raise error_for(resp.status, resp.body, retry_after=parse_retry_after(resp.headers.get("Retry-After")))


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


# --- paths -----------------------------------------------------------------------------------


def resource_path(
    group_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """``/api/v1/...`` for the core group, ``/apis/<group>/<version>/...`` otherwise."""
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
        if subresource:
            parts.append(subresource)
    elif subresource:
        raise ValueError("subresource needs a name")
    return "/".join(parts)


# --- rate limiting and backoff ---------------------------------------------------------------


class TokenBucket:
    """client-go's token bucket: ``burst`` tokens, refilled at ``qps``; waiters reserve in order.

    Each ``acquire`` takes a token immediately (possibly driving the balance negative) and then
    sleeps for its share of the deficit, so callers are served FIFO without a lock.
    ``qps <= 0`` disables limiting.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock()

    def _advance(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)

    def reserve(self) -> float:
        """Take a token; return how long the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        self._advance()
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def try_acquire(self) -> bool:
        """Take a token only if one is available now."""
        if self.qps <= 0:
            return True
        self._advance()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def full(self) -> bool:
        """Refilled to its burst: as good as a new bucket (a cache of buckets may drop it)."""
        if self.qps <= 0:
            return True
        self._advance()
        return self._tokens >= self.burst

    async def acquire(self) -> float:
        delay = self.reserve()
        if delay > 0:
            await self._sleep(delay)
        return delay


class Backoff:
    """Jittered exponential backoff: ``initial * factor**n`` capped, times ``1 + jitter*U[0,1)``."""

    def __init__(
        self,
        *,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._current = initial

    def next(self) -> float:
        base = self._current
        self._current = min(self.cap, self._current * self.factor)
        return min(self.cap, base * (1.0 + self.jitter * self._rng.random()))

    def reset(self) -> None:
        self._current = self.initial


@dataclass
class RetryPolicy:
    max_retries: int = 4
    initial: float = 0.2
    cap: float = 5.0
    max_retry_after: float = 30.0


# --- the client ------------------------------------------------------------------------------


class ApiClient:
    """Implements ``scheduler.framework.interfaces.ApiClient``; create and close inside a loop."""

    def __init__(
        self,
        connection: ConnectionConfig,
        *,
        qps: float = 50.0,
        burst: int = 100,
        pool_size: int = 100,
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        user_agent: str = "kube-py-scheduler",
        metrics: SchedulerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        write_pipeline: int = 1,
    ) -> None:
        # Checked here, not when the write pool is first made: a bad value would otherwise
        # fail every write of a running scheduler instead of its start.
        if write_pipeline < 1:
            raise ValueError(f"write_pipeline must be at least 1, got {write_pipeline}")
        self.connection = connection
        self._base = connection.host.rstrip("/")
        self.limiter = TokenBucket(qps, burst, clock=clock, sleep=sleep)
        self._pool_size = pool_size
        # Writes of one loop turn pipelined on one connection, up to this many (http1.py).
        self._write_pipeline = write_pipeline
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self.retry = retry or RetryPolicy()
        self._user_agent = user_agent
        self._lean_heads: dict[str | None, str] = {}
        self._bind_results = Children(metrics.bind_requests) if metrics is not None else None
        # client-go's rest_client_requests_total / rest_client_request_duration_seconds: one
        # count and one observation per request sent (retries included), host as in the URL.
        self._rest_host = urlsplit(self._base).netloc
        self._rest_results = (
            Children(metrics.ops.rest_client_requests) if metrics is not None else None)
        self._rest_durations = (
            Children(metrics.ops.rest_client_request_duration) if metrics is not None else None)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._session: aiohttp.ClientSession | None = None
        self._writer: Http1Pool | None = None
        self._closed = False

    # -- session

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise ApiConnectionError("client is closed")
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._pool_size,
                limit_per_host=self._pool_size,
                keepalive_timeout=90.0,
                ssl=self.connection.ssl_context(),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(
                    total=self._request_timeout, sock_connect=self._connect_timeout
                ),
                json_serialize=lambda o: orjson.dumps(o).decode(),
                headers={"User-Agent": self._user_agent},
            )
        return self._session

    def _ensure_writer(self) -> Http1Pool | None:
        """The lean pool for writes (``http1``), or None where aiohttp must do them (a proxy)."""
        if self._writer is None and not self.connection.proxy:
            if self._closed:
                raise ApiConnectionError("client is closed")
            ctx = self.connection.ssl_context()
            self._writer = Http1Pool(
                self._base, ssl_context=ctx if isinstance(ctx, ssl.SSLContext) else None,
                server_hostname=self.connection.tls_server_name, size=self._pool_size,
                connect_timeout=self._connect_timeout, pipeline=self._write_pipeline,
            )
        return self._writer

    async def warm_writes(self, count: int) -> int:
        """Open up to ``count`` of the write pool's connections ahead of the first writes
        (Http1Pool.warm); how many were opened (0 where aiohttp does the writes: a proxy).
        Never raises for a connection that cannot be opened: the first write connects."""
        if self._closed:
            return 0
        writer = self._ensure_writer()
        return await writer.warm(count) if writer is not None else 0

    async def close(self) -> None:
        self._closed = True
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _headers(self, content_type: str | None, accept: str = "application/json") -> dict[str, str]:
        headers = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        auth = self.connection.authorization()
        if auth:
            headers["Authorization"] = auth
        return headers

    def _request_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if self.connection.proxy:
            kw["proxy"] = self.connection.proxy
        if self.connection.tls_server_name:
            kw["server_hostname"] = self.connection.tls_server_name
        return kw

    # -- core request

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        discard_ok_body: bool = False,
    ) -> ApiResponse:
        """Send one request (rate limited, retried where safe); HTTP errors are returned, not raised.

        Raises :class:`ApiConnectionError` when the server cannot be reached (after retries for
        reads). ``discard_ok_body``: a 2xx answer's body is not decoded (``body`` None), for
        callers that never read it (an Event's POST answers the whole Event); an error's body
        is decoded as always.
        """
        method = method.upper()
        idempotent = method in ("GET", "HEAD")
        data: bytes | None
        if body is None:
            data = None
        elif isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = orjson.dumps(body)
        backoff: Backoff | None = None  # made on the first retry (most requests have none)
        attempt = 0
        limiter = self.limiter
        while True:
            attempt += 1
            if limiter.qps > 0:
                await limiter.acquire()
            # Counted here, not in a coroutine of its own around the send (two awaits less
            # in every request's chain): rest_client_request* by the answer's code, or
            # "<error>" when none came.
            started = time.perf_counter() if self._rest_results is not None else 0.0
            try:
                resp = await self._send(method, path, data, params,
                                        content_type if data is not None else None,
                                        discard_ok_body)
            except ApiConnectionError as exc:
                if started:
                    self._count_rest(method, "<error>", started)
                if idempotent and attempt <= self.retry.max_retries:
                    backoff = backoff or self._backoff()
                    delay = backoff.next()
                    log.debug("retrying after connection error", method=method, path=path, attempt=attempt, delay=delay, error=str(exc))
                    await self._sleep(delay)
                    continue
                raise
            if started:
                self._count_rest(method, str(resp.status), started)
            retryable = resp.status == 429 or (idempotent and resp.status >= 500)
            if retryable and attempt <= self.retry.max_retries:
                backoff = backoff or self._backoff()
                delay = backoff.next()
                retry_after = parse_retry_after(resp.headers.get("Retry-After"))
                if retry_after is not None:
                    delay = min(self.retry.max_retry_after, retry_after)
                log.debug("retrying", method=method, path=path, status=resp.status, attempt=attempt, delay=delay)
                await self._sleep(delay)
                continue
            return resp

    def _backoff(self) -> Backoff:
        return Backoff(initial=self.retry.initial, cap=self.retry.cap, jitter=1.0, rng=self._rng)

    def _count_rest(self, method: str, code: str, started: float) -> None:
        assert self._rest_results is not None and self._rest_durations is not None
        self._rest_durations(method, self._rest_host).observe(time.perf_counter() - started)
        self._rest_results(code, method, self._rest_host).inc()

    def _send(
        self,
        method: str,
        path: str,
        data: bytes | None,
        params: Mapping[str, str] | None,
        content_type: str | None,
        discard_ok_body: bool = False,
    ) -> Coroutine[Any, Any, ApiResponse]:
        """The exchange, to be awaited at once: the lean pool's for the methods it sends,
        aiohttp's otherwise (the coroutine of the one that sends, none between)."""
        if method in _LEAN_METHODS:
            writer = self._ensure_writer()
            if writer is not None:
                return self._send_lean(writer, method, path, data, params, content_type,
                                       discard_ok_body)
        return self._send_aiohttp(method, path, data, params, content_type, discard_ok_body)

    async def _send_aiohttp(
        self,
        method: str,
        path: str,
        data: bytes | None,
        params: Mapping[str, str] | None,
        content_type: str | None,
        discard_ok_body: bool,
    ) -> ApiResponse:
        session = self._ensure_session()
        try:
            async with session.request(
                method,
                self._base + path,
                params=dict(params) if params else None,
                data=data,
                headers=self._headers(content_type),
                **self._request_kwargs(),
            ) as resp:
                raw = await resp.read()
                if discard_ok_body and 200 <= resp.status < 300:
                    return ApiResponse(resp.status, None, dict(resp.headers))
                return ApiResponse(resp.status, _decode(raw, resp.headers.get("Content-Type", "")), dict(resp.headers))
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            if isinstance(exc, aiohttp.ClientResponseError):  # pragma: no cover - not raised by request()
                raise
            raise ApiConnectionError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc

    async def _send_lean(
        self,
        writer: Http1Pool,
        method: str,
        path: str,
        data: bytes | None,
        params: Mapping[str, str] | None,
        content_type: str | None,
        discard_ok_body: bool = False,
    ) -> ApiResponse:
        head = self._lean_heads.get(content_type)
        if head is None:
            head = f"User-Agent: {self._user_agent}\r\nAccept: application/json\r\n"
            if content_type:
                head += f"Content-Type: {content_type}\r\n"
            self._lean_heads[content_type] = head
        auth = self.connection.authorization()
        if auth:
            if "\r" in auth or "\n" in auth:
                raise ApiConnectionError(f"{method} {path}: the credentials hold a line break")
            head += f"Authorization: {auth}\r\n"
        target = quote(path, safe=_PATH_SAFE) if _NEEDS_QUOTING(path) else path
        if params:
            target += "?" + urlencode(params)
        try:
            raw = await writer.request(method, target, head=head, body=data,
                                       timeout=self._request_timeout)
        except HttpConnectionError as exc:
            raise ApiConnectionError(f"{method} {path}: {exc}") from exc
        if discard_ok_body and 200 <= raw.status < 300:
            return ApiResponse(raw.status, None, raw.headers)
        return ApiResponse(raw.status, _decode(raw.body, raw.headers.get("Content-Type", "")),
                           raw.headers)

    # -- helpers (raise typed errors)

    async def get(self, path: str, *, params: Mapping[str, str] | None = None) -> Any:
        return raise_for_status(await self.request("GET", path, params=params)).body

    async def list_page(
        self,
        path: str,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One page of a LIST (``limit``/``continue``); the body is the List object."""
        q = dict(params or {})
        if limit:
            q["limit"] = str(limit)
        if continue_token:
            q["continue"] = continue_token
        body = raise_for_status(await self.request("GET", path, params=q)).body
        if not isinstance(body, dict):
            raise ApiError(200, "InvalidResponse", f"LIST {path} did not return an object", body)
        return body

    async def create(self, path: str, body: Mapping[str, Any], *, params: Mapping[str, str] | None = None) -> Any:
        return raise_for_status(await self.request("POST", path, body=dict(body), params=params)).body

    async def create_unread(self, path: str, body: Mapping[str, Any]) -> None:
        """``create`` for a caller that does not read what the server answers (the Event
        recorder): the same request and the same typed error of a refusal, without decoding
        the created object."""
        raise_for_status(await self.request(
            "POST", path, body=body if type(body) is dict else dict(body), discard_ok_body=True))

    async def patch(
        self,
        path: str,
        body: Any,
        *,
        patch_type: PatchType = "strategic",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        ct = PATCH_CONTENT_TYPES.get(patch_type)
        if ct is None:
            raise ValueError(f"unknown patch_type {patch_type!r}")
        return raise_for_status(await self.request("PATCH", path, body=body, params=params, content_type=ct)).body

    async def update(self, path: str, body: Mapping[str, Any]) -> Any:
        return raise_for_status(await self.request("PUT", path, body=dict(body))).body

    async def delete(
        self, path: str, *, body: Mapping[str, Any] | None = None, params: Mapping[str, str] | None = None
    ) -> Any:
        return raise_for_status(
            await self.request("DELETE", path, body=dict(body) if body is not None else None, params=params)
        ).body

    async def bind(self, pod: Mapping[str, Any], node_name: str) -> ApiResponse:
        """POST the v1.Binding for ``pod`` (with its uid as precondition); raises on non-2xx.

        409 → :class:`Conflict` (already bound), 404 → :class:`NotFound` (pod gone).
        """
        meta = pod.get("metadata") or {}
        name = meta.get("name")
        namespace = meta.get("namespace") or "default"
        if not name:
            raise ValueError("bind: pod has no metadata.name")
        binding_meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if meta.get("uid"):
            binding_meta["uid"] = meta["uid"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": binding_meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        path = resource_path("v1", "pods", namespace, name, "binding")
        try:
            resp = await self.request("POST", path, body=binding)
        except ApiConnectionError:
            self._count_bind("error")
            raise
        self._count_bind(f"{resp.status // 100}xx")
        return raise_for_status(resp)

    def _count_bind(self, result: str) -> None:
        if self._bind_results is not None:
            self._bind_results(result).inc()

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Any:
        """Strategic-merge patch of ``pods/{name}/status``; returns the updated pod."""
        return await self.patch(resource_path("v1", "pods", namespace, name, "status"), dict(patch))

    # -- watch

    async def watch(
        self,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        read_timeout: float | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Stream watch events (``{"type", "object"}``) until the server closes the stream.

        Not rate limited.  A non-200 answer raises the typed :class:`ApiError` (410 → Gone); a
        broken connection raises :class:`ApiConnectionError`.  Close the iterator (``aclose``)
        to stop early.
        """
        q = dict(params or {})
        q["watch"] = "true"
        if read_timeout is None:
            server_timeout = float(q.get("timeoutSeconds", "0") or 0)
            read_timeout = (server_timeout + 60.0) if server_timeout > 0 else 900.0
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout, sock_read=read_timeout)
        session = self._ensure_session()
        started = time.perf_counter()
        try:
            async with session.get(
                self._base + path,
                params=q,
                headers=self._headers(None),
                timeout=timeout,
                **self._request_kwargs(),
            ) as resp:
                if self._rest_results is not None:  # counted when the answer's head arrives
                    self._count_rest("GET", str(resp.status), started)
                    started = 0.0
                if resp.status != 200:
                    raw = await resp.read()
                    raise error_for(
                        resp.status,
                        _decode(raw, resp.headers.get("Content-Type", "")),
                        retry_after=parse_retry_after(resp.headers.get("Retry-After")),
                    )
                parser = WatchStreamParser()
                async for chunk in resp.content.iter_any():
                    for event in parser.feed(chunk):
                        yield event
                for event in parser.finish():
                    yield event
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            if self._rest_results is not None and started:
                self._count_rest("GET", "<error>", started)
            raise ApiConnectionError(f"WATCH {path}: {type(exc).__name__}: {exc}") from exc


class WatchStreamParser:
    """Splits a newline-delimited JSON byte stream into objects, across arbitrary chunk borders."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        buf = self._buf
        buf.extend(chunk)
        out: list[dict[str, Any]] = []
        start = 0
        find = buf.find
        # Each line is decoded from a view of the buffer (no copy of the event's bytes; JSON
        # allows the surrounding whitespace), the view released before the buffer shrinks.
        with memoryview(buf) as view:
            while True:
                nl = find(b"\n", start)
                if nl < 0:
                    break
                with view[start:nl] as line:
                    start = nl + 1
                    try:
                        obj = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        raw = bytes(line).strip()
                        if not raw:
                            continue  # a blank line (a keep-alive)
                        obj = self._parse(raw)  # raises, naming the line
                    if type(obj) is not dict:
                        obj = self._parse(bytes(line).strip())  # raises: not an object
                out.append(obj)
        if start:
            del buf[:start]
        return out

    def finish(self) -> list[dict[str, Any]]:
        line = bytes(self._buf).strip()
        self._buf.clear()
        return [self._parse(line)] if line else []

    @staticmethod
    def _parse(line: bytes) -> dict[str, Any]:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ApiConnectionError(f"malformed watch event: {line[:200]!r}") from exc
        if not isinstance(obj, dict):
            raise ApiConnectionError(f"malformed watch event: {line[:200]!r}")
        return obj


def _decode(raw: bytes, content_type: str) -> Any:
    if not raw:
        return None
    if "json" in content_type or raw[:1] in (b"{", b"["):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return raw.decode("utf-8", errors="replace")
