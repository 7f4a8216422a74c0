"""In-memory object storage with a cluster-wide resourceVersion and per-type watch history.

Why this shape: the event loop is the only writer, so no locks are needed, and every stored
object is treated as immutable. Each entry keeps the object dict *and* its serialized JSON, so
GET, LIST and watch fan-out copy bytes instead of re-encoding (a 10000-pod list is a join).
Writers build new dicts (sharing unchanged sub-dicts) instead of mutating stored ones.

Watch history is a bounded deque per resource type, like kube-apiserver's watch cache; a
watch from a resourceVersion older than what the deque still holds gets 410 Expired.

The sandbox's simulated controllers (kubelet, PV, resourceclaim, workload controllers and
garbage collector, namespace controller) are not called by the registry: each runs an
``Informer`` here, the in-process form of a client's list+watch. It lists the types it watches
once (its initial list, at the store's resourceVersion), then receives every later event of
those types, in resourceVersion order across them, as the same ``Event`` objects the HTTP
watch serves (no encoding: an event costs an append), filtered per type before queueing.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from .errors import ApiError, gone
from .resources import ResourceType
from .selectors import Matcher

Obj = dict[str, Any]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"


class Entry:
    __slots__ = ("obj", "raw")

    def __init__(self, obj: Obj, raw: bytes) -> None:
        self.obj = obj
        self.raw = raw


class Event:
    __slots__ = ("type", "rv", "obj", "raw", "prev", "ns")

    def __init__(self, type: str, rv: int, obj: Obj, raw: bytes, prev: Obj | None, ns: str) -> None:
        self.type = type
        self.rv = rv
        self.obj = obj
        self.raw = raw
        self.prev = prev
        self.ns = ns


class Watcher:
    """One open watch: filters events at commit time and buffers them for its writer task."""

    __slots__ = ("ns", "match", "buf", "wake", "closed", "rt")

    def __init__(self, rt: ResourceType, ns: str | None, match: Matcher | None) -> None:
        self.rt = rt
        self.ns = ns
        self.match = match
        # (type, event) or ("BOOKMARK", rv) / ("ERROR", status dict)
        self.buf: list[tuple[str, Any]] = []
        self.wake = asyncio.Event()
        self.closed = False

    def offer(self, ev: Event) -> None:
        if self.ns is not None and ev.ns != self.ns:
            return
        m = self.match
        if m is None:
            self.buf.append((ev.type, ev))
        elif ev.type == DELETED:
            if m(ev.obj):
                self.buf.append((DELETED, ev))
        else:
            cur = m(ev.obj)
            old = ev.prev is not None and m(ev.prev)
            if cur:
                self.buf.append((MODIFIED if old else ADDED, ev))
            elif old:
                # stops matching: DELETED carrying the previous state at the new version
                assert ev.prev is not None
                prev = {**ev.prev, "metadata": {**ev.prev["metadata"], "resourceVersion": str(ev.rv)}}
                self.buf.append((DELETED, Event(DELETED, ev.rv, prev, orjson.dumps(prev), None, ev.ns)))
            else:
                return
        self.wake.set()

    def push(self, item: tuple[str, Any]) -> None:
        self.buf.append(item)
        self.wake.set()

    def close(self) -> None:
        self.closed = True
        self.wake.set()


class InternalWatcher(Watcher):
    """A watch of an in-process simulation (an ``Informer``'s): it sees every event like a
    client's watch, but the drop-watches fault, which ends client connections, leaves it
    alone."""

    __slots__ = ()


Keep = Callable[[ResourceType, "Event"], bool]


class _InformerWatcher(InternalWatcher):
    """One type's watch of an ``Informer``: events go, unencoded and filtered, to the
    informer's shared queue, so that they stay in resourceVersion order across types."""

    __slots__ = ("sink", "keep")

    def __init__(self, rt: ResourceType, sink: list[tuple[ResourceType, Event]], wake: asyncio.Event,
                 keep: Keep | None) -> None:
        super().__init__(rt, None, None)
        self.sink = sink
        self.wake = wake
        self.keep = keep

    def offer(self, ev: Event) -> None:
        if self.keep is not None and not self.keep(self.rt, ev):
            return
        self.sink.append((self.rt, ev))
        self.wake.set()

    def push(self, item: tuple[str, Any]) -> None:
        pass  # bookmarks and errors are for clients


class Informer:
    """An in-process list+watch of some resource types (or of every stored type but the
    event views): what an informer is to a controller of kube-controller-manager.

    ``open()`` (re)opens the watches and returns, for each type whose watch had to be opened,
    its current objects (the initial list; the watch starts right after it, at the same
    resourceVersion, since the event loop is the only writer). ``drain()`` returns the events
    since the last drain, in order. ``keep(rt, event)`` filters at commit time: what it
    rejects is never queued. Every queued event sets ``wake``."""

    def __init__(
        self,
        store: Store,
        *,
        wake: asyncio.Event,
        types: tuple[ResourceType, ...] = (),
        every_type: bool = False,
        keep: Keep | None = None,
    ) -> None:
        self.store = store
        self.wake = wake
        self.types = types
        self.every_type = every_type
        self.keep = keep
        self.rv = 0  # the store's resourceVersion at the last (re)list
        self._queue: list[tuple[ResourceType, Event]] = []
        self._watchers: dict[str, _InformerWatcher] = {}
        self._opened = False
        self._drops = 0
        if every_type:
            store.type_listeners.append(self._new_type)

    @property
    def is_open(self) -> bool:
        return self._opened

    def _new_type(self, ts: TypeStore) -> None:
        """A type registered after the informer opened (a CRD): watched from its first object."""
        if self._opened and not ts.rt.is_view and ts.rt.key not in self._watchers:
            self._add(ts)

    def _add(self, ts: TypeStore) -> None:
        w = _InformerWatcher(ts.rt, self._queue, self.wake, self.keep)
        ts.watchers.add(w)
        self._watchers[ts.rt.key] = w

    def open(self) -> list[tuple[ResourceType, list[Entry]]]:
        """(Re)open closed watches; the initial list of each type (re)opened."""
        if self._opened and self._drops == self.store.drops:
            return []  # nothing closed since: only a dropped type (a CRD's) closes these watches
        out: list[tuple[ResourceType, list[Entry]]] = []
        self._opened = True
        self._drops = self.store.drops
        if self.every_type:
            for key in [k for k, w in self._watchers.items() if w.closed]:
                del self._watchers[key]  # a dropped type (CRD deleted)
            stores = [ts for ts in self.store.types.values() if not ts.rt.is_view]
        else:
            stores = [self.store.type_store(rt) for rt in self.types]
        for ts in stores:
            w = self._watchers.get(ts.rt.key)
            if w is not None and not w.closed:
                continue
            self._add(ts)
            out.append((ts.rt, list(ts.entries())))
        if out:
            self.rv = self.store.rv
        return out

    def drain(self) -> list[tuple[ResourceType, Event]]:
        if not self._queue:
            return []
        out = self._queue[:]
        self._queue.clear()
        return out

    def close(self) -> None:
        for w in self._watchers.values():
            ts = self.store.types.get(w.rt.key)
            if ts is not None:
                ts.watchers.discard(w)
            w.closed = True
        self._watchers.clear()
        self._queue.clear()
        self._opened = False
        if self.every_type and self._new_type in self.store.type_listeners:
            self.store.type_listeners.remove(self._new_type)


class TypeStore:
    """All objects of one resource type (one group+plural), with history and watchers."""

    def __init__(self, rt: ResourceType, history: int, floor: int) -> None:
        self.rt = rt
        self.by_ns: dict[str, dict[str, Entry]] = {}
        self.count = 0
        self.history: deque[Event] = deque()
        self.history_max = history
        # Every event with rv > floor is still in history.
        self.floor = floor
        self.watchers: set[Watcher] = set()
        self._sorted: list[tuple[str, str]] | None = None

    def get(self, ns: str, name: str) -> Entry | None:
        d = self.by_ns.get(ns)
        return d.get(name) if d is not None else None

    def sorted_keys(self) -> list[tuple[str, str]]:
        if self._sorted is None:
            self._sorted = sorted((ns, n) for ns, d in self.by_ns.items() for n in d)
        return self._sorted

    def iter_sorted(self, ns: str | None) -> Iterator[tuple[tuple[str, str], Entry]]:
        if ns is not None:
            d = self.by_ns.get(ns) or {}
            for n in sorted(d):
                yield (ns, n), d[n]
        else:
            for k in self.sorted_keys():
                yield k, self.by_ns[k[0]][k[1]]

    def entries(self) -> Iterator[Entry]:
        for d in self.by_ns.values():
            yield from d.values()

    def put(self, ns: str, name: str, entry: Entry) -> bool:
        d = self.by_ns.get(ns)
        if d is None:
            d = self.by_ns[ns] = {}
        new = name not in d
        d[name] = entry
        if new:
            self.count += 1
            self._sorted = None
        return new

    def remove(self, ns: str, name: str) -> None:
        d = self.by_ns.get(ns)
        if d is not None and name in d:
            del d[name]
            self.count -= 1
            self._sorted = None
            if not d:
                del self.by_ns[ns]

    def record(self, ev: Event) -> None:
        h = self.history
        h.append(ev)
        if len(h) > self.history_max:
            self.floor = h.popleft().rv
        for w in self.watchers:
            w.offer(ev)

    def events_after(self, rv: int) -> list[Event]:
        out: list[Event] = []
        for ev in reversed(self.history):
            if ev.rv <= rv:
                break
            out.append(ev)
        out.reverse()
        return out


def encode_continue(rv: int, ns: str, name: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{ns}/{name}\x00"})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    from .errors import bad_request

    try:
        pad = "=" * (-len(token) % 4)
        d = orjson.loads(base64.urlsafe_b64decode(token + pad))
        start = str(d["start"]).rstrip("\x00")
        ns, _, name = start.partition("/")
        return int(d["rv"]), (ns, name)
    except Exception:
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)") from None


class Store:
    def __init__(self, *, watch_history: int) -> None:
        self.rv = 0
        self.watch_history = watch_history
        self.types: dict[str, TypeStore] = {}
        # Lists continued from before this version get 410 (forced compaction).
        self.compacted_rv = 0
        self.type_listeners: list[Callable[[TypeStore], None]] = []  # informers of every type
        self.drops = 0  # types dropped so far (their watches closed)

    def type_store(self, rt: ResourceType) -> TypeStore:
        ts = self.types.get(rt.key)
        if ts is None:
            ts = self.types[rt.key] = TypeStore(rt, self.watch_history, self.rv)
            for listener in self.type_listeners:
                listener(ts)
        return ts

    def drop_type(self, rt: ResourceType) -> None:
        ts = self.types.pop(rt.key, None)
        if ts is not None:
            self.drops += 1
            for w in list(ts.watchers):
                w.close()

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    # ------------------------------------------------------------ writes

    def write(self, ts: TypeStore, obj: Obj, prev: Obj | None, *, added: bool = False) -> Entry:
        """Stamp a new resourceVersion on ``obj`` (whose metadata dict must be fresh) and store it."""
        rv = self.next_rv()
        md = obj["metadata"]
        md["resourceVersion"] = str(rv)
        raw = orjson.dumps(obj)
        entry = Entry(obj, raw)
        ns = md.get("namespace", "")
        ts.put(ns, md["name"], entry)
        ts.record(Event(ADDED if added or prev is None else MODIFIED, rv, obj, raw, prev, ns))
        return entry

    def remove(self, ts: TypeStore, entry: Entry) -> Entry:
        """Delete an object; the DELETED event carries it at the deletion's resourceVersion."""
        rv = self.next_rv()
        old = entry.obj
        obj = {**old, "metadata": {**old["metadata"], "resourceVersion": str(rv)}}
        raw = orjson.dumps(obj)
        ns = obj["metadata"].get("namespace", "")
        ts.remove(ns, obj["metadata"]["name"])
        ts.record(Event(DELETED, rv, obj, raw, old, ns))
        return Entry(obj, raw)

    # ------------------------------------------------------------ reads

    def list_objects(
        self,
        ts: TypeStore,
        ns: str | None,
        match: Matcher | None,
        *,
        limit: int = 0,
        continue_token: str = "",
    ) -> tuple[list[Entry], int, str, int | None]:
        """Returns (entries, list resourceVersion, continue token, remainingItemCount)."""
        list_rv = self.rv
        start: tuple[str, str] | None = None
        if continue_token:
            list_rv, start = decode_continue(continue_token)
            if list_rv < self.compacted_rv:
                raise gone(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter, or use the "
                    "continue token in this response to retrieve the remainder of the results. "
                    "Continuing with the provided token results in an inconsistent list - objects "
                    "that were created, modified, or deleted between the time the first chunk was "
                    "returned and now may show up in the list."
                )
        if ns is not None:
            d = ts.by_ns.get(ns) or {}
            keys = [(ns, n) for n in sorted(d)] if (limit or start) else None
            if keys is None:
                names = sorted(d)
                if match is None:
                    return [d[n] for n in names], list_rv, "", None
                return [e for e in (d[n] for n in names) if match(e.obj)], list_rv, "", None
        else:
            keys = ts.sorted_keys()
            if not limit and start is None:
                by = ts.by_ns
                if match is None:
                    return [by[a][b] for a, b in keys], list_rv, "", None
                return [e for e in (by[a][b] for a, b in keys) if match(e.obj)], list_rv, "", None
        i = bisect.bisect_right(keys, start) if start is not None else 0
        out: list[Entry] = []
        by = ts.by_ns
        n = len(keys)
        while i < n:
            k = keys[i]
            i += 1
            e = by[k[0]][k[1]]
            if match is None or match(e.obj):
                out.append(e)
                if limit and len(out) >= limit:
                    break
        token = ""
        remaining: int | None = None
        if limit and i < n and len(out) >= limit:
            last = out[-1].obj["metadata"]
            token = encode_continue(list_rv, last.get("namespace", ""), last["name"])
            if match is None:
                remaining = n - i
        return out, list_rv, token, remaining

    # ------------------------------------------------------------ faults

    def compact(self) -> None:
        """Forget all watch history: watches and continues from older versions get 410."""
        for ts in self.types.values():
            ts.history.clear()
            ts.floor = self.rv
        self.compacted_rv = self.rv

    def drop_watches(self) -> int:
        n = 0
        for ts in self.types.values():
            for w in list(ts.watchers):
                if isinstance(w, InternalWatcher):
                    continue
                w.close()
                ts.watchers.discard(w)
                n += 1
        return n

    def check_watch_rv(self, ts: TypeStore, rv: int) -> ApiError | None:
        if rv < ts.floor:
            return gone(f"too old resource version: {rv} ({ts.floor + 1})")
        return None


EncodeFn = Callable[[Obj], bytes]
