"""The namespace controller, as kube-controller-manager runs it (``pkg/controller/namespace``).

Why: a deleted namespace (marked Terminating by the API server, ``namespaces.py``) must be
emptied and then go, as on a cluster. The controller watches the store (in-process ``store.Informer``s:
namespaces, and, only while a namespace is being emptied, the removals of objects in it,
chosen before queueing). ``delay`` seconds (default 1) after it sees a namespace Terminating, as a
real controller acts after its informer and work queue, it deletes every namespaced object in
it (background propagation): a client deleting a namespace and then its contents
(``kubectl delete -k``, which deletes the Namespace first) finds them still there, as on a
cluster. Once the namespace is empty (pods on simulated nodes terminate gracefully first) it
drops the ``kubernetes`` finalizer from ``spec.finalizers`` through the registry's ``finalize``
subresource (as upstream's controller calls PUT namespaces/{name}/finalize); the API server
removes the namespace once no finalizer is left.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .namespaces import FINALIZER
from .resources import ResourceType
from .store import DELETED, Event, Informer
from .wakeloop import wake_loop

if TYPE_CHECKING:
    from .registry import Registry

Obj = dict[str, Any]
log = logging.getLogger("scheduler.sandbox")


class NamespaceControllerSim:
    def __init__(
        self,
        registry: Registry,
        *,
        delay: float = 1.0,
        tick: float = 0.003,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.delay = delay
        self.tick = tick
        self.clock = clock
        self.ns_rt = registry.catalog.builtin("", "namespaces")
        self._wake = asyncio.Event()
        self._seen: set[str] = set()  # Terminating namespaces known to the controller
        self._due: list[tuple[float, str]] = []  # (when, namespace): contents to delete
        self._emptying: set[str] = set()  # contents deleted: finalized once empty
        self._check: set[str] = set()  # emptying namespaces that lost an object
        self.informer = Informer(registry.store, wake=self._wake, types=(self.ns_rt,))
        # the removals in the namespaces being emptied: watched only while there are some
        # (an informer started and stopped as upstream's dynamic informers are), so that
        # the steady state's writes cost this controller nothing
        self.contents = Informer(registry.store, wake=self._wake, every_type=True, keep=self._keep)

    def _keep(self, rt: ResourceType, ev: Event) -> bool:
        return ev.type == DELETED and ev.ns in self._emptying

    # ------------------------------------------------------------ the watch

    def sync_watch(self) -> None:
        for _, entries in self.informer.open():
            for e in entries:
                self._namespace(e.obj, deleted=False)
        for _, ev in self.informer.drain():
            self._namespace(ev.obj, deleted=ev.type == DELETED)
        if self._emptying:
            if self.contents.open():
                self._check |= self._emptying  # (re)started: look at each namespace once
            for _, ev in self.contents.drain():
                if ev.ns in self._emptying:
                    self._check.add(ev.ns)
        elif self.contents.is_open:
            self.contents.close()

    def _namespace(self, obj: Obj, *, deleted: bool) -> None:
        name = obj["metadata"]["name"]
        if deleted:
            self._seen.discard(name)
            self._emptying.discard(name)
            return
        if obj["metadata"].get("deletionTimestamp") and name not in self._seen:
            self._seen.add(name)
            heapq.heappush(self._due, (self.clock() + self.delay, name))

    # ------------------------------------------------------------ the loop

    async def run(self, *, iterations: int | None = None) -> None:
        try:
            await wake_loop(self._wake, self.sync, delay=self.tick, what="namespace controller simulation",
                            before=self.sync_watch, timeout=self._until_due, iterations=iterations)
        finally:
            self.informer.close()
            self.contents.close()

    def _until_due(self) -> float | None:
        if self._check:
            return 0.0
        if self._due:
            return max(0.0, self._due[0][0] - self.clock())
        return None

    def sync(self) -> None:
        """Delete the contents of the namespaces whose delay is over; finalize the emptied."""
        self.sync_watch()
        now = self.clock()
        while self._due and self._due[0][0] <= now:
            _, ns = heapq.heappop(self._due)
            if ns in self._seen:
                self._delete_contents(ns)
                self._emptying.add(ns)
                self._check.add(ns)
        self.sync_watch()  # the removals the deletions made
        check, self._check = self._check, set()
        for ns in sorted(check):
            if ns in self._emptying:
                self._maybe_finalize(ns)

    def _delete_contents(self, ns: str) -> None:
        reg = self.registry
        for ots in list(reg.store.types.values()):
            if not ots.rt.namespaced or ots.rt.is_view:
                continue
            for oe in list((ots.by_ns.get(ns) or {}).values()):
                try:
                    reg.delete(ots.rt, ns, oe.obj["metadata"]["name"], {"propagationPolicy": "Background"})
                except ApiError as err:
                    if err.code != 404:
                        log.warning("namespace %s: cannot delete %s %s: %s", ns, ots.rt.plural,
                                    oe.obj["metadata"]["name"], err.message)

    def _maybe_finalize(self, ns: str) -> None:
        """Once a Terminating namespace is empty: drop the ``kubernetes`` finalizer through the
        ``finalize`` subresource, as upstream's controller does (PUT namespaces/{name}/finalize,
        at the resourceVersion it read); the API server removes the namespace once no
        finalizer, in spec or metadata, is left."""
        reg = self.registry
        for ts in reg.store.types.values():
            if ts.rt.namespaced and ts.by_ns.get(ns):
                return
        e = reg.ts(self.ns_rt).get("", ns)
        if e is None:
            self._emptying.discard(ns)
            return
        obj = e.obj
        spec = obj.get("spec") or {}
        if FINALIZER not in (spec.get("finalizers") or []):
            self._emptying.discard(ns)  # finalized: the rest is other finalizers' owners'
            return
        finalizers = [f for f in spec["finalizers"] if f != FINALIZER]
        try:
            reg.update(self.ns_rt, "", ns, {**obj, "spec": {**spec, "finalizers": finalizers}}, sub="finalize")
        except ApiError as err:
            if err.code == 409:
                self._check.add(ns)  # changed since read: again on the next pass, from the new state
                self._wake.set()
            elif err.code == 404:
                self._emptying.discard(ns)
            else:
                log.warning("namespace %s: cannot finalize: %s", ns, err.message)
            return
        self._emptying.discard(ns)
