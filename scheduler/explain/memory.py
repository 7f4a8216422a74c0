"""Where the daemon's memory goes: ``/debug/memory``, the Python counterpart of
kube-scheduler's ``/debug/pprof/heap`` (served, like it, while the configuration's
``enableProfiling`` is on, under the debug routes' authorization).

One GET answers with the process's RSS, the live objects per type (after a full
collection) and their growth since the baseline, and, while ``tracemalloc`` traces, the
allocation sites that grew most since the baseline, with their tracebacks
(``Snapshot.compare_to(baseline, "traceback")``).  The baseline is taken by the first
request, again on ``?reset=true``, and when ``?tracemalloc=N`` starts
tracing with N frames per allocation (``?tracemalloc=0`` stops it).  Tracing from the
start (``PYTHONTRACEMALLOC=N``) works too, but makes the imports alone take many times
longer: starting it on a warm daemon traces only what it allocates from then on, which is
what a leak is.  ``?top=N`` bounds each list.  The report also gives pymalloc's arenas (live and free
bytes in them) and glibc malloc's figures (``mallinfo2``: memory its heaps hold, use and
keep free), and ``?trim=true`` returns the
free part to the system (``malloc_trim(0)``) and reports RSS after it: RSS that a trim
gives back was the allocator's, not a live object's.

The daemon freezes its synced heap (``gc.freeze()`` once the informers have synced): the
objects counted are those the collector tracks outside that frozen heap, i.e. what was
allocated since the sync and is still alive, which is where a leak shows
(``frozenObjects`` gives the size of the rest).  The walk and the snapshot run in a worker
thread, so the event loop (and the leader lease's renewals) keeps running, only slower,
while they take seconds on a large heap: a debugging aid, not a metric.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import os
import re
import sys
import tempfile
import contextlib
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

MEMORY_ROUTE = "/debug/memory"
DEFAULT_TOP = 25
MAX_TOP = 500
MAX_FRAMES = 100
# Allocations of the tracing machinery itself, and of imports, are not the daemon's.
_IGNORED = (
    tracemalloc.Filter(False, tracemalloc.__file__),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    tracemalloc.Filter(False, "<unknown>"),
)


class _MallInfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (2.33+), every field a size_t.
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


_LIBC = _libc()


def malloc_info() -> dict[str, int] | None:
    """glibc malloc's own figures (all arenas): bytes in its heaps, in use, free inside
    them (held, not returned to the system: fragmentation), and in mmapped chunks; None
    without glibc 2.33+."""
    fn = getattr(_LIBC, "mallinfo2", None)
    if fn is None:
        return None
    fn.restype = _MallInfo2
    info = fn()
    return {"heapBytes": int(info.arena), "inUseBytes": int(info.uordblks),
            "freeBytes": int(info.fordblks), "mmappedBytes": int(info.hblkhd)}


def malloc_trim() -> bool:
    """Give glibc malloc's free memory back to the system (``malloc_trim(0)``); False
    without glibc."""
    fn = getattr(_LIBC, "malloc_trim", None)
    if fn is None:
        return False
    fn(0)
    return True


_PYMALLOC_FIGURES = {
    "# arenas allocated current": "arenas",
    "# arenas highwater mark": "arenasHighWater",
    "# bytes in allocated blocks": "allocatedBytes",
    "# bytes in available blocks": "availableBytes",
}


def pymalloc_stats() -> dict[str, int] | None:
    """CPython's small-object allocator (objects of up to 512 bytes, in 1 MiB arenas):
    arenas held now and at most, bytes in live blocks and free inside held pools (held
    arenas with few live blocks are fragmentation: an arena is returned only when empty).
    From ``sys._debugmallocstats()``, which writes to the C stderr; None if unavailable."""
    stats = getattr(sys, "_debugmallocstats", None)
    if stats is None:
        return None
    with tempfile.TemporaryFile() as out:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            stats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    found: dict[str, int] = {}
    for line in text.splitlines():
        label, _, value = line.partition("=")
        key = _PYMALLOC_FIGURES.get(label.strip())
        if key is not None and re.fullmatch(r"[\d,]+", value.strip()):
            found[key] = int(value.strip().replace(",", ""))
    if "unused pools" in text:
        pools = re.search(r"^(\d+) unused pools \* (\d+) bytes", text, re.MULTILINE)
        if pools:
            found["unusedPoolBytes"] = int(pools.group(1)) * int(pools.group(2))
    return found or None


class DebugRouteServer(Protocol):
    def add_debug_route(self, path: str, handler: Any) -> None: ...


def rss_bytes() -> int | None:
    """This process's resident set size, from /proc (None where there is no /proc)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _type_name(kind: type) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def object_counts() -> Counter[str]:
    """Live objects tracked by the collector, per type (``module.QualName``), after a full
    collection so that garbage waiting for one does not count. Counted by type, then named:
    a name built per object allocated a string for each (and, while tracemalloc traces, a
    trace for each)."""
    gc.collect()
    counts: Counter[str] = Counter()
    for kind, n in Counter(map(type, gc.get_objects())).items():
        counts[_type_name(kind)] += n
    return counts


def _snapshot() -> tracemalloc.Snapshot:
    return tracemalloc.take_snapshot().filter_traces(_IGNORED)


def _traceback(stat: tracemalloc.StatisticDiff) -> list[str]:
    # Most recent call first: the allocating line, then its callers.
    return [f"{frame.filename}:{frame.lineno}" for frame in reversed(stat.traceback)]


# How often the daemon hands glibc malloc's free memory back (see malloc_trimmer).
TRIM_INTERVAL_SECONDS = 60.0
TRIM_TASK_NAME = "malloc-trim"


async def trim_loop(*, interval: float = TRIM_INTERVAL_SECONDS,
                    trim: Callable[[], bool] = malloc_trim,
                    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                    iterations: int | None = None) -> None:
    """Every ``interval``, ``malloc_trim(0)``: glibc keeps the memory the daemon frees in
    its heaps (for the next allocation of that size) and returns it to the system only
    from the top of a heap; the JSON of every watch event and request passes through
    there between long-lived objects, so a long-running daemon's RSS creeps up with free
    memory no object uses.  A trim returns the free pages wherever they are, in a few
    milliseconds.  Stops at once without glibc; ``iterations`` bounds it for tests."""
    done = 0
    while iterations is None or done < iterations:
        await sleep(interval)
        if not trim():
            return
        done += 1


@contextlib.asynccontextmanager
async def malloc_trimmer(*, interval: float = TRIM_INTERVAL_SECONDS,
                         trim: Callable[[], bool] = malloc_trim) -> AsyncIterator[None]:
    """Run :func:`trim_loop` as a named task for the daemon's life (cancelled on exit)."""
    task = asyncio.create_task(trim_loop(interval=interval, trim=trim), name=TRIM_TASK_NAME)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


class MemoryIntrospection:
    """The baseline and the report of ``/debug/memory``."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._baseline_at = 0.0
        self._baseline_counts: Counter[str] | None = None  # taken by the first report
        self._baseline_snapshot: tracemalloc.Snapshot | None = None
        self._lock = threading.Lock()  # one report at a time (they run in worker threads)

    def reset(self) -> None:
        """Growth is counted from now."""
        self._baseline_at = self._clock()
        self._baseline_counts = object_counts()
        self._baseline_snapshot = _snapshot() if tracemalloc.is_tracing() else None

    def trace(self, frames: int) -> None:
        """Start tracing allocations with ``frames`` frames each, growth counted from now
        (no-op if already tracing); 0 stops tracing."""
        if frames == 0:
            tracemalloc.stop()
            self._baseline_snapshot = None
        elif not tracemalloc.is_tracing():
            tracemalloc.start(frames)
            self._baseline_snapshot = _snapshot()
            self._baseline_counts = None  # the next report's counts

    def report(self, *, top: int = DEFAULT_TOP, reset: bool = False) -> dict[str, Any]:
        """RSS, objects per type and their growth, and (when tracing) the allocation sites
        that grew most since the baseline; ``reset`` makes now the baseline afterwards."""
        counts = object_counts()
        if self._baseline_counts is None:
            self._baseline_at = self._clock()
            self._baseline_counts = counts
        growth = Counter(counts)
        growth.subtract(self._baseline_counts)
        out: dict[str, Any] = {
            "rssBytes": rss_bytes(),
            "sinceBaselineSeconds": round(self._clock() - self._baseline_at, 1),
            "objects": sum(counts.values()),
            "objectsByType": dict(counts.most_common(top)),
            "objectGrowthByType": {name: n for name, n in
                                   sorted(growth.items(), key=lambda kv: -kv[1])[:top] if n > 0},
            "gcCounts": list(gc.get_count()),
            # gc.freeze() (the daemon's, once synced) moves objects out of the collector's
            # view: they are not in the counts above.
            "frozenObjects": gc.get_freeze_count(),
            "malloc": malloc_info(),
            "pymalloc": pymalloc_stats(),
        }
        snapshot: tracemalloc.Snapshot | None = None
        if tracemalloc.is_tracing():
            snapshot = _snapshot()
            traced, peak = tracemalloc.get_traced_memory()
            out["tracemalloc"] = {
                "frames": tracemalloc.get_traceback_limit(),
                "tracedBytes": traced,
                "peakBytes": peak,
                "top": self._growth(snapshot, top=top),
            }
        else:
            out["tracemalloc"] = None
        if reset:
            self._baseline_at = self._clock()
            self._baseline_counts = counts
            self._baseline_snapshot = snapshot
        return out

    def _growth(self, snapshot: tracemalloc.Snapshot, *, top: int) -> list[dict[str, Any]]:
        if self._baseline_snapshot is None:  # tracing started after the baseline
            self._baseline_snapshot = snapshot
        stats = snapshot.compare_to(self._baseline_snapshot, "traceback")
        return [{"sizeDiffBytes": s.size_diff, "countDiff": s.count_diff,
                 "sizeBytes": s.size, "count": s.count, "traceback": _traceback(s)}
                for s in stats[:top]]

    async def handler(self, request: web.Request) -> web.StreamResponse:
        try:
            top = int(request.query.get("top", DEFAULT_TOP))
        except ValueError:
            return web.json_response({"error": "top: an integer"}, status=400)
        if not 1 <= top <= MAX_TOP:
            return web.json_response({"error": f"top: 1 to {MAX_TOP}"}, status=400)
        reset = _flag(request.query.get("reset"))
        trim = _flag(request.query.get("trim"))
        if "tracemalloc" in request.query:
            try:
                frames = int(request.query["tracemalloc"])
            except ValueError:
                frames = -1
            if not 0 <= frames <= MAX_FRAMES:
                return web.json_response(
                    {"error": f"tracemalloc: frames per allocation, 0 (stop) to {MAX_FRAMES}"},
                    status=400)
        else:
            frames = None
        return web.json_response(await asyncio.to_thread(self._answer, top=top, reset=reset,
                                                         frames=frames, trim=trim))

    def _answer(self, *, top: int, reset: bool, frames: int | None, trim: bool
                ) -> dict[str, Any]:
        with self._lock:
            if frames is not None:
                self.trace(frames)
            out = self.report(top=top, reset=reset)
            if trim and malloc_trim():
                # What the allocator held but did not use: RSS it gives back.
                out["afterTrim"] = {"rssBytes": rss_bytes(), "malloc": malloc_info()}
            return out

    def register(self, server: DebugRouteServer) -> None:
        server.add_debug_route(MEMORY_ROUTE, self.handler)
