"""Reflector + store + handlers: a local, event-driven mirror of one API resource.

Why not the official client's ``kubernetes.informer.SharedInformer`` (kubernetes 37)?  It does
diff a relist against its cache and fires DELETED for vanished objects, but:

* it is thread-based on the synchronous client: each informer runs its own thread and calls
  handlers there, while our cache, queue and scheduling loop live on one asyncio event loop
  (every event would have to cross threads, and every structure would need locks);
* it deserializes every object into the generated models (slow to build for pods, and we keep
  objects as plain dicts from the wire);
* a delete found by a relist looks like a watched delete: no ``DeletedFinalStateUnknown``
  tombstone, which our cache needs to tell "gone, last state unknown" from a real delete;
* a relist fires MODIFIED for every object still present, changed or not (no resourceVersion
  comparison), which would requeue every pending pod after each 410;
* no paged LIST, no watch bookmarks, a fixed 5 s retry instead of jittered backoff, and no
  "CRD not installed yet" state.

So this is client-go's reflector, reduced to asyncio:

* LIST (paged) then WATCH from the list's resourceVersion with bookmarks and a randomized
  server timeout; when a watch ends, re-watch from the last seen resourceVersion.
* 410 Gone (HTTP or an ERROR event) → relist and diff against the store: adds, updates for
  changed resourceVersions and ``DeletedFinalStateUnknown`` tombstones for vanished objects.
* Connection failures → jittered exponential backoff (cap ~30 s), then resume from the last
  resourceVersion, so no event is lost.
* A resource that 404s (a CRD not installed yet) counts as synced-empty and is retried quietly.

Handlers are synchronous callables run on the event loop, one event at a time, in order; an
exception in one handler is logged and never stops the informer.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import gc
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.client.api import (
    ApiClient,
    ApiConnectionError,
    ApiError,
    Backoff,
    Gone,
    NotFound,
    resource_path,
)

log = structlog.get_logger(__name__)

# How often a resource that is not served (a CRD not installed yet) is asked for again.
MISSING_RESOURCE_POLL_SECONDS = 2.0

Obj = dict[str, Any]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class DeletedFinalStateUnknown:
    """Delivered to ``on_delete`` when an object vanished while we were not watching.

    ``obj`` is the last state we knew, which may be stale.
    """

    key: str
    obj: Obj


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` otherwise (client-go's MetaNamespaceKey)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    ns = meta.get("namespace")
    return f"{ns}/{name}" if ns else str(name)


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


IndexKey = Callable[[Obj], str | None]


class _CollectorPause:
    """The cyclic garbage collector paused while any informer decodes and hands out a LIST.

    A LIST allocates every object it returns at once (10000 pods and their parses are
    millions of containers), all of them live: each young collection it triggers walks
    objects that survive, and every full collection the growing heap triggers walks the
    whole cache again, which made decoding a page about four times slower.  Nothing a
    LIST allocates is cyclic garbage, so the collector is paused from the first page to the
    last handler and resumed as it was (the daemon freezes the synced heap afterwards).
    Counted, so that informers listing at once resume it only when the last one is done;
    a lock, because other event loops of the process (the PodGroup controller's thread)
    may list too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._resume = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._resume:
                gc.enable()


_collector_pause = _CollectorPause()


class Store:
    """Objects by key, with a per-namespace index and named secondary indexes (client-go's
    ``Indexers``: a plugin asking "the pods of group G" every cycle gets them without a walk
    over the namespace).  Read-only for everyone but the informer."""

    def __init__(self) -> None:
        self._items: dict[str, Obj] = {}
        self._by_ns: dict[str, dict[str, Obj]] = {}
        # index name -> (key function, index value -> {object key: object})
        self._indexes: dict[str, tuple[IndexKey, dict[str, dict[str, Obj]]]] = {}

    def get_by_key(self, key: str) -> Obj | None:
        return self._items.get(key)

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def list(self, namespace: str | None = None) -> list[Obj]:
        if namespace is None:
            return list(self._items.values())
        return list(self._by_ns.get(namespace, {}).values())

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def by_index(self, index: str, value: str, key: IndexKey) -> builtins.list[Obj]:
        """Objects for which ``key`` answers ``value``.  The index named ``index`` is built
        from the store on first use and kept up to date by every later change; ``key`` must
        be the same function for a given name (later ones are ignored)."""
        entry = self._indexes.get(index)
        if entry is None:
            buckets: dict[str, dict[str, Obj]] = {}
            for item_key, obj in self._items.items():
                found = key(obj)
                if found is not None:
                    buckets.setdefault(found, {})[item_key] = obj
            entry = self._indexes[index] = (key, buckets)
        bucket = entry[1].get(value)
        return list(bucket.values()) if bucket else []

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def _put(self, key: str, obj: Obj, ns: str | None = None) -> Obj | None:
        """``ns``: the object's namespace when the caller has read it ("" for none)."""
        old = self._items.get(key)
        self._items[key] = obj
        if ns is None:
            ns = (obj.get("metadata") or {}).get("namespace") or ""
        self._by_ns.setdefault(ns, {})[key] = obj
        for index_key, buckets in self._indexes.values():
            if old is not None:
                _unindex(buckets, index_key(old), key)
            found = index_key(obj)
            if found is not None:
                buckets.setdefault(found, {})[key] = obj
        return old

    def _delete(self, key: str) -> Obj | None:
        old = self._items.pop(key, None)
        if old is not None:
            ns = (old.get("metadata") or {}).get("namespace") or ""
            bucket = self._by_ns.get(ns)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._by_ns[ns]
            for index_key, buckets in self._indexes.values():
                _unindex(buckets, index_key(old), key)
        return old


def _unindex(buckets: dict[str, dict[str, Obj]], value: str | None, key: str) -> None:
    if value is None:
        return
    bucket = buckets.get(value)
    if bucket is not None:
        bucket.pop(key, None)
        if not bucket:
            del buckets[value]


OnAdd = Callable[[Obj], None]
OnUpdate = Callable[[Obj, Obj], None]
OnDelete = Callable[[Any], None]  # Obj or DeletedFinalStateUnknown
Filter = Callable[[Obj], bool]


@dataclass
class _Handler:
    on_add: OnAdd | None
    on_update: OnUpdate | None
    on_delete: OnDelete | None
    filter: Filter | None


class Informer:
    """List/watch one resource into a :class:`Store` and call handlers for every change."""

    def __init__(
        self,
        client: ApiClient,
        *,
        path: str,
        resource_name: str,
        params: Mapping[str, str] | None = None,
        kind: str | None = None,
        api_version: str | None = None,
        page_size: int = 500,
        resync: float | None = None,
        watch_timeout_range: tuple[int, int] = (300, 600),
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        backoff: Backoff | None = None,
        missing_poll_seconds: float = MISSING_RESOURCE_POLL_SECONDS,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.path = path
        self.resource_name = resource_name
        self.params = dict(params or {})
        self.kind = kind
        self.api_version = api_version
        self.page_size = page_size
        self.resync = resync
        self.watch_timeout_range = watch_timeout_range
        self.store = Store()
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._backoff = backoff or Backoff(initial=0.8, cap=30.0, factor=2.0, jitter=1.0, rng=self._rng)
        # A resource that is not served yet (its CRD is not installed) is polled at a short,
        # fixed interval instead of the growing connection backoff: users install the CRD
        # after the scheduler and expect their PodGroups to be seen within seconds. A 404
        # list is cheap for the API server.
        self._missing_backoff = Backoff(initial=missing_poll_seconds, cap=missing_poll_seconds,
                                        factor=1.0, jitter=0.25, rng=self._rng)
        self._handlers: list[_Handler] = []
        self._synced = asyncio.Event()
        self._stop_requested = False
        self._task: asyncio.Task[Any] | None = None
        self._last_rv = ""
        self._need_list = True
        self._missing_logged = False
        self._log = log.bind(resource=resource_name)
        # Observability for tests and health checks.
        self.list_count = 0
        self.watch_count = 0

    # -- public

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def last_resource_version(self) -> str:
        return self._last_rv

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def add_handler(
        self,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
        filter: Filter | None = None,
    ) -> None:
        """Register handlers; objects already in the store are replayed to ``on_add`` at once."""
        handler = _Handler(on_add, on_update, on_delete, filter)
        self._handlers.append(handler)
        for obj in self.store.list():
            self._dispatch_add(obj, (handler,))

    def stop(self) -> None:
        """Stop ``run`` (it returns normally); safe to call from any task, idempotent."""
        self._stop_requested = True
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()

    async def run(self, *, iterations: int | None = None) -> None:
        """Run the reflector.  ``iterations`` bounds the number of list/watch rounds (tests)."""
        self._task = asyncio.current_task()
        resync_task: asyncio.Task[None] | None = None
        if self.resync:
            resync_task = asyncio.create_task(self._resync_loop(), name=f"informer-resync:{self.resource_name}")
        try:
            done = 0
            while not self._stop_requested and (iterations is None or done < iterations):
                done += 1
                try:
                    await self._round()
                except Exception:  # a bug; keep the mirror alive and rebuild it from a fresh list
                    self._log.exception("informer round failed unexpectedly; relisting")
                    self._need_list = True
                    await self._sleep(self._backoff.next())
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._stop_requested and task is not None:
                task.uncancel()
                return
            raise
        finally:
            if resync_task is not None:
                resync_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await resync_task
            self._task = None

    # -- one round: maybe list, then one watch

    async def _round(self) -> None:
        listing = self._need_list
        started = self._clock()
        try:
            if self._need_list:
                with _collector_pause:
                    await self._list_and_replace()
                self._need_list = False
                listing = False
                started = self._clock()
            events = await self._watch_once()
        except Gone as exc:
            self._log.info("resourceVersion expired, relisting", rv=self._last_rv, reason=exc.reason)
            self._need_list = True
            if listing:  # an expired continue token: do not hammer the server
                await self._sleep(self._backoff.next())
            return
        except NotFound as exc:
            if not self._missing_logged:
                self._log.info("resource not served (yet); retrying quietly", path=self.path, message=exc.message)
                self._missing_logged = True
            self._need_list = True
            self._synced.set()  # synced-empty: the scheduler can start without the CRD
            await self._sleep(self._missing_backoff.next())
            return
        except (ApiConnectionError, ApiError) as exc:
            delay = self._backoff.next()
            self._log.warning("list/watch failed; backing off", error=str(exc), delay=round(delay, 3), rv=self._last_rv)
            await self._sleep(delay)
            return
        if self._missing_logged:
            self._log.info("resource is served now", path=self.path)
            self._missing_logged = False
        if events > 0:
            self._backoff.reset()
        elif self._clock() - started < 1.0:
            # A watch that ends at once without delivering anything must not become a hot loop.
            await self._sleep(self._backoff.next())

    async def _list_and_replace(self) -> None:
        items: list[Obj] = []
        cont: str | None = None
        list_rv = ""
        list_kind: str | None = None
        api_version: str | None = None
        while True:
            page = await self.client.list_page(self.path, limit=self.page_size, continue_token=cont, params=self.params)
            meta = page.get("metadata") or {}
            list_rv = str(meta.get("resourceVersion") or list_rv)
            list_kind = page.get("kind") or list_kind
            api_version = page.get("apiVersion") or api_version
            items.extend(page.get("items") or [])
            cont = meta.get("continue") or None
            if not cont:
                break
        self.list_count += 1
        kind = self.kind or (list_kind[:-4] if list_kind and list_kind.endswith("List") else None)
        api_version = self.api_version or api_version
        # Remember them for watch objects too (real servers send them; be safe).
        self.kind, self.api_version = kind, api_version
        for obj in items:
            # List items carry no kind/apiVersion; event references need them.
            if kind:
                obj.setdefault("kind", kind)
            if api_version:
                obj.setdefault("apiVersion", api_version)
        self._replace(items)
        self._last_rv = list_rv
        self._synced.set()
        self._backoff.reset()
        self._log.debug("listed", count=len(items), rv=list_rv)

    def _replace(self, items: Iterable[Obj]) -> None:
        seen: set[str] = set()
        for obj in items:
            key = object_key(obj)
            seen.add(key)
            old = self.store._put(key, obj)
            if old is None:
                self._dispatch_add(obj)
            elif _rv(old) != _rv(obj) or not _rv(obj):
                self._dispatch_update(old, obj)
        for key in [k for k in self.store.keys() if k not in seen]:
            old = self.store._delete(key)
            if old is not None:
                self._dispatch_delete(DeletedFinalStateUnknown(key, old))

    async def _watch_once(self) -> int:
        lo, hi = self.watch_timeout_range
        params = dict(self.params)
        params.update(
            {
                "resourceVersion": self._last_rv,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(self._rng.randint(lo, hi) if hi > lo else lo),
            }
        )
        if not self._last_rv:
            params.pop("resourceVersion")
        self.watch_count += 1
        count = 0
        stream = self.client.watch(self.path, params)
        async with contextlib.aclosing(stream):
            async for event in stream:
                count += 1
                self._handle_event(event)
        return count

    def _handle_event(self, event: Mapping[str, Any]) -> None:
        etype = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ApiConnectionError(f"watch event without object: {str(event)[:200]}")
        if etype == "ERROR":
            code = int(obj.get("code") or 0)
            reason = str(obj.get("reason") or "")
            message = str(obj.get("message") or "")
            if code == 410 or reason in ("Expired", "Gone"):
                raise Gone(410, reason or "Expired", message, obj)
            raise ApiError(code or 500, reason or "WatchError", message, obj)
        # The metadata read once for the resourceVersion, the key and the namespace (what
        # _rv, object_key and the store's _put each read of it).
        meta = obj.get("metadata") or {}
        rv = str(meta.get("resourceVersion") or "")
        if etype == "BOOKMARK":
            if rv:
                self._last_rv = rv
            return
        if self.kind:
            obj.setdefault("kind", self.kind)
        if self.api_version:
            obj.setdefault("apiVersion", self.api_version)
        name = meta.get("name") or ""
        ns = meta.get("namespace")
        key = f"{ns}/{name}" if ns else str(name)
        if etype in ("ADDED", "MODIFIED"):
            old = self.store._put(key, obj, ns or "")
            if old is None:
                self._dispatch_add(obj)
            else:
                self._dispatch_update(old, obj)
        elif etype == "DELETED":
            old = self.store._delete(key)
            self._dispatch_delete(obj if obj.get("metadata") else (old or obj))
        else:
            self._log.warning("unknown watch event type", type=etype)
        if rv:
            self._last_rv = rv

    # -- dispatch

    # Each event goes to every handler through its filter.  A handler without a filter (every
    # handler of the scheduler's pod informer) is called inline; a filtered one through
    # ``_passes`` (client-go's FilteringResourceEventHandler).  A failing filter or handler
    # is logged by ``_failed`` and skipped; the key is computed only for that log line.

    def _dispatch_add(self, obj: Obj, handlers: Iterable[_Handler] | None = None) -> None:
        for h in self._handlers if handlers is None else handlers:
            on_add = h.on_add
            if on_add is None or h.filter is not None and not self._passes(h, obj):
                continue
            try:
                on_add(obj)
            except Exception:
                self._failed("add", object_key(obj))

    def _dispatch_update(self, old: Obj, new: Obj) -> None:
        for h in self._handlers:
            if h.filter is None:
                on_update = h.on_update
                if on_update is not None:
                    try:
                        on_update(old, new)
                    except Exception:
                        self._failed("update", object_key(new))
                continue
            # Crossing the filter is an add or a delete.
            newer, older = self._passes(h, new), self._passes(h, old)
            fn, what, args = ((h.on_update, "update", (old, new)) if newer and older
                              else (h.on_add, "add", (new,)) if newer
                              else (h.on_delete, "delete", (old,)) if older
                              else (None, "", ()))
            if fn is not None:
                try:
                    fn(*args)
                except Exception:
                    self._failed(what, object_key(new))

    def _dispatch_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        inner = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        for h in self._handlers:
            on_delete = h.on_delete
            if on_delete is None or h.filter is not None and not self._passes(h, inner):
                continue
            try:
                on_delete(obj)
            except Exception:
                self._failed("delete", obj.key if isinstance(obj, DeletedFinalStateUnknown)
                             else object_key(obj))

    def _passes(self, h: _Handler, obj: Obj) -> bool:
        """The handler's filter (it has one) lets the object through; False when it raises."""
        assert h.filter is not None
        try:
            return bool(h.filter(obj))
        except Exception:
            self._failed("filter", object_key(obj))
            return False

    def _failed(self, what: str, key: str) -> None:
        """Log the exception being handled: the filter's, or the ``what`` handler's."""
        if what == "filter":
            self._log.exception("event filter failed", key=key)
        else:
            self._log.exception("event handler failed", handler=what, key=key)

    async def _resync_loop(self) -> None:
        assert self.resync
        while True:
            await self._sleep(self.resync)
            for obj in self.store.list():
                self._dispatch_update(obj, obj)


# --- the factory -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceSpec:
    group_version: str
    plural: str
    kind: str
    namespaced: bool


RESOURCES: dict[str, ResourceSpec] = {
    "pods": ResourceSpec("v1", "pods", "Pod", True),
    "nodes": ResourceSpec("v1", "nodes", "Node", False),
    "persistentvolumes": ResourceSpec("v1", "persistentvolumes", "PersistentVolume", False),
    "persistentvolumeclaims": ResourceSpec("v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    "storageclasses": ResourceSpec("storage.k8s.io/v1", "storageclasses", "StorageClass", False),
    "csinodes": ResourceSpec("storage.k8s.io/v1", "csinodes", "CSINode", False),
    "csidrivers": ResourceSpec("storage.k8s.io/v1", "csidrivers", "CSIDriver", False),
    "csistoragecapacities": ResourceSpec("storage.k8s.io/v1", "csistoragecapacities", "CSIStorageCapacity", True),
    "poddisruptionbudgets": ResourceSpec("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    "podgroups": ResourceSpec("scheduling.x-k8s.io/v1alpha1", "podgroups", "PodGroup", True),
    "elasticquotas": ResourceSpec("scheduling.x-k8s.io/v1alpha1", "elasticquotas", "ElasticQuota", True),
    "namespaces": ResourceSpec("v1", "namespaces", "Namespace", False),
    "services": ResourceSpec("v1", "services", "Service", True),
    "replicationcontrollers": ResourceSpec("v1", "replicationcontrollers", "ReplicationController", True),
    "replicasets": ResourceSpec("apps/v1", "replicasets", "ReplicaSet", True),
    "statefulsets": ResourceSpec("apps/v1", "statefulsets", "StatefulSet", True),
    # Dynamic Resource Allocation (the DynamicResources plugin)
    "resourceclaims": ResourceSpec("resource.k8s.io/v1", "resourceclaims", "ResourceClaim", True),
    "resourceslices": ResourceSpec("resource.k8s.io/v1", "resourceslices", "ResourceSlice", False),
    "deviceclasses": ResourceSpec("resource.k8s.io/v1", "deviceclasses", "DeviceClass", False),
    "devicetaintrules": ResourceSpec("resource.k8s.io/v1", "devicetaintrules", "DeviceTaintRule", False),
}

DEFAULT_RESOURCES: tuple[str, ...] = (
    "pods",
    "nodes",
    "persistentvolumes",
    "persistentvolumeclaims",
    "storageclasses",
    "csinodes",
    "csidrivers",
    "poddisruptionbudgets",
    "podgroups",
    "elasticquotas",
    "namespaces",
    # PodTopologySpread's system default constraints select pods by their owning
    # Service/ReplicaSet/StatefulSet/ReplicationController, as upstream's informers do.
    "services",
    "replicationcontrollers",
    "replicasets",
    "statefulsets",
    "csistoragecapacities",
    "resourceclaims",
    "resourceslices",
    "deviceclasses",
    "devicetaintrules",
)


class InformerFactory:
    """Creates the scheduler's informers, runs each in a named supervised task, stops them all."""

    def __init__(
        self,
        client: ApiClient,
        *,
        resources: Iterable[str] = DEFAULT_RESOURCES,
        pod_field_selector: str | None = None,
        pod_label_selector: str | None = None,
        page_size: int = 500,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self._page_size = page_size
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._pod_params: dict[str, str] = {}
        if pod_field_selector:
            self._pod_params["fieldSelector"] = pod_field_selector
        if pod_label_selector:
            self._pod_params["labelSelector"] = pod_label_selector
        self._informers: dict[str, Informer] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False
        for r in resources:
            self.informer(r)
        self.listers = Listers(self)

    def informer(self, resource: str) -> Informer:
        """The informer for ``resource`` (a key of ``RESOURCES``), created on first use."""
        inf = self._informers.get(resource)
        if inf is not None:
            return inf
        spec = RESOURCES.get(resource)
        if spec is None:
            raise KeyError(f"unknown resource {resource!r}; known: {', '.join(sorted(RESOURCES))}")
        inf = Informer(
            self.client,
            path=resource_path(spec.group_version, spec.plural),
            resource_name=resource,
            params=self._pod_params if resource == "pods" else None,
            kind=spec.kind,
            api_version=spec.group_version,
            page_size=self._page_size,
            clock=self._clock,
            sleep=self._sleep,
            rng=random.Random(self._rng.random()),
        )
        self._informers[resource] = inf
        if self._tasks and not self._stopping:
            self._start_one(resource, inf)
        return inf

    @property
    def informers(self) -> Mapping[str, Informer]:
        return dict(self._informers)

    def start(self) -> None:
        """Start every informer not yet running (call inside the event loop)."""
        for name, inf in self._informers.items():
            if name not in self._tasks:
                self._start_one(name, inf)

    def _start_one(self, name: str, inf: Informer) -> None:
        self._tasks[name] = asyncio.create_task(self._supervise(inf), name=f"informer:{name}")

    async def _supervise(self, inf: Informer) -> None:
        backoff = Backoff(initial=1.0, cap=30.0, rng=self._rng)
        while not self._stopping:
            try:
                await inf.run()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("informer crashed; restarting", resource=inf.resource_name)
                await self._sleep(backoff.next())

    def has_synced(self) -> bool:
        return all(inf.has_synced for inf in self._informers.values())

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Whether every informer synced (or found its resource missing) within ``timeout``."""
        waits = [inf.wait_synced() for inf in self._informers.values()]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        except asyncio.TimeoutError:
            pending = [n for n, i in self._informers.items() if not i.has_synced]
            log.warning("informer caches not synced", pending=pending)
            return False
        return True

    async def stop(self) -> None:
        """Stop all informers and wait for their tasks."""
        self._stopping = True
        for inf in self._informers.values():
            inf.stop()
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()


class Listers:
    """``scheduler.framework.interfaces.ObjectLister`` over the factory's stores."""

    def __init__(self, factory: InformerFactory) -> None:
        self._factory = factory

    def _store(self, resource: str) -> Store:
        inf = self._factory._informers.get(resource)
        if inf is None:
            raise KeyError(f"no informer for resource {resource!r}")
        return inf.store

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._store(resource).get(name, namespace or None)

    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self._store(resource).list(namespace)

    def by_index(self, resource: str, index: str, value: str,
                 key: Callable[[dict[str, Any]], str | None]) -> builtins.list[dict[str, Any]]:
        return self._store(resource).by_index(index, value, key)

    def watch(self, resource: str, *, on_add: Callable[[dict[str, Any]], None],
              on_update: Callable[[dict[str, Any], dict[str, Any]], None],
              on_delete: Callable[[dict[str, Any]], None]) -> None:
        """``scheduler.framework.interfaces.ObjectWatcher``: the informer's events (a
        tombstone unwrapped to the last state known)."""
        inf = self._factory._informers.get(resource)
        if inf is None:
            raise KeyError(f"no informer for resource {resource!r}")

        def deleted(obj: Any) -> None:
            on_delete(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)

        inf.add_handler(on_add, on_update, deleted)
