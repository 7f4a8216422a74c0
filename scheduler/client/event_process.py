"""The Event recording's sending side in a child process: the daemon's second core.

The daemon is one asyncio loop; writing Events (events.k8s.io/v1 POSTs and series PATCHes,
their HTTP connections, the spam filter and the aggregation into series) cost about a
sixth of its CPU per scheduled pod.  With ``--event-process on`` (or ``auto`` on a process
that may use two CPUs or more) that work runs in a child process:

- the parent's recorder (``RemoteEventRecorder``) checks the Event's type and subject as
  ``EventRecorder.event`` does, reads the two clocks and appends one compact record (plain
  tuples and dicts) to a buffer; ``FLUSH_DELAY`` (5 ms) after the first record the buffer
  goes down a pipe as one ``marshal`` frame (marshal dumped a batch of records in about half
  pickle's time and a tenth of JSON's);
- the child (``python -m scheduler.client.event_process``, started with ``spawn``'s
  semantics: a fresh interpreter, never a fork of the running loop) builds its API client
  from the parent's connection (host, credentials, TLS files or data: pickled once at
  start) with the same QPS and burst, and feeds every record to an ``EventRecorder`` of the
  same scheduler name and reporting instance: the same spam filter, series, bodies, retries
  and log lines, by the same code;
- what the child counts that the parent exports (``scheduler_py_events_dropped``, the
  rest_client request counts and latencies of its requests) comes back on a second pipe
  every half second and at a flush, and is applied to the parent's metrics: the exposition
  is the same;
- the parent supervises it: a child that exits unasked is logged as an error and started
  again (with a backoff from ``restart_delay`` doubling up to ``MAX_RESTART_DELAY``); the
  records made meanwhile wait in a bounded buffer (``buffer_size``; when full the oldest is
  dropped and counted as ``events_dropped{reason="queue_full"}``, as client-go's
  broadcaster drops when its queue is full). Each frame of records carries a sequence
  number the child acknowledges once it has read it (at most ``ACK_DELAY`` later, and
  before answering a flush); the frames a child that died had not acknowledged (still in
  the pipe, or read in its last moments) go back to the front of the buffer and are written
  to the next child, so a crash loses no Event still in the pipe (one read and written in
  the last ``ACK_DELAY`` may be written twice). What a dead child had read but not yet
  written, and its series (a repeat then starts a new Event), are lost with it;
- ``stop`` (the one stop path: ``Components.aclose`` stopping the recorders) writes what is
  buffered, asks the child to flush its queue and stop (within ``timeout``), waits for it,
  and kills it only if it does not exit.

The channel's frames are ``<u32 length><u8 kind><payload>``: kind ``P`` a pickle (the
child's settings, once), ``M`` marshal (records and control messages).
"""

from __future__ import annotations

import asyncio
import contextlib
import marshal
import os
import pickle
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, cast

import structlog

from scheduler.client.connection import ConnectionConfig
from scheduler.client.events import (
    DEFAULT_SENDERS,
    EVENT_TYPES,
    EventRecorder,
    event_references,
)
from scheduler.metrics import SchedulerMetrics

log = structlog.get_logger(__name__)

MODES = ("auto", "on", "off")
DEFAULT_BUFFER_SIZE = 1000
RESTART_DELAY = 1.0
MAX_RESTART_DELAY = 30.0
STATS_INTERVAL = 0.5
# How long the child waits before acknowledging the frames it read (one acknowledgement for
# every frame read meanwhile): what a crash may write twice, against a message per frame.
ACK_DELAY = 0.02
# How long a record waits for others before the pipe write: ~5 records a frame at 1000
# pods/s; with a frame per loop turn (0) the scheduler spent ~0.02 ms more per Event and the
# child ~0.04 ms more (tests/perf/bench_event_process.py --per-turn 2, two runs each).
FLUSH_DELAY = 0.005
# Bytes waiting in the pipe's transport above which records stay in the buffer (the child
# is not keeping up): the buffer is the one bound.
WRITE_HIGH_WATER = 1 << 20
_HEADER = 5  # u32 length + u8 kind
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# A record: (recorder index, type, reason, action, message, regarding ref, related ref or
# None, the recorder clock's reading, the wall clock in ns since the epoch).
Record = tuple[int, str, str, str, str, dict[str, Any], "dict[str, Any] | None", float, int]


# -- which mode


def cgroup_cpu_limit(*, proc_cgroup: Path = Path("/proc/self/cgroup"),
                     cgroup_root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPUs the cgroup (v2) of this process may use (``cpu.max``'s quota / period, the
    tightest along its path), None when unlimited or unknown."""
    try:
        lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    path = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), None)
    if path is None:
        return None
    limit: float | None = None
    here = cgroup_root / path.lstrip("/")
    while True:
        try:
            quota, period = (here / "cpu.max").read_text(encoding="utf-8").split()[:2]
            if quota != "max":
                cpus = int(quota) / int(period)
                limit = cpus if limit is None else min(limit, cpus)
        except (OSError, ValueError):
            pass
        if here == cgroup_root or cgroup_root not in here.parents:
            return limit
        here = here.parent


def usable_cpus(*, affinity: Callable[[], int] | None = None,
                cgroup_limit: Callable[[], float | None] = cgroup_cpu_limit) -> float:
    """How many CPUs this process may use: its affinity (os.sched_getaffinity), capped by
    its cgroup's cpu.max."""
    if affinity is None:
        try:
            cpus = float(len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            cpus = float(os.cpu_count() or 1)
    else:
        cpus = float(affinity())
    limit = cgroup_limit()
    return min(cpus, limit) if limit is not None else cpus


def use_event_process(mode: str, *, cpus: Callable[[], float] = usable_cpus) -> bool:
    """``--event-process``: on, off, or auto (on when the process may use two CPUs or more)."""
    if mode not in MODES:
        raise ValueError(f"--event-process: must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "auto":
        return cpus() >= 2.0
    return mode == "on"


# -- the channel


def encode_frame(message: Any, *, kind: bytes = b"M") -> bytes:
    """One frame: marshal (``M``) for records and control messages, pickle (``P``) once for
    the child's settings."""
    payload = marshal.dumps(message) if kind == b"M" else pickle.dumps(message, 5)
    return len(payload).to_bytes(4, "little") + kind + payload


class FrameReader:
    """Frames out of a byte stream, whatever the pieces it arrives in."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        buf = self._buf
        buf += data
        out: list[Any] = []
        start = 0
        while len(buf) - start >= _HEADER:
            size = int.from_bytes(buf[start:start + 4], "little")
            end = start + _HEADER + size
            if len(buf) < end:
                break
            kind = buf[start + 4:start + 5]
            payload = bytes(buf[start + _HEADER:end])
            out.append(marshal.loads(payload) if kind == b"M" else pickle.loads(payload))
            start = end
        if start:
            del buf[:start]
        return out


def wall_from_ns(ns: int) -> datetime:
    """The wall-clock datetime (UTC, microseconds) of ``time.time_ns()``'s reading."""
    return _EPOCH + timedelta(microseconds=ns // 1000)


# -- what the child counts and ships back


class _Tally:
    """Stands for a labelled Counter/Histogram in the child: counts and observations per
    label values, taken (and reset) by ``take``."""

    def __init__(self) -> None:
        self.children: dict[tuple[str, ...], _TallyChild] = {}

    def labels(self, *values: str, **kw: str) -> _TallyChild:
        key = tuple(values) + tuple(kw.values())
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = _TallyChild()
        return child

    def take(self) -> dict[tuple[str, ...], Any]:
        out: dict[tuple[str, ...], Any] = {}
        for key, child in self.children.items():
            if child.count or child.observed:
                out[key] = (child.count, child.observed)
                child.count, child.observed = 0, []
        return out


class _TallyChild:
    __slots__ = ("count", "observed")

    def __init__(self) -> None:
        self.count = 0.0
        self.observed: list[float] = []

    def inc(self, amount: float = 1.0) -> None:
        self.count += amount

    def observe(self, value: float) -> None:
        self.observed.append(value)


class ShippedMetrics:
    """The child's stand-in for SchedulerMetrics: only what the API client and the
    recorder write (events_dropped, rest_client_*, bind_requests)."""

    def __init__(self) -> None:
        self.events_dropped = _Tally()
        self.bind_requests = _Tally()
        self.ops = _Ops()

    def take(self) -> dict[str, dict[tuple[str, ...], Any]]:
        taken = {"events_dropped": self.events_dropped.take(),
                 "rest_client_requests": self.ops.rest_client_requests.take(),
                 "rest_client_request_duration": self.ops.rest_client_request_duration.take()}
        return {name: values for name, values in taken.items() if values}


class _Ops:
    def __init__(self) -> None:
        self.rest_client_requests = _Tally()
        self.rest_client_request_duration = _Tally()


def apply_stats(metrics: SchedulerMetrics | None, stats: Mapping[str, Mapping[Any, Any]]) -> None:
    """The child's counts and observations, into the parent's metrics."""
    if metrics is None:
        return
    for key, (count, _) in stats.get("events_dropped", {}).items():
        metrics.events_dropped.labels(*key).inc(count)
    for key, (count, _) in stats.get("rest_client_requests", {}).items():
        metrics.ops.rest_client_requests.labels(*key).inc(count)
    for key, (_, observed) in stats.get("rest_client_request_duration", {}).items():
        child = metrics.ops.rest_client_request_duration.labels(*key)
        for value in observed:
            child.observe(value)


# -- the parent's side


@dataclass
class _Up:
    """A running child and its pipes."""

    proc: asyncio.subprocess.Process
    stdin: asyncio.WriteTransport
    back: asyncio.ReadTransport
    back_closed: asyncio.Future[None]
    ready: bool = False
    flushes: dict[int, asyncio.Future[None]] = field(default_factory=dict)
    # The frames of records written to this child and not acknowledged yet: (sequence
    # number, records), oldest first; written again to the next child if this one dies.
    unacked: deque[tuple[int, list[Record]]] = field(default_factory=deque)
    sequence: int = 0


class EventProcess:
    """The child process that writes the Events of every recorder it made, supervised."""

    def __init__(
        self,
        connection: ConnectionConfig,
        *,
        qps: float,
        burst: int,
        metrics: SchedulerMetrics | None = None,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        queue_size: int = 1000,
        senders: int = DEFAULT_SENDERS,
        restart_delay: float = RESTART_DELAY,
        max_restart_delay: float = MAX_RESTART_DELAY,
        sleep: Callable[[float], Any] = asyncio.sleep,
        python: Sequence[str] = (sys.executable,),
        child_settings: Mapping[str, Any] | None = None,
        flush_delay: float = FLUSH_DELAY,
        write_pipeline: int = 1,
    ) -> None:
        self._connection = connection
        self._write_pipeline = write_pipeline  # the child's Event POSTs, as the daemon's writes
        self._qps = qps
        self._burst = burst
        self._metrics = metrics
        self._buffer_size = max(1, buffer_size)
        self._queue_size = queue_size
        self._senders = senders
        self._restart_delay = restart_delay
        self._max_restart_delay = max_restart_delay
        self._sleep = sleep
        self._python = tuple(python)
        self._extra = dict(child_settings or {})
        # 0: the records go at the end of the loop turn that made them; more: they wait
        # that long for others (fewer, larger frames)
        self._flush_delay = flush_delay
        self._recorders: list[RemoteEventRecorder] = []
        self._buffer: deque[Record] = deque()
        self._flush_handle: asyncio.Handle | asyncio.TimerHandle | None = None
        self._up: _Up | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._stopped: asyncio.Future[None] | None = None
        self._flush_tokens = 0
        self._ready: asyncio.Event | None = None  # set while a child that said "ready" runs
        self.restarts = 0  # children started again after one exited unasked
        self.dropped = 0  # records dropped from the full buffer (drop-oldest)
        self.frames = 0  # frames of records written
        self.resent = 0  # records of unacknowledged frames written again to a new child

    # -- recorders

    def recorder(self, scheduler_name: str, *, hostname: str | None = None) -> RemoteEventRecorder:
        """A recorder whose Events this process writes; all are made before ``start``."""
        if self._task is not None:
            raise RuntimeError("event process: recorders are made before it starts")
        recorder = RemoteEventRecorder(self, len(self._recorders), scheduler_name=scheduler_name,
                                       hostname=hostname, metrics=self._metrics)
        self._recorders.append(recorder)
        return recorder

    @property
    def pid(self) -> int | None:
        """The running child's process id."""
        return self._up.proc.pid if self._up is not None else None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    # -- the hot path

    def submit(self, record: Record) -> None:
        buffer = self._buffer
        if len(buffer) >= self._buffer_size:
            buffer.popleft()
            self.dropped += 1
            if self._metrics is not None:
                self._metrics.events_dropped.labels(reason="queue_full").inc()
        buffer.append(record)
        if self._flush_handle is None and self._up is not None:
            loop = asyncio.get_running_loop()
            self._flush_handle = (loop.call_later(self._flush_delay, self._flush)
                                  if self._flush_delay else loop.call_soon(self._flush))

    def _flush_now(self) -> None:
        """The buffer down the pipe now (a flush, a stop, a child just up)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        self._flush()

    def _flush(self) -> None:
        """The buffer down the pipe as one frame."""
        self._flush_handle = None
        up = self._up
        if up is None or not self._buffer:
            return
        if up.stdin.is_closing():
            return
        if up.stdin.get_write_buffer_size() > WRITE_HIGH_WATER:
            # The child is behind: keep the records (bounded) and look again shortly.
            self._flush_handle = asyncio.get_running_loop().call_later(0.05, self._flush)
            return
        records = list(self._buffer)
        self._buffer.clear()
        up.sequence += 1
        up.unacked.append((up.sequence, records))
        up.stdin.write(encode_frame(("records", records, up.sequence)))
        self.frames += 1

    # -- lifecycle

    def start(self) -> None:
        """Start the supervisor (and through it the child); idempotent."""
        if self._task is None and not self._stopping:
            self._task = asyncio.create_task(self._supervise(), name="event-process")

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Until a child has said it runs; TimeoutError after ``timeout``."""
        if self._ready is None:
            self._ready = asyncio.Event()
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError("event process: no child ready") from None

    async def flush(self, timeout: float = 5.0) -> bool:
        """Until every record made so far is written by the child (its queue drained) and
        its counts applied; False when no child runs or on timeout."""
        up = self._up
        if up is None:
            return False
        self._flush_now()
        self._flush_tokens += 1
        token = self._flush_tokens
        done = up.flushes[token] = asyncio.get_running_loop().create_future()
        up.stdin.write(encode_frame(("flush", token, timeout)))
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout + 1.0)
        except (asyncio.TimeoutError, ConnectionError):
            return False
        finally:
            up.flushes.pop(token, None)
        return True

    async def stop(self, timeout: float = 5.0) -> None:
        """Write what is buffered, let the child flush and exit (killed after ``timeout``
        and a grace), stop supervising.  Every caller waits for the same stop."""
        if self._stopped is not None:
            await asyncio.shield(self._stopped)
            return
        self._stopped = asyncio.get_running_loop().create_future()
        self._stopping = True
        try:
            await self._stop(timeout)
        finally:
            self._stopped.set_result(None)

    async def _stop(self, timeout: float) -> None:
        up = self._up
        if up is not None:
            self._flush_now()
            if not up.stdin.is_closing():
                up.stdin.write(encode_frame(("stop", timeout)))
            try:
                await asyncio.wait_for(asyncio.shield(up.proc.wait()), timeout + 5.0)
            except asyncio.TimeoutError:
                log.warning("event process did not stop; killing it", pid=up.proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    up.proc.kill()
                await up.proc.wait()
            # Its last counts arrive before its pipe closes.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(up.back_closed), 5.0)
        if self._buffer:
            log.warning("event process stopped; dropping buffered events",
                        remaining=len(self._buffer))
            if self._metrics is not None:
                self._metrics.events_dropped.labels(reason="stopped").inc(len(self._buffer))
            self._buffer.clear()
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._task = None
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._up = None

    async def _supervise(self) -> None:
        delay = self._restart_delay
        while not self._stopping:
            up: _Up | None = None
            try:
                up = await self._spawn()
            except (OSError, ValueError) as exc:
                log.error("could not start the event process", error=str(exc))
            if up is not None:
                self._up = up
                if self._buffer:
                    self._flush_now()
                try:
                    code = await up.proc.wait()
                finally:
                    with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                        if not self._stopping:
                            await asyncio.wait_for(asyncio.shield(up.back_closed), 1.0)
                    if not self._stopping:
                        self._down(up)
                if self._stopping:
                    return
                if up.ready:
                    delay = self._restart_delay  # it ran: start again promptly
                log.error("event process exited; starting it again", pid=up.proc.pid,
                          returncode=code, buffered=len(self._buffer), restarts=self.restarts + 1)
            await self._sleep(delay)
            delay = min(delay * 2, self._max_restart_delay)
            self.restarts += 1

    def _down(self, up: _Up) -> None:
        if self._up is up:
            self._up = None
            if self._ready is not None:
                self._ready.clear()
        self._requeue(up)
        for waiter in up.flushes.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("event process exited"))
        with contextlib.suppress(Exception):
            up.stdin.close()
        with contextlib.suppress(Exception):
            up.back.close()

    def _requeue(self, up: _Up) -> None:
        """The frames a dead child never acknowledged, back in front of the buffer (in
        their order, before what was made since), to be written to the next child; the
        buffer's bound holds (the oldest beyond it dropped and counted as queue_full)."""
        if not up.unacked:
            return
        records = [record for _, frame in up.unacked for record in frame]
        up.unacked.clear()
        self.resent += len(records)
        self._buffer.extendleft(reversed(records))
        over = len(self._buffer) - self._buffer_size
        if over > 0:
            for _ in range(over):
                self._buffer.popleft()
            self.dropped += over
            if self._metrics is not None:
                self._metrics.events_dropped.labels(reason="queue_full").inc(over)

    def _settings(self) -> dict[str, Any]:
        from scheduler.logging import current_settings

        return {
            "connection": self._connection,
            "qps": self._qps,
            "burst": self._burst,
            "recorders": [(r.scheduler_name, r.hostname) for r in self._recorders],
            "queue_size": self._queue_size,
            "senders": self._senders,
            "write_pipeline": self._write_pipeline,
            "log": current_settings(),
            **self._extra,
        }

    async def _spawn(self) -> _Up:
        loop = asyncio.get_running_loop()
        settings = encode_frame(self._settings(), kind=b"P")
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        # The child imports this very tree (an editable install, a test's checkout).
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._python, "-m", "scheduler.client.event_process", "--back-fd", str(write_fd),
                # Its stdout is the parent's stderr: nothing it prints can mix with what
                # the parent prints (the bench's JSON).
                stdin=asyncio.subprocess.PIPE, stdout=2, pass_fds=(write_fd,), env=env,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        assert proc.stdin is not None
        stdin = proc.stdin.transport
        back_closed: asyncio.Future[None] = loop.create_future()
        up_box: list[_Up] = []
        protocol = _BackChannel(self, up_box, back_closed)
        back, _ = await loop.connect_read_pipe(lambda: protocol, os.fdopen(read_fd, "rb", 0))
        up = _Up(proc=proc, stdin=stdin, back=back,
                 back_closed=back_closed)
        up_box.append(up)
        stdin.write(settings)
        log.info("event process started", pid=proc.pid, recorders=len(self._recorders))
        return up

    def _received(self, up: _Up, message: Any) -> None:
        what = message[0]
        if what == "stats":
            _, sent, stats = message
            for index, count in sent.items():
                self._recorders[index].sent += count
            apply_stats(self._metrics, stats)
        elif what == "ack":
            unacked, acked = up.unacked, message[1]
            while unacked and unacked[0][0] <= acked:
                unacked.popleft()
        elif what == "flushed":
            waiter = up.flushes.get(message[1])
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        elif what == "ready":
            up.ready = True
            if self._ready is None:
                self._ready = asyncio.Event()
            self._ready.set()


class _BackChannel(asyncio.Protocol):
    def __init__(self, owner: EventProcess, up: list[_Up], closed: asyncio.Future[None]) -> None:
        self._owner = owner
        self._up = up
        self._closed = closed
        self._reader = FrameReader()

    def data_received(self, data: bytes) -> None:
        for message in self._reader.feed(data):
            if self._up:
                self._owner._received(self._up[0], message)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed.done():
            self._closed.set_result(None)


class RemoteEventRecorder:
    """Implements ``scheduler.framework.interfaces.EventRecorder`` by handing each Event to
    the event process; what ``EventRecorder.event`` refuses before its spam filter is
    refused here the same way (logged, not recorded)."""

    def __init__(self, process: EventProcess, index: int, *, scheduler_name: str,
                 hostname: str | None, metrics: SchedulerMetrics | None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_ns: Callable[[], int] = time.time_ns) -> None:
        self.process = process
        self.index = index
        self.scheduler_name = scheduler_name
        self.hostname = hostname
        self._metrics = metrics
        self._clock = clock
        self._wall_ns = wall_ns
        self._stopped = False
        self.sent = 0  # creates + patches the child reported written

    def event(
        self,
        regarding: Mapping[str, Any],
        *,
        type: str,
        reason: str,
        action: str,
        message: str,
        related: Mapping[str, Any] | None = None,
    ) -> None:
        if self._stopped and type in EVENT_TYPES:
            if self._metrics is not None:
                self._metrics.events_dropped.labels(reason="stopped").inc()
            return
        refs = event_references(regarding, related, type=type, reason=reason)
        if refs is None:
            return
        ref, rel = refs
        self.process.submit((self.index, type, reason, action, message, ref, rel,
                             self._clock(), self._wall_ns()))

    def start(self) -> None:
        self.process.start()

    async def flush(self, timeout: float = 5.0) -> bool:
        return await self.process.flush(timeout)

    async def stop(self, timeout: float = 5.0) -> None:
        self._stopped = True
        await self.process.stop(timeout)


# -- the child's side


async def child_main(stdin: Any, back_fd: int) -> int:
    """Read the settings, then records and control messages, until told to stop or the
    parent goes (end of stdin)."""
    from scheduler.client.api import ApiClient

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    back, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(back_fd, "wb", 0))

    async def frame() -> Any:
        head = await reader.readexactly(_HEADER)
        payload = await reader.readexactly(int.from_bytes(head[:4], "little"))
        return marshal.loads(payload) if head[4:5] == b"M" else pickle.loads(payload)

    def send(message: Any) -> None:
        back.write(encode_frame(message))

    try:
        settings = await frame()
    except asyncio.IncompleteReadError:
        return 0
    from scheduler.logging import configure_logging

    # As the parent logs (a parent that never configured its logging: structlog's console
    # format, on stderr).
    fmt, level = settings.get("log") or ("console", "info")
    configure_logging(fmt=fmt, level=level)
    shipped = ShippedMetrics()
    metrics = cast(SchedulerMetrics, shipped)
    client = ApiClient(settings["connection"], qps=settings["qps"], burst=settings["burst"],
                       metrics=metrics, write_pipeline=settings.get("write_pipeline", 1))
    recorders = [
        EventRecorder(client, scheduler_name=name, hostname=hostname, metrics=metrics,
                      queue_size=settings["queue_size"], senders=settings["senders"])
        for name, hostname in settings["recorders"]]
    for recorder in recorders:
        recorder.start()
    reported = [0] * len(recorders)

    def ship() -> None:
        sent = {}
        for index, recorder in enumerate(recorders):
            if recorder.sent != reported[index]:
                sent[index] = recorder.sent - reported[index]
                reported[index] = recorder.sent
        stats = shipped.take()
        if sent or stats:
            send(("stats", sent, stats))

    async def ticker() -> None:
        while True:
            await asyncio.sleep(settings.get("stats_interval", STATS_INTERVAL))
            ship()

    # The last frame of records read, and the last acknowledged.
    read, acked = 0, 0
    ack_handle: asyncio.TimerHandle | None = None

    def acknowledge() -> None:
        nonlocal acked, ack_handle
        if ack_handle is not None:
            ack_handle.cancel()
            ack_handle = None
        if read != acked:
            acked = read
            send(("ack", read))

    ticking = asyncio.create_task(ticker(), name="event-process:stats")
    send(("ready",))
    stop_timeout = 5.0
    try:
        while True:
            try:
                message = await frame()
            except asyncio.IncompleteReadError:
                log.warning("event process: the scheduler went away; stopping")
                stop_timeout = 1.0
                break
            what = message[0]
            if what == "records":
                for index, type_, reason, action, note, ref, rel, now, wall in message[1]:
                    recorders[index].record(ref, rel, type=type_, reason=reason, action=action,
                                            message=note, now=now, wall=wall_from_ns(wall))
                read = message[2]
                if ack_handle is None:
                    ack_handle = loop.call_later(settings.get("ack_delay", ACK_DELAY),
                                                 acknowledge)
            elif what == "flush":
                _, token, timeout = message
                acknowledge()
                for recorder in recorders:
                    await recorder.flush(timeout)
                ship()
                send(("flushed", token))
            elif what == "stop":
                stop_timeout = message[1]
                break
            elif what == "crash":  # tests: an abrupt exit, as a crash would be
                os._exit(int(message[1]))
    finally:
        ticking.cancel()
        acknowledge()
        for recorder in recorders:
            await recorder.stop(stop_timeout)
        await client.close()
        ship()
        back.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m scheduler.client.event_process",
                                     description="kube-py-scheduler's Event writer (a child "
                                     "of the daemon; not run by hand)")
    parser.add_argument("--back-fd", type=int, required=True)
    args = parser.parse_args(argv)
    # SIGINT (a terminal's ^C) and SIGTERM sent to the process group are the parent's to
    # handle: it stops the child through the one stop path, after a flush. A parent gone
    # without stopping it closes its stdin, which ends it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return asyncio.run(child_main(sys.stdin.buffer, args.back_fd))


if __name__ == "__main__":
    sys.exit(main())
