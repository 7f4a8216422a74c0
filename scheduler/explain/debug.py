"""What the running scheduler says about itself: ``/debug/pods/{namespace}/{name}``,
``/debug/queue``, ``/debug/cache/compare``, and on SIGUSR2 a dump of its cache and queue and
a comparison of the cache with the informers in the log (kube-scheduler's cache debugger).

The handlers only read the scheduler's state on its own event loop; they are registered on
the endpoint server's debug routes, which carry the same authentication and authorization as
/metrics and are served only with authorization on or on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from aiohttp import web

from scheduler.cache.comparer import Comparison, compare, compare_devices, compare_queue
from scheduler.client.api import ApiConnectionError
from scheduler.plugins.dynamicresources.claims import ClaimTracker
from scheduler.plugins.dynamicresources.plugin import DynamicResources
from scheduler.plugins.names import DYNAMIC_RESOURCES

if TYPE_CHECKING:
    from scheduler.scheduler import Scheduler

log = structlog.get_logger(__name__)

POD_ROUTE = "/debug/pods/{namespace}/{name}"
QUEUE_ROUTE = "/debug/queue"
COMPARE_ROUTE = "/debug/cache/compare"
# Page size of the fresh LISTs of /debug/cache/compare?fresh=true.
FRESH_LIST_PAGE = 500
DEFAULT_QUEUE_LIMIT = 1000
QUEUES = ("active", "backoff", "unschedulable", "gated")
# scheduler-plugins' PodGroup label (gangs in /debug/queue).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class FreshListError(Exception):
    """A fresh LIST for the comparison failed (the API server's answer in the message)."""


class DebugRouteServer(Protocol):
    def add_debug_route(self, path: str, handler: Any) -> None: ...


def _pod_ref(namespace: str, name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}}


def _key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _pod_groups(held: dict[str, list[dict[str, Any]]], *, limit: int) -> dict[str, Any]:
    """Gangs with pending members: ``namespace/group`` -> how many members each sub-queue
    (and the in-flight set) holds, so a gang's state reads at a glance (at most ``limit``
    groups, by name)."""
    groups: dict[str, dict[str, int]] = {}
    for where, pods in held.items():
        for pod in pods:
            meta = pod.get("metadata") or {}
            group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
            if not isinstance(group, str) or not group:
                continue
            counts = groups.setdefault(f"{meta.get('namespace') or ''}/{group}", {})
            counts[where] = counts.get(where, 0) + 1
    return {"count": len(groups),
            "groups": {name: groups[name] for name in sorted(groups)[:limit]}}


class SchedulerIntrospection:
    """Read-only views of one Scheduler's queue, cache and diagnoses."""

    def __init__(self, sched: Scheduler, *, clock: Callable[[], float] | None = None) -> None:
        self.sched = sched
        self._clock = clock or sched.clock

    # --- one pod ---------------------------------------------------------------------------

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod's place in the queue and its last diagnosis; None if the scheduler knows
        neither (not pending, or not one of its pods)."""
        sched = self.sched
        ref = _pod_ref(namespace, name)
        queue = sched.queue.queue_of(ref)
        last = sched.diagnoses.get(namespace, name)
        if queue is None and last is None:
            return None
        out: dict[str, Any] = {"pod": f"{namespace}/{name}", "queue": queue or ""}
        qpi = sched.queue.get(ref)
        if queue in QUEUES:
            pods = sched.queue.pending_pods()[queue]
            key = f"{namespace}/{name}"
            out["position"] = next((i for i, p in enumerate(pods) if _key(p) == key), None)
            out["queueLength"] = len(pods)
        if qpi is not None:
            out.update(self._entry(qpi, queue or ""))
        elif last is not None:
            out["attempts"] = last.attempts
        out["lastAttempt"] = None if last is None else last.to_dict()
        return out

    def _entry(self, qpi: Any, queue: str) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "attempts": qpi.attempts,
            "unschedulablePlugins": sorted(qpi.unschedulable_plugins),
            "pendingPlugins": sorted(qpi.pending_plugins),
        }
        if queue == "backoff":
            expiry = qpi.timestamp + self.sched.queue.backoff_duration(qpi)
            entry["backoffRemainingSeconds"] = round(max(0.0, expiry - self._clock()), 3)
        if queue == "gated":
            entry["gatingPlugin"] = qpi.gating_plugin
        return entry

    # --- the queue -------------------------------------------------------------------------

    def queue(self, *, limit: int = DEFAULT_QUEUE_LIMIT) -> dict[str, Any]:
        """Every sub-queue in order (at most ``limit`` pods each, with the true count)."""
        sched = self.sched
        pending = sched.queue.pending_pods()
        out: dict[str, Any] = {}
        for name in QUEUES:
            pods = pending.get(name, [])
            rows = []
            for pod in pods[:limit]:
                qpi = sched.queue.get(pod)
                row: dict[str, Any] = {"pod": _key(pod)}
                if qpi is not None:
                    row.update(self._entry(qpi, name))
                rows.append(row)
            out[name] = {"count": len(pods), "pods": rows}
        in_flight = sched.queue.in_flight_pods()
        out["inFlight"] = {"count": len(in_flight), "pods": [_key(p) for p in in_flight[:limit]]}
        out["podGroups"] = _pod_groups({**pending, "inFlight": in_flight}, limit=limit)
        out["diagnosesKept"] = len(sched.diagnoses)
        return out

    # --- the cache against the cluster ----------------------------------------------------

    def compare(
        self,
        *,
        nodes: list[dict[str, Any]] | None = None,
        pods: list[dict[str, Any]] | None = None,
        claims: list[dict[str, Any]] | None = None,
    ) -> Comparison:
        """Compare the cache, the scheduling queue and each DRA claims tracker with the
        informers' stores, or with the lists given (a fresh LIST of the API server)."""
        sched = self.sched
        stores = sched.informers.informers
        if nodes is None:
            nodes = stores["nodes"].store.list() if "nodes" in stores else []
        if pods is None:
            pods = stores["pods"].store.list() if "pods" in stores else []
        if claims is None and "resourceclaims" in stores:
            claims = stores["resourceclaims"].store.list()
        result = compare(sched.cache, nodes=nodes, pods=pods)
        queued = [p for held in sched.queue.pending_pods().values() for p in held]
        queued.extend(sched.queue.in_flight_pods())
        result.differences.extend(compare_queue(sched.cache, queued=queued, pods=pods,
                                                schedulers=sched.profiles.keys()))
        for tracker in self._claim_trackers():
            result.differences.extend(compare_devices(
                held=tracker.held(), claims=[*(claims or []), *tracker.unnamed_in_flight()],
                in_flight=tracker.in_flight))
        return result

    def _claim_trackers(self) -> list[ClaimTracker]:
        """The claims trackers of DRA plugins that follow the claim informer (one per
        profile; a tracker that scans instead holds only what is in flight)."""
        trackers: dict[int, ClaimTracker] = {}
        for framework in self.sched.profiles.values():
            plugin = framework.get_plugin(DYNAMIC_RESOURCES)
            if isinstance(plugin, DynamicResources) and plugin.follows_claim_events:
                trackers[id(plugin.tracker)] = plugin.tracker
        return list(trackers.values())

    async def fresh_lists(self) -> dict[str, list[dict[str, Any]] | None]:
        """Nodes, pods and ResourceClaims LISTed now from the API server, as each informer
        lists them (its path and selectors: the daemon's pods exclude terminal ones)."""
        out: dict[str, list[dict[str, Any]] | None] = {}
        stores = self.sched.informers.informers
        for resource in ("nodes", "pods", "resourceclaims"):
            inf = stores.get(resource)
            out[resource] = None if inf is None else await self._list_all(inf.path, inf.params)
        return out

    async def _list_all(self, path: str, params: dict[str, str]) -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = {**params, "limit": str(FRESH_LIST_PAGE)}
            if token:
                query["continue"] = token
            try:
                resp = await self.sched.client.request("GET", path, params=query)
            except ApiConnectionError as exc:  # after the client's retries
                raise FreshListError(f"LIST {path}: {exc}") from exc
            if resp.status == 404 and not items:
                return None  # not served (no resource.k8s.io): nothing to compare
            body = resp.body
            if resp.status != 200 or not isinstance(body, dict):
                message = body.get("message") if isinstance(body, dict) else body
                raise FreshListError(f"LIST {path}: HTTP {resp.status}: {message}")
            items.extend(i for i in body.get("items") or [] if isinstance(i, dict))
            token = str((body.get("metadata") or {}).get("continue") or "")
            if not token:
                return items

    def log_comparison(self, result: Comparison, *, source: str) -> None:
        """One log line per difference, then a summary line."""
        for diff in result.differences:
            log.warning("cache mismatch", kind=diff.kind, object=diff.object,
                        detail=diff.detail, compared_with=source)
        summary = log.warning if result.differences else log.info
        summary("cache comparison done", differences=len(result.differences),
                nodes=result.nodes, pods=result.pods, assumed=result.assumed,
                compared_with=source)

    # --- HTTP ------------------------------------------------------------------------------

    async def pod_handler(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"]
        name = request.match_info["name"]
        view = self.pod(namespace, name)
        if view is None:
            return web.json_response(
                {"message": f"pod {namespace}/{name} is not pending in this scheduler"},
                status=404,
            )
        return web.json_response(view)

    async def queue_handler(self, request: web.Request) -> web.StreamResponse:
        raw = request.query.get("limit", str(DEFAULT_QUEUE_LIMIT))
        if not raw.isdigit():
            return web.json_response(
                {"message": f"limit: expected a non-negative integer, got {raw!r}"}, status=400
            )
        return web.json_response(self.queue(limit=int(raw)))

    async def compare_handler(self, request: web.Request) -> web.StreamResponse:
        raw = request.query.get("fresh", "false").lower()
        if raw not in ("true", "false"):
            return web.json_response(
                {"message": f"fresh: expected true or false, got {raw!r}"}, status=400)
        if raw == "false":
            return web.json_response(self.compare().to_dict())
        try:
            lists = await self.fresh_lists()
        except FreshListError as exc:
            return web.json_response({"message": str(exc)}, status=502)
        result = self.compare(nodes=lists["nodes"] or [], pods=lists["pods"] or [],
                              claims=lists["resourceclaims"])
        return web.json_response(result.to_dict())

    def register(self, server: DebugRouteServer) -> None:
        server.add_debug_route(POD_ROUTE, self.pod_handler)
        server.add_debug_route(QUEUE_ROUTE, self.queue_handler)
        server.add_debug_route(COMPARE_ROUTE, self.compare_handler)

    # --- SIGUSR2 ---------------------------------------------------------------------------

    def dump(self) -> None:
        """Log the cache (each node: requested / allocatable and its pods) and the queue."""
        cache = self.sched.cache
        snapshot = cache.dump()
        log.info("dump of the scheduler cache", nodes=len(snapshot.nodes),
                 assumed_pods=snapshot.assumed_pods, deleted_nodes=snapshot.deleted_nodes)
        for name, pods in snapshot.nodes.items():
            info = cache.get_node_info(name)
            if info is None:
                continue
            req, alloc = info.requested, info.allocatable
            log.info(
                "cached node", node=name,
                requested=f"cpu={req.milli_cpu}m memory={req.memory} pods={len(info.pods)}",
                allocatable=(f"cpu={alloc.milli_cpu}m memory={alloc.memory} "
                             f"pods={alloc.allowed_pod_number}"),
                pods=pods,
            )
        queue = self.queue()
        log.info(
            "dump of the scheduling queue",
            **{name: [row["pod"] for row in queue[name]["pods"]] for name in QUEUES},
            in_flight=queue["inFlight"]["pods"],
        )


class CacheDebugger:
    """SIGUSR2 -> one dump and one comparison of the cache with the informers, from a named
    task of the daemon (the signal handler only asks)."""

    TASK_NAME = "cache-debugger"

    def __init__(self, introspection: SchedulerIntrospection) -> None:
        self._introspection = introspection
        self._requested = asyncio.Event()
        self.dumps = 0
        self.last_comparison: Comparison | None = None

    def request_dump(self) -> None:
        self._requested.set()

    async def run(self, *, iterations: int | None = None) -> None:
        done = 0
        while iterations is None or done < iterations:
            await self._requested.wait()
            self._requested.clear()
            started = time.perf_counter()
            try:
                self._introspection.dump()
            except Exception:  # a dump must never take the daemon down
                log.exception("cache dump failed")
            try:
                # Upstream's comparer: the cache against the informers' listers.
                result = self._introspection.compare()
                self._introspection.log_comparison(result, source="informers")
                self.last_comparison = result
            except Exception:
                log.exception("cache comparison failed")
            self.dumps += 1
            done += 1
            log.info("cache dump done", seconds=round(time.perf_counter() - started, 3))


@contextlib.asynccontextmanager
async def cache_debugger(
    sched: Scheduler, *, signals: Sequence[int] = (signal.SIGUSR2,)
) -> AsyncIterator[CacheDebugger]:
    """Run the cache debugger as a named task for the daemon's life: ``signals`` ask for a
    dump; leaving the context removes the handlers and cancels the task."""
    debugger = CacheDebugger(SchedulerIntrospection(sched))
    task = asyncio.create_task(debugger.run(), name=CacheDebugger.TASK_NAME)

    def done(t: asyncio.Task[None]) -> None:
        if not t.cancelled() and t.exception() is not None:
            log.error("cache debugger stopped", error=repr(t.exception()))

    task.add_done_callback(done)
    loop = asyncio.get_running_loop()
    installed: list[int] = []
    for sig in signals:
        # Signal handlers need the main thread (tests run apps in others): no dump there.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, debugger.request_dump)
            installed.append(sig)
    try:
        yield debugger
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
