"""The measured pods' creator: a process of its own, as upstream scheduler_perf's is.

Upstream creates the measured pods while the scheduler runs, from a client that is not the
scheduler; so the scheduler pays those pods' watch events, but not the cost of creating
them.  Creating them from the bench's own process would bill the JSON encoding and the
POSTs to the scheduler's CPU figures, so the bench runs this module in a child process::

    python -m scheduler.bench.creator --kubeconfig FILE --bodies PODS.jsonl [--concurrency N]

The protocol, one JSON object a line on stdout:

1. read the bodies (one pod a line, created in its ``metadata.namespace``), encode them,
   open ``N`` connections to the API server (a ``/version`` GET each), then print
   ``{"ready": <pods>}``;
2. wait for one line on stdin (the bench writes it once the scheduler has synced);
3. create every pod from ``N`` concurrent connections, then print ``{"created", "failed",
   "error", "started", "finished"}``: how many POSTs succeeded or failed, the first failure,
   and ``time.monotonic()`` just before the first POST and just after the last one.  Linux's
   monotonic clock is one clock for every process of the machine, so the bench compares
   these with its own bind times.  The exit code is 0 when every pod was created.

:class:`CreatorProcess` is the bench's side of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import ssl as ssl_module
import sys
import tempfile
import time
from collections import deque
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson

READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class CreatorReport:
    """What the creator printed when it was done."""

    created: int
    failed: int
    error: str
    started: float  # time.monotonic() just before the first POST
    finished: float  # just after the last response
    cpu: float | None = None  # the creator's user + system CPU seconds from started to finished

    @property
    def rate(self) -> float:
        return self.created / max(self.finished - self.started, 1e-9)


def pod_path(pod: dict[str, Any]) -> str:
    namespace = (pod.get("metadata") or {}).get("namespace")
    if not namespace:
        raise ValueError(f"pod {pod.get('metadata', {}).get('name')!r}: metadata.namespace "
                         "is required (the creator POSTs each pod into its namespace)")
    return f"/api/v1/namespaces/{namespace}/pods"


def encode_bodies(lines: Iterable[bytes]) -> list[tuple[str, bytes]]:
    """(collection path, request body) per non-empty line; the bodies are re-encoded once
    here, before the clock starts."""
    out: list[tuple[str, bytes]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            pod = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"bodies line {number}: not JSON: {exc}") from None
        if not isinstance(pod, dict):
            raise ValueError(f"bodies line {number}: a pod object expected, "
                             f"got {type(pod).__name__}")
        try:
            out.append((pod_path(pod), orjson.dumps(pod)))
        except ValueError as exc:
            raise ValueError(f"bodies line {number}: {exc}") from None
    return out


async def create_bodies(client: Any, bodies: Sequence[tuple[str, bytes]],
                        concurrency: int) -> CreatorReport:
    """POST every body from ``concurrency`` workers; failures are counted, not raised."""
    from scheduler.client.api import ApiConnectionError

    created = failed = 0
    error = ""
    queue = iter(bodies)

    async def worker() -> None:
        nonlocal created, failed, error
        for path, body in queue:  # one shared iterator: each body is taken once
            try:
                resp = await client.request("POST", path, body=body)
                ok, why = resp.ok, f"POST {path}: HTTP {resp.status} {resp.body}"
            except ApiConnectionError as exc:
                ok, why = False, str(exc)
            if ok:
                created += 1
            else:
                failed += 1
                error = error or why[:500]

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(bodies))))))
    return CreatorReport(created=created, failed=failed, error=error, started=started,
                         finished=time.monotonic())


# --------------------------------------------------------------------------- pipelined POSTs
#
# The creator shares the machine's cores with the sandbox and the scheduler, so every us of CPU
# it spends per pod is taken from them.  It stays a plain HTTP/1.1 client of the API server,
# but pays as little as a client can: every request's bytes (request line, Host,
# Authorization, Content-Type/Length, body) are built before the clock; they are written over
# keep-alive connections with up to ``depth`` requests in flight on each (HTTP/1.1
# pipelining: the server answers them in order); of each response only the status line and
# Content-Length are read, and the body is kept only for the first failure.

USER_AGENT = "kube-py-scheduler-bench-creator"
DEFAULT_DEPTH = 8
# A response head larger than this is not an API server talking.
MAX_HEAD_BYTES = 64 * 1024
ERROR_CHARS = 500


@dataclass(frozen=True)
class Target:
    """Where the pods go and how the creator authenticates: the kubeconfig's server, its
    bearer token (an ``Authorization`` header) or client certificate (in ``ssl``)."""

    host: str
    port: int
    host_header: str
    prefix: str  # the server URL's path, before every request path
    authorization: str | None
    ssl: ssl_module.SSLContext | None
    server_hostname: str | None

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str) -> Target:
        from scheduler.client.connection import load_connection
        from scheduler.client.http1 import Origin

        connection = load_connection(kubeconfig=kubeconfig)
        if connection.proxy:
            raise ValueError(f"kubeconfig {kubeconfig}: the bench creator does not go "
                             "through a proxy")
        origin = Origin.parse(connection.host)
        auth = connection.authorization()
        if auth is not None and ("\r" in auth or "\n" in auth):
            raise ValueError(f"kubeconfig {kubeconfig}: the credentials hold a line break")
        context = connection.ssl_context() if origin.tls else None
        return cls(host=origin.host, port=origin.port, host_header=origin.host_header,
                   prefix=origin.prefix, authorization=auth,
                   ssl=context if isinstance(context, ssl_module.SSLContext) else None,
                   server_hostname=((connection.tls_server_name or origin.host)
                                    if origin.tls else None))

    def head(self, method: str, path: str, *, content_length: int | None = None) -> bytes:
        lines = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self.host_header}",
                 f"User-Agent: {USER_AGENT}", "Accept: application/json"]
        if self.authorization:
            lines.append(f"Authorization: {self.authorization}")
        if content_length is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {content_length}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def post(self, path: str, body: bytes) -> bytes:
        """The whole request: head and body, ready to write."""
        return self.head("POST", path, content_length=len(body)) + body


class _Batch:
    """Requests shared by the connections (each taken once, in order), and their outcome."""

    def __init__(self, requests: Sequence[bytes], labels: Sequence[str], *,
                 clock: Any = time.monotonic) -> None:
        self.requests = requests
        self.labels = labels  # "POST <path>" per request, for the first error only
        self.next = 0
        self.created = self.failed = 0
        self.error = ""
        self.clock = clock
        self.finished = 0.0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.connections: list[_Pipeline] = []

    def take(self, count: int) -> range:
        start = self.next
        self.next = min(start + count, len(self.requests))
        return range(start, self.next)

    def answered(self, index: int, status: int, body: bytes) -> None:
        if 200 <= status < 300:
            self.created += 1
        else:
            self.fail(index, f"HTTP {status} {body.decode('utf-8', 'replace')}")
        if self.created + self.failed == len(self.requests):
            self._finish()

    def fail(self, index: int, why: str) -> None:
        self.failed += 1
        if not self.error:
            self.error = f"{self.labels[index]}: {why}"[:ERROR_CHARS]
        if self.created + self.failed == len(self.requests):
            self._finish()

    def lost(self, why: str) -> None:
        """A connection broke: when none is left, the requests nobody sent fail too."""
        if any(c.open for c in self.connections):
            return
        for index in self.take(len(self.requests)):
            self.fail(index, why)

    def _finish(self) -> None:
        if not self.done.done():
            self.finished = self.clock()
            self.done.set_result(None)


class _Pipeline(asyncio.Protocol):
    """One keep-alive connection: up to ``depth`` requests written ahead of their responses,
    refilled as responses come back (all the refills of one read in one write)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.batch: _Batch | None = None
        self.transport: asyncio.Transport | None = None
        self.open = False
        self.in_flight: deque[int] = deque()  # request indices, in the order sent
        self.buf = bytearray()
        self.status = 0
        self.body_left = -1  # bytes of the current response's body still to come; -1: a head

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.open = True

    def start(self, batch: _Batch) -> None:
        self.batch = batch
        self._send(self.depth)

    def _send(self, count: int) -> None:
        assert self.batch is not None and self.transport is not None
        if not self.open:
            return
        indices = self.batch.take(count)
        if indices:
            self.in_flight.extend(indices)
            requests = self.batch.requests
            self.transport.write(b"".join([requests[i] for i in indices]))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = answered = 0
        batch = self.batch
        while True:
            if self.body_left < 0:
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    if len(buf) - pos > MAX_HEAD_BYTES:
                        return self._broken("a response head too large")
                    break
                if buf[pos:pos + 7] != b"HTTP/1." or not buf[pos + 9:pos + 12].isdigit():
                    return self._broken(f"not an HTTP/1.x response: {bytes(buf[pos:pos + 40])!r}")
                self.status = int(buf[pos + 9:pos + 12])
                length = _content_length(buf, pos, end)
                if length is None:
                    return self._broken("a response without Content-Length")
                pos, self.body_left = end + 4, length
            if len(buf) - pos < self.body_left:
                break
            body_end = pos + self.body_left
            failed = not 200 <= self.status < 300
            body = bytes(buf[pos:body_end]) if failed and batch is not None and \
                not batch.error else b""
            pos, self.body_left = body_end, -1
            if not self.in_flight:
                return self._broken("a response to no request")
            index = self.in_flight.popleft()
            answered += 1
            if batch is not None:
                batch.answered(index, self.status, body)
        if pos:
            del buf[:pos]
        # Refill once half the window is answered: one write for several requests.
        if answered and batch is not None and len(self.in_flight) <= self.depth // 2:
            self._send(self.depth - len(self.in_flight))

    def _broken(self, why: str) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.connection_lost(ConnectionError(why))

    def eof_received(self) -> bool | None:
        return False  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.open:
            return
        self.open = False
        why = f"connection lost: {exc}" if exc is not None else "the server closed the connection"
        batch, in_flight = self.batch, list(self.in_flight)
        self.in_flight.clear()
        if batch is not None:
            for index in in_flight:
                batch.fail(index, why)
            batch.lost(why)


def _content_length(buf: bytearray, start: int, end: int) -> int | None:
    at = buf.find(b"\r\nContent-Length:", start, end)
    if at < 0:  # header names are case-insensitive; aiohttp's spelling is the one above
        at = bytes(buf[start:end]).lower().find(b"\r\ncontent-length:")
        if at < 0:
            return None
        at += start
    line_end = buf.find(b"\r", at + 17, end + 2)
    try:
        return int(buf[at + 17:line_end])
    except ValueError:
        return None


class PipelinedCreator:
    """``connections`` keep-alive connections to ``target``, each with up to ``depth``
    requests in flight; :meth:`open` connects them and checks each with a ``/version`` GET
    (so the measured window holds no handshake), :meth:`create` POSTs the bodies."""

    def __init__(self, target: Target, *, connections: int, depth: int = DEFAULT_DEPTH) -> None:
        if connections < 1 or depth < 1:
            raise ValueError("connections and depth must be positive")
        self.target = target
        self.connections = connections
        self.depth = depth
        self._pipes: list[_Pipeline] = []

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(self.connections):
            _, pipe = await loop.create_connection(
                lambda: _Pipeline(self.depth), self.target.host, self.target.port,
                ssl=self.target.ssl, server_hostname=self.target.server_hostname)
            self._pipes.append(pipe)
        probe = self.target.head("GET", "/version")
        for pipe in self._pipes:
            batch = _Batch([probe], ["GET /version"])
            batch.connections = [pipe]
            pipe.start(batch)
            await batch.done
            if batch.failed:
                raise ConnectionError(f"{self.target.host}:{self.target.port}: {batch.error}")

    async def create(self, bodies: Sequence[tuple[str, bytes]]) -> CreatorReport:
        requests = [self.target.post(path, body) for path, body in bodies]
        labels = [f"POST {path}" for path, _ in bodies]
        batch = _Batch(requests, labels)
        batch.connections = list(self._pipes)
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        started = time.monotonic()
        if requests:
            for pipe in self._pipes:
                pipe.start(batch)
            batch.lost("no connection is open")
            await batch.done
        else:
            batch.finished = started
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return CreatorReport(created=batch.created, failed=batch.failed, error=batch.error,
                             started=started, finished=batch.finished,
                             cpu=round(usage.ru_utime - usage0.ru_utime
                                       + usage.ru_stime - usage0.ru_stime, 6))

    def close(self) -> None:
        for pipe in self._pipes:
            if pipe.transport is not None:
                pipe.transport.close()
        self._pipes.clear()


async def _main(args: argparse.Namespace) -> int:
    with open(args.bodies, "rb") as f:
        bodies = encode_bodies(f)
    creator = PipelinedCreator(Target.from_kubeconfig(args.kubeconfig),
                               connections=args.concurrency, depth=args.depth)
    try:
        try:
            await creator.open()
        except OSError as exc:
            raise ValueError(f"cannot reach the API server: {exc}") from None
        print(json.dumps({"ready": len(bodies)}), flush=True)
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(None, sys.stdin.readline):
            return 1  # the bench went away before starting us
        report = await creator.create(bodies)
    finally:
        creator.close()
    print(json.dumps(report.__dict__), flush=True)
    return 0 if report.failed == 0 else 1


def run_loop(main: Coroutine[Any, Any, int], *, loop: str) -> int:
    """``main`` on uvloop's event loop (``loop="uvloop"``, or ``"auto"`` when it is
    installed: it costs the creator less CPU per request) or on asyncio's."""
    if loop != "asyncio":
        try:
            import uvloop
        except ImportError:
            if loop == "uvloop":
                raise ValueError("--loop uvloop: uvloop is not installed "
                                 "(pip install 'kube-py-scheduler[bench]')") from None
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(main)
    return asyncio.run(main)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scheduler.bench.creator",
                                description=(__doc__ or "").split("\n")[0])
    p.add_argument("--kubeconfig", required=True, help="the API server to create pods in")
    p.add_argument("--bodies", required=True, help="pods to create, one JSON object a line")
    p.add_argument("--concurrency", type=int, default=32,
                   help="keep-alive connections (default %(default)s)")
    p.add_argument("--depth", type=int, default=DEFAULT_DEPTH,
                   help="requests in flight on each connection (HTTP/1.1 pipelining; "
                        "default %(default)s)")
    p.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                   help="event loop: uvloop when installed (the bench extra), else asyncio's "
                        "(default %(default)s)")
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.concurrency < 1:
        p.error("--concurrency must be positive")
    if args.depth < 1:
        p.error("--depth must be positive")
    from scheduler.logging import configure_logging

    configure_logging(fmt="console", level="warning")  # stderr: stdout is the protocol
    try:
        return run_loop(_main(args), loop=args.loop)
    except ValueError as exc:
        print(f"bench creator: {exc}", file=sys.stderr)
        return 2


class CreatorProcess:
    """The bench's side: write the bodies, start the child and wait until it is ready
    (:meth:`start`), release it (:meth:`go`), collect its report (:meth:`result`)."""

    def __init__(self, proc: asyncio.subprocess.Process, workdir: tempfile.TemporaryDirectory[str],
                 count: int) -> None:
        self._proc = proc
        self._workdir = workdir
        self.count = count

    @property
    def pid(self) -> int:
        return self._proc.pid

    @classmethod
    async def start(cls, kubeconfig: str, pods: Sequence[dict[str, Any]], *,
                    concurrency: int, depth: int | None = None,
                    timeout: float = READY_TIMEOUT_S,
                    module: str = "scheduler.bench.creator", extra: Sequence[str] = (),
                    ) -> CreatorProcess:
        workdir = tempfile.TemporaryDirectory(prefix="bench-creator-")
        path = os.path.join(workdir.name, "pods.jsonl")
        with open(path, "wb") as f:
            for pod in pods:
                f.write(orjson.dumps(pod) + b"\n")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, "--kubeconfig", kubeconfig,
            "--bodies", path, "--concurrency", str(concurrency),
            *(("--depth", str(depth)) if depth is not None else ()), *extra,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        creator = cls(proc, workdir, len(pods))
        try:
            ready = await creator._line(timeout)
            if ready.get("ready") != len(pods):
                raise RuntimeError(f"bench creator: expected ready for {len(pods)} pods, "
                                   f"got {ready}")
        except BaseException:
            await creator.aclose()
            raise
        return creator

    async def _line(self, timeout: float) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = await asyncio.wait_for(self._proc.stdout.readline(), timeout=timeout)
        if not line:
            code = await self._proc.wait()
            raise RuntimeError(f"bench creator exited ({code}) without a report; "
                               "its error is on stderr")
        value = json.loads(line)
        if not isinstance(value, dict):
            raise RuntimeError(f"bench creator: unexpected output {line!r}")
        return value

    async def go(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(b"go\n")
        await self._proc.stdin.drain()

    async def result(self, timeout: float) -> CreatorReport:
        done = await self._line(timeout)
        await asyncio.wait_for(self._proc.wait(), timeout=timeout)
        return CreatorReport(created=int(done["created"]), failed=int(done["failed"]),
                             error=str(done["error"]), started=float(done["started"]),
                             finished=float(done["finished"]),
                             cpu=float(done["cpu"]) if done.get("cpu") is not None else None)

    async def aclose(self) -> None:
        """Stop the child if it still runs and remove the bodies file; safe to repeat."""
        if self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        self._workdir.cleanup()


if __name__ == "__main__":
    sys.exit(main())
